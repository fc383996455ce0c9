// The 32-value formats: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (ggml-common.h, ggml-quants.c).
//
//   block_q8_0 { d: fp16;          qs[32]: int8 }                  34 bytes, x = d * q
//   block_q4_0 { d: fp16;          qs[16]: nibbles }               18 bytes, x = d * (q - 8)
//   block_q4_1 { d: fp16; m: fp16; qs[16]: nibbles }               20 bytes, x = d * q + m
//   block_q5_0 { d: fp16;          qh: uint32; qs[16]: nibbles }   22 bytes, x = d * (q - 16)
//   block_q5_1 { d: fp16; m: fp16; qh: uint32; qs[16]: nibbles }   24 bytes, x = d * q + m
//
// Nibble order: value j (j < 16) is the low nibble of qs[j], value j + 16 the high nibble.
// Q5: bit j of qh is the fifth bit of value j.
//
// Dot products use the activations' 8-bit blocks (see Activations.swift): for a weight
// block with scale d (and min m) and an activation block with scale da (sum sa = da * sum(a)),
//   d * (q - o) . da * a  =  d * da * sum(q * a) - o * d * sa      (o = 8 or 16)
//   (d * q + m) . da * a  =  d * da * sum(q * a) + m * sa
// so the inner loop multiplies unsigned weights with signed activations, as the x86
// instructions want.

import GGUF

#if LEAP_X86_AVX2
import _Builtin_intrinsics.intel
#endif

/// Truncates `v` toward zero into 0...maxValue, as ggml's `MIN(max, (int8_t)v)` does for the
/// in-range values the quantizers produce; NaN gives 0 (C leaves it undefined).
@inline(__always)
func truncatedLevel(_ v: Float, max maxValue: UInt8) -> UInt8 {
    if v >= Float(maxValue) { return maxValue }
    if v > 0 { return UInt8(v) }
    return 0
}

// MARK: - Q8_0

enum Q8_0: QuantizableBlockFormat, IntegerDotFormat {
    static var type: GGMLType { .q8_0 }

    static func dequantizeReference(_ x: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>, nb: Int) {
        for i in 0..<nb {
            let b = x + 34 * i
            let d = loadHalfReference(b, 0)
            for j in 0..<32 {
                y[32 * i + j] = Float(Int8(bitPattern: byte(b, 2 + j))) * d
            }
        }
    }

    static func dequantize(_ x: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>, nb: Int) {
        #if LEAP_X86_AVX2
        for i in 0..<nb {
            let b = x + 34 * i
            let d = loadHalf(b, 0)
            storeLevels32(load256(b, 2), scale0: d, scale1: d, add: nil, y + 32 * i)
        }
        #else
        return dequantizeReference(x, y, nb: nb)
        #endif
    }

    /// ggml's `quantize_row_q8_0_ref`: d = max|x| / 127, q = roundf(x / d) (ties away).
    static func quantizeReference(_ x: UnsafePointer<Float>, _ y: UnsafeMutableRawPointer, nb: Int) {
        for i in 0..<nb {
            var amax: Float = 0
            for j in 0..<32 { amax = max(amax, abs(x[32 * i + j])) }
            let d = amax / 127
            let id: Float = d != 0 ? 1 / d : 0
            let b = y + 34 * i
            storeHalf(b, 0, d)
            for j in 0..<32 {
                let x0 = (x[32 * i + j] * id).rounded(.toNearestOrAwayFromZero)
                let q: Int8 = x0.isNaN ? 0 : Int8(max(-128, min(127, x0)))
                b.storeBytes(of: q, toByteOffset: 2 + j, as: Int8.self)
            }
        }
    }

