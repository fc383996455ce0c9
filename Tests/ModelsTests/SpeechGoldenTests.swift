import Foundation
import GGUF
import Kernels
import LeapJSON
import Models
import Reference
import TestSupport
import Testing

/// The speech-out goldens (`Tests/Fixtures/golden/audio-out`, LiquidAI's liquid-audio 1.3.0
/// on the tiny files' exact values, float32; shared/README.md, "LFM2.5-Audio speech-out
/// fixture"), teacher-forced: the prompt, then every golden step fed back (a text token,
/// or a frame's summed code embeddings), with the depthformer run at every audio step.
///
/// The goldens compute in float32 on the dequantized weights. So does the engine given an
/// F32 copy of the language model (`float32Copy`: every product then takes float inputs)
/// and the vocoder with `.float32` weights: they are held to the goldens' bounds, hidden
/// states and logits within 1e-4, codes and text tokens equal wherever the golden's margin
/// exceeds 1e-3. The reference forward pass (`ReferenceForward`, F32 plain loops) checks
/// the hidden state independently. The file as stored (Q4_0) runs its products on inputs
/// rounded to 8 bits, as does the vocoder with `.asStored` weights: measured, and held to
/// loose bounds only (a tiny model of random weights magnifies rounding).
///
/// Measured, max over the six cases (each case prints its own):
/// - F32: hidden state 3.8e-6 of the largest |h| (the reference's 4.1e-6), depthformer
///   logits 2.1e-5, margins 5.5e-5, frame embedding 5.0e-6, text logits 2.7e-5; every code
///   and text token equal.
/// - 8-bit depthformer from the F32 hidden state: logits 0.23; codes differ where the
///   golden's margin is at most 0.16.
/// - Q4_0 language model: hidden state 6.0% of the largest |h|; with the 8-bit depthformer
///   on it, logits 0.84, codes differ at margins up to 0.83; 4 text tokens differ (margins
///   up to 0.32).
@Suite(.serialized) struct SpeechGoldenTests {
    static let quantizedModel = try! TransformerModel(path: TestFixtures.path("models/lfm2-audio-out-tiny.gguf"))
    static let languageModel = try! TransformerModel(file: float32Copy(of: TestFixtures.path("models/lfm2-audio-out-tiny.gguf")))
    static let vocoderPath = TestFixtures.path("models/vocoder-lfm2-audio-tiny.gguf")
    static let pool = ThreadPool(threads: 2)
    static let exact = try! SpeechVocoder(path: vocoderPath, pool: pool, weights: .float32)
    static let stored = try! SpeechVocoder(path: vocoderPath, pool: pool, weights: .asStored)

    /// The GGUF file at `path` with every tensor dequantized to F32 (the same values).
    static func float32Copy(of path: String) throws -> GGUFFile {
        let file = try GGUFFile(path: path)
        var w = GGUFWriter(copyingMetadataOf: file)
        for t in file.tensors {
            var values = [Float](repeating: 0, count: t.elementCount)
            let rowBytes = t.type.rowBytes(count: t.rowLength)!, data = file.data(for: t).baseAddress!
            values.withUnsafeMutableBufferPointer { v in
                for r in 0..<t.rowCount {
                    t.type.dequantizeRow(data + r * rowBytes, into: v.baseAddress! + r * t.rowLength, count: t.rowLength)
                }
            }
            try w.addTensor(name: t.name, type: .f32, shape: t.shape, data: values.withUnsafeBytes { Array($0) })
        }
        return try GGUFFile(bytes: w.serialize())
    }

    // The audio-in case (chirp-1s) takes its prompt's audio embeddings from the F32-mmproj
    // audio golden `golden/audio/lfm2-audio-tiny-f32.chirp-1s.transcribe.json`.
    static let cases = [
        "hello.interleaved", "chirp-1s.interleaved", "weather.interleaved", "tts-thanks.sequential", "tts-rain.sequential",
        "tts-gap.sequential"
    ]

    static func json(_ relative: String) throws -> JSONValue {
        try JSONValue.parse(String(contentsOfFile: TestFixtures.path(relative), encoding: .utf8))
    }
    static func ints(_ v: JSONValue?) -> [Int] { v?.arrayValue?.compactMap(\.intValue) ?? [] }
    static func doubles(_ v: JSONValue?) -> [Double] { v?.arrayValue?.compactMap(\.doubleValue) ?? [] }
    /// `[[id, logit], ...]` pairs.
    static func top(_ v: JSONValue?) -> [(id: Int, logit: Double)] {
        (v?.arrayValue ?? []).map { ($0.arrayValue?[0].intValue ?? -1, $0.arrayValue?[1].doubleValue ?? .nan) }
    }

