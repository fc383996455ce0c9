// The K-quants: super-blocks of 256 values (QK_K) split into sub-blocks with their own
// scales (ggml-common.h, ggml-quants.c).
//
//   block_q4_K { d: fp16; dmin: fp16; scales[12]; qs[128] }               144 bytes
//       8 sub-blocks of 32; 6-bit scale sc and min m per sub-block, packed in `scales`;
//       x = d * sc * q - dmin * m, q a nibble. Bytes qs[32k..32k+31] hold sub-block 2k in
//       their low nibbles and sub-block 2k+1 in their high nibbles.
//   block_q5_K { d: fp16; dmin: fp16; scales[12]; qh[32]; qs[128] }      176 bytes
//       as Q4_K, plus a fifth bit: bit k of qh[l] belongs to value l of sub-block k.
//   block_q6_K { ql[128]; qh[64]; scales[16]: int8; d: fp16 }             210 bytes
//       16 sub-blocks of 16 with an int8 scale each; x = d * sc * (q - 32), q of 6 bits:
//       4 low bits in ql, 2 high bits in qh (layout in `dequantizeReference`).
//
// Dot products use leap-ref's activations (blocks of 32 with an fp32 scale, not Q8_K):
// sub-block j of super-block i meets activation block 8i + j, so
//   Q4_K/Q5_K:  sum_j  d * sc_j * da_j * sum(q * a)  -  dmin * m_j * sa_j
//   Q6_K:       sum_j  d * da_j * sum_g sc_g * sum(q * a)  -  32 * d * sum_g sc_g * da_j * bsum_g

import GGUF

#if LEAP_X86_AVX2
import _Builtin_intrinsics.intel
#endif

/// ggml's `get_scale_min_k4`: the 6-bit scale and min of sub-block `j` (0..<8).
@inline(__always)
func scaleMinK4(_ j: Int, _ q: UnsafeRawPointer) -> (sc: UInt8, m: UInt8) {
    if j < 4 {
        return (byte(q, j) & 63, byte(q, j + 4) & 63)
    }
    let sc = (byte(q, j + 4) & 0x0F) | ((byte(q, j - 4) >> 6) << 4)
    let m = (byte(q, j + 4) >> 4) | ((byte(q, j) >> 6) << 4)
    return (sc, m)
}

// MARK: - Q4_K and Q5_K

/// Q4_K and Q5_K: super-blocks of 8 sub-blocks of 32 with 6-bit scales and mins, which
/// differ only in Q5_K's 32 bytes of fifth bits (`qh`, before the nibbles). Their dot
/// products (the reference, the AVX2 steps, the portable one) and fast dequantization are
/// written once, here and in PortableDots.swift; the dequantization references stay per
/// format, as ggml writes them.
protocol ScaleMinKFormat: IntegerDotFormat {
    /// Whether a super-block stores a fifth bit per value (Q5_K).
    static var hasFifthBit: Bool { get }
}

extension ScaleMinKFormat {
    /// Byte offset of the 128 bytes of nibbles in a super-block (after `qh` in Q5_K).
    @inline(__always) static var qsOffset: Int { hasFifthBit ? 48 : 16 }
    /// Bytes per super-block (`typeSize`, as a constant the optimizer sees).
    @inline(__always) static var blockBytes: Int { qsOffset + 128 }

