import Foundation
import GGUF
import Kernels
import TestSupport
import Testing

/// The media encoders' fused products (EncoderProducts.swift) against scalar references in
/// Double: several matrices as one product with blocks that span them, added into or
/// overwriting the output; attention with its normalization deferred; the inlined GELU.
@Suite struct EncoderProductsTests {
    static let pool = ThreadPool(threads: 2)

    /// Three matrices of different types and row counts (not multiples of 16, so blocks span
    /// two of them) stacked into one output of a wider stride, with and without
    /// accumulation, with and without threads.
    @Test func stackedProductsMatchTheReference() throws {
        let cols = 96, count = 9, shapes: [(GGMLType, Int)] = [(.f16, 70), (.f32, 45), (.q8_0, 100)]
        let total = shapes.reduce(0) { $0 + $1.1 }, stride = total + 5
        let bytes = shapes.enumerated().map { randomWeights($0.element.0, rows: $0.element.1, cols: cols, seed: UInt64(10 + $0.offset)) }
        var w: [Float] = []
        for (i, (type, rows)) in shapes.enumerated() {
            var part = [Float](repeating: 0, count: rows * cols)
            let rowBytes = type.rowBytes(count: cols)!
            bytes[i].withUnsafeBytes { b in
                for r in 0..<rows { type.dequantizeRowReference(b.baseAddress! + r * rowBytes, into: &part[r * cols], count: cols) }
            }
            w += part
        }
        var rng = SeededRandom(seed: 5)
        let x = rng.normal(count * cols), start = rng.normal(count * stride)
        for accumulate in [false, true] {
            for pool in [nil, Self.pool] {
                var y = start
                try bytes[0].withUnsafeBytes { b0 in
                    try bytes[1].withUnsafeBytes { b1 in
                        try bytes[2].withUnsafeBytes { b2 in
                            let parts = try zip(shapes, [b0, b1, b2]).map { s, b in
                                try WeightMatrix(type: s.0, rows: s.1, cols: cols, data: b.baseAddress!)
                            }
                            WeightMatrix.matmulByRowBlocks(
                                parts, x, count: count, into: &y, stride: stride, accumulate: accumulate, pool: pool)
                        }
                    }
                }
                var worst = 0.0
                for i in 0..<count {
                    for r in 0..<stride {
                        var expected = accumulate || r >= total ? Double(start[i * stride + r]) : 0
                        if r < total { for c in 0..<cols { expected += Double(x[i * cols + c]) * Double(w[r * cols + c]) } }
                        worst = max(worst, abs(Double(y[i * stride + r]) - expected))
                    }
                }
                #expect(worst < 1e-4, "accumulate \(accumulate), pool \(pool != nil): worst error \(worst)")
            }
        }
    }

    /// Deferred-normalization attention against the Double reference, including more tokens
    /// than one block of queries holds.
    @Test(arguments: [5, 70, 1100])
    func deferredAttentionMatchesReference(_ n: Int) {
        // (heads, head width, row stride) for each token count
        let (heads, hd, stride) = [5: (4, 16, 64), 70: (3, 20, 70), 1100: (2, 8, 20)][n]!
        let d = heads * hd
        if n == 1100 { #expect(BidirectionalAttention.deferredQueryBlock(tokens: n) < n) }
        var rng = SeededRandom(seed: UInt64(n * 7 + heads))
        let q = rng.normal(n * stride, scale: 1.5), k = rng.normal(n * stride, scale: 1.5), v = rng.normal(n * stride)
        func packed(_ a: [Float]) -> [Float] { (0..<n).flatMap { a[($0 * stride)..<($0 * stride + d)] } }
        let scale = 1 / Float(hd).squareRoot()
        let expected = BidirectionalAttention.reference(
            queries: packed(q), keys: packed(k), values: packed(v), tokens: n, heads: heads, headDim: hd, scale: scale)
        for pool in [nil, Self.pool] {
            var out = [Float](repeating: .nan, count: n * d)
            let scratch = BidirectionalAttention.deferredScratchCount(tokens: n, threads: pool?.threads ?? 1)
            var scores = [Float](repeating: .nan, count: scratch)
            BidirectionalAttention.attendDeferringNormalization(
                queries: q, keys: k, values: v, stride: stride, tokens: n, heads: heads, headDim: hd, scale: scale, scores: &scores,
                out: &out, outStride: d, pool: pool)
            let worst = zip(out, expected).map { abs($0 - $1) }.max()!
            #expect(worst < 2e-5, "\(n) tokens: worst error \(worst)")
        }
    }

    /// GELU split over the pool gives the values of one pass over the whole span, bit for bit
    /// (its `exp` inlined either way).
    @Test func pooledGeluIsOneSpan() {
        var rng = SeededRandom(seed: 9)
        let x = rng.normal(20_000, scale: 4) + [0, -0, 30, -30, 100, -100, 1e-20]
        var a = x, b = x
        EncoderKernels.geluTanh(&a, count: a.count, pool: Self.pool)
        EncoderKernels.geluTanh(&b, count: b.count, pool: nil)
        #expect(a.map(\.bitPattern) == b.map(\.bitPattern))
    }
}
