// Dot products of one weight row with several activation rows at once (batched decoding:
// one token of each of several sequences).
//
// `WeightMatrix.matvec(_:rows:into:pool:)` multiplies a tile of weight rows with every
// activation row before moving on. Calling the one-row kernel per activation row would
// unpack each weight block (nibbles to bytes, fifth bits, scales) once per activation row;
// the kernels here unpack it once and multiply it with 2 or 4 activation rows, each into
// its own accumulators. Per (weight row, activation row) pair they do exactly the float
// operations of the one-row `dotVector`, in the same order (only independent accumulators
// are interleaved), and the results go through the same `transposeSum8f` / `hsum`, so
// every result is bit-identical to the matvec of that activation row alone. The tests
// (MultiRowTests) check this for every format.
//
// A format opts in by describing its one-row AVX2 loop as steps (`SteppedDotFormat`):
// `unpack` the weights of `stepBlocks` blocks, `accumulate` them into one activation
// row's accumulator, `finish` (odd tail block, final combination). Formats without it
// (F32/F16/BF16, portable builds) run the one-row kernel per activation row.

import GGUF

#if LEAP_X86_AVX2
import _Builtin_intrinsics.intel
#endif

#if LEAP_X86_AVX2

/// A quantized format whose AVX2 dot product is a loop of steps that first unpack weights
/// and then multiply them with the activations: the shape that lets several activation
/// rows share one unpacking. `finish(accumulate(unpack...))` over the steps must perform
/// the float operations of the format's `dotVector` in the same order.
protocol SteppedDotFormat: IntegerDotFormat {
    /// The unpacked weights of one step.
    associatedtype Weights
    /// One activation row's running sums.
    associatedtype Accumulator
    /// Blocks per step.
    static var stepBlocks: Int { get }
    static var zero: Accumulator { get }
    /// Unpacks blocks `i..<i + stepBlocks` of the row at `x`.
    static func unpack(_ x: UnsafeRawPointer, _ i: Int) -> Weights
    /// Multiplies unpacked weights with blocks `i..<i + stepBlocks` of `a`.
    static func accumulate(_ w: Weights, _ a: ActivationView, _ i: Int, _ acc: inout Accumulator)
    /// The dot product's vector (as `dotVector` returns it) from the sums over the whole
    /// steps and the blocks `i..<nb` left over.
    static func finish(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int, from i: Int, _ acc: Accumulator) -> __m256
}

extension SteppedDotFormat {
    /// `dotVector` of the row at `x` with two activation rows.
    @inline(__always)
    static func dotVector2(_ x: UnsafeRawPointer, _ a0: ActivationView, _ a1: ActivationView, nb: Int) -> (__m256, __m256) {
        var c0 = zero, c1 = zero
        var i = 0
        while i + stepBlocks <= nb {
            let w = unpack(x, i)
            accumulate(w, a0, i, &c0)
            accumulate(w, a1, i, &c1)
            i += stepBlocks
        }
        return (finish(x, a0, nb: nb, from: i, c0), finish(x, a1, nb: nb, from: i, c1))
    }

    /// `dotVector` of the row at `x` with four activation rows.
    @inline(__always)
    static func dotVector4(
        _ x: UnsafeRawPointer, _ a0: ActivationView, _ a1: ActivationView, _ a2: ActivationView, _ a3: ActivationView, nb: Int
    ) -> (__m256, __m256, __m256, __m256) {
        var c0 = zero, c1 = zero, c2 = zero, c3 = zero
        var i = 0
        while i + stepBlocks <= nb {
            let w = unpack(x, i)
            accumulate(w, a0, i, &c0)
            accumulate(w, a1, i, &c1)
            accumulate(w, a2, i, &c2)
            accumulate(w, a3, i, &c3)
            i += stepBlocks
        }
        return (
            finish(x, a0, nb: nb, from: i, c0), finish(x, a1, nb: nb, from: i, c1),
            finish(x, a2, nb: nb, from: i, c2), finish(x, a3, nb: nb, from: i, c3)
        )
    }