    /// The largest differences a case measured.
    struct Measured: CustomStringConvertible {
        /// Hidden states (frames 0-2): the largest difference of the 16 values relative to
        /// the largest of them, or of the l2 norm relative to itself. The engine's (F32
        /// copy), the reference's, the engine's on the Q4_0 file.
        var hidden = 0.0, referenceHidden = 0.0, quantizedHidden = 0.0
        /// F32 depthformer from the engine's F32 hidden state: logits (frames 0-2, each
        /// codebook's golden top 10), margins (every frame), codes that differ where the
        /// golden's margin exceeds 1e-3.
        var logits = 0.0, margins = 0.0, codeMismatches = 0
        /// 8-bit depthformer (`.asStored`) from the F32 hidden state, and from the Q4_0
        /// model's: logits, and the largest golden margin of a code that differs.
        var storedLogits = 0.0, storedMismatchMargin = 0.0
        var quantizedLogits = 0.0, quantizedMismatchMargin = 0.0
        /// Frame embeddings (first 4 frames: first 16 values, l2, sum).
        var frameEmbedding = 0.0
        /// Text steps: the engine's top-10 logits against `text_top` (F32), text tokens that
        /// differ where the golden's margin exceeds 1e-3 (F32), the largest golden margin of
        /// a token that differs on the Q4_0 model and how many.
        var textLogits = 0.0, textMismatches = 0
        var quantizedTextMismatches = 0, quantizedTextMismatchMargin = 0.0

        var description: String {
            "F32: h \(hidden) (reference \(referenceHidden)), depthformer logits \(logits), margins \(margins), "
                + "\(codeMismatches) codes differ, frame embedding \(frameEmbedding), text logits \(textLogits), "
                + "\(textMismatches) tokens differ; 8-bit depthformer: logits \(storedLogits) (codes differ at margins up to "
                + "\(storedMismatchMargin)); Q4_0 model: h \(quantizedHidden), 8-bit depthformer logits \(quantizedLogits) (codes "
                + "differ at margins up to \(quantizedMismatchMargin)), \(quantizedTextMismatches) tokens differ (margins up to \(quantizedTextMismatchMargin))"
        }
    }

