// Decode's interleaved layout for Q4_K: InterleavedRows.swift's groups of 8 rows, with a
// chunk per super-block instead of per pair of blocks.
//
// Why. Q4_K is most of a Q4_K_M file (every matrix but ffn_down in some layers, attn_v and
// the output head). Its row-major kernel (KQuantFormats.swift) unpacks one row's
// super-block at a time: the 12 bytes of packed 6-bit scales and mins, 8 multiply-adds,
// then a transposition of 8 sub-block sums, about 70 vector instructions per 144 bytes.
// That made Q4_K_M decode compute-bound on this project's machine whenever the memory was
// fast (35 GB/s of weights against a 52 GB/s read ceiling measured beside it). Interleaved,
// the 8 rows' sums come out in the 8 lanes of one register, the scales apply as vectors and
// nothing is transposed: about as many instructions per byte as Q4_0's interleaved kernel.
//
// The layout. Group g holds rows 8g..<8g+8; its chunk s holds super-block s of the 8 rows:
//
//   d        16 bytes   the fp16 d of rows 0...7
//   dmin     16 bytes   the fp16 dmin of rows 0...7
//   sc       64 bytes   byte 8j + r: the 6-bit scale of row r's sub-block j
//   m        64 bytes   byte 8j + r: the 6-bit min of row r's sub-block j
//   levels   4 x 256    pair k (sub-blocks 2k and 2k+1): vectors of 32 bytes; in vector j,
//                       bytes 4r..<4r+4 are row r's qs[32k+4j..<32k+4j+4]
//
// 1,184 bytes per chunk against the rows' 8 x 144: the scales and mins take a byte each
// instead of 12 packed bytes per row, so that no kernel unpacks them. As stored, the low
// nibbles of qs[32k..<32k+32] are sub-block 2k's values and the high nibbles sub-block
// 2k+1's, so vector j of pair k holds values 4j..<4j+4 of both sub-blocks, and
// `vpdpbusd(levels & 0x0F, broadcast(activations of block 2k, word j))` (the high nibbles
// with block 2k+1's word j) puts row r's products in the 32-bit lane r.
//
// Numbers. Per (row, sub-block) the integer sum is exact. Each row's float sums run over
// the sub-blocks in order in one lane: acc += (d * sc) * da * sum and mins += (dmin * m) *
// sa, and the product is acc - mins; the row-major kernel adds the same terms in another
// order, so the results differ in float rounding only. The prompt's integer matmul packs
// from this copy the bytes it packs from the stored rows (`d * sc`, `-(dmin * m)` as
// floats, the same products), and dequantized rows go through the stored format.

import GGUF

#if LEAP_X86_AVX2
import _Builtin_intrinsics.intel
#endif

extension InterleavedRows {
    /// Bytes of a super-block chunk's d, dmin, scales and mins (see the file header).
    static let superBlockScaleBytes = 160
    /// Bytes of one pair of sub-blocks' levels for the 8 rows.
    static let superBlockPairBytes = 256

    /// Super-blocks per row.
    var superBlocks: Int { nb / 8 }

    /// Writes group `g` of the Q4_K `matrix` as chunks of one super-block.
    func repackSuperBlocks(_ matrix: WeightMatrix, group g: Int) {
        let dst = storage + g * groupBytes
        for r in 0..<Self.groupRows {
            let row = matrix.row(Self.groupRows * g + r)
            for s in 0..<superBlocks {
                let block = row + 144 * s, chunk = dst + chunkBytes * s
                chunk.storeBytes(of: block.loadUnaligned(as: UInt16.self), toByteOffset: 2 * r, as: UInt16.self)
                chunk.storeBytes(of: block.loadUnaligned(fromByteOffset: 2, as: UInt16.self), toByteOffset: 16 + 2 * r, as: UInt16.self)
                for j in 0..<8 {
                    let (sc, m) = scaleMinK4(j, block + 4)
                    chunk.storeBytes(of: sc, toByteOffset: 32 + 8 * j + r, as: UInt8.self)
                    chunk.storeBytes(of: m, toByteOffset: 96 + 8 * j + r, as: UInt8.self)
                }
                for k in 0..<4 {
                    for j in 0..<8 {
                        let word = block.loadUnaligned(fromByteOffset: 16 + 32 * k + 4 * j, as: UInt32.self)
                        chunk.storeBytes(of: word, toByteOffset: scaleBytes + levelBytes * k + 32 * j + 4 * r, as: UInt32.self)
                    }
                }
            }
        }
    }

