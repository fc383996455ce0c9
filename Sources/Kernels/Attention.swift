// Causal attention of one head over its cached keys and values:
//
//   out_i = Σ_j softmax_j(q_i · k_j · scale) v_j     for j = max(0, p_i - window + 1) ... p_i
//
// where query i sits at position `p_i = start + i` and sees its own position and the ones
// before it: all of them (no window), or with a sliding window of `window` positions only
// the `window - 1` latest (Gemma 3's local layers; Beltagy et al., 2020). Three forms:
// `query` for one new token (decode: dot products, softmax, axpy), `causal` for a batch
// of queries (prefill: blocks of queries through two OpenBLAS products), and
// `causalReference`, plain loops that both are tested against.
//
// A decoded token over a long cache is split into blocks of `decodeKeyBlock` keys that
// threads take apart ("flash decoding": Dao et al., 2023): block b gives o_b, its own
// softmax over its keys applied to their values, with its largest score m_b and its sum
// s_b = Σ_j exp(score_j - m_b); `mergeBlocks` then weighs them,
//
//   out = Σ_b w_b o_b,   w_b = s_b exp(m_b - M) / Σ_c s_c exp(m_c - M),   M = max_b m_b,
//
// which is the softmax over all the keys. The blocks depend only on the query's span, never
// on the threads or on other sequences, so a token's output does not either; a span of one
// block is exactly `query`.

import CPUHints

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
#if LEAP_X86_AVX2
import _Builtin_intrinsics.intel
#endif

/// Rows of `width` values, row `j` at `base + j * width`, in the type they are stored in
/// (an attention cache's keys or values of one KV head), as the decode kernels read them:
/// `Elementwise.dot` and `axpy` over a stored row.
public protocol AttentionRows {
    /// Row `j`'s first value.
    func row(_ j: Int) -> UnsafeRawPointer
    /// Values `i ..< i + 16` of the row at `row`, as floats.
    static func load16(_ row: UnsafeRawPointer, _ i: Int) -> SIMD16<Float>
    /// Values `i ..< i + 8` of the row at `row`, as floats.
    static func load8(_ row: UnsafeRawPointer, _ i: Int) -> SIMD8<Float>
    /// Value `i` of the row at `row`, as a float.
    static func load(_ row: UnsafeRawPointer, _ i: Int) -> Float
}

/// Rows of F32 values (an F32 cache, read in place).
@frozen public struct FloatRows: AttentionRows {
    public let base: UnsafePointer<Float>
    public let width: Int

    @inlinable public init(_ base: UnsafePointer<Float>, width: Int) {
        self.base = base
        self.width = width
    }

    @inlinable @inline(__always)
    public func row(_ j: Int) -> UnsafeRawPointer { UnsafeRawPointer(base) + j &* width &* 4 }

    @inlinable @inline(__always)
    public static func load16(_ row: UnsafeRawPointer, _ i: Int) -> SIMD16<Float> {
        row.loadUnaligned(fromByteOffset: i &* 4, as: SIMD16<Float>.self)
    }

    @inlinable @inline(__always)
    public static func load8(_ row: UnsafeRawPointer, _ i: Int) -> SIMD8<Float> {
        row.loadUnaligned(fromByteOffset: i &* 4, as: SIMD8<Float>.self)
    }

    @inlinable @inline(__always)
    public static func load(_ row: UnsafeRawPointer, _ i: Int) -> Float { row.loadUnaligned(fromByteOffset: i &* 4, as: Float.self) }
}

/// Rows of IEEE half values (an F16 cache, read in place: half the bytes of F32), widened
/// to floats as they are loaded (F16C's `vcvtph2ps` where the build has it). Every half is
/// exactly a float, so the values are those of the F32 copy.
@frozen public struct HalfRows: AttentionRows {
    public let base: UnsafeRawPointer
    public let width: Int

    @inlinable public init(_ base: UnsafeRawPointer, width: Int) {
        self.base = base
        self.width = width
    }

