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

#if LEAP_X86_AVX2
import _Builtin_intrinsics.intel
#endif
import GGUF

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

// MARK: - Q4_K

enum Q4_K: BlockFormat {
    static var type: GGMLType { .q4_K }

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
                q += 32; out += 64; scaleIndex += 2
            }
        }
    }

    static func dequantize(_ x: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>, nb: Int) {
        for i in 0..<nb {
            let b = x + 144 * i
            let d = loadHalf(b, 0)
            let dmin = loadHalf(b, 2)
            for k in 0..<4 {
                let (sc1, m1) = scaleMinK4(2 * k, b + 4)
                let (sc2, m2) = scaleMinK4(2 * k + 1, b + 4)
                let raw = b.loadUnaligned(fromByteOffset: 16 + 32 * k, as: SIMD32<UInt8>.self)
                storeLevels(raw & 0x0F, scale: d * Float(sc1), minus: dmin * Float(m1), y + 256 * i + 64 * k)
                storeLevels(raw &>> 4, scale: d * Float(sc2), minus: dmin * Float(m2), y + 256 * i + 64 * k + 32)
            }
        }
    }

    static func dotReference(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> Float {
        var sumf: Float = 0
        for i in 0..<nb {
            let b = x + 144 * i
            let d = loadHalfReference(b, 0)
            let dmin = loadHalfReference(b, 2)
            for j in 0..<8 {
                let (sc, m) = scaleMinK4(j, b + 4)
                let ab = 8 * i + j
                var sumi: Int32 = 0
                for l in 0..<32 {
                    let packed = byte(b, 16 + 32 * (j / 2) + l)
                    let q = j % 2 == 0 ? packed & 0x0F : packed >> 4
                    sumi += Int32(q) * Int32(a.qs[32 * ab + l])
                }
                sumf += d * Float(sc) * a.d[ab] * Float(sumi) - dmin * Float(m) * a.s[ab]
            }
        }
        return sumf
    }

    static func dot(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> Float {
        #if LEAP_X86_AVX2
        var acc = _mm256_setzero_ps()
        var mins: Float = 0
        let aq = UnsafeRawPointer(a.qs)
        let m4 = _mm256_set1_epi8(0x0F)
        for i in 0..<nb {
            let b = x + 144 * i
            let d = loadHalf(b, 0)
            let dmin = loadHalf(b, 2)
            var minSum: Float = 0
            for k in 0..<4 {
                let (sc1, m1) = scaleMinK4(2 * k, b + 4)
                let (sc2, m2) = scaleMinK4(2 * k + 1, b + 4)
                let raw = load256(b, 16 + 32 * k)
                let ab = 8 * i + 2 * k
                let p0 = mulSumU8S8(_mm256_and_si256(raw, m4), load256(aq, 32 * ab))
                let p1 = mulSumU8S8(_mm256_and_si256(_mm256_srli_epi16(raw, 4), m4), load256(aq, 32 * ab + 32))
                acc = _mm256_fmadd_ps(_mm256_set1_ps(d * Float(sc1) * a.d[ab]), _mm256_cvtepi32_ps(p0), acc)
                acc = _mm256_fmadd_ps(_mm256_set1_ps(d * Float(sc2) * a.d[ab + 1]), _mm256_cvtepi32_ps(p1), acc)
                minSum += Float(m1) * a.s[ab] + Float(m2) * a.s[ab + 1]
            }
            mins += dmin * minSum
        }
        return hsum(acc) - mins
        #else
        var sumf: Float = 0
        for i in 0..<nb {
            let b = x + 144 * i
            let d = loadHalf(b, 0)
            let dmin = loadHalf(b, 2)
            for k in 0..<4 {
                let (sc1, m1) = scaleMinK4(2 * k, b + 4)
                let (sc2, m2) = scaleMinK4(2 * k + 1, b + 4)
                let raw = SIMD32<Int16>(truncatingIfNeeded: b.loadUnaligned(fromByteOffset: 16 + 32 * k, as: SIMD32<UInt8>.self))
                let ab = 8 * i + 2 * k
                let s0 = widenedSum((raw & 0x0F) &* activations32(a, ab))
                let s1 = widenedSum((raw &>> 4) &* activations32(a, ab + 1))
                sumf += d * Float(sc1) * a.d[ab] * Float(s0) - dmin * Float(m1) * a.s[ab]
                sumf += d * Float(sc2) * a.d[ab + 1] * Float(s1) - dmin * Float(m2) * a.s[ab + 1]
            }
        }
        return sumf
        #endif
    }
}

/// Stores `scale * q - minus` for 32 levels.
@inline(__always)
func storeLevels(_ q: SIMD32<UInt8>, scale: Float, minus: Float, _ y: UnsafeMutablePointer<Float>) {
    let s = SIMD16<Float>(repeating: scale), m = SIMD16<Float>(repeating: minus)
    let lo = SIMD16<Float>(SIMD16<Int32>(truncatingIfNeeded: q.lowHalf))
    let hi = SIMD16<Float>(SIMD16<Int32>(truncatingIfNeeded: q.highHalf))
    UnsafeMutableRawPointer(y).storeBytes(of: s * lo - m, as: SIMD16<Float>.self)
    UnsafeMutableRawPointer(y).storeBytes(of: s * hi - m, toByteOffset: 64, as: SIMD16<Float>.self)
}

// MARK: - Q5_K

enum Q5_K: BlockFormat {
    static var type: GGMLType { .q5_K }

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
                ql += 32; out += 64; scaleIndex += 2
                u1 <<= 2; u2 <<= 2
            }
        }
    }

    static func dequantize(_ x: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>, nb: Int) {
        for i in 0..<nb {
            let b = x + 176 * i
            let d = loadHalf(b, 0)
            let dmin = loadHalf(b, 2)
            let qh = b.loadUnaligned(fromByteOffset: 16, as: SIMD32<UInt8>.self)
            for k in 0..<4 {
                let (sc1, m1) = scaleMinK4(2 * k, b + 4)
                let (sc2, m2) = scaleMinK4(2 * k + 1, b + 4)
                let raw = b.loadUnaligned(fromByteOffset: 48 + 32 * k, as: SIMD32<UInt8>.self)
                let h1 = ((qh &>> UInt8(2 * k)) & 1) &<< 4
                let h2 = ((qh &>> UInt8(2 * k + 1)) & 1) &<< 4
                storeLevels((raw & 0x0F) | h1, scale: d * Float(sc1), minus: dmin * Float(m1), y + 256 * i + 64 * k)
                storeLevels((raw &>> 4) | h2, scale: d * Float(sc2), minus: dmin * Float(m2), y + 256 * i + 64 * k + 32)
            }
        }
    }

    static func dotReference(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> Float {
        var sumf: Float = 0
        for i in 0..<nb {
            let b = x + 176 * i
            let d = loadHalfReference(b, 0)
            let dmin = loadHalfReference(b, 2)
            for j in 0..<8 {
                let (sc, m) = scaleMinK4(j, b + 4)
                let ab = 8 * i + j
                var sumi: Int32 = 0
                for l in 0..<32 {
                    let packed = byte(b, 48 + 32 * (j / 2) + l)
                    let low = j % 2 == 0 ? packed & 0x0F : packed >> 4
                    let high: UInt8 = (byte(b, 16 + l) >> UInt8(j)) & 1
                    sumi += Int32(low | (high << 4)) * Int32(a.qs[32 * ab + l])
                }
                sumf += d * Float(sc) * a.d[ab] * Float(sumi) - dmin * Float(m) * a.s[ab]
            }
        }
        return sumf
    }

    static func dot(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> Float {
        #if LEAP_X86_AVX2
        var acc = _mm256_setzero_ps()
        var mins: Float = 0
        let aq = UnsafeRawPointer(a.qs)
        let m4 = _mm256_set1_epi8(0x0F)
        let bit4 = _mm256_set1_epi8(0x10)
        for i in 0..<nb {
            let b = x + 176 * i
            let d = loadHalf(b, 0)
            let dmin = loadHalf(b, 2)
            let hbits = load256(b, 16)
            var minSum: Float = 0
            for k in 0..<4 {
                let (sc1, m1) = scaleMinK4(2 * k, b + 4)
                let (sc2, m2) = scaleMinK4(2 * k + 1, b + 4)
                let raw = load256(b, 48 + 32 * k)
                let mask1 = _mm256_set1_epi8(Int8(bitPattern: UInt8(1) << UInt8(2 * k)))
                let mask2 = _mm256_set1_epi8(Int8(bitPattern: UInt8(2) << UInt8(2 * k)))
                let h1 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hbits, mask1), mask1), bit4)
                let h2 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hbits, mask2), mask2), bit4)
                let q1 = _mm256_or_si256(_mm256_and_si256(raw, m4), h1)
                let q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), m4), h2)
                let ab = 8 * i + 2 * k
                let p0 = mulSumU8S8(q1, load256(aq, 32 * ab))
                let p1 = mulSumU8S8(q2, load256(aq, 32 * ab + 32))
                acc = _mm256_fmadd_ps(_mm256_set1_ps(d * Float(sc1) * a.d[ab]), _mm256_cvtepi32_ps(p0), acc)
                acc = _mm256_fmadd_ps(_mm256_set1_ps(d * Float(sc2) * a.d[ab + 1]), _mm256_cvtepi32_ps(p1), acc)
                minSum += Float(m1) * a.s[ab] + Float(m2) * a.s[ab + 1]
            }
            mins += dmin * minSum
        }
        return hsum(acc) - mins
        #else
        var sumf: Float = 0
        for i in 0..<nb {
            let b = x + 176 * i
            let d = loadHalf(b, 0)
            let dmin = loadHalf(b, 2)
            let qh = SIMD32<Int16>(truncatingIfNeeded: b.loadUnaligned(fromByteOffset: 16, as: SIMD32<UInt8>.self))
            for k in 0..<4 {
                let (sc1, m1) = scaleMinK4(2 * k, b + 4)
                let (sc2, m2) = scaleMinK4(2 * k + 1, b + 4)
                let raw = SIMD32<Int16>(truncatingIfNeeded: b.loadUnaligned(fromByteOffset: 48 + 32 * k, as: SIMD32<UInt8>.self))
                let h1 = ((qh &>> Int16(2 * k)) & 1) &<< 4
                let h2 = ((qh &>> Int16(2 * k + 1)) & 1) &<< 4
                let ab = 8 * i + 2 * k
                let s0 = widenedSum(((raw & 0x0F) | h1) &* activations32(a, ab))
                let s1 = widenedSum(((raw &>> 4) | h2) &* activations32(a, ab + 1))
                sumf += d * Float(sc1) * a.d[ab] * Float(s0) - dmin * Float(m1) * a.s[ab]
                sumf += d * Float(sc2) * a.d[ab + 1] * Float(s1) - dmin * Float(m2) * a.s[ab + 1]
            }
        }
        return sumf
        #endif
    }
}

