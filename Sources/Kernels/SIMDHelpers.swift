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
    let index = unsafeBitCast(
        SIMD32<Int8>(
            0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3), to: __m256i.self)
    let bytes = _mm256_shuffle_epi8(v, index)
    let bit = _mm256_set1_epi64x(Int64(bitPattern: 0x8040_2010_0804_0201))
    return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit)
}

/// The 32 floats at `x` as four vectors, and their largest absolute value (the scale of
/// an activation block, 8-bit or 16-bit).
@inline(__always)
func loadBlockOf32(_ x: UnsafePointer<Float>) -> (__m256, __m256, __m256, __m256, Float) {
    let raw = UnsafeRawPointer(x)
    let v0 = raw.loadUnaligned(fromByteOffset: 0, as: __m256.self)
    let v1 = raw.loadUnaligned(fromByteOffset: 32, as: __m256.self)
    let v2 = raw.loadUnaligned(fromByteOffset: 64, as: __m256.self)
    let v3 = raw.loadUnaligned(fromByteOffset: 96, as: __m256.self)
    let signBit = _mm256_set1_ps(-0.0)
    var m = _mm256_max_ps(_mm256_andnot_ps(signBit, v0), _mm256_andnot_ps(signBit, v1))
    m = _mm256_max_ps(m, _mm256_max_ps(_mm256_andnot_ps(signBit, v2), _mm256_andnot_ps(signBit, v3)))
    return (v0, v1, v2, v3, hmax(m))
}

/// Loads 32 bytes.
@inline(__always)
func load256(_ p: UnsafeRawPointer, _ offset: Int = 0) -> __m256i {
    p.loadUnaligned(fromByteOffset: offset, as: __m256i.self)
}

/// Horizontal sum of 8 floats, as ((v0+v1)+(v2+v3)) + ((v4+v5)+(v6+v7)): the same tree
/// as ``transposeSum8f``, so that a row's dot product comes out bit-identical whether
/// it is reduced alone or in a group of 8 (and so matvec results do not depend on how
/// rows are split over threads).
@inline(__always)
func hsum(_ v: __m256) -> Float {
    let h = _mm256_hadd_ps(v, v)  // per 128-bit lane: v0+v1, v2+v3, ...
    let q = _mm256_hadd_ps(h, h)  // per 128-bit lane: (v0+v1)+(v2+v3)
    return q.lowHalf[0] + q.highHalf[0]
}

/// Horizontal sums of eight float vectors at once: lane j of the result is
/// ``hsum(_:)`` of `v[j]`, bit for bit.
@inline(__always)
func transposeSum8f(
    _ v0: __m256, _ v1: __m256, _ v2: __m256, _ v3: __m256,
    _ v4: __m256, _ v5: __m256, _ v6: __m256, _ v7: __m256
) -> __m256 {
    let h0 = _mm256_hadd_ps(_mm256_hadd_ps(v0, v1), _mm256_hadd_ps(v2, v3))
    let h1 = _mm256_hadd_ps(_mm256_hadd_ps(v4, v5), _mm256_hadd_ps(v6, v7))
    // h0: lanes 0-3 the low-half sums of rows 0-3, lanes 4-7 their high-half sums.
    let lo = SIMD8<Float>(lowHalf: h0.lowHalf, highHalf: h1.lowHalf)
    let hi = SIMD8<Float>(lowHalf: h0.highHalf, highHalf: h1.highHalf)
    return lo + hi
}

/// `(value, 0, 0, 0, 0, 0, 0, 0)`.
@inline(__always)
func lane0(_ value: Float) -> __m256 {
    _mm256_setr_ps(value, 0, 0, 0, 0, 0, 0, 0)
}
#endif

#if LEAP_X86_AVX2
/// Converts 32 signed byte levels to floats and stores `Float(q) * scale` (two 16-value
/// halves may have different scales: `scale0` for bytes 0..15, `scale1` for 16..31),
/// then `+ add` when `add` is not nil. Multiplies and adds are separate (not fused), so
/// the result is bit-identical to the scalar reference `Float(q) * d + m`.
@inline(__always)
func storeLevels32(_ q: __m256i, scale0: Float, scale1: Float, add: Float?, _ y: UnsafeMutablePointer<Float>) {
    storeLevels16(_mm256_castsi256_si128(q), scale: scale0, add: add, y)
    storeLevels16(high128(q), scale: scale1, add: add, y + 16)
}