    @inlinable @inline(__always)
    public func row(_ j: Int) -> UnsafeRawPointer { base + j &* width &* 2 }

    @inlinable @inline(__always)
    public static func load16(_ row: UnsafeRawPointer, _ i: Int) -> SIMD16<Float> {
        let p = row + i &* 2
        #if LEAP_X86_AVX2
        let low = _mm256_cvtph_ps(p.loadUnaligned(as: __m128i.self))
        let high = _mm256_cvtph_ps(p.loadUnaligned(fromByteOffset: 16, as: __m128i.self))
        return SIMD16(lowHalf: low, highHalf: high)  // __m256 is SIMD8<Float>
        #else
        var v = SIMD16<Float>()
        for k in 0..<16 { v[k] = FloatBits.halfToFloat(p.loadUnaligned(fromByteOffset: 2 * k, as: UInt16.self)) }
        return v
        #endif
    }

    @inlinable @inline(__always)
    public static func load8(_ row: UnsafeRawPointer, _ i: Int) -> SIMD8<Float> {
        let p = row + i &* 2
        #if LEAP_X86_AVX2
        return _mm256_cvtph_ps(p.loadUnaligned(as: __m128i.self))
        #else
        var v = SIMD8<Float>()
        for k in 0..<8 { v[k] = FloatBits.halfToFloat(p.loadUnaligned(fromByteOffset: 2 * k, as: UInt16.self)) }
        return v
        #endif
    }

    @inlinable @inline(__always)
    public static func load(_ row: UnsafeRawPointer, _ i: Int) -> Float {
        FloatBits.halfToFloat(row.loadUnaligned(fromByteOffset: i &* 2, as: UInt16.self))
    }
}

/// Causal softmax attention of one head (the keys and values of one KV head, F32,
/// row-major `[position][headDim]`).
public enum CausalAttention {
    /// Queries per block in ``causal(queries:queryStride:count:start:keys:values:keyStart:window:headDim:scale:scores:out:outStride:)``:
    /// its `scores` scratch holds `queryBlock` rows of the longest span.
    public static let queryBlock = 64

    /// One query over keys and values `0..<span`:
    /// `out = Σ_j softmax_j(q·k_j · scale) v_j`. `scores` is scratch for `span` floats (left
    /// holding the probabilities). Returns the largest scaled score and the softmax's sum
    /// of exponentials, for ``mergeBlocks(_:maxima:sums:count:headDim:out:)``.
    @discardableResult
    public static func query(
        _ q: UnsafePointer<Float>, keys: UnsafePointer<Float>, values: UnsafePointer<Float>, span: Int, headDim hd: Int,
        scale: Float, scores: UnsafeMutablePointer<Float>, out: UnsafeMutablePointer<Float>
    ) -> (max: Float, sum: Float) {
        scoreKeys(q, 1, FloatRows(keys, width: hd), span, hd, scale, scores, span)
        let statistics = Elementwise.softmax(scores, count: span)
        out.update(repeating: 0, count: hd)
        for j in 0..<span { Elementwise.axpy(scores[j], values + j * hd, out, count: hd) }
        return statistics
    }

    /// ``query(_:keys:values:span:headDim:scale:scores:out:)`` for the `heads` query heads
    /// that share one KV head (grouped-query attention; head `h`'s query at `q + h *
    /// headDim`, its scores at `scores + h * scoreStride`, its output at `out + h *
    /// outStride`), with the loops turned so that each key and each value row is read from
    /// memory once for all of them, not once per head (then from L1 for the others). Each
    /// head's arithmetic is `query`'s, in the same order, so the results are the same bits.
    /// The keys and values are read where they are stored, F32 (``FloatRows``) or IEEE half
    /// (``HalfRows``: an F16 cache, widened in registers; the widening is exact, so an F16
    /// cache gives the bits of its F32 copy). `record(h, max, sum)` receives each head's
    /// softmax statistics. Compiled here, in `Kernels`, for each row type (not inlined into
    /// callers), with its common shapes written out (`groupShapes`).
    public static func queryGroup(
        _ q: UnsafePointer<Float>, heads g: Int, keys: FloatRows, values: FloatRows, span: Int, headDim hd: Int,
        scale: Float, scores: UnsafeMutablePointer<Float>, scoreStride: Int, out: UnsafeMutablePointer<Float>, outStride: Int,
        record: (Int, Float, Float) -> Void
    ) {
        groupShapes(q, g, keys, values, span, hd, scale, scores, scoreStride, out, outStride, record)
    }

