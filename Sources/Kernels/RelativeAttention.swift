// Transformer-XL's relative-position self-attention (Dai et al., 2019), as NeMo's
// `RelPositionMultiHeadAttention` (FastConformer's `rel_pos`) computes it and llama.cpp's
// `lfm2a` graph reproduces it. For T tokens, head h, queries q_i, keys k_j, values v_j,
// the learned biases u and v, and p = linear_pos(P) the projected sinusoid table of the
// 2T-1 relative distances T-1 down to -(T-1):
//
//   score(i, j) = ((q_i + u) · k_j + (q_i + v) · p_(T-1-i+j)) · scale
//   out_i       = Σ_j softmax_j(score(i, ·)) v_j
//
// The second term is "matrix BD" of the paper; computing it for every (query, table row)
// pair and then picking row T-1-i+j for key j is Transformer-XL's "relative shift" (the
// pad-and-reshape trick in the PyTorch code); here the pick is an index.

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Relative-position multi-head self-attention over a whole sequence (no mask).
public enum RelativePositionAttention {
    /// Queries per block in ``attend(queries:keys:values:positions:stride:biasU:biasV:tokens:heads:headDim:scale:out:pool:)``.
    public static let queryBlock = 64

    /// The sinusoid table of the relative distances of `tokens` tokens: `2·tokens - 1`
    /// rows of `width` values, row `r` for the distance `tokens - 1 - r` (from `tokens - 1`
    /// down to `-(tokens - 1)`):
    ///
    /// ```
    /// P[r][2i]   = sin((T-1-r) · 10000^(-2i/width))
    /// P[r][2i+1] = cos((T-1-r) · 10000^(-2i/width))
    /// ```
    ///
    /// Formed as llama.cpp forms it (`clip.cpp`, `lfm2a`): the frequencies in Double, each
    /// angle rounded to Float, then `sinf` and `cosf`. `width` must be even.
    public static func sinusoids(tokens: Int, width: Int) -> [Float] {
        precondition(tokens >= 1 && width >= 2 && width % 2 == 0, "sinusoids: tokens \(tokens), width \(width)")
        let rows = 2 * tokens - 1, pairs = width / 2
        let frequencies = (0..<pairs).map { i in exp(-(log(10000.0) / Double(Float(width))) * Double(2 * Float(i))) }
        var table = [Float](repeating: 0, count: rows * width)
        for r in 0..<rows {
            let distance = Double(tokens - 1 - r)
            for i in 0..<pairs {
                let angle = Float(distance * frequencies[i])
                table[r * width + 2 * i] = sinf(angle)
                table[r * width + 2 * i + 1] = cosf(angle)
            }
        }
        return table
    }

    /// Transformer-XL's relative shift: from `x`, `tokens` rows of `2·tokens - 1` scores of
    /// a query against every table row, the `tokens x tokens` scores against the keys,
    /// `out[i][j] = x[i][tokens - 1 - i + j]` (key `j` seen from query `i` is at distance
    /// `i - j`, table row `tokens - 1 - (i - j)`).
    public static func relativeShift(_ x: UnsafePointer<Float>, tokens T: Int, into out: UnsafeMutablePointer<Float>) {
        let width = 2 * T - 1
        for i in 0..<T {
            for j in 0..<T { out[i * T + j] = x[i * width + T - 1 - i + j] }
        }
    }

    /// Attention of `tokens` queries over the same `tokens` keys, every head at once:
    /// `queries`, `keys`, `values` and `out` are `tokens` rows of `stride` floats (head `h`
    /// at columns `h·headDim ..< (h+1)·headDim`), `positions` is the projected table
    /// (`2·tokens - 1` rows of `stride`), `biasU` and `biasV` `heads x headDim`. Each (head,
    /// block of ``queryBlock`` queries) is three OpenBLAS products (content scores `AC`, the
    /// block's band of position scores `BD`, then the weighted values) with the softmax in
    /// between; the pairs are split over `pool` with OpenBLAS on one thread each.
    public static func attend(
        queries q: UnsafePointer<Float>, keys k: UnsafePointer<Float>, values v: UnsafePointer<Float>,
        positions p: UnsafePointer<Float>, stride: Int,
        biasU: UnsafePointer<Float>, biasV: UnsafePointer<Float>,
        tokens T: Int, heads: Int, headDim hd: Int, scale: Float,
        out: UnsafeMutablePointer<Float>, pool: ThreadPool? = nil
    ) {
        precondition(heads * hd <= stride, "attend: \(heads) heads of \(hd) in rows of \(stride)")
        guard T > 0, heads > 0 else { return }
        let blocks = (T + queryBlock - 1) / queryBlock
        let items = heads * blocks
        let parallel = (pool?.threads ?? 1) > 1 && items > 1
        pool?.sleepWorkers()
        BLAS.withOneThread(when: parallel) {
            let body: (Range<Int>) -> Void = { range in
                let m = min(queryBlock, T)
                let scratch = UnsafeMutablePointer<Float>.allocate(capacity: 2 * m * hd + m * T + m * (T + m - 1))
                defer { scratch.deallocate() }
                for item in range {
                    block(
                        head: item / blocks, queries: (item % blocks) * queryBlock..<min(T, (item % blocks + 1) * queryBlock),
                        q: q, k: k, v: v, p: p, stride: stride, biasU: biasU, biasV: biasV, tokens: T, headDim: hd, scale: scale,
                        out: out, scratch: scratch)
                }
            }
            if parallel, let pool { pool.parallelFor(count: items, body) } else { body(0..<items) }
        }
    }

