// Portable dot products: Swift SIMD vectors of 16 bytes with integer sums per block, used
// when the build has no x86 fast path (LEAP_REF_PORTABLE=1, arm64, ...). They compile to
// the target's baseline SIMD (SSE2, NEON) without any flags.
//
// Each block is unpacked into levels of 16 bytes, then multiplied with the activations in
// `widenedDot`: the even and the odd bytes sign-extended to 16 bits, their 16-bit products
// (exact: levels and activations are at most 128 in magnitude), and each pair of products
// added in 32 bits: a widening multiply-add, spelled in same-width operations and
// reinterpretations (`unsafeBitCast`). On SSE2 that is `pmullw` and shifts; LLVM does not
// fuse it into `pmaddwd`. Two other spellings were tried (docs/performance.md, "The
// portable build against llama.cpp's baseline build"): Swift's SIMD conversions between
// widths compile to calls LLVM does not inline; and scalar loops in the shape of
// `pmaddwd` (four Int32 lanes, each adding the products of two neighbours) did become
// `pmaddwd`, but only in some of the functions LLVM inlined them into, and Q8_0's was
// slower than this. x86 has no byte shifts, so bytes are shifted as 16-bit lanes and
// masked (`shiftRight`). The sums are exact integers, so the lane order changes nothing.
//
// Same formulas as the AVX2 kernels (see LegacyFormats.swift, KQuantFormats.swift); the
// nibble formats and Q4_K/Q5_K share one body each (`NibbleBlockFormat`, `ScaleMinKFormat`).

import GGUF

/// 16 bytes at `p + offset`.
@inline(__always)
func load16(_ p: UnsafeRawPointer, _ offset: Int = 0) -> SIMD16<UInt8> {
    p.loadUnaligned(fromByteOffset: offset, as: SIMD16<UInt8>.self)
}

/// Each byte shifted right by `s` (as 16-bit lanes, then masked: SSE2 has no byte shifts).
@inline(__always)
func shiftRight(_ v: SIMD16<UInt8>, _ s: UInt8) -> SIMD16<UInt8> {
    unsafeBitCast(unsafeBitCast(v, to: SIMD8<UInt16>.self) &>> UInt16(s), to: SIMD16<UInt8>.self) & (0xFF &>> s)
}

/// Each byte shifted left by `s` (as 16-bit lanes, then masked).
@inline(__always)
func shiftLeft(_ v: SIMD16<UInt8>, _ s: UInt8) -> SIMD16<UInt8> {
    unsafeBitCast(unsafeBitCast(v, to: SIMD8<UInt16>.self) &<< UInt16(s), to: SIMD16<UInt8>.self) & (0xFF &<< s)
}

/// Four Int32 lanes adding up to Σ `w[j] * a[j]` over 16 signed bytes, each at most 128
/// in magnitude (so that each product is exact in 16 bits): the products of the even and
/// of the odd bytes in 16-bit lanes, then each pair of neighbouring products added in
/// 32-bit lanes. `unsignedLevels`: the weights are levels 0-127, whose even bytes are
/// masked rather than sign-extended (with a sign extension of values it knows to be
/// small, LLVM's x86 instruction selection moved them through general registers).
@inline(__always)
func widenedDot(_ w: SIMD16<UInt8>, _ a: SIMD16<UInt8>, unsignedLevels: Bool = false) -> SIMD4<Int32> {
    let w16 = unsafeBitCast(w, to: SIMD8<Int16>.self), a16 = unsafeBitCast(a, to: SIMD8<Int16>.self)
    // Sign-extended even bytes: (x << 8) >> 8; odd bytes: x >> 8 (arithmetic shifts).
    let logicalOddW = unsafeBitCast(unsafeBitCast(w, to: SIMD8<UInt16>.self) &>> 8, to: SIMD8<Int16>.self)
    let evenW = unsignedLevels ? w16 & 0xFF : (w16 &<< 8) &>> 8
    let oddW = unsignedLevels ? logicalOddW : w16 &>> 8
    let even = unsafeBitCast(evenW &* ((a16 &<< 8) &>> 8), to: SIMD4<Int32>.self)
    let odd = unsafeBitCast(oddW &* (a16 &>> 8), to: SIMD4<Int32>.self)
    return (((even &<< 16) &>> 16) &+ (even &>> 16)) &+ (((odd &<< 16) &>> 16) &+ (odd &>> 16))
}