    /// ``queryGroup(_:heads:keys:values:span:headDim:scale:scores:scoreStride:out:outStride:record:)-(_,_,FloatRows,_,_,_,_,_,_,_,_,_)``
    /// over an F16 cache.
    public static func queryGroup(
        _ q: UnsafePointer<Float>, heads g: Int, keys: HalfRows, values: HalfRows, span: Int, headDim hd: Int,
        scale: Float, scores: UnsafeMutablePointer<Float>, scoreStride: Int, out: UnsafeMutablePointer<Float>, outStride: Int,
        record: (Int, Float, Float) -> Void
    ) {
        groupShapes(q, g, keys, values, span, hd, scale, scores, scoreStride, out, outStride, record)
    }

    /// The kernel for the group shapes of the models we run (1-4 heads of 64, SmolLM2 and
    /// LFM2; 1, 2 or 4 of 256, Gemma 3) as constants, over the queries and the output sums
    /// in a 64-byte-aligned buffer of the kernel's own. Knowing the shape, the compiler writes
    /// out the loops over the heads and over a row; knowing that the buffer is nobody else's,
    /// it keeps the queries and the sums in registers across the keys instead of reloading
    /// them after every store to `scores` or to the output, which could have changed them if
    /// they overlapped. (`KernelBench --attention`, docs/performance-log.md, "Decode attention":
    /// 1.1-1.4x per key.)
    /// Every case runs the operations of the general case in the same order: the same bits.
    @inline(__always)
    static func groupShapes<Stored: AttentionRows>(
        _ q: UnsafePointer<Float>, _ g: Int, _ keys: Stored, _ values: Stored, _ span: Int, _ hd: Int, _ scale: Float,
        _ scores: UnsafeMutablePointer<Float>, _ scoreStride: Int, _ out: UnsafeMutablePointer<Float>, _ outStride: Int,
        _ record: (Int, Float, Float) -> Void
    ) {
        @inline(__always) func owned(_ g: Int, _ hd: Int) {
            withUnsafeTemporaryAllocation(byteCount: 2 * g * hd * MemoryLayout<Float>.stride, alignment: 64) { buffer in
                let queries = buffer.baseAddress!.bindMemory(to: Float.self, capacity: 2 * g * hd), sums = queries + g * hd
                queries.update(from: q, count: g * hd)
                groupLoops(queries, g, keys, values, span, hd, scale, scores, scoreStride, sums, hd, record)
                for h in 0..<g { (out + h * outStride).update(from: sums + h * hd, count: hd) }
            }
        }
        switch (g, hd) {
        case (1, 64): owned(1, 64)
        case (2, 64): owned(2, 64)
        case (3, 64): owned(3, 64)
        case (4, 64): owned(4, 64)
        case (1, 256): owned(1, 256)
        case (2, 256): owned(2, 256)
        case (4, 256): owned(4, 256)
        default: groupLoops(q, g, keys, values, span, hd, scale, scores, scoreStride, out, outStride, record)
        }
    }