    @Test(arguments: cases) func golden(_ name: String) throws {
        let g = try Self.json("golden/audio-out/lfm2-audio-out-tiny.\(name).json")
        let d = Self.languageModel.hyperparameters.embeddingLength
        let outputs = g["outputs"]?.arrayValue ?? [], context = (g["n_prompt"]?.intValue ?? 0) + outputs.count + 1
        let session = InferenceSession(model: Self.languageModel, contextLength: context)
        let quantized = InferenceSession(model: Self.quantizedModel, contextLength: context)
        let reference = try ReferenceForward(model: Self.quantizedModel)
        let exact = Depthformer(vocoder: Self.exact), stored = Depthformer(vocoder: Self.stored)
        let quantizedStored = Depthformer(vocoder: Self.stored)
        var m = Measured()

        // The prompt: text chunks as tokens, audio chunks as the encoder's embeddings.
        var referenceHidden: [Float] = []
        for chunk in g["prompt_tokens"]?.arrayValue ?? [] {
            if let tokens = chunk["text"]?.arrayValue?.compactMap(\.intValue) {
                try session.evaluate(tokens)
                try quantized.evaluate(tokens)
                for t in tokens { referenceHidden = reference.hiddenState(after: t) }
            } else {
                let source = try #require(chunk["embeddings_from"]?.stringValue)
                let audio = try Self.json("golden/audio/\(source)")
                let rows = (audio["embeddings"]?["data"]?.arrayValue ?? []).map { Self.doubles($0).map(Float.init) }
                #expect(rows.count == chunk["audio"]?.intValue && rows.allSatisfy { $0.count == d })
                try session.evaluate(embeddings: rows.flatMap { $0 })
                try quantized.evaluate(embeddings: rows.flatMap { $0 })
                for row in rows { referenceHidden = reference.hiddenState(afterEmbedding: row) }
            }
        }
        #expect(session.position == g["n_prompt"]?.intValue)

        let steps = g["audio_steps"]?.arrayValue ?? [], embeddings = g["frame_input_embedding"]?.arrayValue ?? []
        let textMargins = Self.doubles(g["text_margins"]), textTop = g["text_top"]?.arrayValue ?? []
        var frame = 0, text = 0
        /// (e) The engine's greedy text token against the golden's `token`, at text step `text`.
        func checkText(_ token: Int?, step: String) {
            let margin = textMargins[text]
            if margin > 1e-3 && GreedyAudioCodes.argmax(session.logits) != token {
                m.textMismatches += 1
                Issue.record("\(name) \(step): token \(GreedyAudioCodes.argmax(session.logits)), golden \(token ?? -1) (margin \(margin))")
            }
            if GreedyAudioCodes.argmax(quantized.logits) != token {
                m.quantizedTextMismatches += 1
                m.quantizedTextMismatchMargin = max(m.quantizedTextMismatchMargin, margin)
            }
            if text < textTop.count {
                for (id, logit) in Self.top(textTop[text]) { m.textLogits = max(m.textLogits, abs(Double(session.logits[id]) - logit)) }
            }
        }
        for (i, output) in outputs.enumerated() {
            if let token = output["text"]?.intValue {
                checkText(token, step: "step \(i)")
                try session.evaluate([token])
                try quantized.evaluate([token])
                referenceHidden = reference.hiddenState(after: token)
                text += 1
                continue
            }
            let codes = Self.ints(output["audio"])
            let golden = steps[frame]
            #expect(golden["frame"]?.intValue == frame && Self.ints(golden["codes"]) == codes)
            let goldenFrame = AudioFrame(codes), margins = Self.doubles(golden["margins"])
            // An end-of-audio frame's golden codes 1-7 are the overwritten 2048s.
            let known = (0..<AudioFrame.codebookCount).filter { $0 == 0 || !goldenFrame.isEndOfAudio }

            // (a) the hidden state, frames 0-2
            if let first16 = golden["h_first16"] {
                let expected = Self.doubles(first16), scale = expected.map(abs).max()!, l2 = golden["h_l2"]?.doubleValue ?? .nan
                func difference(_ h: [Float]) -> Double {
                    let values = zip(h, expected).map { abs(Double($0) - $1) }.max()! / scale
                    let norm = abs(h.reduce(0.0) { $0 + Double($1) * Double($1) }.squareRoot() - l2) / l2
                    return max(values, norm)
                }
                m.hidden = max(m.hidden, difference(Array(session.hiddenState)))
                m.referenceHidden = max(m.referenceHidden, difference(referenceHidden))
                m.quantizedHidden = max(m.quantizedHidden, difference(Array(quantized.hiddenState)))
            }

            // (b, c) the depthformer, teacher-forced (the golden's codes fed to the next codebook)
            let step = try exact.step(hiddenState: session.hiddenState, forcing: goldenFrame)
            for c in 0..<AudioFrame.codebookCount {
                m.margins = max(m.margins, abs(Double(step.margins[c]) - margins[c]))
            }
            for c in known where margins[c] > 1e-3 && step.choices[c] != codes[c] {
                m.codeMismatches += 1
                Issue.record("\(name) frame \(frame) codebook \(c): \(step.choices[c]), golden \(codes[c]) (margin \(margins[c]))")
            }
            #expect(step.frame == goldenFrame, "\(name) frame \(frame)")
            let storedStep = try stored.step(hiddenState: session.hiddenState, forcing: goldenFrame)
            let quantizedStep = try quantizedStored.step(hiddenState: quantized.hiddenState, forcing: goldenFrame)
            #expect(storedStep.frame == goldenFrame && quantizedStep.frame == goldenFrame)
            for c in known where storedStep.choices[c] != codes[c] {
                m.storedMismatchMargin = max(m.storedMismatchMargin, margins[c])
            }
            for c in known where quantizedStep.choices[c] != codes[c] {
                m.quantizedMismatchMargin = max(m.quantizedMismatchMargin, margins[c])
            }
            if let tops = golden["logits_top10"]?.arrayValue {
                for (c, top) in tops.enumerated() {
                    let logits = exact.logits(codebook: c), rounded = stored.logits(codebook: c)
                    let both = quantizedStored.logits(codebook: c)
                    for (id, logit) in Self.top(top) {
                        m.logits = max(m.logits, abs(Double(logits[id]) - logit))
                        m.storedLogits = max(m.storedLogits, abs(Double(rounded[id]) - logit))
                        m.quantizedLogits = max(m.quantizedLogits, abs(Double(both[id]) - logit))
                    }
                }
            }

            // (d) the frame embedding fed back
            let e = Self.exact.frameEmbedding(goldenFrame)
            if frame < embeddings.count {
                let expected = embeddings[frame]
                #expect(Self.ints(expected["codes"]) == codes)
                let first16 = Self.doubles(expected["first16"])
                let l2 = e.reduce(0.0) { $0 + Double($1) * Double($1) }.squareRoot(), sum = e.reduce(0.0) { $0 + Double($1) }
                m.frameEmbedding = max(
                    m.frameEmbedding, zip(e, first16).map { abs(Double($0) - $1) }.max()!,
                    abs(l2 - (expected["l2"]?.doubleValue ?? .nan)), abs(sum - (expected["sum"]?.doubleValue ?? .nan)))
            }
            try session.evaluate(embeddings: e)
            try quantized.evaluate(embeddings: e)
            referenceHidden = reference.hiddenState(afterEmbedding: e)
            frame += 1
        }
        #expect(frame == g["n_frames"]?.intValue && frame + text == outputs.count)
        // Interleaved generation stops at <|im_end|> without emitting it: its margin is the last.
        if text < textMargins.count { checkText(g["special_ids"]?["im_end"]?.intValue, step: "the last step") }
        print("speech golden \(name): \(frame) frames, \(text) text steps; measured \(m)")

        // The goldens' bounds for a float32 computation on the exact values.
        #expect(m.hidden <= 1e-4 && m.referenceHidden <= 1e-4, "\(name)")
        #expect(m.logits <= 1e-4 && m.margins <= 2e-4, "\(name)")
        #expect(m.codeMismatches == 0 && m.textMismatches == 0)
        #expect(m.frameEmbedding <= 1e-4, "\(name)")
        #expect(m.textLogits <= 1e-4, "\(name)")
        // Products on inputs rounded to 8 bits (measured bounds, see above).
        #expect(m.storedLogits <= 1 && m.quantizedHidden <= 0.1 && m.quantizedLogits <= 1.5, "\(name)")
    }
}