    /// The scalar reference dot product: sub-block j's levels (with Q5_K's fifth bit j of
    /// `qh[l]`) times activation block 8i + j, scaled by d * sc_j and less dmin * m_j.
    static func dotReference(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> Float {
        var sumf: Float = 0
        for i in 0..<nb {
            let b = x + blockBytes * i
            let d = loadHalfReference(b, 0)
            let dmin = loadHalfReference(b, 2)
            for j in 0..<8 {
                let (sc, m) = scaleMinK4(j, b + 4)
                let ab = 8 * i + j
                var sumi: Int32 = 0
                for l in 0..<32 {
                    let packed = byte(b, qsOffset + 32 * (j / 2) + l)
                    let low = j % 2 == 0 ? packed & 0x0F : packed >> 4
                    let high: UInt8 = hasFifthBit ? (byte(b, 16 + l) >> UInt8(j)) & 1 : 0
                    sumi += Int32(low | (high << 4)) * Int32(a.qs[32 * ab + l])
                }
                sumf += d * Float(sc) * a.d[ab] * Float(sumi) - dmin * Float(m) * a.s[ab]
            }
        }
        return sumf
    }

    static func dequantize(_ x: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>, nb: Int) {
        #if LEAP_X86_AVX2
        for i in 0..<nb {
            let b = x + blockBytes * i
            let d = loadHalf(b, 0)
            let dmin = loadHalf(b, 2)
            for k in 0..<4 {
                let (sc1, m1) = scaleMinK4(2 * k, b + 4)
                let (sc2, m2) = scaleMinK4(2 * k + 1, b + 4)
                let (q1, q2) = levelPair(b, k)
                let d1 = d * Float(sc1), d2 = d * Float(sc2)
                storeLevels32(q1, scale0: d1, scale1: d1, add: -(dmin * Float(m1)), y + 256 * i + 64 * k)
                storeLevels32(q2, scale0: d2, scale1: d2, add: -(dmin * Float(m2)), y + 256 * i + 64 * k + 32)
            }
        }
        #else
        return dequantizeReference(x, y, nb: nb)
        #endif
    }
}

#if LEAP_X86_AVX2
/// A Q4_K/Q5_K super-block unpacked: its eight 32-value level vectors, the 8 sub-block
/// scales and mins as floats (exact conversions of the 6-bit integers), `d` and `dmin`.
struct SuperBlockWeights {
    let q: (__m256i, __m256i, __m256i, __m256i, __m256i, __m256i, __m256i, __m256i)
    let scales: __m256
    let mins: __m256
    let d: Float
    let dmin: Float
}

extension ScaleMinKFormat {
    // One super-block per step. The 8 sub-block sums are reduced into one vector
    // (`transposeSum8`), so the 8 scales and mins apply as vectors: one float FMA for the
    // scales and one for the mins per super-block.
    static var stepBlocks: Int { 1 }

    /// The levels of sub-blocks 2k and 2k+1 of the super-block at `b`: the low and high
    /// nibbles of `qs[32k..<32k+32]`, with Q5_K's fifth bits (bit j of `qh[l]` for value l
    /// of sub-block j, as 0x10).
    @inline(__always)
    static func levelPair(_ b: UnsafeRawPointer, _ k: Int) -> (__m256i, __m256i) {
        let m4 = _mm256_set1_epi8(0x0F)
        let raw = load256(b, qsOffset + 32 * k)
        let low = _mm256_and_si256(raw, m4), high = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4)
        if !hasFifthBit { return (low, high) }
        let hbits = load256(b, 16), bit4 = _mm256_set1_epi8(0x10)
        @inline(__always) func fifth(_ j: Int) -> __m256i {
            let mask = _mm256_set1_epi8(Int8(bitPattern: UInt8(1) << UInt8(j)))
            return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hbits, mask), mask), bit4)
        }
        return (_mm256_or_si256(low, fifth(2 * k)), _mm256_or_si256(high, fifth(2 * k + 1)))
    }

    @inline(__always)
    static func unpack(_ x: UnsafeRawPointer, _ i: Int) -> SuperBlockWeights {
        let b = x + blockBytes * i
        let (sc, m) = scalesMinsK4(b + 4)
        let (q0, q1) = levelPair(b, 0), (q2, q3) = levelPair(b, 1), (q4, q5) = levelPair(b, 2), (q6, q7) = levelPair(b, 3)
        return SuperBlockWeights(
            q: (q0, q1, q2, q3, q4, q5, q6, q7),
            scales: _mm256_cvtepi32_ps(sc), mins: _mm256_cvtepi32_ps(m), d: loadHalf(b, 0), dmin: loadHalf(b, 2))
    }

    @inline(__always)
    static func accumulate(_ w: SuperBlockWeights, _ a: ActivationView, _ i: Int, _ acc: inout __m256) {
        let aq = UnsafeRawPointer(a.qs), ab = 256 * i
        let p0 = mulSumU8S8(w.q.0, load256(aq, ab)), p1 = mulSumU8S8(w.q.1, load256(aq, ab + 32))
        let p2 = mulSumU8S8(w.q.2, load256(aq, ab + 64)), p3 = mulSumU8S8(w.q.3, load256(aq, ab + 96))
        let p4 = mulSumU8S8(w.q.4, load256(aq, ab + 128)), p5 = mulSumU8S8(w.q.5, load256(aq, ab + 160))
        let p6 = mulSumU8S8(w.q.6, load256(aq, ab + 192)), p7 = mulSumU8S8(w.q.7, load256(aq, ab + 224))
        // Lane j: sum(q * a) of sub-block j, times d * sc_j * da_j; minus dmin * m_j * sa_j.
        let sums = _mm256_cvtepi32_ps(transposeSum8(p0, p1, p2, p3, p4, p5, p6, p7))
        let da = UnsafeRawPointer(a.d).loadUnaligned(fromByteOffset: 32 * i, as: __m256.self)
        let sa = UnsafeRawPointer(a.s).loadUnaligned(fromByteOffset: 32 * i, as: __m256.self)
        let scale = _mm256_mul_ps(_mm256_set1_ps(w.d), _mm256_mul_ps(w.scales, da))
        acc = _mm256_fmadd_ps(scale, sums, acc)
        acc = _mm256_fnmadd_ps(_mm256_set1_ps(w.dmin), _mm256_mul_ps(w.mins, sa), acc)
    }
}
#endif

