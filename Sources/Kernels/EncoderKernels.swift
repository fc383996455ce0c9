// The row operations of a bidirectional transformer encoder (LFM2-VL's vision tower,
// LFM2-Audio's FastConformer): LayerNorm, GELU in its tanh and erf forms, SiLU, a bias added
// to every row, residual additions, the products of weights used once per call, and
// multi-head softmax attention in which every token sees every token (no mask).
//
//   LayerNorm(x) = (x - mean(x)) / sqrt(var(x) + eps) ⊙ w + b        per row
//   GELU_tanh(x) = 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))
//   GELU_erf(x)  = 0.5 x (1 + erf(x / √2))
//   SiLU(x)      = x σ(x) = x / (1 + e^(-x))
//   Y            = X Wᵀ                                               weights in any type
//   Attention_h  = softmax(scale · Q_h K_hᵀ) V_h                       per head h, rows = tokens
//
// The element-wise kernels are portable SIMD16 like `Elementwise` and split long inputs
// over a thread pool; attention runs one head per pool task, each through two OpenBLAS
// products per block of queries. Scalar references in Double sit beside the kernels that
// need one (`...Reference`); EncoderKernelsTests hold the fast forms to them. The kernels
// only one encoder needs are ConformerKernels.swift (the audio encoder's convolutions) and
// RelativeAttention.swift (its attention).

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Row kernels of encoder blocks: LayerNorm, GELU (tanh and erf), SiLU, bias and residual
/// additions.
public enum EncoderKernels {
    /// LayerNorm (Ba et al., 2016) of each of `rows` rows of `width` floats:
    /// `y = (x - μ) / sqrt(σ² + eps) ⊙ weight + bias`, with `μ` and `σ²` the row's mean and
    /// (biased) variance, every value summed in Double as ggml's `norm` does, and the scale
    /// `1 / sqrt(σ² + eps)` formed in Double. `weight` and `bias` (`width` floats each) may
    /// be nil (1 and 0). `y` may equal `x`. Split over `pool` by rows.
    public static func layerNorm(
        _ x: UnsafePointer<Float>, rows: Int, width: Int, weight: UnsafePointer<Float>?, bias: UnsafePointer<Float>?, eps: Float,
        into y: UnsafeMutablePointer<Float>, pool: ThreadPool? = nil
    ) {
        precondition(rows >= 0 && width > 0, "layerNorm: \(rows) rows of \(width)")
        parallel(rows, minChunk: max(1, 4096 / width), pool) { range in
            for r in range { layerNormRow(x + r * width, width: width, weight: weight, bias: bias, eps: eps, into: y + r * width) }
        }
    }