/// 16 for each of 16 values whose bit is set in `bits`: bit `j` of the 16 bits.
@inline(__always)
func fifthBits(_ bits: UInt32) -> SIMD16<UInt8> {
    // Byte j of the vector is byte j / 8 of `bits`; lane j tests bit j % 8 of it.
    let spread = SIMD2<UInt64>(UInt64(bits & 0xFF) &* 0x0101_0101_0101_0101, UInt64((bits >> 8) & 0xFF) &* 0x0101_0101_0101_0101)
    let bit = SIMD16<UInt8>(1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128)
    let set = (unsafeBitCast(spread, to: SIMD16<UInt8>.self) & bit) .== bit
    // A mask's lanes are all ones or zero.
    return unsafeBitCast(set, to: SIMD16<UInt8>.self) & 16
}

extension Q8_0 {
    static func dotPortable(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> Float {
        // Block by block, `sumf += sum · (d·da)`: the order Q8_0SumTests holds portable builds to.
        var sumf: Float = 0
        for i in 0..<nb {
            let b = x + 34 * i
            let q = UnsafeRawPointer(a.qs + 32 * i)
            let sum = (widenedDot(load16(b, 2), load16(q)) &+ widenedDot(load16(b, 18), load16(q, 16))).wrappedSum()
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
            let qs = load16(b, qsOffset)
            var low = qs & 0x0F, high = shiftRight(qs, 4)
            if hasFifthBit {
                let qh = b.loadUnaligned(fromByteOffset: qhOffset, as: UInt32.self)
                low |= fifthBits(qh)
                high |= fifthBits(qh >> 16)
            }
            let q = UnsafeRawPointer(a.qs + 32 * i)
            let sums = widenedDot(low, load16(q), unsignedLevels: true) &+ widenedDot(high, load16(q, 16), unsignedLevels: true)
            let sum = sums.wrappedSum()
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
            var blockSum: Float = 0, minSum: Float = 0
            for k in 0..<4 {
                let (sc1, m1) = scaleMinK4(2 * k, b + 4)
                let (sc2, m2) = scaleMinK4(2 * k + 1, b + 4)
                let ab = 8 * i + 2 * k
                let q0 = UnsafeRawPointer(a.qs + 32 * ab), q1 = q0 + 32
                var v0 = SIMD4<Int32>(), v1 = SIMD4<Int32>()
                for h in 0..<2 {
                    let qs = load16(b, qsOffset + 32 * k + 16 * h)
                    var low = qs & 0x0F, high = shiftRight(qs, 4)
                    if hasFifthBit {
                        let qh = load16(b, 16 + 16 * h)
                        low |= shiftLeft(shiftRight(qh, UInt8(2 * k)) & 1, 4)
                        high |= shiftLeft(shiftRight(qh, UInt8(2 * k + 1)) & 1, 4)
                    }
                    v0 &+= widenedDot(low, load16(q0, 16 * h), unsignedLevels: true)
                    v1 &+= widenedDot(high, load16(q1, 16 * h), unsignedLevels: true)
                }
                let s0 = v0.wrappedSum(), s1 = v1.wrappedSum()
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
                for t in 0..<4 {
                    let ab = 8 * i + 4 * n + t
                    let q = UnsafeRawPointer(a.qs + 32 * ab)
                    let lowShift = UInt8(t < 2 ? 0 : 4), highShift = UInt8(2 * t)
                    // Values 0-15 and 16-31 of the 32: s0 and s1.
                    var sums = InlineArray<2, Int32>(repeating: 0)
                    for h in 0..<2 {
                        let low = shiftRight(load16(b, 64 * n + 32 * (t & 1) + 16 * h), lowShift) & 0x0F
                        let high = shiftLeft(shiftRight(load16(b, 128 + 32 * n + 16 * h), highShift) & 3, 4)
                        sums[h] = widenedDot((low | high) &- 32, load16(q, 16 * h)).wrappedSum()
                    }
                    let g = 8 * n + 2 * t
                    blockSum += a.d[ab] * Float(Int32(sc[g]) &* sums[0] &+ Int32(sc[g + 1]) &* sums[1])
                }
            }
            sumf += d * blockSum
        }
        return sumf
    }
}