// MARK: - Q4_K

enum Q4_K: ScaleMinKFormat {
    static var type: GGMLType { .q4_K }
    static var hasFifthBit: Bool { false }

    static func dequantizeReference(_ x: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>, nb: Int) {
        for i in 0..<nb {
            let b = x + 144 * i
            let d = loadHalfReference(b, 0)
            let dmin = loadHalfReference(b, 2)
            let scales = b + 4
            var q = b + 16
            var out = y + 256 * i
            var scaleIndex = 0
            for _ in stride(from: 0, to: 256, by: 64) {
                let (sc1, m1) = scaleMinK4(scaleIndex, scales)
                let (sc2, m2) = scaleMinK4(scaleIndex + 1, scales)
                let d1 = d * Float(sc1), min1 = dmin * Float(m1)
                let d2 = d * Float(sc2), min2 = dmin * Float(m2)
                for l in 0..<32 { out[l] = d1 * Float(byte(q, l) & 0x0F) - min1 }
                for l in 0..<32 { out[32 + l] = d2 * Float(byte(q, l) >> 4) - min2 }
                q += 32
                out += 64
                scaleIndex += 2
            }
        }
    }
}

// MARK: - Q5_K

enum Q5_K: ScaleMinKFormat {
    static var type: GGMLType { .q5_K }
    static var hasFifthBit: Bool { true }

    static func dequantizeReference(_ x: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>, nb: Int) {
        for i in 0..<nb {
            let b = x + 176 * i
            let d = loadHalfReference(b, 0)
            let dmin = loadHalfReference(b, 2)
            let scales = b + 4
            let qh = b + 16
            var ql = b + 48
            var out = y + 256 * i
            var scaleIndex = 0
            var u1: UInt8 = 1, u2: UInt8 = 2
            for _ in stride(from: 0, to: 256, by: 64) {
                let (sc1, m1) = scaleMinK4(scaleIndex, scales)
                let (sc2, m2) = scaleMinK4(scaleIndex + 1, scales)
                let d1 = d * Float(sc1), min1 = dmin * Float(m1)
                let d2 = d * Float(sc2), min2 = dmin * Float(m2)
                for l in 0..<32 {
                    out[l] = d1 * Float((byte(ql, l) & 0x0F) + (byte(qh, l) & u1 != 0 ? 16 : 0)) - min1
                }
                for l in 0..<32 {
                    out[32 + l] = d2 * Float((byte(ql, l) >> 4) + (byte(qh, l) & u2 != 0 ? 16 : 0)) - min2
                }
                ql += 32
                out += 64
                scaleIndex += 2
                u1 <<= 2
                u2 <<= 2
            }
        }
    }
}

// MARK: - Q6_K

enum Q6_K: IntegerDotFormat {
    static var type: GGMLType { .q6_K }

    static func dequantizeReference(_ x: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>, nb: Int) {
        for i in 0..<nb {
            let b = x + 210 * i
            let d = loadHalfReference(b, 208)
            var ql = b
            var qh = b + 128
            var sc = b + 192
            var out = y + 256 * i
            for _ in stride(from: 0, to: 256, by: 128) {
                for l in 0..<32 {
                    let scaleIndex = l / 16
                    let q1 = Int32((byte(ql, l) & 0x0F) | (((byte(qh, l) >> 0) & 3) << 4)) - 32
                    let q2 = Int32((byte(ql, l + 32) & 0x0F) | (((byte(qh, l) >> 2) & 3) << 4)) - 32
                    let q3 = Int32((byte(ql, l) >> 4) | (((byte(qh, l) >> 4) & 3) << 4)) - 32
                    let q4 = Int32((byte(ql, l + 32) >> 4) | (((byte(qh, l) >> 6) & 3) << 4)) - 32
                    out[l] = d * Float(Int8(bitPattern: byte(sc, scaleIndex))) * Float(q1)
                    out[l + 32] = d * Float(Int8(bitPattern: byte(sc, scaleIndex + 2))) * Float(q2)
                    out[l + 64] = d * Float(Int8(bitPattern: byte(sc, scaleIndex + 4))) * Float(q3)
                    out[l + 96] = d * Float(Int8(bitPattern: byte(sc, scaleIndex + 6))) * Float(q4)
                }
                out += 128
                ql += 64
                qh += 32
                sc += 8
            }
        }
    }