    /// The kernel's loops: every head's scores (`scoreKeys`), the softmax per head, then every
    /// head's weighted sum of the value rows.
    @inline(__always)
    static func groupLoops<Stored: AttentionRows>(
        _ q: UnsafePointer<Float>, _ g: Int, _ keys: Stored, _ values: Stored, _ span: Int, _ hd: Int, _ scale: Float,
        _ scores: UnsafeMutablePointer<Float>, _ scoreStride: Int, _ out: UnsafeMutablePointer<Float>, _ outStride: Int,
        _ record: (Int, Float, Float) -> Void
    ) {
        scoreKeys(q, g, keys, span, hd, scale, scores, scoreStride)
        for h in 0..<g {
            let (top, sum) = Elementwise.softmax(scores + h * scoreStride, count: span)
            record(h, top, sum)
            (out + h * outStride).update(repeating: 0, count: hd)
        }
        for j in 0..<span {
            let v = values.row(j)
            for h in 0..<g { Elementwise.axpy(scores[h &* scoreStride &+ j], v, Stored.self, out + h &* outStride, count: hd) }
        }
    }

    /// The widest head whose scores go through key tiles (see
    /// `scoreKeys(_:_:_:_:_:_:_:_:)`).
    static let tiledHeadWidth = 128

    /// The scaled scores of `g` query heads (head `h`'s query at `q + h * hd`) against keys
    /// `0 ..< span`: `scores[h * scoreStride + j] = (q_h · k_j) * scale`.
    ///
    /// Heads of up to ``tiledHeadWidth`` values: every dot product sums in one order,
    /// whichever key it is and however many keys there are: eight running sums, sum `i`
    /// over the columns `c ≡ i (mod 8)` in column order, then `((s0 + s2) + (s1 + s3)) +
    /// ((s4 + s6) + (s5 + s7))`, then the columns past the last multiple of 8 one by one.
    /// With AVX2 the keys go eight at a time: each key's eight sums are fused multiply-adds
    /// in a register of its own, and the eight registers are folded into one register of
    /// eight scores by unpacking pairs of keys (`foldEight`: 12 unpacks and 7 adds for 8
    /// keys), where adding each key's lanes one after another cost 15 dependent scalar adds
    /// a key and head, most of the kernel's time. The keys of a last, partial tile run as a
    /// whole tile, the missing ones replaced by the tile's first key (their scores are not
    /// stored), so they sum as every other key does. Portable builds take the keys one at a
    /// time in the same order (multiplies and adds unfused). Wider heads (Gemma 3's 256)
    /// take each key in turn, its 16 lanes of products added in order
    /// (`Elementwise.dot`): there the tiles read an F32 cache from memory slower
    /// (docs/performance-log.md, "Decode attention's scores in tiles").
    @inline(__always)
    static func scoreKeys<Stored: AttentionRows>(
        _ q: UnsafePointer<Float>, _ g: Int, _ keys: Stored, _ span: Int, _ hd: Int, _ scale: Float,
        _ scores: UnsafeMutablePointer<Float>, _ scoreStride: Int
    ) {
        guard hd <= tiledHeadWidth else {
            for j in 0..<span {
                let k = keys.row(j)
                for h in 0..<g { scores[h &* scoreStride &+ j] = Elementwise.dot(q + h &* hd, k, Stored.self, count: hd) * scale }
            }
            return
        }
        let whole = hd & ~7
        #if LEAP_X86_AVX2
        // The next tile's rows (contiguous: 8 rows of `rowBytes`) are prefetched in order,
        // `prefetchStep` bytes per 8 columns, while the first head reads this tile's in
        // lockstep, eight rows apart (a pattern the hardware's stream prefetch does not
        // follow).
        let rowBytes = keys.row(1) - keys.row(0), prefetchStep = whole > 0 ? 8 &* rowBytes / (whole >> 3) : 0
        var j0 = 0
        while j0 < span {
            let n = min(8, span &- j0)
            @inline(__always) func row(_ k: Int) -> UnsafeRawPointer { keys.row(k < n ? j0 &+ k : j0) }
            let r0 = row(0), r1 = row(1), r2 = row(2), r3 = row(3), r4 = row(4), r5 = row(5), r6 = row(6), r7 = row(7)
            let next = r0 + 8 &* rowBytes
            for h in 0..<g {
                let qh = UnsafeRawPointer(q + h &* hd)
                var a0 = SIMD8<Float>(), a1 = SIMD8<Float>(), a2 = SIMD8<Float>(), a3 = SIMD8<Float>()
                var a4 = SIMD8<Float>(), a5 = SIMD8<Float>(), a6 = SIMD8<Float>(), a7 = SIMD8<Float>()
                var c = 0
                while c < whole {
                    if h == 0 {
                        var line = next + (c >> 3) &* prefetchStep
                        let end = line + prefetchStep
                        while line < end {
                            leap_prefetch(line)
                            line += 64
                        }
                    }
                    let qc = qh.loadUnaligned(fromByteOffset: c &* 4, as: SIMD8<Float>.self)
                    a0 = _mm256_fmadd_ps(qc, Stored.load8(r0, c), a0)
                    a1 = _mm256_fmadd_ps(qc, Stored.load8(r1, c), a1)
                    a2 = _mm256_fmadd_ps(qc, Stored.load8(r2, c), a2)
                    a3 = _mm256_fmadd_ps(qc, Stored.load8(r3, c), a3)
                    a4 = _mm256_fmadd_ps(qc, Stored.load8(r4, c), a4)
                    a5 = _mm256_fmadd_ps(qc, Stored.load8(r5, c), a5)
                    a6 = _mm256_fmadd_ps(qc, Stored.load8(r6, c), a6)
                    a7 = _mm256_fmadd_ps(qc, Stored.load8(r7, c), a7)
                    c &+= 8
                }
                var sums = foldEight(a0, a1, a2, a3, a4, a5, a6, a7)
                if whole < hd {
                    for k in 0..<n { sums[k] = tailSum(sums[k], q + h &* hd, row(k), Stored.self, from: whole, to: hd) }
                }
                sums *= SIMD8(repeating: scale)
                let out = scores + (h &* scoreStride &+ j0)
                if n == 8 {
                    UnsafeMutableRawPointer(out).storeBytes(of: sums, as: SIMD8<Float>.self)
                } else {
                    for k in 0..<n { out[k] = sums[k] }
                }
            }
            j0 &+= 8
        }
        #else
        for j in 0..<span {
            let k = keys.row(j)
            for h in 0..<g {
                let qh = q + h &* hd
                var acc = SIMD8<Float>()
                var c = 0
                while c < whole {
                    acc += UnsafeRawPointer(qh).loadUnaligned(fromByteOffset: c &* 4, as: SIMD8<Float>.self) * Stored.load8(k, c)
                    c &+= 8
                }
                let low = acc.lowHalf, high = acc.highHalf
                let folded = ((low[0] + low[2]) + (low[1] + low[3])) + ((high[0] + high[2]) + (high[1] + high[3]))
                scores[h &* scoreStride &+ j] = tailSum(folded, qh, k, Stored.self, from: whole, to: hd) * scale
            }
        }
        #endif
    }