    /// `copyRow` for Q4_K: row `r`'s super-blocks as stored, the 12 bytes of scales and
    /// mins packed back as ggml packs them (every bit of the 12 bytes is one of the 16
    /// six-bit values, so the stored bytes come back exactly).
    func copySuperBlockRow(_ r: Int, into dst: UnsafeMutableRawPointer) {
        let src = group(r / Self.groupRows), lane = r % Self.groupRows
        for s in 0..<superBlocks {
            let chunk = src + chunkBytes * s, block = dst + 144 * s
            block.storeBytes(of: chunk.loadUnaligned(fromByteOffset: 2 * lane, as: UInt16.self), as: UInt16.self)
            block.storeBytes(of: chunk.loadUnaligned(fromByteOffset: 16 + 2 * lane, as: UInt16.self), toByteOffset: 2, as: UInt16.self)
            func sc(_ j: Int) -> UInt8 { chunk.load(fromByteOffset: 32 + 8 * j + lane, as: UInt8.self) }
            func m(_ j: Int) -> UInt8 { chunk.load(fromByteOffset: 96 + 8 * j + lane, as: UInt8.self) }
            for j in 0..<4 {
                // The inverse of `scaleMinK4`: bytes j and j+4 hold sub-block j's scale and min
                // in their low 6 bits and the top 2 bits of sub-block j+4's; byte j+8 holds the
                // low nibbles of sub-block j+4's scale and min.
                block.storeBytes(of: sc(j) | (sc(j + 4) >> 4) << 6, toByteOffset: 4 + j, as: UInt8.self)
                block.storeBytes(of: m(j) | (m(j + 4) >> 4) << 6, toByteOffset: 8 + j, as: UInt8.self)
                block.storeBytes(of: (sc(j + 4) & 0x0F) | (m(j + 4) & 0x0F) << 4, toByteOffset: 12 + j, as: UInt8.self)
            }
            for k in 0..<4 {
                for j in 0..<8 {
                    let word = chunk.loadUnaligned(fromByteOffset: scaleBytes + levelBytes * k + 32 * j + 4 * lane, as: UInt32.self)
                    block.storeBytes(of: word, toByteOffset: 16 + 32 * k + 4 * j, as: UInt32.self)
                }
            }
        }
    }
}