    /// `dotRows` for activation rows `t..<t + 4` of `a` (rows of `cols`): row `t + k`'s
    /// results go to `y + (t + k) * outputs`.
    @inline(__always)
    static func dotRows4(
        _ base: UnsafeRawPointer, rowBytes: Int, rows: Range<Int>, nb: Int,
        _ a: ActivationView, cols: Int, _ t: Int, _ y: UnsafeMutablePointer<Float>, outputs: Int
    ) {
        let a0 = a.row(t, cols: cols), a1 = a.row(t + 1, cols: cols), a2 = a.row(t + 2, cols: cols), a3 = a.row(t + 3, cols: cols)
        let y0 = y + t * outputs, y1 = y0 + outputs, y2 = y1 + outputs, y3 = y2 + outputs
        var r = rows.lowerBound
        while r + 8 <= rows.upperBound {
            let p = base + r * rowBytes
            let (v00, v01, v02, v03) = dotVector4(p, a0, a1, a2, a3, nb: nb)
            let (v10, v11, v12, v13) = dotVector4(p + rowBytes, a0, a1, a2, a3, nb: nb)
            let (v20, v21, v22, v23) = dotVector4(p + 2 * rowBytes, a0, a1, a2, a3, nb: nb)
            let (v30, v31, v32, v33) = dotVector4(p + 3 * rowBytes, a0, a1, a2, a3, nb: nb)
            let (v40, v41, v42, v43) = dotVector4(p + 4 * rowBytes, a0, a1, a2, a3, nb: nb)
            let (v50, v51, v52, v53) = dotVector4(p + 5 * rowBytes, a0, a1, a2, a3, nb: nb)
            let (v60, v61, v62, v63) = dotVector4(p + 6 * rowBytes, a0, a1, a2, a3, nb: nb)
            let (v70, v71, v72, v73) = dotVector4(p + 7 * rowBytes, a0, a1, a2, a3, nb: nb)
            UnsafeMutableRawPointer(y0 + r).storeBytes(of: transposeSum8f(v00, v10, v20, v30, v40, v50, v60, v70), as: __m256.self)
            UnsafeMutableRawPointer(y1 + r).storeBytes(of: transposeSum8f(v01, v11, v21, v31, v41, v51, v61, v71), as: __m256.self)
            UnsafeMutableRawPointer(y2 + r).storeBytes(of: transposeSum8f(v02, v12, v22, v32, v42, v52, v62, v72), as: __m256.self)
            UnsafeMutableRawPointer(y3 + r).storeBytes(of: transposeSum8f(v03, v13, v23, v33, v43, v53, v63, v73), as: __m256.self)
            r += 8
        }
        while r < rows.upperBound {
            let (v0, v1, v2, v3) = dotVector4(base + r * rowBytes, a0, a1, a2, a3, nb: nb)
            y0[r] = hsum(v0)
            y1[r] = hsum(v1)
            y2[r] = hsum(v2)
            y3[r] = hsum(v3)
            r += 1
        }
    }

    /// `dotRows` for activation rows `t` and `t + 1` of `a` (see `dotRows4`).
    @inline(__always)
    static func dotRows2(
        _ base: UnsafeRawPointer, rowBytes: Int, rows: Range<Int>, nb: Int,
        _ a: ActivationView, cols: Int, _ t: Int, _ y: UnsafeMutablePointer<Float>, outputs: Int
    ) {
        let a0 = a.row(t, cols: cols), a1 = a.row(t + 1, cols: cols)
        let y0 = y + t * outputs, y1 = y0 + outputs
        var r = rows.lowerBound
        while r + 8 <= rows.upperBound {
            let p = base + r * rowBytes
            let (v00, v01) = dotVector2(p, a0, a1, nb: nb)
            let (v10, v11) = dotVector2(p + rowBytes, a0, a1, nb: nb)
            let (v20, v21) = dotVector2(p + 2 * rowBytes, a0, a1, nb: nb)
            let (v30, v31) = dotVector2(p + 3 * rowBytes, a0, a1, nb: nb)
            let (v40, v41) = dotVector2(p + 4 * rowBytes, a0, a1, nb: nb)
            let (v50, v51) = dotVector2(p + 5 * rowBytes, a0, a1, nb: nb)
            let (v60, v61) = dotVector2(p + 6 * rowBytes, a0, a1, nb: nb)
            let (v70, v71) = dotVector2(p + 7 * rowBytes, a0, a1, nb: nb)
            UnsafeMutableRawPointer(y0 + r).storeBytes(of: transposeSum8f(v00, v10, v20, v30, v40, v50, v60, v70), as: __m256.self)
            UnsafeMutableRawPointer(y1 + r).storeBytes(of: transposeSum8f(v01, v11, v21, v31, v41, v51, v61, v71), as: __m256.self)
            r += 8
        }
        while r < rows.upperBound {
            let (v0, v1) = dotVector2(base + r * rowBytes, a0, a1, nb: nb)
            y0[r] = hsum(v0)
            y1[r] = hsum(v1)
            r += 1
        }
    }

