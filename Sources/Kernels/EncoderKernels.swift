// The row operations of a bidirectional transformer encoder (a vision tower, an audio
// encoder): LayerNorm, GELU in its tanh and erf forms, a bias added to every row, and
// multi-head softmax attention in which every token sees every token (no mask).
//
//   LayerNorm(x) = (x - mean(x)) / sqrt(var(x) + eps) ⊙ w + b        per row
//   GELU_tanh(x) = 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))
//   GELU_erf(x)  = 0.5 x (1 + erf(x / √2))
//   Attention_h  = softmax(scale · Q_h K_hᵀ) V_h                       per head h, rows = tokens
//
// The element-wise kernels are portable SIMD16 like `Elementwise` and split long inputs
// over a thread pool; attention runs one head per pool task, each through two OpenBLAS
// products per block of queries. Each has a scalar reference in Double beside it
// (`...Reference`), which EncoderKernelsTests hold the fast forms to.

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Row kernels of encoder blocks: LayerNorm, GELU (tanh and erf), bias addition.
public enum EncoderKernels {
    /// LayerNorm (Ba et al., 2016) of each of `rows` rows of `width` floats:
    /// `y = (x - μ) / sqrt(σ² + eps) ⊙ weight + bias`, with `μ` and `σ²` the row's mean and
    /// (biased) variance, both summed in Double as ggml's `norm` does. `weight` and `bias`
    /// (`width` floats each) may be nil (1 and 0). `y` may equal `x`. Split over `pool` by
    /// rows.
    public static func layerNorm(
        _ x: UnsafePointer<Float>, rows: Int, width: Int, weight: UnsafePointer<Float>?, bias: UnsafePointer<Float>?, eps: Float,
        into y: UnsafeMutablePointer<Float>, pool: ThreadPool? = nil
    ) {
        precondition(rows >= 0 && width > 0, "layerNorm: \(rows) rows of \(width)")
        let body: (Range<Int>) -> Void = { range in
            for r in range { layerNormRow(x + r * width, width: width, weight: weight, bias: bias, eps: eps, into: y + r * width) }
        }
        parallel(rows, minChunk: max(1, 4096 / width), pool, body)
    }

    /// LayerNorm of one row of `n` floats (see ``layerNorm(_:rows:width:weight:bias:eps:into:pool:)``).
    @inlinable
    public static func layerNormRow(
        _ x: UnsafePointer<Float>, width n: Int, weight: UnsafePointer<Float>?, bias: UnsafePointer<Float>?, eps: Float,
        into y: UnsafeMutablePointer<Float>
    ) {
        let xr = UnsafeRawPointer(x)
        // Mean: SIMD partial sums widened to Double.
        var acc = SIMD16<Float>()
        var i = 0
        while i + 16 <= n {
            acc += xr.loadUnaligned(fromByteOffset: i * 4, as: SIMD16<Float>.self)
            i += 16
        }
        var sum: Double = 0
        for lane in 0..<16 { sum += Double(acc[lane]) }
        while i < n {
            sum += Double(x[i])
            i += 1
        }
        let mean = Float(sum / Double(n))
        // Variance of the centred values, summed the same way.
        let m16 = SIMD16<Float>(repeating: mean)
        acc = SIMD16<Float>()
        i = 0
        while i + 16 <= n {
            let v = xr.loadUnaligned(fromByteOffset: i * 4, as: SIMD16<Float>.self) - m16
            acc += v * v
            i += 16
        }
        var squares: Double = 0
        for lane in 0..<16 { squares += Double(acc[lane]) }
        while i < n {
            let v = x[i] - mean
            squares += Double(v * v)
            i += 1
        }
        let scale = Float(1 / (squares / Double(n) + Double(eps)).squareRoot())
        let yr = UnsafeMutableRawPointer(y)
        let s16 = SIMD16<Float>(repeating: scale)
        i = 0
        while i + 16 <= n {
            var v = (xr.loadUnaligned(fromByteOffset: i * 4, as: SIMD16<Float>.self) - m16) * s16
            if let weight { v *= UnsafeRawPointer(weight).loadUnaligned(fromByteOffset: i * 4, as: SIMD16<Float>.self) }
            if let bias { v += UnsafeRawPointer(bias).loadUnaligned(fromByteOffset: i * 4, as: SIMD16<Float>.self) }
            yr.storeBytes(of: v, toByteOffset: i * 4, as: SIMD16<Float>.self)
            i += 16
        }
        while i < n {
            var v = (x[i] - mean) * scale
            if let weight { v *= weight[i] }
            if let bias { v += bias[i] }
            y[i] = v
            i += 1
        }
    }

    /// The scalar reference of ``layerNorm(_:rows:width:weight:bias:eps:into:pool:)``: the
    /// formula in Double, one row at a time.
    public static func layerNormReference(
        _ x: [Float], rows: Int, width: Int, weight: [Float]?, bias: [Float]?, eps: Float
    ) -> [Float] {
        var y = [Float](repeating: 0, count: rows * width)
        for r in 0..<rows {
            let row = x[(r * width)..<((r + 1) * width)].map(Double.init)
            let mean = row.reduce(0, +) / Double(width)
            let variance = row.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / Double(width)
            for c in 0..<width {
                var v = (row[c] - mean) / (variance + Double(eps)).squareRoot()
                if let weight { v *= Double(weight[c]) }
                if let bias { v += Double(bias[c]) }
                y[r * width + c] = Float(v)
            }
        }
        return y
    }

