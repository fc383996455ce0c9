// The dot-product loop of the integer formats (Q8_0 ... Q6_K) on AVX2 builds, for one
// weight row with one activation row or with several (batched decoding: one token of each
// of several sequences).
//
// Each format describes its kernel as steps (`IntegerDotFormat`: `unpack` the weights of
// `stepBlocks` blocks, `accumulate` them into one activation row's sums, `finish`; the
// formats' files define them). `dotVectors` is the only loop over the steps: with n
// activation rows it unpacks each step once and accumulates it into the n rows' own sums
// in turn, and n = 1 is the one-row kernel `dotVector`. So every (weight row, activation
// row) pair gets the same float operations in the same order whether the activation row
// runs alone or with others, by construction; `dotRowGroups` then reduces 8 weight rows at
// once with `transposeSum8f` (the tail with `hsum`, the same addition tree), for one
// activation row as for n. The multi-row matvec (`WeightMatrix.matvec(_:rows:into:pool:)`)
// takes activation rows in fours, then a pair, then one alone: every result is
// bit-identical to the matvec of that activation row alone (MultiRowTests checks it for
// every format). F16 weights share each converted chunk the same way (`F16Format.dots`);
// F32/BF16 weights and portable builds run the one-row kernel per activation row (same
// results, no sharing).

import GGUF

#if LEAP_X86_AVX2
import _Builtin_intrinsics.intel

extension IntegerDotFormat {
    /// The stepped loop over the row at `x` with the `n` activation rows `a`: each step's
    /// weights are unpacked once and accumulated into every row's own sums in turn. Row
    /// k's vector is `dotVector(x, a[k], nb: nb)`, bit for bit.
    @inline(__always)
    static func dotVectors<let n: Int>(_ x: UnsafeRawPointer, _ a: InlineArray<n, ActivationView>, nb: Int) -> InlineArray<n, __m256> {
        var sums = InlineArray<n, Accumulator>(repeating: zero)
        let steps = nb / stepBlocks
        for step in 0..<steps {
            let i = step &* stepBlocks
            let w = unpack(x, i)
            unrolled(n) { k in accumulate(w, a[k], i, &sums[k]) }
        }
        var out = InlineArray<n, __m256>(repeating: _mm256_setzero_ps())
        unrolled(n) { k in out[k] = finish(x, a[k], nb: nb, from: steps &* stepBlocks, sums[k]) }
        return out
    }

    /// `dot` before its final horizontal sum (`hsum(dotVector(...)) == dot(...)`): the
    /// stepped loop with one activation row.
    static func dotVector(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> __m256 {
        dotVectors(x, InlineArray<1, ActivationView>(repeating: a), nb: nb)[0]
    }

    /// Weight rows `rows` times the activation rows `t` of `a` (rows of `cols`), every
    /// unpacked step shared by the n activation rows: row `t[k]`'s results go to
    /// `y + t[k] * outputs`.
    @inline(__always)
    static func dotRows<let n: Int>(
        _ base: UnsafeRawPointer, rowBytes: Int, rows: Range<Int>, nb: Int,
        _ a: ActivationView, cols: Int, activationRows t: InlineArray<n, Int>, _ y: UnsafeMutablePointer<Float>, outputs: Int
    ) {
        var rowViews = InlineArray<n, ActivationView>(repeating: a)
        var outputRows = InlineArray<n, UnsafeMutablePointer<Float>>(repeating: y)
        unrolled(n) { k in
            rowViews[k] = a.row(t[k], cols: cols)
            outputRows[k] = y + t[k] * outputs
        }
        dotRowGroups(base, rowBytes: rowBytes, rows: rows, outputRows) { p in dotVectors(p, rowViews, nb: nb) }
    }

    /// The multi-row kernel: activation rows in fours, then a pair, then one alone.
    @inline(__always)
    static func dotRowsMulti(
        _ base: UnsafeRawPointer, rowBytes: Int, rows: Range<Int>, nb: Int,
        _ a: ActivationView, cols: Int, activationRows: Range<Int>, _ y: UnsafeMutablePointer<Float>, outputs: Int
    ) {
        var t = activationRows.lowerBound
        while t + 4 <= activationRows.upperBound {
            let four: InlineArray<4, Int> = [t, t + 1, t + 2, t + 3]
            dotRows(base, rowBytes: rowBytes, rows: rows, nb: nb, a, cols: cols, activationRows: four, y, outputs: outputs)
            t += 4
        }
        if t + 2 <= activationRows.upperBound {
            let two: InlineArray<2, Int> = [t, t + 1]
            dotRows(base, rowBytes: rowBytes, rows: rows, nb: nb, a, cols: cols, activationRows: two, y, outputs: outputs)
            t += 2
        }
        if t < activationRows.upperBound {
            dotRows(base, rowBytes: rowBytes, rows: rows, nb: nb, a.row(t, cols: cols), y + t * outputs)
        }
    }
}

/// The products of weight rows `rows` (`rowBytes` apart from `base`) with n activation
/// rows, from `vectors` (a weight row's n dot-product vectors, before their horizontal
/// sums): eight weight rows at a time reduced together, one transposition instead of
/// eight horizontal sums (bit-identical to `hsum` per row: the same addition tree), the
/// rest one by one. Weight row r's product with activation row k goes to `y[k][r]`.
@inline(__always)
func dotRowGroups<let n: Int>(
    _ base: UnsafeRawPointer, rowBytes: Int, rows: Range<Int>, _ y: InlineArray<n, UnsafeMutablePointer<Float>>,
    _ vectors: (UnsafeRawPointer) -> InlineArray<n, __m256>
) {
    var r = rows.lowerBound
    while r + 8 <= rows.upperBound {
        let p = base + r * rowBytes
        let v0 = vectors(p), v1 = vectors(p + rowBytes), v2 = vectors(p + 2 * rowBytes), v3 = vectors(p + 3 * rowBytes)
        let v4 = vectors(p + 4 * rowBytes), v5 = vectors(p + 5 * rowBytes), v6 = vectors(p + 6 * rowBytes)
        let v7 = vectors(p + 7 * rowBytes)
        unrolled(n) { k in
            let sums = transposeSum8f(v0[k], v1[k], v2[k], v3[k], v4[k], v5[k], v6[k], v7[k])
            UnsafeMutableRawPointer(y[k] + r).storeBytes(of: sums, as: __m256.self)
        }
        r += 8
    }
    while r < rows.upperBound {
        let v = vectors(base + r * rowBytes)
        unrolled(n) { k in y[k][r] = hsum(v[k]) }
        r += 1
    }
}

extension IntegerDotFormat where Accumulator == __m256 {
    /// The sums of one vector (the K-quants, Q8_0) start at zero...
    static var zero: __m256 { _mm256_setzero_ps() }