    /// The multi-row kernel: activation rows in fours, then a pair, then one alone.
    @inline(__always)
    static func dotRowsMulti(
        _ base: UnsafeRawPointer, rowBytes: Int, rows: Range<Int>, nb: Int,
        _ a: ActivationView, cols: Int, activationRows: Range<Int>, _ y: UnsafeMutablePointer<Float>, outputs: Int
    ) {
        var t = activationRows.lowerBound
        while t + 4 <= activationRows.upperBound {
            dotRows4(base, rowBytes: rowBytes, rows: rows, nb: nb, a, cols: cols, t, y, outputs: outputs)
            t += 4
        }
        if t + 2 <= activationRows.upperBound {
            dotRows2(base, rowBytes: rowBytes, rows: rows, nb: nb, a, cols: cols, t, y, outputs: outputs)
            t += 2
        }
        if t < activationRows.upperBound {
            dotRows(base, rowBytes: rowBytes, rows: rows, nb: nb, a.row(t, cols: cols), y + t * outputs)
        }
    }
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
    default:
        for t in activationRows {
            dotRows(type, base, rowBytes: rowBytes, rows: rows, nb: nb, a.row(t, cols: cols), y + t * outputs)
        }
    }
}

// MARK: - The 32-value formats

#if LEAP_X86_AVX2
extension Q8_0: SteppedDotFormat {
    #if LEAP_X86_AVX512VNNI
    struct Weights {
        let d: __m256
        let biased: __m256i  // w + 128
    }
    struct Accumulator {
        var acc: __m256
        var offset: __m256
    }
    static var zero: Accumulator { Accumulator(acc: _mm256_setzero_ps(), offset: _mm256_setzero_ps()) }
    #else
    struct Weights {
        let d: __m256
        let w: __m256i
        let magnitude: __m256i  // |w|
    }
    typealias Accumulator = __m256
    static var zero: Accumulator { _mm256_setzero_ps() }
    #endif
    static var stepBlocks: Int { 1 }

    @inline(__always)
    static func unpack(_ x: UnsafeRawPointer, _ i: Int) -> Weights {
        let b = x + 34 * i
        let w = load256(b, 2)
        #if LEAP_X86_AVX512VNNI
        return Weights(d: broadcastHalf(b, 0), biased: _mm256_xor_si256(w, _mm256_set1_epi8(-128)))
        #else
        return Weights(d: broadcastHalf(b, 0), w: w, magnitude: _mm256_sign_epi8(w, w))
        #endif
    }

    @inline(__always)
    static func accumulate(_ w: Weights, _ a: ActivationView, _ i: Int, _ acc: inout Accumulator) {
        let av = load256(UnsafeRawPointer(a.qs), 32 * i)
        #if LEAP_X86_AVX512VNNI
        let p = mulSumU8S8(w.biased, av)
        acc.offset = _mm256_fmadd_ps(w.d, broadcastFloat(a.s, i), acc.offset)
        acc.acc = _mm256_fmadd_ps(_mm256_mul_ps(w.d, broadcastFloat(a.d, i)), _mm256_cvtepi32_ps(p), acc.acc)
        #else
        let p = _mm256_madd_epi16(_mm256_maddubs_epi16(w.magnitude, _mm256_sign_epi8(av, w.w)), _mm256_set1_epi16(1))
        acc = _mm256_fmadd_ps(_mm256_mul_ps(w.d, broadcastFloat(a.d, i)), _mm256_cvtepi32_ps(p), acc)
        #endif
    }

    @inline(__always)
    static func finish(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int, from i: Int, _ acc: Accumulator) -> __m256 {
        #if LEAP_X86_AVX512VNNI
        return _mm256_fnmadd_ps(_mm256_set1_ps(16), acc.offset, acc.acc)
        #else
        return acc
        #endif
    }
}