/// The high 128 bits of `v`. (`_mm256_extracti128_si256` is a macro Swift cannot import,
/// and `SIMD32.highHalf` compiled to a call; a dword permute is one instruction.)
@inline(__always)
func high128(_ v: __m256i) -> __m128i {
    _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(4, 5, 6, 7, 4, 5, 6, 7)))
}

/// The largest of 8 floats.
@inline(__always)
func hmax(_ v: __m256) -> Float {
    var m = _mm_max_ps(v.lowHalf, v.highHalf)
    m = _mm_max_ps(m, _mm_movehl_ps(m, m))
    m = _mm_max_ss(m, _mm_movehdup_ps(m))
    return _mm_cvtss_f32(m)
}

@inline(__always)
func storeLevels16(_ x: __m128i, scale: Float, add: Float?, _ y: UnsafeMutablePointer<Float>) {
    let s = _mm256_set1_ps(scale)
    var f0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(x)), s)
    var f1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(x, x))), s)
    if let add {
        let m = _mm256_set1_ps(add)
        f0 = _mm256_add_ps(f0, m)
        f1 = _mm256_add_ps(f1, m)
    }
    let out = UnsafeMutableRawPointer(y)
    out.storeBytes(of: f0, as: __m256.self)
    out.storeBytes(of: f1, toByteOffset: 32, as: __m256.self)
}

/// Horizontal sums of eight Int32x8 vectors: lane j of the result is the sum of the
/// lanes of `p[j]`.
@inline(__always)
func transposeSum8(
    _ p0: __m256i, _ p1: __m256i, _ p2: __m256i, _ p3: __m256i,
    _ p4: __m256i, _ p5: __m256i, _ p6: __m256i, _ p7: __m256i
) -> __m256i {
    let s01 = _mm256_hadd_epi32(p0, p1)
    let s23 = _mm256_hadd_epi32(p2, p3)
    let s45 = _mm256_hadd_epi32(p4, p5)
    let s67 = _mm256_hadd_epi32(p6, p7)
    // Per 128-bit lane: [p0, p1, p2, p3] partial sums (low lane: lanes 0-3 of each p,
    // high lane: lanes 4-7).
    let s0123 = unsafeBitCast(_mm256_hadd_epi32(s01, s23), to: SIMD8<Int32>.self)
    let s4567 = unsafeBitCast(_mm256_hadd_epi32(s45, s67), to: SIMD8<Int32>.self)
    let lo = SIMD8<Int32>(lowHalf: s0123.lowHalf, highHalf: s4567.lowHalf)
    let hi = SIMD8<Int32>(lowHalf: s0123.highHalf, highHalf: s4567.highHalf)
    return unsafeBitCast(lo &+ hi, to: __m256i.self)
}

/// The 8 scales and 8 mins of a Q4_K/Q5_K super-block (12 packed bytes at `q`), as two
/// Int32x8 vectors: the same values as ``scaleMinK4(_:_:)``, computed on 32-bit words.
@inline(__always)
func scalesMinsK4(_ q: UnsafeRawPointer) -> (sc: __m256i, m: __m256i) {
    let w0 = q.loadUnaligned(as: UInt32.self)
    let w1 = q.loadUnaligned(fromByteOffset: 4, as: UInt32.self)
    let w2 = q.loadUnaligned(fromByteOffset: 8, as: UInt32.self)
    // Bytes 0-3: sc[j] = q[j] & 63, m[j] = q[j+4] & 63.
    // Bytes 4-7: sc = low nibble of q[j+8] | top 2 bits of q[j] << 4;
    //            m  = high nibble of q[j+8] | top 2 bits of q[j+4] << 4.
    let scLow = w0 & 0x3F3F_3F3F
    let mLow = w1 & 0x3F3F_3F3F
    let scHigh = (w2 & 0x0F0F_0F0F) | (((w0 >> 6) & 0x0303_0303) << 4)
    let mHigh = ((w2 >> 4) & 0x0F0F_0F0F) | (((w1 >> 6) & 0x0303_0303) << 4)
    let sc = _mm_cvtsi64_si128(Int64(bitPattern: UInt64(scLow) | UInt64(scHigh) << 32))
    let m = _mm_cvtsi64_si128(Int64(bitPattern: UInt64(mLow) | UInt64(mHigh) << 32))
    return (_mm256_cvtepu8_epi32(sc), _mm256_cvtepu8_epi32(m))
}
#endif

#if LEAP_X86_AVX2
/// The fp16 field at `p + offset`, widened and broadcast to 8 lanes (vpbroadcastw from
/// memory + vcvtph2ps: no scalar round trip, and no merge into a stale register, which a
/// scalar `_cvtsh_ss` compiles to and which chained each block to the previous one).
@inline(__always)
func broadcastHalf(_ p: UnsafeRawPointer, _ offset: Int) -> __m256 {
    _mm256_cvtph_ps(_mm_set1_epi16(p.loadUnaligned(fromByteOffset: offset, as: Int16.self)))
}

