import Foundation
import GGUF
import Kernels
import TestSupport
import Testing

@testable import Models

/// Caches as needed: a sliding-window layer holds a ring (`2 · ringLength` rows, each
/// position written twice) only where that is at most half the context; otherwise the
/// whole context, whose pages fill half as fast. Either way the results are the same bits.
@Suite struct CacheMemoryTests {
    /// Gemma 3 270M in the server (window 512, passes of up to 512 tokens): a ring of 1,023
    /// positions is 2,046 rows, which at a context of 2,048 saves 2 rows and doubles what
    /// every shorter sequence touches, so the layer holds the context; at 4,096 the ring
    /// halves the layer.
    @Test func aRingOnlyWhereItHalvesTheLayer() {
        #expect(!KVCache.usesRing(512 - 1 + 512, contextLength: 2048))
        #expect(KVCache.usesRing(512 - 1 + 512, contextLength: 4096))
        #expect(KVCache.usesRing(9, contextLength: 36) && !KVCache.usesRing(9, contextLength: 35))
    }

    /// The tiny Gemma 3 (window 6) with passes of 4 tokens: rings of 9 positions from a
    /// context of 36 on. At 30 (a ring before this rule) its local layers hold the whole
    /// context, and its logits equal, bit for bit, those of a session with rings.
    @Test func aLayerWithoutItsRingComputesTheSameBits() throws {
        let model = try Gemma3Tests.tinyModel()
        let whole = InferenceSession(model: model, contextLength: 30, maxBatch: 4)
        let ring = InferenceSession(model: model, contextLength: 64, maxBatch: 4)
        #expect(whole.sequence.kv.ringLengths == [nil, nil, nil])
        #expect(ring.sequence.kv.ringLengths == [9, 9, nil])
        let tokens = Gemma3Tests.tokens(28)
        let chunked = Array(tokens[0..<16]), single = Array(tokens[16...])
        #expect(try Gemma3Tests.feed(whole, chunked, chunk: 4) == Gemma3Tests.feed(ring, chunked, chunk: 4))
        #expect(try Gemma3Tests.feed(whole, single, chunk: 1) == Gemma3Tests.feed(ring, single, chunk: 1))
    }
}
