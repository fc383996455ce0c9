// Portable dot products: plain scalar loops over each block with integer accumulation,
// used when the build has no x86 fast path (LEAP_REF_PORTABLE=1, arm64, ...). They are
// written for the optimizer (one Int32 sum per block, no per-value conversions), and
// LLVM vectorizes their inner loops for the target's baseline SIMD (SSE2, NEON).
// Swift's generic SIMD types were tried first and were 10-100x slower here: conversions
// between vector widths were scalarized.
//
// Same formulas as the AVX2 kernels (see LegacyFormats.swift, KQuantFormats.swift); the
// nibble formats and Q4_K/Q5_K share one body each (`NibbleBlockFormat`, `ScaleMinKFormat`).

import GGUF

@inline(__always)
func nibbleDot(_ qs: UnsafePointer<UInt8>, _ a: UnsafePointer<Int8>) -> Int32 {
    var sum: Int32 = 0
    for j in 0..<16 {
        sum &+= Int32(qs[j] & 0x0F) &* Int32(a[j]) &+ Int32(qs[j] >> 4) &* Int32(a[j + 16])
    }
    return sum
}

@inline(__always)
func fiveBitDot(_ qs: UnsafePointer<UInt8>, _ qh: UInt32, _ a: UnsafePointer<Int8>) -> Int32 {
    var sum: Int32 = 0
    for j in 0..<16 {
        let h0 = Int32(truncatingIfNeeded: (qh >> UInt32(j)) & 1) << 4
        let h1 = Int32(truncatingIfNeeded: (qh >> UInt32(j + 16)) & 1) << 4
        sum &+= (Int32(qs[j] & 0x0F) | h0) &* Int32(a[j]) &+ (Int32(qs[j] >> 4) | h1) &* Int32(a[j + 16])
    }
    return sum
}

extension Q8_0 {
    static func dotPortable(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> Float {
        var sumf: Float = 0
        for i in 0..<nb {
            let b = x + 34 * i
            let w = (b + 2).assumingMemoryBound(to: Int8.self)
            let q = a.qs + 32 * i
            var sum: Int32 = 0
            for j in 0..<32 { sum &+= Int32(w[j]) &* Int32(q[j]) }
            sumf += Float(sum) * (loadHalf(b, 0) * a.d[i])
        }
        return sumf
    }
}

extension NibbleBlockFormat {
    static func dotPortable(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> Float {
        var sumf: Float = 0, offsetSum: Float = 0
        for i in 0..<nb {
            let b = x + blockBytes * i
            let qs = (b + qsOffset).assumingMemoryBound(to: UInt8.self)
            let sum =
                hasFifthBit
                ? fiveBitDot(qs, b.loadUnaligned(fromByteOffset: qhOffset, as: UInt32.self), a.qs + 32 * i)
                : nibbleDot(qs, a.qs + 32 * i)
            let d = loadHalf(b, 0)
            if hasMin {
                sumf += Float(sum) * (d * a.d[i]) + loadHalf(b, 2) * a.s[i]
            } else {
                sumf += Float(sum) * (d * a.d[i])
                offsetSum += d * a.s[i]
            }
        }
        return hasMin ? sumf : sumf - offset * offsetSum
    }
}

extension ScaleMinKFormat {
    static func dotPortable(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> Float {
        var sumf: Float = 0
        for i in 0..<nb {
            let b = x + blockBytes * i
            let d = loadHalf(b, 0), dmin = loadHalf(b, 2)
            let qh = (b + 16).assumingMemoryBound(to: UInt8.self)
            let qs = (b + qsOffset).assumingMemoryBound(to: UInt8.self)
            var blockSum: Float = 0, minSum: Float = 0
            for k in 0..<4 {
                let (sc1, m1) = scaleMinK4(2 * k, b + 4)
                let (sc2, m2) = scaleMinK4(2 * k + 1, b + 4)
                let ab = 8 * i + 2 * k
                let q0 = a.qs + 32 * ab, q1 = q0 + 32
                let shift1 = UInt8(2 * k), shift2 = UInt8(2 * k + 1)
                var s0: Int32 = 0, s1: Int32 = 0
                for l in 0..<32 {
                    var low = Int32(qs[32 * k + l] & 0x0F), high = Int32(qs[32 * k + l] >> 4)
                    if hasFifthBit {
                        low |= Int32((qh[l] >> shift1) & 1) << 4
                        high |= Int32((qh[l] >> shift2) & 1) << 4
                    }
                    s0 &+= low &* Int32(q0[l])
                    s1 &+= high &* Int32(q1[l])
                }
                blockSum += Float(sc1) * a.d[ab] * Float(s0) + Float(sc2) * a.d[ab + 1] * Float(s1)
                minSum += Float(m1) * a.s[ab] + Float(m2) * a.s[ab + 1]
            }
            sumf += d * blockSum - dmin * minSum
        }
        return sumf
    }
}

extension Q6_K {
    static func dotPortable(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> Float {
        var sumf: Float = 0
        for i in 0..<nb {
            let b = x + 210 * i
            let d = loadHalf(b, 208)
            let sc = (b + 192).assumingMemoryBound(to: Int8.self)
            var blockSum: Float = 0
            for n in 0..<2 {
                let ql = (b + 64 * n).assumingMemoryBound(to: UInt8.self)
                let qh = (b + 128 + 32 * n).assumingMemoryBound(to: UInt8.self)
                for t in 0..<4 {
                    let ab = 8 * i + 4 * n + t
                    let q = a.qs + 32 * ab
                    let lowBase = ql + 32 * (t & 1)
                    let lowShift = UInt8(t < 2 ? 0 : 4), highShift = UInt8(2 * t)
                    var s0: Int32 = 0, s1: Int32 = 0
                    for l in 0..<16 {
                        let v = Int32((lowBase[l] >> lowShift) & 0x0F) | Int32((qh[l] >> highShift) & 3) << 4
                        s0 &+= (v - 32) &* Int32(q[l])
                    }
                    for l in 16..<32 {
                        let v = Int32((lowBase[l] >> lowShift) & 0x0F) | Int32((qh[l] >> highShift) & 3) << 4
                        s1 &+= (v - 32) &* Int32(q[l])
                    }
                    let g = 8 * n + 2 * t
                    blockSum += a.d[ab] * Float(Int32(sc[g]) &* s0 &+ Int32(sc[g + 1]) &* s1)
                }
            }
            sumf += d * blockSum
        }
        return sumf
    }
}