    static func dotReference(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> Float {
        var sumf: Float = 0
        for i in 0..<nb {
            let b = x + 34 * i
            var sumi: Int32 = 0
            for j in 0..<32 {
                sumi += Int32(Int8(bitPattern: byte(b, 2 + j))) * Int32(a.qs[32 * i + j])
            }
            sumf += Float(sumi) * (loadHalfReference(b, 0) * a.d[i])
        }
        return sumf
    }
}

#if LEAP_X86_AVX2
extension Q8_0 {
    // One block per step, with the sign trick (|w| times a with w's sign keeps the
    // unsigned operand <= 128) on every x86 build: each lane's integer is the exact Σ w·a
    // of its 4 values, whether `vpdpbusd` (VNNI) or `vpmaddubsw` + `vpmaddwd` (AVX2, pairs
    // of at most 2 · 128 · 127) computes it, so a VNNI build decodes to the bits of an
    // AVX2 build. (Biasing the levels to w + 128 and taking 128 · Σa off in floats
    // rounds differently, enough to flip a mixture-of-experts router's near tie.)
    struct Weights {
        let d: __m256
        let w: __m256i
        let magnitude: __m256i  // |w|
    }
    typealias Accumulator = __m256
    static var stepBlocks: Int { 1 }

    @inline(__always)
    static func unpack(_ x: UnsafeRawPointer, _ i: Int) -> Weights {
        let b = x + 34 * i
        let w = load256(b, 2)
        return Weights(d: broadcastHalf(b, 0), w: w, magnitude: _mm256_sign_epi8(w, w))
    }

    @inline(__always)
    static func accumulate(_ w: Weights, _ a: ActivationView, _ i: Int, _ acc: inout Accumulator) {
        let p = mulSumU8S8(w.magnitude, _mm256_sign_epi8(load256(UnsafeRawPointer(a.qs), 32 * i), w.w))
        acc = _mm256_fmadd_ps(_mm256_mul_ps(w.d, broadcastFloat(a.d, i)), _mm256_cvtepi32_ps(p), acc)
    }
}
#endif

// MARK: - The nibble formats: Q4_0, Q4_1, Q5_0, Q5_1

/// The 32-value formats with 4-bit levels, which differ in two optional fields: an fp16
/// min `m` after `d` (Q4_1, Q5_1: x = d * q + m; otherwise x = d * (q - offset)), and
/// 32 fifth bits `qh` (Q5_0, Q5_1). Their fast kernels (dequantization, the AVX2 steps and
/// the portable dot product) are written once, here and in PortableDots.swift, from these
/// two flags; the references stay per format, as ggml writes them.
protocol NibbleBlockFormat: IntegerDotFormat {
    /// Whether a block stores a min `m` (else its levels are centred on `offset`).
    static var hasMin: Bool { get }
    /// Whether a block stores a fifth bit per value (`qh`).
    static var hasFifthBit: Bool { get }
}

extension NibbleBlockFormat {
    /// Byte offset of `qh` in a block (after `d` and `m`).
    @inline(__always) static var qhOffset: Int { hasMin ? 4 : 2 }
    /// Byte offset of the 16 bytes of nibbles.
    @inline(__always) static var qsOffset: Int { qhOffset + (hasFifthBit ? 4 : 0) }
    /// Bytes per block (`typeSize`, as a constant the optimizer sees).
    @inline(__always) static var blockBytes: Int { qsOffset + 16 }
    /// The level offset of the formats without a min: 8 (Q4_0), 16 (Q5_0).
    @inline(__always) static var offset: Float { hasFifthBit ? 16 : 8 }

    static func dequantize(_ x: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>, nb: Int) {
        #if LEAP_X86_AVX2
        for i in 0..<nb {
            let b = x + blockBytes * i
            let d = loadHalf(b, 0)
            if hasMin {
                storeLevels32(levels(b), scale0: d, scale1: d, add: loadHalf(b, 2), y + 32 * i)
            } else {
                let q = _mm256_sub_epi8(levels(b), _mm256_set1_epi8(Int8(offset)))
                storeLevels32(q, scale0: d, scale1: d, add: nil, y + 32 * i)
            }
        }
        #else
        return dequantizeReference(x, y, nb: nb)
        #endif
    }
}

#if LEAP_X86_AVX2
/// The running sums of the nibble formats: the scaled products and the offset (or min)
/// terms, lanes 0-3 for even blocks and 4-7 for odd ones.
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

extension NibbleBlockFormat {
    // Two blocks per step: the 16 packed bytes of blocks i and i+1 share one register
    // (see SIMDHelpers.swift), Int32 lanes 0-3 / 4-7 end up belonging to block i / i+1,
    // and the activations' `d4`/`s4` hold each block's scale four times. An odd block
    // count leaves the last block to `finish`, alone.
    static var stepBlocks: Int { 2 }
    static var zero: PairAccumulator { .zero }

