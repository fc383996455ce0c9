import Foundation
import Testing

@testable import Kernels

/// The causal attention kernels (decode's `query`, prefill's sgemm `causal`) against the
/// scalar reference, and the reference against the definition written out here.
@Suite struct AttentionTests {
    struct Shape: Sendable, CustomTestStringConvertible {
        let start: Int
        let count: Int
        let headDim: Int
        var testDescription: String { "start \(start), \(count) queries, head \(headDim)" }
    }

    /// Several query blocks (count > queryBlock), a block that starts past 0, one query.
    static let shapes = [
        Shape(start: 0, count: 5, headDim: 16), Shape(start: 7, count: 3, headDim: 64),
        Shape(start: 3, count: CausalAttention.queryBlock + 9, headDim: 32), Shape(start: 20, count: 1, headDim: 64)
    ]

    /// Random queries, keys and values of `shape`: queries in rows of `stride`, keys and
    /// values for every position the last query sees.
    static func data(_ s: Shape, stride: Int, seed: UInt64) -> (q: [Float], k: [Float], v: [Float]) {
        var rng = SeededRandom(seed: seed)
        let span = s.start + s.count
        return (rng.normal(s.count * stride), rng.normal(span * s.headDim), rng.normal(span * s.headDim))
    }

    static func reference(_ s: Shape, _ q: [Float], stride: Int, _ k: [Float], _ v: [Float], scale: Float) -> [Float] {
        var out = [Float](repeating: .nan, count: s.count * s.headDim)
        CausalAttention.causalReference(
            queries: q, queryStride: stride, count: s.count, start: s.start, keys: k, values: v,
            headDim: s.headDim, scale: scale, out: &out, outStride: s.headDim)
        return out
    }

    @Test(arguments: shapes)
    func batchedAttentionMatchesReference(_ s: Shape) {
        let stride = s.headDim + 8  // rows of a wider matrix, as the heads of a query row
        let (q, k, v) = Self.data(s, stride: stride, seed: 3)
        let scale = 1 / Float(s.headDim).squareRoot()
        let expected = Self.reference(s, q, stride: stride, k, v, scale: scale)
        var out = [Float](repeating: .nan, count: s.count * stride)
        var scores = [Float](repeating: .nan, count: min(s.count, CausalAttention.queryBlock) * (s.start + s.count))
        CausalAttention.causal(
            queries: q, queryStride: stride, count: s.count, start: s.start, keys: k, values: v,
            headDim: s.headDim, scale: scale, scores: &scores, out: &out, outStride: stride)
        for i in 0..<s.count {
            for c in 0..<s.headDim {
                #expect(abs(out[i * stride + c] - expected[i * s.headDim + c]) <= 1e-5, "query \(i) dim \(c)")
            }
        }
    }

    @Test(arguments: shapes)
    func singleQueryMatchesReference(_ s: Shape) {
        // The last query of the shape, alone: it sees every key.
        let (q, k, v) = Self.data(s, stride: s.headDim, seed: 4)
        let scale: Float = 0.3
        let expected = Self.reference(s, q, stride: s.headDim, k, v, scale: scale)
        let last = s.count - 1, span = s.start + s.count
        var out = [Float](repeating: .nan, count: s.headDim)
        var scores = [Float](repeating: .nan, count: span)
        q.withUnsafeBufferPointer { qb in
            CausalAttention.query(
                qb.baseAddress! + last * s.headDim, keys: k, values: v, span: span, headDim: s.headDim, scale: scale,
                scores: &scores, out: &out)
        }
        for c in 0..<s.headDim { #expect(abs(out[c] - expected[last * s.headDim + c]) <= 1e-5) }
        #expect(abs(scores.reduce(0, +) - 1) <= 1e-5, "the probabilities sum to 1")
    }

    /// The reference is the definition: with one key, the output is that value; a query
    /// that matches one key far better than the others returns (almost) its value; and the
    /// first query of a batch starting at 0 never sees the later keys.
    @Test func referenceIsCausalSoftmaxAttention() {
        let hd = 4
        let k: [Float] = [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0]
        let v: [Float] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
        // Query 0 sees key 0 only; query 2 points at key 2 with a large scale.
        let q: [Float] = [0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 40, 0]
        var out = [Float](repeating: .nan, count: 3 * hd)
        CausalAttention.causalReference(
            queries: q, queryStride: hd, count: 3, start: 0, keys: k, values: v, headDim: hd, scale: 1, out: &out, outStride: hd)
        #expect(Array(out[0..<4]) == [1, 2, 3, 4])
        // Query 1 is zero: the mean of the two values it sees.
        #expect(Array(out[4..<8]) == [3, 4, 5, 6])
        for c in 0..<hd { #expect(abs(out[8 + c] - v[8 + c]) < 1e-6) }
    }
}