    /// ...and are the dot product's vector when a step covers whole blocks (the
    /// K-quants: a super-block per step), so nothing is left over.
    @inline(__always)
    static func finish(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int, from i: Int, _ acc: __m256) -> __m256 { acc }
}

/// Calls `body(k)` for k in 0..<n (n at most 4), unrolled: with a constant k in each call
/// the optimizer keeps the n rows' values (`InlineArray` elements) in registers, where a
/// loop over k left them in memory (and InlineArray's closure initializer was compiled
/// out of line, with its intrinsics as calls).
@inline(__always)
func unrolled(_ n: Int, _ body: (Int) -> Void) {
    precondition(n <= 4, "unrolled: at most 4")
    if n > 0 { body(0) }
    if n > 1 { body(1) }
    if n > 2 { body(2) }
    if n > 3 { body(3) }
}
#endif

extension BlockFormat {
    /// The generic multi-row product: the one-row kernel once per activation row.
    @inline(__always)
    static func dotRowsMulti(
        _ base: UnsafeRawPointer, rowBytes: Int, rows: Range<Int>, nb: Int,
        _ a: ActivationView, cols: Int, activationRows: Range<Int>, _ y: UnsafeMutablePointer<Float>, outputs: Int
    ) {
        for t in activationRows {
            dotRows(base, rowBytes: rowBytes, rows: rows, nb: nb, a.row(t, cols: cols), y + t * outputs)
        }
    }
}

/// Dispatches a tile of weight rows times activation rows `activationRows` (rows of
/// `cols` in `a`; row `t`'s results at `y + t * outputs`) to the multi-row kernel of
/// `type` where it has one, else to its one-row kernel per activation row.
func dotRowsMulti(
    _ type: GGMLType, _ base: UnsafeRawPointer, rowBytes: Int, rows: Range<Int>, nb: Int,
    _ a: ActivationView, cols: Int, activationRows: Range<Int>, _ y: UnsafeMutablePointer<Float>, outputs: Int
) {
    switch type {
    case .q8_0:
        Q8_0.dotRowsMulti(base, rowBytes: rowBytes, rows: rows, nb: nb, a, cols: cols, activationRows: activationRows, y, outputs: outputs)
    case .q4_0:
        Q4_0.dotRowsMulti(base, rowBytes: rowBytes, rows: rows, nb: nb, a, cols: cols, activationRows: activationRows, y, outputs: outputs)
    case .q4_1:
        Q4_1.dotRowsMulti(base, rowBytes: rowBytes, rows: rows, nb: nb, a, cols: cols, activationRows: activationRows, y, outputs: outputs)
    case .q5_0:
        Q5_0.dotRowsMulti(base, rowBytes: rowBytes, rows: rows, nb: nb, a, cols: cols, activationRows: activationRows, y, outputs: outputs)
    case .q5_1:
        Q5_1.dotRowsMulti(base, rowBytes: rowBytes, rows: rows, nb: nb, a, cols: cols, activationRows: activationRows, y, outputs: outputs)
    case .q4_K:
        Q4_K.dotRowsMulti(base, rowBytes: rowBytes, rows: rows, nb: nb, a, cols: cols, activationRows: activationRows, y, outputs: outputs)
    case .q5_K:
        Q5_K.dotRowsMulti(base, rowBytes: rowBytes, rows: rows, nb: nb, a, cols: cols, activationRows: activationRows, y, outputs: outputs)
    case .q6_K:
        Q6_K.dotRowsMulti(base, rowBytes: rowBytes, rows: rows, nb: nb, a, cols: cols, activationRows: activationRows, y, outputs: outputs)
    #if LEAP_X86_AVX2
    case .f16:
        F16Format.dotRowsMulti(
            base, rowBytes: rowBytes, rows: rows, nb: nb, a, cols: cols, activationRows: activationRows, y, outputs: outputs)
    #endif
    default:
        for t in activationRows {
            dotRows(type, base, rowBytes: rowBytes, rows: rows, nb: nb, a.row(t, cols: cols), y + t * outputs)
        }
    }
}
