// Causal attention of one head over its cached keys and values:
//
//   out_i = Σ_j softmax_j(q_i · k_j · scale) v_j     for j = 0 ... start + i
//
// where query i sits at position `start + i` and sees every earlier position and its own.
// Three forms: `query` for one new token (decode: dot products, softmax, axpy), `causal`
// for a batch of queries (prefill: blocks of queries through two OpenBLAS products), and
// `causalReference`, plain loops that both are tested against.

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Causal softmax attention of one head (the keys and values of one KV head, F32,
/// row-major `[position][headDim]`).
public enum CausalAttention {
    /// Queries per block in ``causal(queries:queryStride:count:start:keys:values:headDim:scale:scores:out:outStride:)``:
    /// its `scores` scratch holds `queryBlock` rows of the longest span.
    public static let queryBlock = 64

    /// One query over keys and values `0..<span`:
    /// `out = Σ_j softmax_j(q·k_j · scale) v_j`. `scores` is scratch for `span` floats (left
    /// holding the probabilities).
    @inlinable
    public static func query(
        _ q: UnsafePointer<Float>, keys: UnsafePointer<Float>, values: UnsafePointer<Float>, span: Int, headDim hd: Int,
        scale: Float, scores: UnsafeMutablePointer<Float>, out: UnsafeMutablePointer<Float>
    ) {
        for j in 0..<span { scores[j] = Elementwise.dot(q, keys + j * hd, count: hd) * scale }
        Elementwise.softmax(scores, count: span)
        out.update(repeating: 0, count: hd)
        for j in 0..<span { Elementwise.axpy(scores[j], values + j * hd, out, count: hd) }
    }

    /// `count` queries at positions `start ..< start + count` (query `i` at
    /// `queries + i * queryStride`), each over keys `0 ... start + i`; output row `i` at
    /// `out + i * outStride`. Runs blocks of ``queryBlock`` queries through OpenBLAS sgemm
    /// (`S = scale · Q Kᵀ`, a causal softmax of each row, `O = S V`) on the calling thread's
    /// share of OpenBLAS (see ``BLAS/withOneThread(when:_:)`` for running heads in parallel).
    /// `scores` is scratch for `min(count, queryBlock) * (start + count)` floats.
    public static func causal(
        queries q: UnsafePointer<Float>, queryStride: Int, count n: Int, start: Int,
        keys: UnsafePointer<Float>, values: UnsafePointer<Float>, headDim hd: Int, scale: Float,
        scores: UnsafeMutablePointer<Float>, out: UnsafeMutablePointer<Float>, outStride: Int
    ) {
        var i0 = 0
        while i0 < n {
            let m = min(queryBlock, n - i0)
            let span = start + i0 + m  // keys visible to the last query of the block
            // S[m][span] = scale · Q[i0..<i0+m] · K[0..<span]ᵀ
            BLAS.sgemm(
                transB: true, m: m, n: span, k: hd, alpha: scale,
                a: q + i0 * queryStride, lda: queryStride, b: keys, ldb: hd, c: scores, ldc: span)
            for r in 0..<m {
                let visible = start + i0 + r + 1
                let row = scores + r * span
                Elementwise.softmax(row, count: visible)
                for j in visible..<span { row[j] = 0 }
            }
            // O[i0..<i0+m] = S · V[0..<span]
            BLAS.sgemm(
                m: m, n: hd, k: span, a: scores, lda: span, b: values, ldb: hd,
                c: out + i0 * outStride, ldc: outStride)
            i0 += m
        }
    }

    /// The scalar reference of ``causal(queries:queryStride:count:start:keys:values:headDim:scale:scores:out:outStride:)``
    /// (and of ``query(_:keys:values:span:headDim:scale:scores:out:)`` with `count` 1):
    /// one query at a time, plain loops, `exp` from the C library, sums in Double.
    public static func causalReference(
        queries q: UnsafePointer<Float>, queryStride: Int, count n: Int, start: Int,
        keys: UnsafePointer<Float>, values: UnsafePointer<Float>, headDim hd: Int, scale: Float,
        out: UnsafeMutablePointer<Float>, outStride: Int
    ) {
        for i in 0..<n {
            let qi = q + i * queryStride, span = start + i + 1
            var s = [Double](repeating: 0, count: span)
            for j in 0..<span {
                var dot: Double = 0
                for c in 0..<hd { dot += Double(qi[c]) * Double(keys[j * hd + c]) }
                s[j] = dot * Double(scale)
            }
            let top = s.max()!
            var total: Double = 0
            for j in 0..<span {
                s[j] = exp(s[j] - top)
                total += s[j]
            }
            for c in 0..<hd {
                var acc: Double = 0
                for j in 0..<span { acc += s[j] / total * Double(values[j * hd + c]) }
                out[i * outStride + c] = Float(acc)
            }
        }
    }
}