// MARK: - Q6_K

enum Q6_K: BlockFormat {
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
                out += 128; ql += 64; qh += 32; sc += 8
            }
        }
    }

    /// The 6-bit levels (0...63) of the 32 values of activation block `t` (0..<4) of half
    /// `n` (0..<2) of the super-block at `b`.
    @inline(__always)
    static func levels(_ b: UnsafeRawPointer, half n: Int, part t: Int) -> SIMD32<UInt8> {
        let ql = b.loadUnaligned(fromByteOffset: 64 * n + 32 * (t & 1), as: SIMD32<UInt8>.self)
        let qh = b.loadUnaligned(fromByteOffset: 128 + 32 * n, as: SIMD32<UInt8>.self)
        let low = t < 2 ? ql & 0x0F : ql &>> 4
        return low | (((qh &>> UInt8(2 * t)) & 3) &<< 4)
    }

    static func dequantize(_ x: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>, nb: Int) {
        for i in 0..<nb {
            let b = x + 210 * i
            let d = loadHalf(b, 208)
            for n in 0..<2 {
                for t in 0..<4 {
                    let q = SIMD32<Int16>(truncatingIfNeeded: levels(b, half: n, part: t)) &- 32
                    let sc0 = Float(Int8(bitPattern: byte(b, 192 + 8 * n + 2 * t)))
                    let sc1 = Float(Int8(bitPattern: byte(b, 192 + 8 * n + 2 * t + 1)))
                    let out = UnsafeMutableRawPointer(y + 256 * i + 128 * n + 32 * t)
                    // Same product order as the reference: (d * sc) * q.
                    out.storeBytes(of: SIMD16<Float>(repeating: d * sc0) * SIMD16<Float>(SIMD16<Int32>(truncatingIfNeeded: q.lowHalf)),
                                   as: SIMD16<Float>.self)
                    out.storeBytes(of: SIMD16<Float>(repeating: d * sc1) * SIMD16<Float>(SIMD16<Int32>(truncatingIfNeeded: q.highHalf)),
                                   toByteOffset: 64, as: SIMD16<Float>.self)
                }
            }
        }
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

    static func dot(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> Float {
        #if LEAP_X86_AVX2
        var acc = _mm256_setzero_ps()
        var offsets = _mm256_setzero_ps()
        let aq = UnsafeRawPointer(a.qs)
        let ad = UnsafeRawPointer(a.d)
        let bsums = UnsafeRawPointer(a.bsums)
        let m4 = _mm256_set1_epi8(0x0F)
        let m2 = _mm256_set1_epi8(0x30)
        for i in 0..<nb {
            let b = x + 210 * i
            let d = loadHalf(b, 208)
            let sc16 = _mm256_cvtepi8_epi16(b.loadUnaligned(fromByteOffset: 192, as: __m128i.self))
            // The -32 offsets of the 8 activation blocks at once: lane k is
            // sc[2k] * bsum[2k] + sc[2k+1] * bsum[2k+1], weighted by da_k.
            let off = _mm256_cvtepi32_ps(_mm256_madd_epi16(sc16, load256(bsums, 32 * i)))
            offsets = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_mul_ps(off, ad.loadUnaligned(fromByteOffset: 32 * i, as: __m256.self)), offsets)
            for n in 0..<2 {
                let l0 = load256(b, 64 * n)
                let l1 = load256(b, 64 * n + 32)
                let h = load256(b, 128 + 32 * n)
                let q0 = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m2))
                let q1 = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m2))
                let q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(h, m2))
                let q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(h, 2), m2))
                let ab = 8 * i + 4 * n
                acc = q6Step(acc, q0, aq, ab, b, 8 * n, d, a)
                acc = q6Step(acc, q1, aq, ab + 1, b, 8 * n + 2, d, a)
                acc = q6Step(acc, q2, aq, ab + 2, b, 8 * n + 4, d, a)
                acc = q6Step(acc, q3, aq, ab + 3, b, 8 * n + 6, d, a)
            }
        }
        return hsum(acc) - 32 * hsum(offsets)
        #else
        var sumf: Float = 0
        for i in 0..<nb {
            let b = x + 210 * i
            let d = loadHalf(b, 208)
            for n in 0..<2 {
                for t in 0..<4 {
                    let ab = 8 * i + 4 * n + t
                    let p = (SIMD32<Int16>(truncatingIfNeeded: levels(b, half: n, part: t)) &- 32) &* activations32(a, ab)
                    let sc0 = Int32(Int8(bitPattern: byte(b, 192 + 8 * n + 2 * t)))
                    let sc1 = Int32(Int8(bitPattern: byte(b, 192 + 8 * n + 2 * t + 1)))
                    let s0 = SIMD16<Int32>(truncatingIfNeeded: p.lowHalf).wrappedSum()
                    let s1 = SIMD16<Int32>(truncatingIfNeeded: p.highHalf).wrappedSum()
                    sumf += d * a.d[ab] * Float(sc0 * s0 + sc1 * s1)
                }
            }
        }
        return sumf
        #endif
    }

    #if LEAP_X86_AVX2
    /// One activation block of Q6_K: levels `q` (0...63) times activations, weighted by the
    /// int8 scales of its two 16-value halves (scale index `s` and `s + 1`).
    @inline(__always)
    static func q6Step(_ acc: __m256, _ q: __m256i, _ aq: UnsafeRawPointer, _ ab: Int,
                       _ b: UnsafeRawPointer, _ s: Int, _ d: Float, _ a: ActivationView) -> __m256 {
        let sc0 = Int16(Int8(bitPattern: byte(b, 192 + s)))
        let sc1 = Int16(Int8(bitPattern: byte(b, 193 + s)))
        let scales = _mm256_set_m128i(_mm_set1_epi16(sc1), _mm_set1_epi16(sc0))
        let p = _mm256_madd_epi16(_mm256_maddubs_epi16(q, load256(aq, 32 * ab)), scales)
        return _mm256_fmadd_ps(_mm256_set1_ps(d * a.d[ab]), _mm256_cvtepi32_ps(p), acc)
    }
    #endif
}