    /// LayerNorm of one row of `n` floats (see ``layerNorm(_:rows:width:weight:bias:eps:into:pool:)``).
    @inlinable
    public static func layerNormRow(
        _ x: UnsafePointer<Float>, width n: Int, weight: UnsafePointer<Float>?, bias: UnsafePointer<Float>?, eps: Float,
        into y: UnsafeMutablePointer<Float>
    ) {
        let xr = UnsafeRawPointer(x)
        // Mean: each value widened to Double, eight lanes at a time.
        var acc = SIMD8<Double>()
        var i = 0
        while i + 8 <= n {
            acc += SIMD8<Double>(xr.loadUnaligned(fromByteOffset: i * 4, as: SIMD8<Float>.self))
            i += 8
        }
        var sum = acc.sum()
        while i < n {
            sum += Double(x[i])
            i += 1
        }
        let mean = Float(sum / Double(n))
        // Variance of the centred values (centred in Float, as ggml), summed the same way.
        let m8 = SIMD8<Float>(repeating: mean)
        acc = SIMD8<Double>()
        i = 0
        while i + 8 <= n {
            let v = xr.loadUnaligned(fromByteOffset: i * 4, as: SIMD8<Float>.self) - m8
            acc += SIMD8<Double>(v * v)
            i += 8
        }
        var squares = acc.sum()
        while i < n {
            let v = x[i] - mean
            squares += Double(v * v)
            i += 1
        }
        let scale = Float(1 / (squares / Double(n) + Double(eps)).squareRoot())
        let yr = UnsafeMutableRawPointer(y)
        let m16 = SIMD16<Float>(repeating: mean), s16 = SIMD16<Float>(repeating: scale)
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
    /// with the C library's `erff` (correctly rounded to within an ulp or so; the encoders
    /// apply it to one projector layer, so its scalar cost does not show). Split over `pool`.
    public static func geluErf(_ x: UnsafeMutablePointer<Float>, count n: Int, pool: ThreadPool? = nil) {
        let invSqrt2: Float = 0.707_106_781_186_547_5
        parallel(n, minChunk: 8192, pool) { range in
            for i in range {
                let v = x[i]
                x[i] = 0.5 * v * (1 + erff(v * invSqrt2))
            }
        }
    }

    /// SiLU (or swish; Elfwing et al., 2018) in place over `count` floats:
    /// `x ← x σ(x) = x / (1 + e^(-x))`, with the vector `exp`. Split over `pool`.
    public static func silu(_ x: UnsafeMutablePointer<Float>, count n: Int, pool: ThreadPool? = nil) {
        parallel(n, minChunk: 8192, pool) { range in
            sigmoidProduct(x + range.lowerBound, gate: x + range.lowerBound, into: x + range.lowerBound, count: range.count)
        }
    }

    /// `y[i] = a[i] · σ(g[i]) = a[i] / (1 + e^(-g[i]))` over `count` floats, with the vector
    /// `exp`: SiLU when `g` is `a`, a sigmoid-gated linear unit's output otherwise. `y` may
    /// be `a` or `g`.
    @inlinable
    public static func sigmoidProduct(
        _ a: UnsafePointer<Float>, gate g: UnsafePointer<Float>, into y: UnsafeMutablePointer<Float>, count n: Int
    ) {
        var i = 0
        let ar = UnsafeRawPointer(a), gr = UnsafeRawPointer(g), yr = UnsafeMutableRawPointer(y)
        while i + 16 <= n {
            let av = ar.loadUnaligned(fromByteOffset: i * 4, as: SIMD16<Float>.self)
            let gv = gr.loadUnaligned(fromByteOffset: i * 4, as: SIMD16<Float>.self)
            yr.storeBytes(of: av / (1 + Elementwise.exp(-gv)), toByteOffset: i * 4, as: SIMD16<Float>.self)
            i += 16
        }
        while i < n {
            y[i] = a[i] / (1 + expf(-g[i]))
            i += 1
        }
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

    /// `y[i] += factor · x[i]` for `count` floats (a half-step residual). Split over `pool`.
    public static func add(
        _ x: UnsafePointer<Float>, scaledBy factor: Float, into y: UnsafeMutablePointer<Float>, count n: Int, pool: ThreadPool? = nil
    ) {
        parallel(n, minChunk: 16_384, pool) { range in
            Elementwise.axpy(factor, x + range.lowerBound, y + range.lowerBound, count: range.count)
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

extension WeightMatrix {
    /// Rows of weights per block in ``matmulByRowBlocks(_:count:into:pool:)``: the same
    /// number of blocks for every thread, at least two, each of about 4 MB of F32 tile at
    /// most, at least 16 rows, a multiple of 16.
    /// Each block is one OpenBLAS product, which packs all of the activations again, so
    /// the blocks are few: with blocks of 256 KB (80 rows of 768 values) that packing took
    /// a quarter of a SigLIP2 encode (docs/performance-log.md, "Media encoders (2026-11-26)").
    public static func rowBlock(rows: Int, cols: Int, threads: Int) -> Int {
        let t = max(1, threads)
        // Blocks: a multiple of the threads (every thread gets as many), at least two each.
        let byMemory = (rows * cols + (1 << 20) - 1) >> 20
        let blocks = (max(2 * t, byMemory) + t - 1) / t * t
        return max(16, ((rows + blocks - 1) / blocks + 15) / 16 * 16)
    }

    /// `Y = X Wᵀ` for `count` rows of `x` (`count x cols`, row-major; `y` is `count x
    /// rows`), for a matrix used once per call (an encoder's): the weight rows are split in
    /// blocks of ``rowBlock(rows:cols:threads:)`` over `pool`, and each thread dequantizes a block into
    /// its own small tile and multiplies it with OpenBLAS on one thread, so the weights are
    /// read once, no whole-matrix copy is written, and the threads are the pool's (OpenBLAS
    /// starts none of its own). F32 weights are multiplied in place, by the same blocks.
    /// Without a pool of several threads, one block after the other (and OpenBLAS may use
    /// its threads in each product).
    public func matmulByRowBlocks(_ x: UnsafePointer<Float>, count: Int, into y: UnsafeMutablePointer<Float>, pool: ThreadPool? = nil) {
        precondition(count >= 0)
        if count == 0 || rows == 0 { return }
        let inPlace = type == .f32 && Int(bitPattern: data) % MemoryLayout<Float>.alignment == 0
        let block = Self.rowBlock(rows: rows, cols: cols, threads: pool?.threads ?? 1), blocks = (rows + block - 1) / block
        let parallel = (pool?.threads ?? 1) > 1 && blocks > 1
        if inPlace && !parallel {
            pool?.sleepWorkers()
            BLAS.sgemm(
                transB: true, m: count, n: rows, k: cols, a: x, lda: cols, b: data.assumingMemoryBound(to: Float.self), ldb: cols,
                c: y, ldc: rows)
            return
        }
        // One tile per thread (none for F32 weights, read in place).
        let threads = parallel ? pool?.threads ?? 1 : 1
        let tiles: UnsafeMutablePointer<Float>? = inPlace ? nil : .allocate(capacity: threads * block * cols)
        defer { tiles?.deallocate() }
        productByRowBlocks(x, count: count, into: y, blockRows: block, tiles: tiles, pool: parallel ? pool : nil)
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