    /// `sum` plus `q[c] * row[c]` for the columns `from ..< to`, in order.
    @inline(__always)
    static func tailSum<Stored: AttentionRows>(
        _ sum: Float, _ q: UnsafePointer<Float>, _ row: UnsafeRawPointer, _: Stored.Type, from: Int, to: Int
    ) -> Float {
        var sum = sum
        for c in from..<to { sum += q[c] * Stored.load(row, c) }
        return sum
    }

    #if LEAP_X86_AVX2
    /// The lanes of each of eight registers added up, `((x0 + x2) + (x1 + x3)) + ((x4 + x6) +
    /// (x5 + x7))`, as lane `k` of one register for register `k`: unpacking pairs adds lanes
    /// 2 apart (`_mm256_unpacklo_ps`/`hi`), then pairs of pairs adds lanes 1 apart (the
    /// 64-bit unpacks), then the 128-bit halves of two registers are added across.
    @inline(__always)
    static func foldEight(
        _ a0: SIMD8<Float>, _ a1: SIMD8<Float>, _ a2: SIMD8<Float>, _ a3: SIMD8<Float>,
        _ a4: SIMD8<Float>, _ a5: SIMD8<Float>, _ a6: SIMD8<Float>, _ a7: SIMD8<Float>
    ) -> SIMD8<Float> {
        // [x0+x2, y0+y2, x1+x3, y1+y3 | x4+x6, y4+y6, x5+x7, y5+y7]
        @inline(__always) func pairs(_ x: SIMD8<Float>, _ y: SIMD8<Float>) -> SIMD8<Float> {
            _mm256_unpacklo_ps(x, y) + _mm256_unpackhi_ps(x, y)
        }
        // [x, y, z, w of the low 128 bits | of the high 128 bits]
        @inline(__always) func quads(_ xy: SIMD8<Float>, _ zw: SIMD8<Float>) -> SIMD8<Float> {
            let a = _mm256_castps_pd(xy), b = _mm256_castps_pd(zw)
            return _mm256_castpd_ps(_mm256_unpacklo_pd(a, b)) + _mm256_castpd_ps(_mm256_unpackhi_pd(a, b))
        }
        let first = quads(pairs(a0, a1), pairs(a2, a3)), second = quads(pairs(a4, a5), pairs(a6, a7))
        return SIMD8(lowHalf: first.lowHalf, highHalf: second.lowHalf) + SIMD8(lowHalf: first.highHalf, highHalf: second.highHalf)
    }
    #endif