    /// The 32 unsigned levels (0...15, or 0...31 with the fifth bit) of the block at `b`.
    @inline(__always)
    static func levels(_ b: UnsafeRawPointer) -> __m256i {
        let q = unpackNibbles16(b, qsOffset)
        if !hasFifthBit { return q }
        return _mm256_or_si256(q, fifthBitBytes(b.loadUnaligned(fromByteOffset: qhOffset, as: UInt32.self)))
    }

    @inline(__always)
    static func unpack(_ x: UnsafeRawPointer, _ i: Int) -> PairWeights {
        let b = x + blockBytes * i
        var q = unpackNibblePair(b, qsOffset, blockBytes + qsOffset)
        if hasFifthBit {
            let h = fifthBitPair(
                b.loadUnaligned(fromByteOffset: qhOffset, as: UInt32.self),
                b.loadUnaligned(fromByteOffset: blockBytes + qhOffset, as: UInt32.self))
            q = (_mm256_or_si256(q.lo, h.lo), _mm256_or_si256(q.hi, h.hi))
        }
        let m = hasMin ? halfPair(b, 2, blockBytes + 2) : _mm256_setzero_ps()
        return PairWeights(lo: q.lo, hi: q.hi, d: halfPair(b, 0, blockBytes), m: m)
    }

    @inline(__always)
    static func accumulate(_ w: PairWeights, _ a: ActivationView, _ i: Int, _ c: inout PairAccumulator) {
        let av = activationPair(UnsafeRawPointer(a.qs), i)
        let p = _mm256_cvtepi32_ps(mulSumU8S8(mulSumU8S8(w.lo, av.lo), w.hi, av.hi))
        c.acc = _mm256_fmadd_ps(_mm256_mul_ps(w.d, scalePair(a.d4, i)), p, c.acc)
        c.extra = _mm256_fmadd_ps(hasMin ? w.m : w.d, scalePair(a.s4, i), c.extra)
    }

    @inline(__always)
    static func finish(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int, from i: Int, _ c: PairAccumulator) -> __m256 {
        var tail: Float = 0
        if i < nb {  // an odd block count: the last block alone
            let b = x + blockBytes * i
            let p = mulSumU8S8(levels(b), load256(UnsafeRawPointer(a.qs), 32 * i))
            let d = loadHalf(b, 0)
            let sum = hsum(_mm256_cvtepi32_ps(p))
            tail = hasMin ? sum * (d * a.d[i]) + loadHalf(b, 2) * a.s[i] : sum * (d * a.d[i]) - offset * (d * a.s[i])
        }
        // `extra` holds 4 copies of each block's term: offset * (sum of copies) / 4, or the
        // mins' sum / 4; the odd block's scalar goes to lane 0.
        let whole =
            hasMin
            ? _mm256_fmadd_ps(_mm256_set1_ps(0.25), c.extra, c.acc)
            : _mm256_fnmadd_ps(_mm256_set1_ps(offset / 4), c.extra, c.acc)
        return _mm256_add_ps(whole, lane0(tail))
    }
}
#endif

// MARK: - Q4_0

enum Q4_0: QuantizableBlockFormat, NibbleBlockFormat {
    static var type: GGMLType { .q4_0 }
    static var hasMin: Bool { false }
    static var hasFifthBit: Bool { false }