/// The running sums of the 4- and 5-bit formats: the scaled products and the offset (or
/// min) terms, lanes 0-3 for even blocks and 4-7 for odd ones.
struct PairAccumulator {
    var acc: __m256
    var extra: __m256
    static var zero: PairAccumulator { PairAccumulator(acc: _mm256_setzero_ps(), extra: _mm256_setzero_ps()) }
}

/// Two blocks' levels (see `unpackNibblePair`) and their fp16 fields widened.
struct PairWeights {
    let lo: __m256i
    let hi: __m256i
    let d: __m256
    let m: __m256  // the mins (Q4_1, Q5_1); unused otherwise
}

/// Multiplies a pair of unpacked blocks with activation blocks `i` and `i + 1`: the integer
/// sums of `dotVector`'s loop for the nibble formats.
@inline(__always)
func pairProducts(_ w: PairWeights, _ a: ActivationView, _ i: Int) -> __m256 {
    let av = activationPair(UnsafeRawPointer(a.qs), i)
    return _mm256_cvtepi32_ps(mulSumU8S8(mulSumU8S8(w.lo, av.lo), w.hi, av.hi))
}

extension Q4_0: SteppedDotFormat {
    static var stepBlocks: Int { 2 }
    static var zero: PairAccumulator { .zero }

    @inline(__always)
    static func unpack(_ x: UnsafeRawPointer, _ i: Int) -> PairWeights {
        let b = x + 18 * i
        let q = unpackNibblePair(b, 2, 20)
        return PairWeights(lo: q.lo, hi: q.hi, d: halfPair(b, 0, 18), m: _mm256_setzero_ps())
    }

    @inline(__always)
    static func accumulate(_ w: PairWeights, _ a: ActivationView, _ i: Int, _ c: inout PairAccumulator) {
        let p = pairProducts(w, a, i)
        c.acc = _mm256_fmadd_ps(_mm256_mul_ps(w.d, scalePair(a.d4, i)), p, c.acc)
        c.extra = _mm256_fmadd_ps(w.d, scalePair(a.s4, i), c.extra)
    }

    @inline(__always)
    static func finish(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int, from i: Int, _ c: PairAccumulator) -> __m256 {
        var tail: Float = 0
        if i < nb {
            let b = x + 18 * i
            let p = mulSumU8S8(unpackNibbles16(b, 2), load256(UnsafeRawPointer(a.qs), 32 * i))
            let d = loadHalf(b, 0)
            tail = hsum(_mm256_cvtepi32_ps(p)) * (d * a.d[i]) - 8 * (d * a.s[i])
        }
        return _mm256_add_ps(_mm256_fnmadd_ps(_mm256_set1_ps(2), c.extra, c.acc), lane0(tail))
    }
}

extension Q4_1: SteppedDotFormat {
    static var stepBlocks: Int { 2 }
    static var zero: PairAccumulator { .zero }

    @inline(__always)
    static func unpack(_ x: UnsafeRawPointer, _ i: Int) -> PairWeights {
        let b = x + 20 * i
        let q = unpackNibblePair(b, 4, 24)
        return PairWeights(lo: q.lo, hi: q.hi, d: halfPair(b, 0, 20), m: halfPair(b, 2, 22))
    }

    @inline(__always)
    static func accumulate(_ w: PairWeights, _ a: ActivationView, _ i: Int, _ c: inout PairAccumulator) {
        let p = pairProducts(w, a, i)
        c.acc = _mm256_fmadd_ps(_mm256_mul_ps(w.d, scalePair(a.d4, i)), p, c.acc)
        c.extra = _mm256_fmadd_ps(w.m, scalePair(a.s4, i), c.extra)
    }

    @inline(__always)
    static func finish(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int, from i: Int, _ c: PairAccumulator) -> __m256 {
        var tail: Float = 0
        if i < nb {
            let b = x + 20 * i
            let p = mulSumU8S8(unpackNibbles16(b, 4), load256(UnsafeRawPointer(a.qs), 32 * i))
            tail = hsum(_mm256_cvtepi32_ps(p)) * (loadHalf(b, 0) * a.d[i]) + loadHalf(b, 2) * a.s[i]
        }
        return _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(0.25), c.extra, c.acc), lane0(tail))
    }
}