/// `p[i]` broadcast to 8 lanes.
@inline(__always)
func broadcastFloat(_ p: UnsafePointer<Float>, _ i: Int) -> __m256 {
    _mm256_set1_ps(p[i])
}
#endif

#if LEAP_X86_AVX2
// Two 32-value blocks at once. The nibbles of blocks i and i+1 are loaded into one
// register and split into low and high nibbles, so `lo` holds values 0..15 of both blocks
// and `hi` values 16..31; the activations are gathered to match. After the products,
// Int32 lanes 0-3 belong to block i and lanes 4-7 to block i+1, which is the layout of the
// `d4`/`s4` activation scales and of `halfPair`. Half the instructions of one block at a
// time for the nibble formats.

/// Low and high nibbles of the 16-byte `qs` of two blocks at `p + o0` and `p + o1`.
@inline(__always)
func unpackNibblePair(_ p: UnsafeRawPointer, _ o0: Int, _ o1: Int) -> (lo: __m256i, hi: __m256i) {
    let t = _mm256_set_m128i(
        p.loadUnaligned(fromByteOffset: o1, as: __m128i.self),
        p.loadUnaligned(fromByteOffset: o0, as: __m128i.self))
    let m4 = _mm256_set1_epi8(0x0F)
    return (_mm256_and_si256(t, m4), _mm256_and_si256(_mm256_srli_epi16(t, 4), m4))
}

/// Activation blocks i and i+1 arranged like `unpackNibblePair`'s result.
@inline(__always)
func activationPair(_ aq: UnsafeRawPointer, _ i: Int) -> (lo: __m256i, hi: __m256i) {
    let lo = _mm256_set_m128i(
        aq.loadUnaligned(fromByteOffset: 32 * i + 32, as: __m128i.self),
        aq.loadUnaligned(fromByteOffset: 32 * i, as: __m128i.self))
    let hi = _mm256_set_m128i(
        aq.loadUnaligned(fromByteOffset: 32 * i + 48, as: __m128i.self),
        aq.loadUnaligned(fromByteOffset: 32 * i + 16, as: __m128i.self))
    return (lo, hi)
}

/// The fp16 fields at `p + o0` and `p + o1` as floats: lanes 0-3 the first, 4-7 the second.
@inline(__always)
func halfPair(_ p: UnsafeRawPointer, _ o0: Int, _ o1: Int) -> __m256 {
    let h0 = _mm_set1_epi16(p.loadUnaligned(fromByteOffset: o0, as: Int16.self))
    let h1 = _mm_set1_epi16(p.loadUnaligned(fromByteOffset: o1, as: Int16.self))
    return _mm256_cvtph_ps(_mm_unpacklo_epi64(h0, h1))
}

/// `d4`/`s4`-style scales of blocks i and i+1 (lanes 0-3 and 4-7).
@inline(__always)
func scalePair(_ p: UnsafePointer<Float>, _ i: Int) -> __m256 {
    UnsafeRawPointer(p).loadUnaligned(fromByteOffset: 16 * i, as: __m256.self)
}

/// The Q5 fifth bits of two blocks (`qh0`, `qh1`) as 0x10 bytes, arranged like
/// `unpackNibblePair`: bits 0..15 of each word go with `lo`, bits 16..31 with `hi`.
@inline(__always)
func fifthBitPair(_ qh0: UInt32, _ qh1: UInt32) -> (lo: __m256i, hi: __m256i) {
    let lo = (qh0 & 0xFFFF) | (qh1 << 16)
    let hi = (qh0 >> 16) | (qh1 & 0xFFFF_0000)
    return (fifthBitBytes(lo), fifthBitBytes(hi))
}

/// The 32 bits of `bits` as bytes: 0x10 where the bit is set, 0 elsewhere (the fifth bit
/// of Q5 levels). With AVX-512 BW/VL, one masked move from a mask register; otherwise a
/// byte shuffle, compare and mask.
@inline(__always)
func fifthBitBytes(_ bits: UInt32) -> __m256i {
    #if LEAP_X86_AVX512VNNI
    return _mm256_maskz_mov_epi8(bits, _mm256_set1_epi8(0x10))
    #else
    return _mm256_and_si256(expandBitsToBytes(bits), _mm256_set1_epi8(0x10))
    #endif
}
#endif