    static func dequantizeReference(_ x: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>, nb: Int) {
        for i in 0..<nb {
            let b = x + 18 * i
            let d = loadHalfReference(b, 0)
            for j in 0..<16 {
                let x0 = Int32(byte(b, 2 + j) & 0x0F) - 8
                let x1 = Int32(byte(b, 2 + j) >> 4) - 8
                y[32 * i + j] = Float(x0) * d
                y[32 * i + j + 16] = Float(x1) * d
            }
        }
    }

    /// ggml's `quantize_row_q4_0_ref`: d = (value of largest magnitude) / -8,
    /// q = min(15, trunc(x / d + 8.5)).
    static func quantizeReference(_ x: UnsafePointer<Float>, _ y: UnsafeMutableRawPointer, nb: Int) {
        for i in 0..<nb {
            var amax: Float = 0, maxValue: Float = 0
            for j in 0..<32 {
                let v = x[32 * i + j]
                if amax < abs(v) {
                    amax = abs(v)
                    maxValue = v
                }
            }
            let d = maxValue / -8
            let id: Float = d != 0 ? 1 / d : 0
            let b = y + 18 * i
            storeHalf(b, 0, d)
            for j in 0..<16 {
                let xi0 = truncatedLevel(x[32 * i + j] * id + 8.5, max: 15)
                let xi1 = truncatedLevel(x[32 * i + 16 + j] * id + 8.5, max: 15)
                b.storeBytes(of: xi0 | (xi1 << 4), toByteOffset: 2 + j, as: UInt8.self)
            }
        }
    }

    static func dotReference(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> Float {
        var sumf: Float = 0
        for i in 0..<nb {
            let b = x + 18 * i
            var sumi: Int32 = 0
            for j in 0..<16 {
                let v0 = Int32(byte(b, 2 + j) & 0x0F) - 8
                let v1 = Int32(byte(b, 2 + j) >> 4) - 8
                sumi += v0 * Int32(a.qs[32 * i + j]) + v1 * Int32(a.qs[32 * i + j + 16])
            }
            sumf += Float(sumi) * (loadHalfReference(b, 0) * a.d[i])
        }
        return sumf
    }
}

// MARK: - Q4_1

enum Q4_1: QuantizableBlockFormat, NibbleBlockFormat {
    static var type: GGMLType { .q4_1 }
    static var hasMin: Bool { true }
    static var hasFifthBit: Bool { false }

    static func dequantizeReference(_ x: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>, nb: Int) {
        for i in 0..<nb {
            let b = x + 20 * i
            let d = loadHalfReference(b, 0)
            let m = loadHalfReference(b, 2)
            for j in 0..<16 {
                let x0 = Float(byte(b, 4 + j) & 0x0F)
                let x1 = Float(byte(b, 4 + j) >> 4)
                y[32 * i + j] = x0 * d + m
                y[32 * i + j + 16] = x1 * d + m
            }
        }
    }

    /// ggml's `quantize_row_q4_1_ref`: d = (max - min) / 15, m = min,
    /// q = min(15, trunc((x - min) / d + 0.5)).
    static func quantizeReference(_ x: UnsafePointer<Float>, _ y: UnsafeMutableRawPointer, nb: Int) {
        for i in 0..<nb {
            var minValue = Float.greatestFiniteMagnitude, maxValue = -Float.greatestFiniteMagnitude
            for j in 0..<32 {
                let v = x[32 * i + j]
                if v < minValue { minValue = v }
                if v > maxValue { maxValue = v }
            }
            let d = (maxValue - minValue) / 15
            let id: Float = d != 0 ? 1 / d : 0
            let b = y + 20 * i
            storeHalf(b, 0, d)
            storeHalf(b, 2, minValue)
            for j in 0..<16 {
                let xi0 = truncatedLevel((x[32 * i + j] - minValue) * id + 0.5, max: 15)
                let xi1 = truncatedLevel((x[32 * i + 16 + j] - minValue) * id + 0.5, max: 15)
                b.storeBytes(of: xi0 | (xi1 << 4), toByteOffset: 4 + j, as: UInt8.self)
            }
        }
    }

