import Foundation
import GGUF
import Kernels
import TestSupport
import Testing

/// The encoder kernels (LayerNorm, GELU tanh and erf, SiLU, bias and residual additions,
/// the products by row blocks, bidirectional attention) against their scalar references in
/// Double, with and without a thread pool.
@Suite struct EncoderKernelsTests {
    static let pool = ThreadPool(threads: 2)

    @Test(arguments: [1, 15, 16, 17, 64, 100, 768])
    func layerNormMatchesTheFormula(_ width: Int) {
        var rng = SeededRandom(seed: UInt64(width))
        let rows = 7
        // Rows with an offset, so that the mean matters.
        let x = rng.normal(rows * width, scale: 2).enumerated().map { $0.element + Float($0.offset % 5) - 1 }
        let weight = rng.normal(width), bias = rng.normal(width, scale: 0.1)
        for (w, b) in [(weight, bias), (nil, nil)] as [([Float]?, [Float]?)] {
            let expected = EncoderKernels.layerNormReference(x, rows: rows, width: width, weight: w, bias: b, eps: 1e-6)
            for pool in [nil, Self.pool] {
                var y = [Float](repeating: .nan, count: x.count)
                x.withUnsafeBufferPointer { xs in
                    y.withUnsafeMutableBufferPointer { ys in
                        EncoderKernels.layerNorm(
                            xs.baseAddress!, rows: rows, width: width, weight: w, bias: b, eps: 1e-6, into: ys.baseAddress!, pool: pool)
                    }
                }
                let worst = zip(y, expected).map { abs($0 - $1) / max(1, abs($1)) }.max()!
                #expect(worst < 2e-6, "width \(width): worst relative error \(worst)")
            }
        }
        // A constant row normalizes to the bias (variance 0, eps keeps it finite).
        var constant = [Float](repeating: 3, count: width)
        constant.withUnsafeMutableBufferPointer { c in
            bias.withUnsafeBufferPointer { b in
                EncoderKernels.layerNorm(
                    c.baseAddress!, rows: 1, width: width, weight: nil, bias: b.baseAddress!, eps: 1e-6, into: c.baseAddress!)
            }
        }
        #expect(constant == bias)
    }