#if LEAP_X86_AVX2
extension InterleavedRows {
    /// The 8 rows' integer sums of sub-blocks 2k (`low`) and 2k+1 (`high`) of one pair's
    /// levels at `w`, with the activation blocks at `a` and `a + 32` (lane r: row r).
    @inline(__always)
    static func nibblePairSums(_ w: UnsafeRawPointer, _ a: UnsafeRawPointer) -> (low: __m256i, high: __m256i) {
        let m4 = _mm256_set1_epi8(0x0F)
        #if LEAP_X86_AVX512VNNI
        var low = _mm256_setzero_si256(), high = _mm256_setzero_si256()
        for j in 0..<8 {
            let t = load256(w, 32 * j)
            low = mulSumU8S8(low, _mm256_and_si256(t, m4), broadcastWord(a, j))
            high = mulSumU8S8(high, _mm256_and_si256(_mm256_srli_epi16(t, 4), m4), broadcastWord(a, 8 + j))
        }
        return (low, high)
        #else
        // A vpmaddubsw lane is at most 2 * 15 * 128 = 3,840: eight of them fit in Int16.
        var low = _mm256_setzero_si256(), high = _mm256_setzero_si256()
        for j in 0..<8 {
            let t = load256(w, 32 * j)
            low = _mm256_add_epi16(low, _mm256_maddubs_epi16(_mm256_and_si256(t, m4), broadcastWord(a, j)))
            high = _mm256_add_epi16(high, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(t, 4), m4), broadcastWord(a, 8 + j)))
        }
        let ones = _mm256_set1_epi16(1)
        return (_mm256_madd_epi16(low, ones), _mm256_madd_epi16(high, ones))
        #endif
    }

    /// The 8 bytes at `p` (one sub-block's scales or mins of the 8 rows) as floats.
    @inline(__always)
    static func byteLanes(_ p: UnsafeRawPointer) -> __m256 {
        _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(p.loadUnaligned(as: Int64.self))))
    }

    /// One activation row's running sums over a Q4_K group: `acc` (Σ d sc da sum) and
    /// `mins` (Σ dmin m sa), lane r for row r.
    struct SuperBlockSums {
        var acc = _mm256_setzero_ps()
        var mins = _mm256_setzero_ps()

        /// Adds sub-blocks 2k and 2k+1 (activation blocks `b` and `b + 1`): their integer
        /// sums and the 8 rows' `d * sc` and `dmin * m` of each.
        @inline(__always)
        mutating func add(
            _ sums: (low: __m256i, high: __m256i), scales: (__m256, __m256), mins m: (__m256, __m256), _ a: ActivationView, _ b: Int
        ) {
            acc = _mm256_fmadd_ps(_mm256_mul_ps(scales.0, broadcastFloat(a.d, b)), _mm256_cvtepi32_ps(sums.low), acc)
            acc = _mm256_fmadd_ps(_mm256_mul_ps(scales.1, broadcastFloat(a.d, b + 1)), _mm256_cvtepi32_ps(sums.high), acc)
            mins = _mm256_fmadd_ps(m.0, broadcastFloat(a.s, b), mins)
            mins = _mm256_fmadd_ps(m.1, broadcastFloat(a.s, b + 1), mins)
        }

        /// The 8 rows' dot products.
        @inline(__always)
        var result: __m256 { _mm256_sub_ps(acc, mins) }
    }

    /// `dotGroup` for Q4_K: every chunk's levels are read once for the `count` (1, 2 or 4)
    /// activation rows, its scales and mins converted once.
    @inline(__always)
    func dotSuperBlockGroup(_ g: Int, _ a: ActivationRows, count: Int) {
        let p = group(g)
        var s0 = SuperBlockSums(), s1 = SuperBlockSums(), s2 = SuperBlockSums(), s3 = SuperBlockSums()
        let q0 = UnsafeRawPointer(a.views.0.qs), q1 = UnsafeRawPointer(a.views.1.qs)
        let q2 = UnsafeRawPointer(a.views.2.qs), q3 = UnsafeRawPointer(a.views.3.qs)
        for s in 0..<superBlocks {
            let chunk = p + chunkBytes * s
            prefetchAhead(chunk)
            let d = _mm256_cvtph_ps(chunk.loadUnaligned(as: __m128i.self))
            let dmin = _mm256_cvtph_ps(chunk.loadUnaligned(fromByteOffset: 16, as: __m128i.self))
            for k in 0..<4 {
                let w = chunk + scaleBytes + levelBytes * k, b = 8 * s + 2 * k
                let scales = (_mm256_mul_ps(d, Self.byteLanes(chunk + 32 + 16 * k)), _mm256_mul_ps(d, Self.byteLanes(chunk + 40 + 16 * k)))
                let mins = (
                    _mm256_mul_ps(dmin, Self.byteLanes(chunk + 96 + 16 * k)), _mm256_mul_ps(dmin, Self.byteLanes(chunk + 104 + 16 * k))
                )
                s0.add(Self.nibblePairSums(w, q0 + 32 * b), scales: scales, mins: mins, a.views.0, b)
                if count > 1 { s1.add(Self.nibblePairSums(w, q1 + 32 * b), scales: scales, mins: mins, a.views.1, b) }
                if count > 2 {
                    s2.add(Self.nibblePairSums(w, q2 + 32 * b), scales: scales, mins: mins, a.views.2, b)
                    s3.add(Self.nibblePairSums(w, q3 + 32 * b), scales: scales, mins: mins, a.views.3, b)
                }
            }
        }
        UnsafeMutableRawPointer(a.outputs.0 + 8 * g).storeBytes(of: s0.result, as: __m256.self)
        if count > 1 { UnsafeMutableRawPointer(a.outputs.1 + 8 * g).storeBytes(of: s1.result, as: __m256.self) }
        if count > 2 {
            UnsafeMutableRawPointer(a.outputs.2 + 8 * g).storeBytes(of: s2.result, as: __m256.self)
            UnsafeMutableRawPointer(a.outputs.3 + 8 * g).storeBytes(of: s3.result, as: __m256.self)
        }
    }

    /// `packForMatmul` for Q4_K: sub-block j of super-block s becomes group block 8s + j,
    /// its levels the low (j even) or high (j odd) nibbles of pair j / 2, its scales
    /// `d * sc` and `-(dmin * m)` as `IntegerMatmul.kQuantScales` computes them.
    func packSuperBlocksForMatmul(_ g: Int, into dst: UnsafeMutableRawPointer) {
        let p = group(g), m4 = _mm256_set1_epi8(0x0F)
        for s in 0..<superBlocks {
            let chunk = p + chunkBytes * s
            let d = _mm256_cvtph_ps(chunk.loadUnaligned(as: __m128i.self))
            let dmin = _mm256_cvtph_ps(chunk.loadUnaligned(fromByteOffset: 16, as: __m128i.self))
            for j in 0..<8 {
                let w = chunk + scaleBytes + levelBytes * (j / 2)
                let out = dst + (8 * s + j) * IntegerMatmul.groupBlockBytes
                for v in 0..<8 {
                    let t = load256(w, 32 * v)
                    let levels = j % 2 == 0 ? _mm256_and_si256(t, m4) : _mm256_and_si256(_mm256_srli_epi16(t, 4), m4)
                    out.storeBytes(of: levels, toByteOffset: 32 * v, as: __m256i.self)
                }
                let minimum = _mm256_mul_ps(dmin, Self.byteLanes(chunk + 96 + 8 * j))
                out.storeBytes(of: _mm256_mul_ps(d, Self.byteLanes(chunk + 32 + 8 * j)), toByteOffset: 256, as: __m256.self)
                out.storeBytes(of: _mm256_xor_ps(minimum, _mm256_set1_ps(-0.0)), toByteOffset: 288, as: __m256.self)
            }
        }
    }

    /// `dequantize(group:into:stride:)` for Q4_K: each row back in the stored format, then
    /// the format's own dequantization, so the floats are those of the stored rows.
    func dequantizeSuperBlocks(group g: Int, into dst: UnsafeMutablePointer<Float>, stride: Int) {
        withUnsafeTemporaryAllocation(byteCount: rowBytes, alignment: 64) { buffer in
            for r in 0..<Self.groupRows {
                copySuperBlockRow(Self.groupRows * g + r, into: buffer.baseAddress!)
                Q4_K.dequantize(UnsafeRawPointer(buffer.baseAddress!), dst + r * stride, nb: superBlocks)
            }
        }
    }
}
#endif
