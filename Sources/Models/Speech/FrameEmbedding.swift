import Kernels

extension SpeechVocoder {
    /// The language model's input after an audio frame: the plain sum of the frame's rows
    /// of `audio_embedding.embedding.weight`, codebook `c`'s code at row `code + 2049·c`
    ///
    /// ```
    /// e = Σ_c audio_embedding[code_c + 2049·c]        [d_LM]  (no norm, no scale)
    /// ```
    ///
    /// An end-of-audio frame too (rows `2048 + 2049·c`). Writes `languageModelWidth`
    /// floats to `out`; allocates nothing.
    public func frameEmbedding(_ frame: AudioFrame, into out: UnsafeMutablePointer<Float>) {
        let d = shape.languageModelWidth
        audioEmbedding.dequantize(rows: frame[0]..<(frame[0] + 1), into: out)
        withUnsafeTemporaryAllocation(of: Float.self, capacity: d) { row in
            for c in 1..<AudioFrame.codebookCount {
                let r = frame[c] + AudioFrame.codesPerCodebook * c
                audioEmbedding.dequantize(rows: r..<(r + 1), into: row.baseAddress!)
                Elementwise.add(row.baseAddress!, into: out, count: d)
            }
        }
    }

    /// ``frameEmbedding(_:into:)`` as a new array (the input of
    /// `InferenceSession.evaluate(embeddings:)`).
    public func frameEmbedding(_ frame: AudioFrame) -> [Float] {
        [Float](unsafeUninitializedCapacity: shape.languageModelWidth) { buffer, count in
            frameEmbedding(frame, into: buffer.baseAddress!)
            count = shape.languageModelWidth
        }
    }
}