    static func dotReference(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> Float {
        var sumf: Float = 0
        for i in 0..<nb {
            let b = x + 20 * i
            var sumi: Int32 = 0
            for j in 0..<16 {
                sumi +=
                    Int32(byte(b, 4 + j) & 0x0F) * Int32(a.qs[32 * i + j])
                    + Int32(byte(b, 4 + j) >> 4) * Int32(a.qs[32 * i + j + 16])
            }
            sumf += Float(sumi) * (loadHalfReference(b, 0) * a.d[i]) + loadHalfReference(b, 2) * a.s[i]
        }
        return sumf
    }
}

// MARK: - Q5_0

enum Q5_0: QuantizableBlockFormat, NibbleBlockFormat {
    static var type: GGMLType { .q5_0 }
    static var hasMin: Bool { false }
    static var hasFifthBit: Bool { true }

    static func dequantizeReference(_ x: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>, nb: Int) {
        for i in 0..<nb {
            let b = x + 22 * i
            let d = loadHalfReference(b, 0)
            let qh = b.loadUnaligned(fromByteOffset: 2, as: UInt32.self)
            for j in 0..<16 {
                let xh_0 = UInt8(truncatingIfNeeded: ((qh >> UInt32(j)) << 4) & 0x10)
                let xh_1 = UInt8(truncatingIfNeeded: (qh >> UInt32(j + 12)) & 0x10)
                let x0 = Int32((byte(b, 6 + j) & 0x0F) | xh_0) - 16
                let x1 = Int32((byte(b, 6 + j) >> 4) | xh_1) - 16
                y[32 * i + j] = Float(x0) * d
                y[32 * i + j + 16] = Float(x1) * d
            }
        }
    }

    /// ggml's `quantize_row_q5_0_ref`: d = (value of largest magnitude) / -16,
    /// q = min(31, trunc(x / d + 16.5)); low 4 bits in qs, the fifth in qh.
    static func quantizeReference(_ x: UnsafePointer<Float>, _ y: UnsafeMutableRawPointer, nb: Int) {
        for i in 0..<nb {
            var amax: Float = 0, maxValue: Float = 0
            for j in 0..<32 {
                let v = x[32 * i + j]
                if amax < abs(v) {
                    amax = abs(v)
                    maxValue = v
                }
            }
            let d = maxValue / -16
            let id: Float = d != 0 ? 1 / d : 0
            let b = y + 22 * i
            storeHalf(b, 0, d)
            var qh: UInt32 = 0
            for j in 0..<16 {
                let xi0 = truncatedLevel(x[32 * i + j] * id + 16.5, max: 31)
                let xi1 = truncatedLevel(x[32 * i + 16 + j] * id + 16.5, max: 31)
                b.storeBytes(of: (xi0 & 0x0F) | ((xi1 & 0x0F) << 4), toByteOffset: 6 + j, as: UInt8.self)
                qh |= UInt32((xi0 & 0x10) >> 4) << UInt32(j)
                qh |= UInt32((xi1 & 0x10) >> 4) << UInt32(j + 16)
            }
            b.storeBytes(of: qh, toByteOffset: 2, as: UInt32.self)
        }
    }

    static func dotReference(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> Float {
        var sumf: Float = 0
        for i in 0..<nb {
            let b = x + 22 * i
            let qh = b.loadUnaligned(fromByteOffset: 2, as: UInt32.self)
            var sumi: Int32 = 0
            for j in 0..<16 {
                let xh_0 = UInt8(truncatingIfNeeded: ((qh >> UInt32(j)) << 4) & 0x10)
                let xh_1 = UInt8(truncatingIfNeeded: (qh >> UInt32(j + 12)) & 0x10)
                let x0 = Int32((byte(b, 6 + j) & 0x0F) | xh_0) - 16
                let x1 = Int32((byte(b, 6 + j) >> 4) | xh_1) - 16
                sumi += x0 * Int32(a.qs[32 * i + j]) + x1 * Int32(a.qs[32 * i + j + 16])
            }
            sumf += Float(sumi) * (loadHalfReference(b, 0) * a.d[i])
        }
        return sumf
    }
}

// MARK: - Q5_1

enum Q5_1: QuantizableBlockFormat, NibbleBlockFormat {
    static var type: GGMLType { .q5_1 }
    static var hasMin: Bool { true }
    static var hasFifthBit: Bool { true }