    /// GELU in its tanh form (Hendrycks & Gimpel, 2016), in place over `count` floats:
    /// `x ← 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))`, computed as the equal
    /// `x / (1 + e^(-2u))` for `u = √(2/π) (x + 0.044715 x³)` with the vector `exp` (so `x`
    /// itself for large `x`, and 0 for very negative `x`). Split over `pool`.
    public static func geluTanh(_ x: UnsafeMutablePointer<Float>, count n: Int, pool: ThreadPool? = nil) {
        parallel(n, minChunk: 8192, pool) { range in geluTanhSpan(x + range.lowerBound, count: range.count) }
    }

    static func geluTanhSpan(_ x: UnsafeMutablePointer<Float>, count n: Int) {
        let c: Float = -2 * 0.797_884_560_802_865_4  // -2 √(2/π)
        let a: Float = 0.044_715
        let xr = UnsafeMutableRawPointer(x)
        var i = 0
        while i + 16 <= n {
            let g = xr.loadUnaligned(fromByteOffset: i * 4, as: SIMD16<Float>.self)
            let e = Elementwise.exp(c * g * (1 + a * g * g))
            xr.storeBytes(of: g / (1 + e), toByteOffset: i * 4, as: SIMD16<Float>.self)
            i += 16
        }
        while i < n {
            let g = x[i]
            x[i] = g / (1 + expf(c * g * (1 + a * g * g)))
            i += 1
        }
    }

    /// GELU in its exact form, in place over `count` floats: `x ← 0.5 x (1 + erf(x / √2))`,
    /// with ``erf(_:)``. Split over `pool`.
    public static func geluErf(_ x: UnsafeMutablePointer<Float>, count n: Int, pool: ThreadPool? = nil) {
        parallel(n, minChunk: 8192, pool) { range in geluErfSpan(x + range.lowerBound, count: range.count) }
    }

    static func geluErfSpan(_ x: UnsafeMutablePointer<Float>, count n: Int) {
        let invSqrt2: Float = 0.707_106_781_186_547_5
        let xr = UnsafeMutableRawPointer(x)
        var i = 0
        while i + 16 <= n {
            let g = xr.loadUnaligned(fromByteOffset: i * 4, as: SIMD16<Float>.self)
            xr.storeBytes(of: 0.5 * g * (1 + erf(g * invSqrt2)), toByteOffset: i * 4, as: SIMD16<Float>.self)
            i += 16
        }
        if i < n {
            // The tail through the same vector formula, so every element rounds alike.
            var tail = SIMD16<Float>()
            for k in 0..<(n - i) { tail[k] = x[i + k] }
            let out = 0.5 * tail * (1 + erf(tail * invSqrt2))
            for k in 0..<(n - i) { x[i + k] = out[k] }
        }
    }

    /// The error function of 16 floats, within 4e-7 of the exact value: Abramowitz & Stegun
    /// 7.1.26, `erf(|x|) = 1 - (a₁t + a₂t² + a₃t³ + a₄t⁴ + a₅t⁵) e^(-x²)` with
    /// `t = 1 / (1 + p|x|)` (absolute error of the formula 1.5e-7, plus float rounding; measured
    /// 3.2e-7), the sign restored.
    @inlinable
    public static func erf(_ x: SIMD16<Float>) -> SIMD16<Float> {
        var ax = x
        ax.replace(with: -x, where: x .< 0)
        let t = 1 / (1 + 0.327_591_1 * ax)
        var p = SIMD16<Float>(repeating: 1.061_405_429)
        p = SIMD16(repeating: -1.453_152_027).addingProduct(p, t)
        p = SIMD16(repeating: 1.421_413_741).addingProduct(p, t)
        p = SIMD16(repeating: -0.284_496_736).addingProduct(p, t)
        p = SIMD16(repeating: 0.254_829_592).addingProduct(p, t)
        p *= t
        var y = 1 - p * Elementwise.exp(-(ax * ax))
        y.replace(with: -y, where: x .< 0)
        return y
    }

    /// `y[r][c] += bias[c]` for `rows` rows of `width` floats. Split over `pool` by rows.
    public static func addBias(
        _ bias: UnsafePointer<Float>, to y: UnsafeMutablePointer<Float>, rows: Int, width: Int, pool: ThreadPool? = nil
    ) {
        parallel(rows, minChunk: max(1, 8192 / max(1, width)), pool) { range in
            for r in range { Elementwise.add(bias, into: y + r * width, count: width) }
        }
    }

