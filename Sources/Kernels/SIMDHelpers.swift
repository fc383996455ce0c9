// Small x86 building blocks shared by the fast dot products. Compiled only when the build
// enables AVX2/FMA/F16C (LEAP_X86_AVX2); VNNI variants when LEAP_X86_AVX512VNNI is set.

#if LEAP_X86_AVX2
import _Builtin_intrinsics.intel

/// Sums of products of 32 unsigned bytes `u` with 32 signed bytes `s`, four at a time:
/// 8 Int32 lanes, lane k = sum of bytes 4k..4k+3. Requires u <= 255 and no 16-bit
/// saturation on the AVX2 path, i.e. u * |s| pairs below 32768: callers keep u <= 127
/// (the sign trick) or u <= 63 (4-, 5- and 6-bit weights).
@inline(__always)
func mulSumU8S8(_ u: __m256i, _ s: __m256i) -> __m256i {
    #if LEAP_X86_AVX512VNNI
    // vpdpbusd; the all-ones mask makes LLVM emit the unmasked instruction.
    return _mm256_mask_dpbusd_epi32(_mm256_setzero_si256(), 0xFF, u, s)
    #else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))
    #endif
}

/// Accumulating form of ``mulSumU8S8(_:_:)``: `acc + mulSum(u, s)`.
@inline(__always)
func mulSumU8S8(_ acc: __m256i, _ u: __m256i, _ s: __m256i) -> __m256i {
    #if LEAP_X86_AVX512VNNI
    return _mm256_mask_dpbusd_epi32(acc, 0xFF, u, s)
    #else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)))
    #endif
}

/// Loads 16 bytes of packed nibbles at `p + offset` and spreads them over 32 bytes: bytes
/// 0..15 get the low nibbles, bytes 16..31 the high nibbles (the order of ggml's 32-value
/// blocks, where value j is in the low nibble of qs[j] and value j+16 in the high one).
@inline(__always)
func unpackNibbles16(_ p: UnsafeRawPointer, _ offset: Int) -> __m256i {
    let tmp = p.loadUnaligned(fromByteOffset: offset, as: __m128i.self)
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(tmp, 4), tmp), _mm256_set1_epi8(0x0F))
}

/// Turns the 32 bits of `bits` into 32 bytes: byte j is 0xFF when bit j is set, else 0.
@inline(__always)
func expandBitsToBytes(_ bits: UInt32) -> __m256i {
    let v = _mm256_set1_epi32(Int32(bitPattern: bits))
    // Byte j takes byte j/8 of the 32-bit word (shuffle indices are per 128-bit lane, and
    // every lane holds the word four times).
    let index = unsafeBitCast(SIMD32<Int8>(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                           2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3), to: __m256i.self)
    let bytes = _mm256_shuffle_epi8(v, index)
    let bit = _mm256_set1_epi64x(Int64(bitPattern: 0x8040_2010_0804_0201))
    return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit)
}

/// Loads 32 bytes.
@inline(__always)
func load256(_ p: UnsafeRawPointer, _ offset: Int = 0) -> __m256i {
    p.loadUnaligned(fromByteOffset: offset, as: __m256i.self)
}

/// Horizontal sum of 8 floats (halving: 4 + 2 + 1 additions).
@inline(__always)
func hsum(_ v: __m256) -> Float {
    let s4 = v.lowHalf + v.highHalf
    let s2 = s4.lowHalf + s4.highHalf
    return s2[0] + s2[1]
}
#endif