    static func dequantize(_ x: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>, nb: Int) {
        #if LEAP_X86_AVX2
        for i in 0..<nb {
            let b = x + 210 * i
            let d = loadHalf(b, 208)
            for n in 0..<2 {
                let (q0, q1, q2, q3) = q6Levels(b, n)
                @inline(__always) func store(_ q: __m256i, _ t: Int) {
                    let sc0 = Float(Int8(bitPattern: byte(b, 192 + 8 * n + 2 * t)))
                    let sc1 = Float(Int8(bitPattern: byte(b, 192 + 8 * n + 2 * t + 1)))
                    storeLevels32(
                        _mm256_sub_epi8(q, _mm256_set1_epi8(32)), scale0: d * sc0, scale1: d * sc1, add: nil,
                        y + 256 * i + 128 * n + 32 * t)
                }
                store(q0, 0)
                store(q1, 1)
                store(q2, 2)
                store(q3, 3)
            }
        }
        #else
        return dequantizeReference(x, y, nb: nb)
        #endif
    }

    static func dotReference(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> Float {
        var sumf: Float = 0
        for i in 0..<nb {
            let b = x + 210 * i
            let d = loadHalfReference(b, 208)
            for n in 0..<2 {
                for t in 0..<4 {
                    let ab = 8 * i + 4 * n + t
                    var sumi: Int32 = 0
                    for l in 0..<32 {
                        let packedLow = byte(b, 64 * n + 32 * (t & 1) + l)
                        let low = t < 2 ? packedLow & 0x0F : packedLow >> 4
                        let high = (byte(b, 128 + 32 * n + l) >> UInt8(2 * t)) & 3
                        let q = Int32(low | (high << 4)) - 32
                        let sc = Int32(Int8(bitPattern: byte(b, 192 + 8 * n + 2 * t + l / 16)))
                        sumi += sc * q * Int32(a.qs[32 * ab + l])
                    }
                    sumf += d * a.d[ab] * Float(sumi)
                }
            }
        }
        return sumf
    }

    #if LEAP_X86_AVX2
    /// The 6-bit levels (0...63) of the four 32-value activation blocks of half `n` of the
    /// super-block at `b` (see `dequantizeReference` for the bit layout).
    @inline(__always)
    static func q6Levels(_ b: UnsafeRawPointer, _ n: Int) -> (__m256i, __m256i, __m256i, __m256i) {
        let m4 = _mm256_set1_epi8(0x0F)
        let m2 = _mm256_set1_epi8(0x30)
        let l0 = load256(b, 64 * n)
        let l1 = load256(b, 64 * n + 32)
        let h = load256(b, 128 + 32 * n)
        let q0 = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m2))
        let q1 = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m2))
        let q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(h, m2))
        let q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(h, 2), m2))
        return (q0, q1, q2, q3)
    }
    #endif
}

#if LEAP_X86_AVX2
/// A Q6_K super-block unpacked: its 6-bit levels, the 16-bit scale pairs each level vector
/// is multiplied with, the scales for the -32 offsets, and `d`.
struct Q6KWeights {
    let q: (__m256i, __m256i, __m256i, __m256i, __m256i, __m256i, __m256i, __m256i)
    let s: (__m256i, __m256i, __m256i, __m256i, __m256i, __m256i, __m256i, __m256i)
    let sc16: __m256i
    let d: Float
}

extension Q6_K {
    // One super-block per step.
    static var stepBlocks: Int { 1 }

    @inline(__always)
    static func unpack(_ x: UnsafeRawPointer, _ i: Int) -> Q6KWeights {
        let b = x + 210 * i
        let sc16 = _mm256_cvtepi8_epi16(b.loadUnaligned(fromByteOffset: 192, as: __m128i.self))
        // Picks scales 2j and 2j+1 (16-bit, from the dword j of a permuted vector) into the
        // low and high 128-bit halves: bytes 0,1 repeated in the low lane, 2,3 in the high.
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
        // Lane j: sum_g sc_g * (sum(q * a) - 32 * bsum_g) over the two halves of block j.
        let offsets = _mm256_madd_epi16(w.sc16, load256(UnsafeRawPointer(a.bsums), 32 * i))
        let isum = _mm256_sub_epi32(transposeSum8(p0, p1, p2, p3, p4, p5, p6, p7), _mm256_slli_epi32(offsets, 5))
        let da = UnsafeRawPointer(a.d).loadUnaligned(fromByteOffset: 32 * i, as: __m256.self)
        acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(w.d), da), _mm256_cvtepi32_ps(isum), acc)
    }
}
#endif