    @Test func layerNormReferenceIsTheTextbookFormula() {
        // Row (1, 2, 3, 6): mean 3, variance (4 + 1 + 0 + 9) / 4 = 3.5.
        let y = EncoderKernels.layerNormReference([1, 2, 3, 6], rows: 1, width: 4, weight: [1, 2, 1, 1], bias: [0, 0, 1, 0], eps: 0)
        let s = 1 / 3.5.squareRoot()
        let expected = [-2 * s, -1 * s * 2, 0 + 1, 3 * s].map(Float.init)
        for (a, b) in zip(y, expected) { #expect(abs(a - b) < 1e-6) }
    }

    static func geluTanhExact(_ x: Double) -> Double { 0.5 * x * (1 + tanh((2 / Double.pi).squareRoot() * (x + 0.044715 * x * x * x))) }
    static func geluErfExact(_ x: Double) -> Double { 0.5 * x * (1 + Foundation.erf(x / 2.0.squareRoot())) }

    /// Inputs over the range activations take, plus the extremes and a tail that is not a
    /// multiple of 16.
    static var geluInputs: [Float] {
        var x = stride(from: -12.0, through: 12.0, by: 0.0173).map { Float($0) }
        x += [0, -0.0, 1e-8, -1e-8, 30, -30, 100, -100, 1e4, -1e4]
        return x
    }

    @Test func geluTanhMatchesTheFormula() {
        for pool in [nil, Self.pool] {
            var x = Self.geluInputs
            let n = x.count
            x.withUnsafeMutableBufferPointer { EncoderKernels.geluTanh($0.baseAddress!, count: n, pool: pool) }
            for (input, value) in zip(Self.geluInputs, x) {
                let exact = Self.geluTanhExact(Double(input))
                #expect(abs(Double(value) - exact) <= 2e-6 * max(1, abs(exact)), "gelu_tanh(\(input)) = \(value), exact \(exact)")
            }
        }
    }

    /// The worst error of an in-place kernel over ``geluInputs``, with and without a pool,
    /// against `exact`: absolute below 1, relative above.
    static func worstError(
        _ kernel: (UnsafeMutablePointer<Float>, Int, ThreadPool?) -> Void, exact: (Double) -> Double
    ) -> Double {
        var worst = 0.0
        for pool in [nil, Self.pool] {
            var x = Self.geluInputs
            let n = x.count
            x.withUnsafeMutableBufferPointer { kernel($0.baseAddress!, n, pool) }
            for (input, value) in zip(Self.geluInputs, x) {
                let e = exact(Double(input))
                worst = max(worst, abs(Double(value) - e) / max(1, abs(e)))
            }
        }
        return worst
    }

    /// The erf form through the C library's `erff`: within a few float roundings of the
    /// exact value (the audio encoder's adapter; the vision encoder uses the tanh form).
    @Test func geluErfMatchesTheFormula() {
        let worst = Self.worstError({ EncoderKernels.geluErf($0, count: $1, pool: $2) }, exact: Self.geluErfExact)
        #expect(worst <= 2.5e-7, "worst error \(worst)")
    }

    @Test func siluMatchesTheFormula() {
        let worst = Self.worstError({ EncoderKernels.silu($0, count: $1, pool: $2) }, exact: { $0 / (1 + Foundation.exp(-$0)) })
        #expect(worst <= 1e-6, "worst error \(worst)")
    }

    @Test func biasAndResidualAdditions() {
        var rng = SeededRandom(seed: 7)
        let rows = 37, width = 45
        let y0 = rng.normal(rows * width), bias = rng.normal(width), x = rng.normal(rows * width)
        for pool in [nil, Self.pool] {
            var y = y0
            y.withUnsafeMutableBufferPointer { ys in
                bias.withUnsafeBufferPointer {
                    EncoderKernels.addBias($0.baseAddress!, to: ys.baseAddress!, rows: rows, width: width, pool: pool)
                }
                x.withUnsafeBufferPointer { EncoderKernels.add($0.baseAddress!, into: ys.baseAddress!, count: rows * width, pool: pool) }
            }
            for i in y.indices { #expect(y[i] == y0[i] + bias[i % width] + x[i]) }
            var half = y0
            half.withUnsafeMutableBufferPointer { ys in
                x.withUnsafeBufferPointer {
                    EncoderKernels.add($0.baseAddress!, scaledBy: 0.5, into: ys.baseAddress!, count: rows * width, pool: pool)
                }
            }
            for i in half.indices { #expect(half[i] == y0[i] + 0.5 * x[i]) }
        }
    }

    /// `Y = X Wᵀ` by blocks of weight rows, against the product of the scalar reference
    /// dequantization in Double: several blocks and a partial one, F32 in place, F16 and a
    /// quantized type through the tiles, with and without threads.
    @Test(arguments: [GGMLType.f32, .f16, .q8_0, .q4_K])
    func productsByRowBlocksMatchTheReference(_ type: GGMLType) throws {
        let rows = 300, cols = 256, count = 7
        #expect(WeightMatrix.rowBlock(rows: rows, cols: cols, threads: 2) == 80)  // 4 blocks, the last of 60 rows
        #expect(WeightMatrix.rowBlock(rows: rows, cols: cols, threads: 1) == 160)
        let bytes = randomWeights(type, rows: rows, cols: cols, seed: 3)
        var rng = SeededRandom(seed: 4)
        let x = rng.normal(count * cols)
        var w = [Float](repeating: 0, count: rows * cols)
        let rowBytes = type.rowBytes(count: cols)!
        bytes.withUnsafeBytes { b in
            for r in 0..<rows { type.dequantizeRowReference(b.baseAddress! + r * rowBytes, into: &w[r * cols], count: cols) }
        }
        for pool in [nil, Self.pool] {
            var y = [Float](repeating: .nan, count: count * rows)
            try bytes.withUnsafeBytes { b in
                let m = try WeightMatrix(type: type, rows: rows, cols: cols, data: b.baseAddress!)
                m.matmulByRowBlocks(x, count: count, into: &y, pool: pool)
            }
            var worst = 0.0
            for i in 0..<count {
                for r in 0..<rows {
                    var acc = 0.0
                    for c in 0..<cols { acc += Double(x[i * cols + c]) * Double(w[r * cols + c]) }
                    worst = max(worst, abs(Double(y[i * rows + r]) - acc))
                }
            }
            #expect(worst < 1e-4, "\(type): worst error \(worst)")
        }
    }

    struct AttentionCase: Sendable, CustomStringConvertible {
        let tokens: Int, heads: Int, headDim: Int, stride: Int
        var description: String { "n=\(tokens) heads=\(heads) hd=\(headDim) stride=\(stride)" }
    }

    static let attentionCases = [
        AttentionCase(tokens: 1, heads: 1, headDim: 8, stride: 8),
        AttentionCase(tokens: 5, heads: 4, headDim: 16, stride: 64),
        AttentionCase(tokens: 70, heads: 3, headDim: 20, stride: 70),
        // More tokens than a query block: the blocks' rows must all see all keys.
        AttentionCase(tokens: 300, heads: 4, headDim: 16, stride: 64)
    ]

    @Test(arguments: attentionCases)
    func bidirectionalAttentionMatchesReference(_ c: AttentionCase) {
        var rng = SeededRandom(seed: UInt64(c.tokens * 31 + c.heads))
        let d = c.heads * c.headDim, n = c.tokens
        // Rows with `stride` floats; the extra columns must be ignored.
        let q = rng.normal(n * c.stride, scale: 1.5), k = rng.normal(n * c.stride, scale: 1.5), v = rng.normal(n * c.stride)
        func packed(_ a: [Float]) -> [Float] { (0..<n).flatMap { a[($0 * c.stride)..<($0 * c.stride + d)] } }
        let scale = 1 / Float(c.headDim).squareRoot()
        let expected = BidirectionalAttention.reference(
            queries: packed(q), keys: packed(k), values: packed(v), tokens: n, heads: c.heads, headDim: c.headDim, scale: scale)
        for pool in [nil, Self.pool] {
            var out = [Float](repeating: .nan, count: n * d)
            var scores = [Float](repeating: .nan, count: BidirectionalAttention.scratchCount(tokens: n, heads: c.heads))
            q.withUnsafeBufferPointer { qs in
                k.withUnsafeBufferPointer { ks in
                    v.withUnsafeBufferPointer { vs in
                        BidirectionalAttention.attend(
                            queries: qs.baseAddress!, keys: ks.baseAddress!, values: vs.baseAddress!, stride: c.stride, tokens: n,
                            heads: c.heads, headDim: c.headDim, scale: scale, scores: &scores, out: &out, outStride: d, pool: pool)
                    }
                }
            }
            let worst = zip(out, expected).map { abs($0 - $1) }.max()!
            #expect(worst < 2e-5, "\(c): worst error \(worst)")
        }
    }

    @Test func attentionReferenceAveragesEqualScores() {
        // Identical keys: every query weighs all values equally, so each output is their mean.
        let n = 4, hd = 2
        let q: [Float] = [1, 2, 3, 4, 5, 6, 7, 8], k = [Float](repeating: 0.5, count: n * hd), v: [Float] = [1, 10, 2, 20, 3, 30, 6, 60]
        let out = BidirectionalAttention.reference(queries: q, keys: k, values: v, tokens: n, heads: 1, headDim: hd, scale: 1)
        for i in 0..<n {
            #expect(abs(out[i * hd] - 3) < 1e-6)
            #expect(abs(out[i * hd + 1] - 30) < 1e-5)
        }
    }
}