    static func dequantizeReference(_ x: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>, nb: Int) {
        for i in 0..<nb {
            let b = x + 24 * i
            let d = loadHalfReference(b, 0)
            let m = loadHalfReference(b, 2)
            let qh = b.loadUnaligned(fromByteOffset: 4, as: UInt32.self)
            for j in 0..<16 {
                let xh_0 = UInt8(truncatingIfNeeded: ((qh >> UInt32(j)) << 4) & 0x10)
                let xh_1 = UInt8(truncatingIfNeeded: (qh >> UInt32(j + 12)) & 0x10)
                let x0 = Float((byte(b, 8 + j) & 0x0F) | xh_0)
                let x1 = Float((byte(b, 8 + j) >> 4) | xh_1)
                y[32 * i + j] = x0 * d + m
                y[32 * i + j + 16] = x1 * d + m
            }
        }
    }

    /// ggml's `quantize_row_q5_1_ref`: d = (max - min) / 31, m = min,
    /// q = trunc((x - min) / d + 0.5) (at most 31).
    static func quantizeReference(_ x: UnsafePointer<Float>, _ y: UnsafeMutableRawPointer, nb: Int) {
        for i in 0..<nb {
            var minValue = Float.greatestFiniteMagnitude, maxValue = -Float.greatestFiniteMagnitude
            for j in 0..<32 {
                let v = x[32 * i + j]
                if v < minValue { minValue = v }
                if v > maxValue { maxValue = v }
            }
            let d = (maxValue - minValue) / 31
            let id: Float = d != 0 ? 1 / d : 0
            let b = y + 24 * i
            storeHalf(b, 0, d)
            storeHalf(b, 2, minValue)
            var qh: UInt32 = 0
            for j in 0..<16 {
                let xi0 = truncatedLevel((x[32 * i + j] - minValue) * id + 0.5, max: 31)
                let xi1 = truncatedLevel((x[32 * i + 16 + j] - minValue) * id + 0.5, max: 31)
                b.storeBytes(of: (xi0 & 0x0F) | ((xi1 & 0x0F) << 4), toByteOffset: 8 + j, as: UInt8.self)
                qh |= UInt32((xi0 & 0x10) >> 4) << UInt32(j)
                qh |= UInt32((xi1 & 0x10) >> 4) << UInt32(j + 16)
            }
            b.storeBytes(of: qh, toByteOffset: 4, as: UInt32.self)
        }
    }

    static func dotReference(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> Float {
        var sumf: Float = 0
        for i in 0..<nb {
            let b = x + 24 * i
            let qh = b.loadUnaligned(fromByteOffset: 4, as: UInt32.self)
            var sumi: Int32 = 0
            for j in 0..<16 {
                let xh_0 = UInt8(truncatingIfNeeded: ((qh >> UInt32(j)) << 4) & 0x10)
                let xh_1 = UInt8(truncatingIfNeeded: (qh >> UInt32(j + 12)) & 0x10)
                let x0 = Int32((byte(b, 8 + j) & 0x0F) | xh_0)
                let x1 = Int32((byte(b, 8 + j) >> 4) | xh_1)
                sumi += x0 * Int32(a.qs[32 * i + j]) + x1 * Int32(a.qs[32 * i + j + 16])
            }
            sumf += Float(sumi) * (loadHalfReference(b, 0) * a.d[i]) + loadHalfReference(b, 2) * a.s[i]
        }
        return sumf
    }
}