extension Q5_0: SteppedDotFormat {
    static var stepBlocks: Int { 2 }
    static var zero: PairAccumulator { .zero }

    @inline(__always)
    static func unpack(_ x: UnsafeRawPointer, _ i: Int) -> PairWeights {
        let b = x + 22 * i
        let q = unpackNibblePair(b, 6, 28)
        let h = fifthBitPair(b.loadUnaligned(fromByteOffset: 2, as: UInt32.self), b.loadUnaligned(fromByteOffset: 24, as: UInt32.self))
        return PairWeights(
            lo: _mm256_or_si256(q.lo, h.lo), hi: _mm256_or_si256(q.hi, h.hi), d: halfPair(b, 0, 22), m: _mm256_setzero_ps())
    }

    @inline(__always)
    static func accumulate(_ w: PairWeights, _ a: ActivationView, _ i: Int, _ c: inout PairAccumulator) {
        let p = pairProducts(w, a, i)
        c.acc = _mm256_fmadd_ps(_mm256_mul_ps(w.d, scalePair(a.d4, i)), p, c.acc)
        c.extra = _mm256_fmadd_ps(w.d, scalePair(a.s4, i), c.extra)
    }

    @inline(__always)
    static func finish(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int, from i: Int, _ c: PairAccumulator) -> __m256 {
        var tail: Float = 0
        if i < nb {
            let b = x + 22 * i
            let hi = fifthBitBytes(b.loadUnaligned(fromByteOffset: 2, as: UInt32.self))
            let p = mulSumU8S8(_mm256_or_si256(unpackNibbles16(b, 6), hi), load256(UnsafeRawPointer(a.qs), 32 * i))
            let d = loadHalf(b, 0)
            tail = hsum(_mm256_cvtepi32_ps(p)) * (d * a.d[i]) - 16 * (d * a.s[i])
        }
        return _mm256_add_ps(_mm256_fnmadd_ps(_mm256_set1_ps(4), c.extra, c.acc), lane0(tail))
    }
}

extension Q5_1: SteppedDotFormat {
    static var stepBlocks: Int { 2 }
    static var zero: PairAccumulator { .zero }

    @inline(__always)
    static func unpack(_ x: UnsafeRawPointer, _ i: Int) -> PairWeights {
        let b = x + 24 * i
        let q = unpackNibblePair(b, 8, 32)
        let h = fifthBitPair(b.loadUnaligned(fromByteOffset: 4, as: UInt32.self), b.loadUnaligned(fromByteOffset: 28, as: UInt32.self))
        return PairWeights(
            lo: _mm256_or_si256(q.lo, h.lo), hi: _mm256_or_si256(q.hi, h.hi), d: halfPair(b, 0, 24), m: halfPair(b, 2, 26))
    }

    @inline(__always)
    static func accumulate(_ w: PairWeights, _ a: ActivationView, _ i: Int, _ c: inout PairAccumulator) {
        let p = pairProducts(w, a, i)
        c.acc = _mm256_fmadd_ps(_mm256_mul_ps(w.d, scalePair(a.d4, i)), p, c.acc)
        c.extra = _mm256_fmadd_ps(w.m, scalePair(a.s4, i), c.extra)
    }

    @inline(__always)
    static func finish(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int, from i: Int, _ c: PairAccumulator) -> __m256 {
        var tail: Float = 0
        if i < nb {
            let b = x + 24 * i
            let hi = fifthBitBytes(b.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
            let p = mulSumU8S8(_mm256_or_si256(unpackNibbles16(b, 8), hi), load256(UnsafeRawPointer(a.qs), 32 * i))
            tail = hsum(_mm256_cvtepi32_ps(p)) * (loadHalf(b, 0) * a.d[i]) + loadHalf(b, 2) * a.s[i]
        }
        return _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(0.25), c.extra, c.acc), lane0(tail))
    }
}
#endif

// MARK: - The K-quants

