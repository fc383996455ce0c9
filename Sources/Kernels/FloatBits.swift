// Conversions between Float and the 16-bit float formats ggml stores (IEEE half, bfloat16).
//
// The software conversions below are the reference: bit-exact, round-to-nearest-even, like
// ggml's (and numpy's) conversions. They are written with integer operations only, so they
// work on every platform, including macOS x86-64 where Swift's `Float16` is unavailable.
// Where the CPU has a conversion instruction (F16C on x86), the fast entry points use it;
// the tests check hardware == software on every half value and on edge-case floats.

#if LEAP_X86_AVX2
import _Builtin_intrinsics.intel
#endif

/// Bit-level conversions between `Float` and IEEE half (binary16) or bfloat16 values.
///
/// Half and bfloat16 values are passed as their raw `UInt16` bit patterns, as they are
/// stored in GGUF files (little-endian).
public enum FloatBits {
    /// Converts an IEEE half bit pattern to a Float (exact: every half is a Float).
    /// Uses F16C when the build enables it.
    @inline(__always)
    public static func halfToFloat(_ h: UInt16) -> Float {
        #if LEAP_X86_AVX2
        // Through a GPR -> vmovd (which zeroes the vector register) rather than
        // `_cvtsh_ss`, whose vpinsrw merges into a stale register: that false dependency
        // chained each block's scale to the previous block's accumulator.
        return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(Int32(h))))
        #elseif arch(arm64)
        return Float(Float16(bitPattern: h))
        #else
        return halfToFloatArithmetic(h)
        #endif
    }

    /// Half to Float with integer and float arithmetic and selects, no branches and no
    /// table: the conversion of builds without a conversion instruction (portable x86-64).
    /// A 256 KiB table (ggml's `ggml_table_f32_f16`, which leap-ref used before) costs a
    /// load that may miss in cache, and its lazily initialized global put a call in every
    /// block of the portable dot products, which kept LLVM from vectorizing some of them.
    /// Equal to the reference on every half value (the tests check all 65,536).
    @inline(__always)
    static func halfToFloatArithmetic(_ h: UInt16) -> Float {
        let sign = UInt32(h & 0x8000) << 16
        // Exponent and mantissa in a Float's places; the exponent rebiased from 15 to 127.
        let shifted = UInt32(h & 0x7FFF) << 13
        let exponent = shifted & 0x0F80_0000
        let rebiased = shifted &+ 0x3800_0000
        // Infinity and NaN: the exponent all ones (rebias once more, to 255).
        let special = exponent == 0x0F80_0000 ? rebiased &+ 0x3800_0000 : rebiased
        // Zero and subnormals: 2^-14 * (1 + m / 1024) - 2^-14 = m * 2^-24, exact.
        let subnormal = Float(bitPattern: rebiased &+ 0x0080_0000) - Float(bitPattern: 0x3880_0000)
        let magnitude = exponent == 0 ? subnormal.bitPattern : special
        return Float(bitPattern: sign | magnitude)
    }

    /// Converts a Float to the nearest IEEE half bit pattern (round to nearest, ties to even;
    /// overflow gives infinity; NaN stays NaN with its sign and the quiet bit set).
    @inline(__always)
    public static func floatToHalf(_ f: Float) -> UInt16 {
        // The reference is cheap enough: quantizers convert to half once per block.
        floatToHalfReference(f)
    }

    /// Software half -> Float conversion (the reference).
    public static func halfToFloatReference(_ h: UInt16) -> Float {
        let sign = UInt32(h & 0x8000) << 16
        let exponent = UInt32(h >> 10) & 0x1F
        let mantissa = UInt32(h & 0x3FF)
        if exponent == 0x1F {
            // Infinity or NaN: keep the payload in the top mantissa bits.
            return Float(bitPattern: sign | 0x7F80_0000 | (mantissa << 13))
        }
        if exponent == 0 {
            // Zero or subnormal: value = mantissa * 2^-24, exact in Float.
            let magnitude = Float(mantissa) * Float(bitPattern: 0x3380_0000)  // 2^-24
            return Float(bitPattern: sign | magnitude.bitPattern)
        }
        // Normal: rebias the exponent from 15 to 127.
        return Float(bitPattern: sign | ((exponent + 112) << 23) | (mantissa << 13))
    }

    /// Software Float -> half conversion (the reference), round to nearest, ties to even.
    public static func floatToHalfReference(_ f: Float) -> UInt16 {
        let bits = f.bitPattern
        let sign = UInt16(truncatingIfNeeded: (bits >> 16) & 0x8000)
        let magnitude = bits & 0x7FFF_FFFF
        if magnitude > 0x7F80_0000 {
            // NaN: quiet it and keep the top 9 payload bits (as F16C does).
            return sign | 0x7E00 | UInt16(truncatingIfNeeded: (magnitude >> 13) & 0x1FF)
        }
        // Exponent rebiased for half; values of 2^16 and more (and infinity) overflow.
        let exponent = Int(magnitude >> 23) - 127 + 15
        if exponent >= 31 { return sign | 0x7C00 }
        if exponent <= 0 {
            // The result is a half subnormal (or zero, or rounds up to the smallest normal).
            // In units of 2^-24 the value is mantissa24 >> (14 - exponent).
            let shift = 14 - exponent
            if shift > 24 { return sign }  // below half of the smallest subnormal
            let mantissa = (magnitude & 0x7F_FFFF) | 0x80_0000
            return sign | UInt16(truncatingIfNeeded: shiftRightRoundingToEven(mantissa, by: UInt32(shift)))
        }
        // Normal: 10 mantissa bits kept, 13 rounded off; a carry may bump the exponent, up
        // to 0x7C00 (infinity), which is the right result for values in [65520, 65536).
        var h = UInt32(exponent) << 10 | ((magnitude >> 13) & 0x3FF)
        let rest = magnitude & 0x1FFF
        if rest > 0x1000 || (rest == 0x1000 && (h & 1) == 1) { h += 1 }
        return sign | UInt16(truncatingIfNeeded: h)
    }

    @inline(__always)
    static func shiftRightRoundingToEven(_ value: UInt32, by shift: UInt32) -> UInt32 {
        let quotient = value >> shift
        let rest = value & ((1 << shift) - 1)
        let half: UInt32 = 1 << (shift - 1)
        if rest > half || (rest == half && (quotient & 1) == 1) { return quotient + 1 }
        return quotient
    }

    /// Converts a bfloat16 bit pattern to a Float (exact: the top 16 bits of a Float).
    @inline(__always)
    public static func bf16ToFloat(_ b: UInt16) -> Float {
        Float(bitPattern: UInt32(b) << 16)
    }

    /// Converts a Float to bfloat16 as ggml does (`ggml_compute_fp32_to_bf16`): round to
    /// nearest even; NaN is forced quiet (bit 6 of the result set), keeping the sign.
    @inline(__always)
    public static func floatToBF16(_ f: Float) -> UInt16 {
        let u = f.bitPattern
        if (u & 0x7FFF_FFFF) > 0x7F80_0000 {
            return UInt16(truncatingIfNeeded: (u >> 16) | 64)
        }
        // Adding 0x7FFF plus the lowest kept bit rounds ties to even; the carry may run
        // into the exponent (correctly giving infinity for the largest finite values).
        return UInt16(truncatingIfNeeded: (UInt64(u) + 0x7FFF + UInt64((u >> 16) & 1)) >> 16)
    }
}