    /// Keys per block when one decoded query is split over threads (see the top of the file).
    public static let decodeKeyBlock = 512

    /// How many blocks of ``decodeKeyBlock`` keys a query over `span` keys takes.
    @inlinable
    public static func decodeBlocks(span: Int) -> Int { (span + decodeKeyBlock - 1) / decodeKeyBlock }

    /// The softmax over all of a query's keys from its `count` blocks' outputs (block b's
    /// `headDim` floats at `partial + b * headDim`, each normalized over its own keys, with
    /// the block's largest score `maxima[b]` and sum of exponentials `sums[b]`), added in
    /// block order: `out = Σ_b w_b o_b` (the weights at the top of the file).
    @inlinable
    public static func mergeBlocks(
        _ partial: UnsafePointer<Float>, maxima: UnsafePointer<Float>, sums: UnsafePointer<Float>, count: Int, headDim hd: Int,
        out: UnsafeMutablePointer<Float>
    ) {
        var top = -Float.infinity
        for b in 0..<count where maxima[b] > top { top = maxima[b] }
        var total: Float = 0
        for b in 0..<count { total += sums[b] * expf(maxima[b] - top) }
        out.update(repeating: 0, count: hd)
        for b in 0..<count { Elementwise.axpy(sums[b] * expf(maxima[b] - top) / total, partial + b * hd, out, count: hd) }
    }