#if LEAP_X86_AVX2
/// A super-block's eight 32-value level vectors and its scales, unpacked once.
struct SuperBlockWeights {
    let q: (__m256i, __m256i, __m256i, __m256i, __m256i, __m256i, __m256i, __m256i)
    /// Q4_K/Q5_K: the 8 sub-block scales and mins as floats (exact conversions of the
    /// integers `dotVector` converts), `d` and `dmin` the super-block's fp16 fields.
    let scales: __m256
    let mins: __m256
    let d: Float
    let dmin: Float
}

/// Q4_K/Q5_K: one activation row's step over a super-block, as in their `dotVector`.
@inline(__always)
func kQuantStep(_ w: SuperBlockWeights, _ a: ActivationView, _ i: Int, _ acc: inout __m256) {
    let aq = UnsafeRawPointer(a.qs), ab = 256 * i
    let p0 = mulSumU8S8(w.q.0, load256(aq, ab)), p1 = mulSumU8S8(w.q.1, load256(aq, ab + 32))
    let p2 = mulSumU8S8(w.q.2, load256(aq, ab + 64)), p3 = mulSumU8S8(w.q.3, load256(aq, ab + 96))
    let p4 = mulSumU8S8(w.q.4, load256(aq, ab + 128)), p5 = mulSumU8S8(w.q.5, load256(aq, ab + 160))
    let p6 = mulSumU8S8(w.q.6, load256(aq, ab + 192)), p7 = mulSumU8S8(w.q.7, load256(aq, ab + 224))
    let sums = _mm256_cvtepi32_ps(transposeSum8(p0, p1, p2, p3, p4, p5, p6, p7))
    let da = UnsafeRawPointer(a.d).loadUnaligned(fromByteOffset: 32 * i, as: __m256.self)
    let sa = UnsafeRawPointer(a.s).loadUnaligned(fromByteOffset: 32 * i, as: __m256.self)
    let scale = _mm256_mul_ps(_mm256_set1_ps(w.d), _mm256_mul_ps(w.scales, da))
    acc = _mm256_fmadd_ps(scale, sums, acc)
    acc = _mm256_fnmadd_ps(_mm256_set1_ps(w.dmin), _mm256_mul_ps(w.mins, sa), acc)
}

extension Q4_K: SteppedDotFormat {
    static var stepBlocks: Int { 1 }
    static var zero: __m256 { _mm256_setzero_ps() }

    @inline(__always)
    static func unpack(_ x: UnsafeRawPointer, _ i: Int) -> SuperBlockWeights {
        let b = x + 144 * i
        let (sc, m) = scalesMinsK4(b + 4)
        let m4 = _mm256_set1_epi8(0x0F)
        let r0 = load256(b, 16), r1 = load256(b, 48), r2 = load256(b, 80), r3 = load256(b, 112)
        @inline(__always) func low(_ r: __m256i) -> __m256i { _mm256_and_si256(r, m4) }
        @inline(__always) func high(_ r: __m256i) -> __m256i { _mm256_and_si256(_mm256_srli_epi16(r, 4), m4) }
        return SuperBlockWeights(
            q: (low(r0), high(r0), low(r1), high(r1), low(r2), high(r2), low(r3), high(r3)),
            scales: _mm256_cvtepi32_ps(sc), mins: _mm256_cvtepi32_ps(m), d: loadHalf(b, 0), dmin: loadHalf(b, 2))
    }

    @inline(__always)
    static func accumulate(_ w: SuperBlockWeights, _ a: ActivationView, _ i: Int, _ acc: inout __m256) {
        kQuantStep(w, a, i, &acc)
    }

    @inline(__always)
    static func finish(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int, from i: Int, _ acc: __m256) -> __m256 { acc }
}

extension Q5_K: SteppedDotFormat {
    static var stepBlocks: Int { 1 }
    static var zero: __m256 { _mm256_setzero_ps() }