    /// `y[i] += x[i]` for `count` floats. Split over `pool`.
    public static func add(_ x: UnsafePointer<Float>, into y: UnsafeMutablePointer<Float>, count n: Int, pool: ThreadPool? = nil) {
        parallel(n, minChunk: 16_384, pool) { range in
            Elementwise.add(x + range.lowerBound, into: y + range.lowerBound, count: range.count)
        }
    }

    /// Runs `body` over sub-ranges covering `0..<count`: on `pool` when it has several
    /// threads and `count` exceeds `minChunk`, else in one call on this thread.
    @inline(__always)
    public static func parallel(_ count: Int, minChunk: Int, _ pool: ThreadPool?, _ body: (Range<Int>) -> Void) {
        guard count > 0 else { return }
        if let pool, pool.threads > 1, count > minChunk {
            pool.parallelFor(count: count, minChunk: minChunk, body)
        } else {
            body(0..<count)
        }
    }
}

/// Multi-head softmax attention in which every token sees every token (an encoder's
/// self-attention: no causal mask, no padding), over `n` tokens whose queries, keys and
/// values are rows of `heads · headDim` floats, head `h` at columns `h·headDim ..<
/// (h+1)·headDim`:
///
/// ```
/// O_h = softmax_rows(scale · Q_h K_hᵀ) V_h        Q_h, K_h, V_h, O_h: [n, headDim]
/// ```
public enum BidirectionalAttention {
    /// Queries per block: a head's score scratch holds this many rows of `n` scores.
    public static let queryBlock = 128

    /// Floats of `scores` scratch ``attend(queries:keys:values:stride:tokens:heads:headDim:scale:scores:out:outStride:pool:)`` needs.
    public static func scratchCount(tokens n: Int, heads: Int) -> Int { heads * min(n, queryBlock) * n }

    /// Every head over all `n` tokens. Row `i` of the queries, keys and values is at
    /// `queries + i * stride` (and the same for keys, values); output row `i` at
    /// `out + i * outStride`. One head per pool task, each with its own
    /// `min(n, queryBlock) · n` floats of `scores` and two single-threaded OpenBLAS products
    /// per block of queries (`S = scale · Q Kᵀ`, a softmax of each row, `O = S V`); with no
    /// pool (or one thread) the heads run in turn and OpenBLAS uses its own threads.
    public static func attend(
        queries q: UnsafePointer<Float>, keys k: UnsafePointer<Float>, values v: UnsafePointer<Float>, stride: Int, tokens n: Int,
        heads: Int, headDim hd: Int, scale: Float, scores: UnsafeMutablePointer<Float>, out: UnsafeMutablePointer<Float>,
        outStride: Int, pool: ThreadPool? = nil
    ) {
        precondition(n >= 0 && heads > 0 && hd > 0 && stride >= heads * hd && outStride >= heads * hd, "attend: bad shape")
        guard n > 0 else { return }
        let block = min(n, queryBlock)
        let head: (Int) -> Void = { h in
            let s = scores + h * block * n
            var i0 = 0
            while i0 < n {
                let m = min(block, n - i0)
                // S[m][n] = scale · Q[i0..<i0+m]_h · K_hᵀ
                BLAS.sgemm(
                    transB: true, m: m, n: n, k: hd, alpha: scale,
                    a: q + i0 * stride + h * hd, lda: stride, b: k + h * hd, ldb: stride, c: s, ldc: n)
                for r in 0..<m { Elementwise.softmax(s + r * n, count: n) }
                // O[i0..<i0+m]_h = S · V_h
                BLAS.sgemm(m: m, n: hd, k: n, a: s, lda: n, b: v + h * hd, ldb: stride, c: out + i0 * outStride + h * hd, ldc: outStride)
                i0 += m
            }
        }
        guard let pool, pool.threads > 1, heads > 1 else {
            for h in 0..<heads { head(h) }
            return
        }
        // Our threads run one head each: OpenBLAS must not start its own threads inside.
        BLAS.withOneThread(when: true) {
            pool.parallelFor(count: heads) { range in
                for h in range { head(h) }
            }
        }
    }

    /// The scalar reference: for each head and query, the scores in Double, the softmax
    /// with the C library's `exp`, and the weighted sum of the values, plain loops.
    public static func reference(
        queries q: [Float], keys k: [Float], values v: [Float], tokens n: Int, heads: Int, headDim hd: Int, scale: Float
    ) -> [Float] {
        let d = heads * hd
        var out = [Float](repeating: 0, count: n * d)
        var s = [Double](repeating: 0, count: n)
        for h in 0..<heads {
            for i in 0..<n {
                for j in 0..<n {
                    var dot: Double = 0
                    for c in 0..<hd { dot += Double(q[i * d + h * hd + c]) * Double(k[j * d + h * hd + c]) }
                    s[j] = dot * Double(scale)
                }
                let top = s.max()!
                var total: Double = 0
                for j in 0..<n {
                    s[j] = exp(s[j] - top)
                    total += s[j]
                }
                for c in 0..<hd {
                    var acc: Double = 0
                    for j in 0..<n { acc += s[j] * Double(v[j * d + h * hd + c]) }
                    out[i * d + h * hd + c] = Float(acc / total)
                }
            }
        }
        return out
    }
}
