import Models
import TestSupport
import Testing

/// Our own paths against each other: the batched prefill (8-bit integer matmul for the
/// legacy quantized types on VNNI builds, else exact F32 products with the dequantized
/// weights) and the one-token decode (8-bit activations, integer dot products) must give
/// the same logits within the activation rounding, and splitting a prompt into several
/// batches, or truncating and re-evaluating, must not change them.
@Suite(.serialized) struct ConsistencyTests {
    static let tokens = [504, 3575, 282, 4649, 314, 7042, 30, 198, 198, 504, 1797, 1918, 553, 253, 2155, 28, 1069, 30]

    static func relativeError(_ a: [Float], _ b: [Float]) -> Float {
        let range = b.max()! - b.min()!
        return zip(a, b).map { abs($0 - $1) }.max()! / range
    }

    @Test(arguments: ["SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct.Q8_0.gguf", "lfm2-tiny"])
    func decodeMatchesPrefill(_ name: String) throws {
        let path =
            name == "lfm2-tiny"
            ? TestFixtures.path("models/lfm2-tiny.gguf") : try TestFixtures.require(TestFixtures.modelCache + "/" + name)
        let model = try TransformerModel(path: path)
        let batch = InferenceSession(model: model, contextLength: 64)
        let exact = try batch.evaluateAllLogits(Self.tokens)
        let stepwise = InferenceSession(model: model, contextLength: 64)
        var worst: Float = 0
        for (i, t) in Self.tokens.enumerated() {
            try stepwise.evaluate([t])
            worst = max(worst, Self.relativeError(Array(stepwise.logits), exact[i]))
        }
        // 8-bit activations with an fp32 scale per 32 values. SmolLM2's residual stream has
        // outlier channels hundreds of times larger than the rest, so the rounding of the
        // other values in their blocks costs up to ~4.5% of the logit range by the last
        // layer (llama.cpp's Q8_0 activations cost as much: see docs/numerics.md).
        #expect(worst < 0.05, "decode vs prefill: \(worst * 100)% of range")
        print("decode vs prefill \(name): \(worst * 100)% of range")
    }

    /// Pieces and the whole prompt agree within `splitTolerance` of the logit range. Not
    /// bit for bit: the F32 products of a chunk sum in an order that depends on the chunk's
    /// size (short chunks go tile by tile, OpenBLAS picks its kernel by size), and a 1e-7
    /// difference can flip one 8-bit rounding of the activations of lfm2-tiny's Q4_0
    /// integer products, which moves the logits by about 0.3% of their range from that row
    /// on. A wrong position, cache row or truncation moves them by tens of percent.
    static let splitTolerance: Float = 1e-2

    @Test func batchSplittingAndTruncationDoNotChangeLogits() throws {
        let model = try TransformerModel(path: TestFixtures.path("models/lfm2-tiny.gguf"))
        let whole = InferenceSession(model: model, contextLength: 64)
        let reference = try whole.evaluateAllLogits(Self.tokens)

        // Small batches: the same positions, computed in pieces of 5.
        let pieces = InferenceSession(model: model, contextLength: 64, maxBatch: 5)
        let split = try pieces.evaluateAllLogits(Self.tokens)
        for (a, b) in zip(split, reference) { #expect(Self.relativeError(a, b) < Self.splitTolerance) }

        // Truncate to 8 tokens, feed different ones, truncate back, feed the originals (10
        // tokens: batches of 5, so no single-token batch switches to the decode numerics).
        pieces.truncate(to: 8)
        _ = try pieces.evaluateAllLogits([1, 2, 3, 4])
        pieces.truncate(to: 8)
        #expect(pieces.position == 8)
        let resumed = try pieces.evaluateAllLogits(Array(Self.tokens[8...]))
        #expect(resumed.count == 10)
        for (a, b) in zip(resumed, reference[8...]) { #expect(Self.relativeError(a, b) < Self.splitTolerance) }
    }

    /// A prompt of three blocks of queries (64, 64 and 22: the prefill's attention runs each
    /// head's blocks as separate tasks on the threads) against the same prompt in pieces of
    /// 50 (one block each): every row's logits agree, so each block's queries met their
    /// own keys and wrote their own rows.
    @Test func longPromptBlocksMatchShortPieces() throws {
        let model = try TransformerModel(path: TestFixtures.path("models/lfm2-tiny.gguf"))
        let tokens = (0..<150).map { ($0 * 7919 + 13) % 1000 + 2 }
        let reference = try InferenceSession(model: model, contextLength: 160).evaluateAllLogits(tokens)
        let split = try InferenceSession(model: model, contextLength: 160, maxBatch: 50).evaluateAllLogits(tokens)
        var worst: Float = 0
        for (a, b) in zip(split, reference) { worst = max(worst, Self.relativeError(a, b)) }
        #expect(split.count == 150)
        #expect(worst < Self.splitTolerance, "pieces vs whole: \(worst * 100)% of range")
    }

    @Test func cacheSizesFollowTheLayersAndTheCacheType() throws {
        let model = try TransformerModel(path: TestFixtures.path("models/lfm2-tiny.gguf"))
        // lfm2-tiny: 2 attention layers x 2 KV heads x 32 dims, K and V; 4 conv layers x 128.
        let f32 = InferenceSession(model: model, contextLength: 100)
        let f16 = InferenceSession(model: model, contextLength: 100, kvCacheType: .f16)
        let conv = 4 * 100 * 128 * 4
        #expect(f32.cacheByteCount == 2 * 2 * 2 * 32 * 100 * 4 + conv)
        #expect(f16.cacheByteCount == 2 * 2 * 2 * 32 * 100 * 2 + conv)
    }

    @Test func badInputIsATypedError() throws {
        let model = try TransformerModel(path: TestFixtures.path("models/lfm2-tiny.gguf"))
        let s = InferenceSession(model: model, contextLength: 8)
        #expect(throws: ModelError.invalidBatch(count: 0, maximum: 512)) { try s.evaluate([]) }
        #expect(throws: ModelError.invalidToken(id: -1, vocabularySize: 49161)) { try s.evaluate([-1]) }
        #expect(throws: ModelError.invalidToken(id: 49161, vocabularySize: 49161)) { try s.evaluate([49161]) }
        #expect(throws: ModelError.contextOverflow(position: 0, tokens: 9, contextLength: 8)) {
            try s.evaluate(Array(repeating: 1, count: 9))
        }
        try s.evaluate([1, 2, 3])
        #expect(throws: ModelError.contextOverflow(position: 3, tokens: 6, contextLength: 8)) {
            try s.evaluate(Array(repeating: 1, count: 6))
        }
        #expect(s.position == 3, "a refused batch leaves the session as it was")
    }
}
