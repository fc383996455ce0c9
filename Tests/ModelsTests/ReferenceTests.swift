import GGUF
import Models
import TestSupport
import Testing

/// The fast engine against `ReferenceForward` (plain loops, F32, the scalar reference
/// dequantizers): a prompt prefilled in one batch, then tokens decoded one at a time,
/// every position's logits compared over the whole vocabulary. This catches a broken fast
/// path without golden files: the second half of the suite shows that a perturbed weight
/// or a wrong RoPE pairing in the engine's input moves the logits well past the same
/// tolerance.
///
/// The error is `max |fast - reference| / (max - min of the reference logits)`. Bounds
/// (docs/numerics.md):
/// - SmolLM2 F32: every product is float math on both sides (sgemm or the F32 matvec
///   against sequential sums), so they differ by summation order only (measured 0.0003%
///   of the range): bound 0.01%.
/// - lfm2-tiny (Q4_0/Q4_1/Q8_0 matrices): the engine rounds activations to 8 bits (an
///   fp32 scale per 32 values) where the reference multiplies floats: in decode, in the
///   output head, and in prefill on VNNI builds (measured 0.36% prefill, 1.65% decode on
///   an AVX2 build): bound 3%. The perturbations below move the logits by 14% and more.
@Suite(.serialized) struct ReferenceTests {
    static let prompt = [504, 3575, 282, 4649, 314, 7042, 30, 198, 198, 504, 1797, 1918]
    static let continuation = [553, 253, 2155, 28, 1069, 30]

    static func relativeError(_ fast: [Float], _ reference: [Float]) -> Float {
        let range = reference.max()! - reference.min()!
        return zip(fast, reference).map { abs($0 - $1) }.max()! / range
    }

    /// The worst error of the engine on `engineModel` against the reference on
    /// `referenceModel`, over the prompt (one batch) and the continuation (one token at a time).
    static func worstError(engine engineModel: TransformerModel, reference referenceModel: TransformerModel) throws -> (
        prefill: Float, decode: Float
    ) {
        let session = InferenceSession(model: engineModel, contextLength: 32)
        let reference = ReferenceForward(model: referenceModel)
        var prefill: Float = 0, decode: Float = 0
        for (row, token) in zip(try session.evaluateAllLogits(prompt), prompt) {
            prefill = max(prefill, relativeError(row, reference.next(token)))
        }
        for token in continuation {
            try session.evaluate([token])
            decode = max(decode, relativeError(Array(session.logits), reference.next(token)))
        }
        return (prefill, decode)
    }

    static let lfm2Tiny = TestFixtures.path("models/lfm2-tiny.gguf")
    static let lfm2Tolerance: Float = 0.03

    @Test func lfm2TinyMatchesReference() throws {
        let model = try TransformerModel(path: Self.lfm2Tiny)
        let (prefill, decode) = try Self.worstError(engine: model, reference: model)
        print("lfm2-tiny vs reference: prefill \(prefill * 100)%, decode \(decode * 100)% of range")
        #expect(prefill <= Self.lfm2Tolerance)
        #expect(decode <= Self.lfm2Tolerance)
    }

    @Test func smolLM2F32MatchesReference() throws {
        let model = try TransformerModel(path: try TestFixtures.require(TestFixtures.modelCache + "/SmolLM2-135M-Instruct.F32.gguf"))
        let (prefill, decode) = try Self.worstError(engine: model, reference: model)
        print("SmolLM2 F32 vs reference: prefill \(prefill * 100)%, decode \(decode * 100)% of range")
        #expect(prefill <= 0.0001)
        #expect(decode <= 0.0001)
    }

    // MARK: - The tolerance catches a broken engine

    /// lfm2-tiny with each tensor's bytes passed through `edit` (name, type, shape, bytes).
    static func edited(_ edit: (String, GGMLType, [Int], inout [UInt8]) -> Void) throws -> TransformerModel {
        let file = try GGUFFile(path: lfm2Tiny)
        var writer = GGUFWriter(copyingMetadataOf: file)
        for t in file.tensors {
            var bytes = Array(file.data(for: t))
            edit(t.name, t.type, t.shape, &bytes)
            try writer.addTensor(name: t.name, type: t.type, shape: t.shape, data: bytes)
        }
        return try TransformerModel(file: try GGUFFile(bytes: try writer.serialize()))
    }

    /// The engine's convolution reading one layer's kernel taps in reverse order (the
    /// oldest input weighted as the newest) is caught.
    @Test func reversedConvolutionTapsAreCaught() throws {
        let perturbed = try Self.edited { name, type, shape, bytes in
            guard name == "blk.1.shortconv.conv.weight" else { return }
            #expect(type == .f32 && shape == [3, 128])
            // [channel][tap] of F32: swap taps 0 and 2 of every channel.
            for c in 0..<128 {
                for b in 0..<4 { bytes.swapAt(12 * c + b, 12 * c + 8 + b) }
            }
        }
        let (prefill, decode) = try Self.worstError(engine: perturbed, reference: try TransformerModel(path: Self.lfm2Tiny))
        print("reversed taps: prefill \(prefill * 100)%, decode \(decode * 100)% of range")
        #expect(max(prefill, decode) > 2 * Self.lfm2Tolerance)
    }

    /// The engine's attention pairing RoPE dimensions as llama does (`2i`, `2i+1`) instead
    /// of LFM2's halves (`i`, `i + hd/2`) is caught. Running the engine on q/k weights
    /// (and q/k norms) whose head dimensions are reordered so that `2i, 2i+1` land at
    /// `i, i + hd/2` is exactly that: the NeoX rotation of the reordered vector is the
    /// adjacent-pair rotation of the original, and the dot products of queries and keys
    /// do not change under the same reordering of both.
    @Test func wrongRopePairingIsCaught() throws {
        let hd = 32, half = hd / 2
        // New dimension j takes old dimension from(j).
        func from(_ j: Int) -> Int { j < half ? 2 * j : 2 * (j - half) + 1 }
        let perturbed = try Self.edited { name, type, shape, bytes in
            let rows = name.hasSuffix("attn_q.weight") || name.hasSuffix("attn_k.weight")
            let norms = name.hasSuffix("attn_q_norm.weight") || name.hasSuffix("attn_k_norm.weight")
            guard rows || norms else { return }
            let rowBytes = rows ? type.rowBytes(count: shape[0])! : 4
            let original = bytes
            for head in 0..<(bytes.count / (rowBytes * hd)) {
                for j in 0..<hd {
                    let dst = (head * hd + j) * rowBytes, src = (head * hd + from(j)) * rowBytes
                    bytes.replaceSubrange(dst..<(dst + rowBytes), with: original[src..<(src + rowBytes)])
                }
            }
        }
        let (prefill, decode) = try Self.worstError(engine: perturbed, reference: try TransformerModel(path: Self.lfm2Tiny))
        print("wrong RoPE pairing: prefill \(prefill * 100)%, decode \(decode * 100)% of range")
        #expect(max(prefill, decode) > 2 * Self.lfm2Tolerance)
    }
}