    /// `count` queries at positions `start ..< start + count` (query `i` at
    /// `queries + i * queryStride`), each over the keys it sees: positions
    /// `max(0, start + i - window + 1) ... start + i` (every earlier one when `window` is
    /// nil). `keys` and `values` hold positions `keyStart ..< start + count`, row by row;
    /// `keyStart` may be past 0 only for the positions no query sees (a sliding window's
    /// older keys). Output row `i` at `out + i * outStride`. Runs blocks of ``queryBlock``
    /// queries through OpenBLAS sgemm (`S = scale · Q Kᵀ` over the keys the block sees, a
    /// causal softmax of each row over its visible keys, `O = S V`) on the calling thread's
    /// share of OpenBLAS (see ``BLAS/withOneThread(when:_:)`` for running heads in
    /// parallel). `scores` is scratch for `min(count, queryBlock) * (start + count - keyStart)`
    /// floats.
    public static func causal(
        queries q: UnsafePointer<Float>, queryStride: Int, count n: Int, start: Int,
        keys: UnsafePointer<Float>, values: UnsafePointer<Float>, keyStart: Int = 0, window: Int? = nil, headDim hd: Int,
        scale: Float, scores: UnsafeMutablePointer<Float>, out: UnsafeMutablePointer<Float>, outStride: Int
    ) {
        precondition(keyStart >= 0 && keyStart <= firstVisible(start, window), "keys from \(keyStart) miss what position \(start) sees")
        var i0 = 0
        while i0 < n {
            let m = min(queryBlock, n - i0)
            // Keys seen by some query of the block: from the first query's first visible
            // key to the last query's own position.
            let low = firstVisible(start + i0, window), span = start + i0 + m - low
            let blockKeys = keys + (low - keyStart) * hd, blockValues = values + (low - keyStart) * hd
            // S[m][span] = scale · Q[i0..<i0+m] · K[low..<low+span]ᵀ
            BLAS.sgemm(
                transB: true, m: m, n: span, k: hd, alpha: scale,
                a: q + i0 * queryStride, lda: queryStride, b: blockKeys, ldb: hd, c: scores, ldc: span)
            for r in 0..<m {
                let position = start + i0 + r
                let first = firstVisible(position, window) - low, end = position + 1 - low
                let row = scores + r * span
                for j in 0..<first { row[j] = 0 }
                Elementwise.softmax(row + first, count: end - first)
                for j in end..<span { row[j] = 0 }
            }
            // O[i0..<i0+m] = S · V[low..<low+span]
            BLAS.sgemm(
                m: m, n: hd, k: span, a: scores, lda: span, b: blockValues, ldb: hd,
                c: out + i0 * outStride, ldc: outStride)
            i0 += m
        }
    }

    /// The first position a query at `position` sees: 0, or with a sliding window of
    /// `window` positions, `position - window + 1` when that is later.
    @inlinable
    public static func firstVisible(_ position: Int, _ window: Int?) -> Int {
        guard let window, position >= window else { return 0 }
        return position - window + 1
    }

    /// The scalar reference of ``causal(queries:queryStride:count:start:keys:values:keyStart:window:headDim:scale:scores:out:outStride:)``
    /// (and of ``query(_:keys:values:span:headDim:scale:scores:out:)`` with `count` 1):
    /// one query at a time, plain loops, `exp` from the C library, sums in Double. `keys`
    /// and `values` hold positions `keyStart ..< start + count`.
    public static func causalReference(
        queries q: UnsafePointer<Float>, queryStride: Int, count n: Int, start: Int,
        keys: UnsafePointer<Float>, values: UnsafePointer<Float>, keyStart: Int = 0, window: Int? = nil, headDim hd: Int,
        scale: Float, out: UnsafeMutablePointer<Float>, outStride: Int
    ) {
        for i in 0..<n {
            let qi = q + i * queryStride, position = start + i
            // The positions query i sees, as rows of `keys`.
            var visible = Array(0...position)
            if let window { visible = visible.filter { position - $0 < window } }
            precondition(visible.first! >= keyStart, "position \(visible.first!) is not among the keys")
            let rows = visible.map { $0 - keyStart }
            var s = [Double](repeating: 0, count: rows.count)
            for (j, row) in rows.enumerated() {
                var dot: Double = 0
                for c in 0..<hd { dot += Double(qi[c]) * Double(keys[row * hd + c]) }
                s[j] = dot * Double(scale)
            }
            let top = s.max()!
            var total: Double = 0
            for j in s.indices {
                s[j] = exp(s[j] - top)
                total += s[j]
            }
            for c in 0..<hd {
                var acc: Double = 0
                for (j, row) in rows.enumerated() { acc += s[j] / total * Double(values[row * hd + c]) }
                out[i * outStride + c] = Float(acc)
            }
        }
    }
}
