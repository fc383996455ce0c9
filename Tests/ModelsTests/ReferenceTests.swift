import GGUF
import Models
import Reference
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
///   output head, and in the prompt products of Q4_0 (the integer matmul; Q4_1 and Q8_0
///   prompts are multiplied in F32), measured 0.87% prefill, 1.75% decode, the same bits
///   on AVX2 and VNNI builds: bound 3%. The perturbations below move the logits by 14% and more.
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
        let reference = try ReferenceForward(model: referenceModel)
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

    static let lfm2moeTiny = TestFixtures.path("models/lfm2moe-tiny.gguf")

    @Test func lfm2moeTinyMatchesReference() throws {
        let model = try TransformerModel(path: Self.lfm2moeTiny)
        let (prefill, decode) = try Self.worstError(engine: model, reference: model)
        print("lfm2moe-tiny vs reference: prefill \(prefill * 100)%, decode \(decode * 100)% of range")
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

    /// Gemma 3 270M, the real file, past its 512-token sliding window (the golden prompts
    /// are shorter than the window, so they never exercise it): a 530-token prompt
    /// prefilled in two chunks (512, then 18 tokens whose local layers no longer see the
    /// first positions), then 6 tokens decoded one at a time. The reference evaluates every
    /// position but computes logits only at the compared ones (its output head, 262,144
    /// rows, is most of its time).
    ///
    /// Bound 3% of the logit range, like lfm2-tiny: the engine rounds activations to 8 bits
    /// (an fp32 scale per 32 values) in decode, in the output head, and in prefill for
    /// Gemma's Q5_0 and K-quant matrices on AVX2 and VNNI builds, where the reference
    /// multiplies floats (measured 2.85%).
    @Test func gemma3MatchesReferencePastTheWindow() throws {
        let path = try TestFixtures.require(TestFixtures.gemma3_270mQ4_K_M)
        let model = try TransformerModel(path: path)
        let long = try GoldenLogits(model: "gemma3-270m-q4_k_m", prompt: "gemma-long").tokens  // 299 tokens, <bos> first
        let tokens = Array((long + long.dropFirst()).prefix(536))
        let prompt = Array(tokens[0..<530]), continuation = Array(tokens[530...])
        let compared: Set<Int> = [511, 513, 529]  // prompt positions, besides every decoded one

        func engine(_ model: TransformerModel) throws -> [Int: [Float]] {
            let session = InferenceSession(model: model, contextLength: 600)
            var rows: [Int: [Float]] = [:]
            for (p, row) in try session.evaluateAllLogits(prompt).enumerated() where compared.contains(p) { rows[p] = row }
            for token in continuation {
                try session.evaluate([token])
                rows[session.position - 1] = Array(session.logits)
            }
            return rows
        }
        let fast = try engine(model)
        let reference = try ReferenceForward(model: model)
        var worst: Float = 0, expected: [Int: [Float]] = [:]
        for (p, token) in tokens.enumerated() {
            if let row = fast[p] {
                expected[p] = reference.next(token)
                worst = max(worst, Self.relativeError(row, expected[p]!))
            } else {
                reference.skip(token)
            }
        }
        #expect(expected.count == compared.count + continuation.count)
        print("Gemma 3 270M vs reference past the window: \(worst * 100)% of range")
        #expect(worst <= Self.gemmaTolerance)

        // Whether the window matters is the tiny model's test (`Gemma3Tests`: 93% of range
        // without it). On this prompt the real model barely notices: the same engine with a
        // 600-position window (local RoPE base kept, every position visible) measured 1.7-2.9%
        // of range from the windowed reference past position 512, no more than the 8-bit
        // rounding above, so it cannot serve as a control here.
    }

    /// The 8-bit activations make this bound noisy: splitting the global layers' decode
    /// attention into two key blocks changed their outputs by at most 2e-6 and moved the
    /// worst error here from 2.7% to 3.3% of range (a few activations crossing an 8-bit
    /// rounding boundary); a 600-position window moves it within 1.7-2.9% (below); the
    /// short prompt chunks' F32 products tile by tile (another summation order for the
    /// file's non-integer matrices, 1e-7 apart) moved it to 4.4%. A wrong window, position
    /// or cache row costs tens of percent (93% without the window in `Gemma3Tests`).
    static let gemmaTolerance: Float = 0.05

    // MARK: - The tolerance catches a broken engine

    /// lfm2-tiny (or `path`) with each tensor's bytes passed through `edit` (name, type,
    /// shape, bytes).
    static func edited(_ path: String = lfm2Tiny, _ edit: (String, GGMLType, [Int], inout [UInt8]) -> Void) throws -> TransformerModel {
        let file = try GGUFFile(path: path)
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

    /// The engine reading an expert's slice at another expert's offset (one layer's gate
    /// projections rotated: expert e reads expert e + 1's) is caught.
    @Test func rotatedExpertSlicesAreCaught() throws {
        let perturbed = try Self.edited(Self.lfm2moeTiny) { name, type, shape, bytes in
            guard name == "blk.3.ffn_gate_exps.weight" else { return }
            #expect(shape == [128, 64, 8])
            let expertBytes = type.rowBytes(count: shape[0])! * shape[1]
            bytes = Array(bytes[expertBytes...] + bytes[..<expertBytes])
        }
        let (prefill, decode) = try Self.worstError(engine: perturbed, reference: try TransformerModel(path: Self.lfm2moeTiny))
        print("rotated expert slices: prefill \(prefill * 100)%, decode \(decode * 100)% of range")
        #expect(max(prefill, decode) > 2 * Self.lfm2Tolerance)
    }

    /// The engine weighing experts by their biased scores (or choosing them without the
    /// bias) is caught: run on a file whose selection biases are all 0, it routes
    /// differently from the reference on the true file.
    @Test func ignoredSelectionBiasIsCaught() throws {
        let perturbed = try Self.edited(Self.lfm2moeTiny) { name, _, _, bytes in
            if name.hasSuffix("exp_probs_b.bias") { bytes = [UInt8](repeating: 0, count: bytes.count) }
        }
        let (prefill, decode) = try Self.worstError(engine: perturbed, reference: try TransformerModel(path: Self.lfm2moeTiny))
        print("selection bias ignored: prefill \(prefill * 100)%, decode \(decode * 100)% of range")
        #expect(max(prefill, decode) > 2 * Self.lfm2Tolerance)
    }
}