    /// One head's attention for the queries `rows` (see ``attend``). `scratch` holds
    /// `2·m·hd + m·T + m·(T + m - 1)` floats for `m = rows.count`.
    static func block(
        head h: Int, queries rows: Range<Int>,
        q: UnsafePointer<Float>, k: UnsafePointer<Float>, v: UnsafePointer<Float>, p: UnsafePointer<Float>, stride: Int,
        biasU: UnsafePointer<Float>, biasV: UnsafePointer<Float>, tokens T: Int, headDim hd: Int, scale: Float,
        out: UnsafeMutablePointer<Float>, scratch: UnsafeMutablePointer<Float>
    ) {
        let m = rows.count, i0 = rows.lowerBound
        let qu = scratch, qv = qu + m * hd, ac = qv + m * hd, bd = ac + m * T
        // q + u and q + v for the block's queries.
        let u = biasU + h * hd, w = biasV + h * hd
        for ii in 0..<m {
            let src = q + (i0 + ii) * stride + h * hd
            for c in 0..<hd {
                qu[ii * hd + c] = src[c] + u[c]
                qv[ii * hd + c] = src[c] + w[c]
            }
        }
        // AC = (Q + u) Kᵀ: m x T.
        BLAS.sgemm(transB: true, m: m, n: T, k: hd, a: qu, lda: hd, b: k + h * hd, ldb: stride, c: ac, ldc: T)
        // The table rows the block reads: T-1-i+j for i in rows, j in 0..<T, that is
        // r0 = T - i1 ..< r0 + T + m - 1. BD = (Q + v) P[r0...]ᵀ: m x (T + m - 1).
        let r0 = T - rows.upperBound, span = T + m - 1
        BLAS.sgemm(transB: true, m: m, n: span, k: hd, a: qv, lda: hd, b: p + r0 * stride + h * hd, ldb: stride, c: bd, ldc: span)
        // score(i, j) = (AC[i][j] + BD[i][row T-1-i+j]) · scale; row T-1-i+j is column
        // (m-1-ii) + j of the block's band.
        for ii in 0..<m {
            let s = ac + ii * T, band = bd + ii * span + (m - 1 - ii)
            for j in 0..<T { s[j] = (s[j] + band[j]) * scale }
            Elementwise.softmax(s, count: T)
        }
        // out = softmax · V: m x hd, into the head's columns.
        BLAS.sgemm(m: m, n: hd, k: T, a: ac, lda: T, b: v + h * hd, ldb: stride, c: out + i0 * stride + h * hd, ldc: stride)
    }

    /// ``attend`` written plainly (loops, Double sums, the explicit relative shift): the
    /// reference the fast form is tested against.
    public static func attendReference(
        queries q: UnsafePointer<Float>, keys k: UnsafePointer<Float>, values v: UnsafePointer<Float>,
        positions p: UnsafePointer<Float>, stride: Int,
        biasU: UnsafePointer<Float>, biasV: UnsafePointer<Float>,
        tokens T: Int, heads: Int, headDim hd: Int, scale: Float,
        out: UnsafeMutablePointer<Float>
    ) {
        let width = 2 * T - 1
        var bd = [Float](repeating: 0, count: T * width)
        var shifted = [Float](repeating: 0, count: T * T)
        for h in 0..<heads {
            for i in 0..<T {
                for r in 0..<width {
                    var s: Double = 0
                    for c in 0..<hd { s += Double(q[i * stride + h * hd + c] + biasV[h * hd + c]) * Double(p[r * stride + h * hd + c]) }
                    bd[i * width + r] = Float(s)
                }
            }
            bd.withUnsafeBufferPointer { relativeShift($0.baseAddress!, tokens: T, into: &shifted) }
            for i in 0..<T {
                var scores = [Double](repeating: 0, count: T)
                for j in 0..<T {
                    var s: Double = 0
                    for c in 0..<hd { s += Double(q[i * stride + h * hd + c] + biasU[h * hd + c]) * Double(k[j * stride + h * hd + c]) }
                    scores[j] = (s + Double(shifted[i * T + j])) * Double(scale)
                }
                let top = scores.max()!
                let e = scores.map { exp($0 - top) }
                let sum = e.reduce(0, +)
                for c in 0..<hd {
                    var o: Double = 0
                    for j in 0..<T { o += e[j] / sum * Double(v[j * stride + h * hd + c]) }
                    out[i * stride + h * hd + c] = Float(o)
                }
            }
        }
    }
}