    @inline(__always)
    static func unpack(_ x: UnsafeRawPointer, _ i: Int) -> SuperBlockWeights {
        let b = x + 176 * i
        let (sc, m) = scalesMinsK4(b + 4)
        let m4 = _mm256_set1_epi8(0x0F)
        let bit4 = _mm256_set1_epi8(0x10)
        let hbits = load256(b, 16)
        @inline(__always) func high(_ j: Int) -> __m256i {
            let mask = _mm256_set1_epi8(Int8(bitPattern: UInt8(1) << UInt8(j)))
            return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hbits, mask), mask), bit4)
        }
        @inline(__always) func pair(_ k: Int) -> (__m256i, __m256i) {
            let raw = load256(b, 48 + 32 * k)
            return (
                _mm256_or_si256(_mm256_and_si256(raw, m4), high(2 * k)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), m4), high(2 * k + 1))
            )
        }
        let (q0, q1) = pair(0), (q2, q3) = pair(1), (q4, q5) = pair(2), (q6, q7) = pair(3)
        return SuperBlockWeights(
            q: (q0, q1, q2, q3, q4, q5, q6, q7),
            scales: _mm256_cvtepi32_ps(sc), mins: _mm256_cvtepi32_ps(m), d: loadHalf(b, 0), dmin: loadHalf(b, 2))
    }

    @inline(__always)
    static func accumulate(_ w: SuperBlockWeights, _ a: ActivationView, _ i: Int, _ acc: inout __m256) {
        kQuantStep(w, a, i, &acc)
    }

    @inline(__always)
    static func finish(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int, from i: Int, _ acc: __m256) -> __m256 { acc }
}

/// A Q6_K super-block unpacked: its 6-bit levels, the 16-bit scale pairs each level vector
/// is multiplied with, the scales for the -32 offsets, and `d`.
struct Q6KWeights {
    let q: (__m256i, __m256i, __m256i, __m256i, __m256i, __m256i, __m256i, __m256i)
    let s: (__m256i, __m256i, __m256i, __m256i, __m256i, __m256i, __m256i, __m256i)
    let sc16: __m256i
    let d: Float
}

extension Q6_K: SteppedDotFormat {
    static var stepBlocks: Int { 1 }
    static var zero: __m256 { _mm256_setzero_ps() }

    @inline(__always)
    static func unpack(_ x: UnsafeRawPointer, _ i: Int) -> Q6KWeights {
        let b = x + 210 * i
        let sc16 = _mm256_cvtepi8_epi16(b.loadUnaligned(fromByteOffset: 192, as: __m128i.self))
        let pairShuffle = unsafeBitCast(
            SIMD32<Int8>(
                0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,
                2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3), to: __m256i.self)
        @inline(__always) func scales(_ j: Int) -> __m256i {
            _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(sc16, _mm256_set1_epi32(Int32(j))), pairShuffle)
        }
        let (q0, q1, q2, q3) = q6Levels(b, 0)
        let (q4, q5, q6, q7) = q6Levels(b, 1)
        return Q6KWeights(
            q: (q0, q1, q2, q3, q4, q5, q6, q7),
            s: (scales(0), scales(1), scales(2), scales(3), scales(4), scales(5), scales(6), scales(7)),
            sc16: sc16, d: loadHalf(b, 208))
    }

    @inline(__always)
    static func accumulate(_ w: Q6KWeights, _ a: ActivationView, _ i: Int, _ acc: inout __m256) {
        let aq = UnsafeRawPointer(a.qs), ab = 256 * i
        @inline(__always) func step(_ q: __m256i, _ s: __m256i, _ j: Int) -> __m256i {
            _mm256_madd_epi16(_mm256_maddubs_epi16(q, load256(aq, ab + 32 * j)), s)
        }
        let p0 = step(w.q.0, w.s.0, 0), p1 = step(w.q.1, w.s.1, 1), p2 = step(w.q.2, w.s.2, 2), p3 = step(w.q.3, w.s.3, 3)
        let p4 = step(w.q.4, w.s.4, 4), p5 = step(w.q.5, w.s.5, 5), p6 = step(w.q.6, w.s.6, 6), p7 = step(w.q.7, w.s.7, 7)
        let offsets = _mm256_madd_epi16(w.sc16, load256(UnsafeRawPointer(a.bsums), 32 * i))
        let isum = _mm256_sub_epi32(transposeSum8(p0, p1, p2, p3, p4, p5, p6, p7), _mm256_slli_epi32(offsets, 5))
        let da = UnsafeRawPointer(a.d).loadUnaligned(fromByteOffset: 32 * i, as: __m256.self)
        acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(w.d), da), _mm256_cvtepi32_ps(isum), acc)
    }

    @inline(__always)
    static func finish(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int, from i: Int, _ acc: __m256) -> __m256 { acc }
}
#endif
