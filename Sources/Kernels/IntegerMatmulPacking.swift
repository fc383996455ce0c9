// The integer matmul's packing: each group of 8 weight rows repacked into group blocks of
// 320 bytes per 32 columns (levels in 4-byte row lanes, then the two scale vectors; see
// IntegerMatmul.swift's header), the scalar reference and the AVX2 packers per format.

import GGUF

#if LEAP_X86_AVX2
import _Builtin_intrinsics.intel
#endif

extension IntegerMatmul {
    /// The 32 unsigned levels of 32-value block `i` of the row at `row` into `u`, and the
    /// two packed scales (see the file header). Scalar reference for the packing.
    static func levelsReference(
        _ type: GGMLType, _ row: UnsafeRawPointer, block i: Int, _ u: UnsafeMutablePointer<UInt8>
    ) -> (Float, Float) {
        func nibbles(_ b: UnsafeRawPointer, _ offset: Int) {
            for j in 0..<16 {
                u[j] = byte(b, offset + j) & 0x0F
                u[j + 16] = byte(b, offset + j) >> 4
            }
        }
        func fifthBits(_ qh: UInt32) {
            for j in 0..<32 { u[j] |= UInt8(truncatingIfNeeded: (qh >> UInt32(j)) & 1) << 4 }
        }
        // K-quants: super-block i / 8, sub-block (or Q6_K pair of sub-blocks) i % 8.
        let sub = i % 8
        switch type {
        case .q8_0:
            let b = row + 34 * i
            for j in 0..<32 { u[j] = byte(b, 2 + j) ^ 0x80 }
            let d = loadHalfReference(b, 0)
            return (d, -128 * d)
        case .q4_0:
            let b = row + 18 * i
            nibbles(b, 2)
            let d = loadHalfReference(b, 0)
            return (d, -8 * d)
        case .q4_1:
            let b = row + 20 * i
            nibbles(b, 4)
            return (loadHalfReference(b, 0), loadHalfReference(b, 2))
        case .q5_0:
            let b = row + 22 * i
            nibbles(b, 6)
            fifthBits(b.loadUnaligned(fromByteOffset: 2, as: UInt32.self))
            let d = loadHalfReference(b, 0)
            return (d, -16 * d)
        case .q5_1:
            let b = row + 24 * i
            nibbles(b, 8)
            fifthBits(b.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
            return (loadHalfReference(b, 0), loadHalfReference(b, 2))
        case .q4_K, .q5_K:
            let five = type == .q5_K
            let b = row + (five ? 176 : 144) * (i / 8)
            let qs = b + (five ? 48 : 16) + 32 * (sub / 2)
            for l in 0..<32 {
                u[l] = sub % 2 == 0 ? byte(qs, l) & 0x0F : byte(qs, l) >> 4
                if five { u[l] |= ((byte(b, 16 + l) >> UInt8(sub)) & 1) << 4 }
            }
            let (sc, m) = scaleMinK4(sub, b + 4)
            return (loadHalfReference(b, 0) * Float(sc), -(loadHalfReference(b, 2) * Float(m)))
        case .q6_K:
            let b = row + 210 * (i / 8)
            let n = sub / 4, t = sub % 4
            for l in 0..<32 {
                let packedLow = byte(b, 64 * n + 32 * (t & 1) + l)
                let low = t < 2 ? packedLow & 0x0F : packedLow >> 4
                u[l] = low | ((byte(b, 128 + 32 * n + l) >> UInt8(2 * t)) & 3) << 4
            }
            let d = loadHalfReference(b, 208)
            let sc0 = Float(Int8(bitPattern: byte(b, 192 + 2 * sub))), sc1 = Float(Int8(bitPattern: byte(b, 193 + 2 * sub)))
            return (d * sc0, d * sc1)
        default:
            preconditionFailure("no integer levels for \(type)")
        }
    }

    /// Packs rows `rows` (at most 8; missing rows are zero) of the matrix at `base` into
    /// `nb` group blocks at `dst`. Scalar reference; ``packGroup`` equals it byte for byte.
    static func packGroupReference(
        _ type: GGMLType, _ base: UnsafeRawPointer, rowBytes: Int, rows: Range<Int>, nb: Int,
        _ dst: UnsafeMutableRawPointer
    ) {
        precondition(rows.count <= groupRows)
        dst.initializeMemory(as: UInt8.self, repeating: 0, count: nb * groupBlockBytes)
        let u = UnsafeMutablePointer<UInt8>.allocate(capacity: 32)
        defer { u.deallocate() }
        for (r, row) in rows.enumerated() {
            for i in 0..<nb {
                let (d, m) = levelsReference(type, base + row * rowBytes, block: i, u)
                let g = dst + i * groupBlockBytes
                for k in 0..<8 {
                    for j in 0..<4 { g.storeBytes(of: u[4 * k + j], toByteOffset: 32 * k + 4 * r + j, as: UInt8.self) }
                }
                g.storeBytes(of: d, toByteOffset: 256 + 4 * r, as: Float.self)
                g.storeBytes(of: m, toByteOffset: 288 + 4 * r, as: Float.self)
            }
        }
    }

    /// Fast packing (AVX2: levels of 8 rows transposed as an 8 x 8 matrix of 32-bit
    /// words); bit-identical to ``packGroupReference``.
    static func packGroup(
        _ type: GGMLType, _ base: UnsafeRawPointer, rowBytes: Int, rows: Range<Int>, nb: Int,
        _ dst: UnsafeMutableRawPointer
    ) {
        #if LEAP_X86_AVX2
        switch type {
        case .q8_0:
            packGroupAVX2(base, rowBytes: rowBytes, rows: rows, nb: nb, typeSize: 34, dst) { b in
                (_mm256_xor_si256(load256(b, 2), _mm256_set1_epi8(-128)), loadHalf(b, 0), -128 * loadHalf(b, 0))
            }
        case .q4_0:
            packGroupAVX2(base, rowBytes: rowBytes, rows: rows, nb: nb, typeSize: 18, dst) { b in
                (unpackNibbles16(b, 2), loadHalf(b, 0), -8 * loadHalf(b, 0))
            }
        case .q4_1:
            packGroupAVX2(base, rowBytes: rowBytes, rows: rows, nb: nb, typeSize: 20, dst) { b in
                (unpackNibbles16(b, 4), loadHalf(b, 0), loadHalf(b, 2))
            }
        case .q5_0:
            packGroupAVX2(base, rowBytes: rowBytes, rows: rows, nb: nb, typeSize: 22, dst) { b in
                (
                    _mm256_or_si256(unpackNibbles16(b, 6), fifthBitBytes(b.loadUnaligned(fromByteOffset: 2, as: UInt32.self))),
                    loadHalf(b, 0), -16 * loadHalf(b, 0)
                )
            }
        case .q5_1:
            packGroupAVX2(base, rowBytes: rowBytes, rows: rows, nb: nb, typeSize: 24, dst) { b in
                (
                    _mm256_or_si256(unpackNibbles16(b, 8), fifthBitBytes(b.loadUnaligned(fromByteOffset: 4, as: UInt32.self))),
                    loadHalf(b, 0), loadHalf(b, 2)
                )
            }
        case .q4_K:
            packGroupKQuantAVX2(base, rowBytes: rowBytes, rows: rows, nb: nb, typeSize: 144, dst, Self.q4KSuperBlock)
        case .q5_K:
            packGroupKQuantAVX2(base, rowBytes: rowBytes, rows: rows, nb: nb, typeSize: 176, dst, Self.q5KSuperBlock)
        case .q6_K:
            packGroupKQuantAVX2(base, rowBytes: rowBytes, rows: rows, nb: nb, typeSize: 210, dst, Self.q6KSuperBlock)
        default: preconditionFailure("no integer levels for \(type)")
        }
        #else
        packGroupReference(type, base, rowBytes: rowBytes, rows: rows, nb: nb, dst)
        #endif
    }

    #if LEAP_X86_AVX2
    /// Row base pointers of a group (missing rows read row 0 again; their lanes are
    /// cleared by the `keep` mask) and the mask of the valid lanes.
    @inline(__always)
    static func groupRowBases(_ base: UnsafeRawPointer, rowBytes: Int, rows: Range<Int>) -> ([UnsafeRawPointer], __m256i) {
        let n = rows.count
        precondition(n >= 1 && n <= groupRows)
        var rowBase = [UnsafeRawPointer](repeating: base + rows.lowerBound * rowBytes, count: 8)
        for r in 0..<n { rowBase[r] = base + (rows.lowerBound + r) * rowBytes }
        let keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(Int32(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
        return (rowBase, keep)
    }

    /// Stores one group block: the 8 rows' level vectors transposed as an 8 x 8 matrix of
    /// 32-bit words (vector k = word k of every row) and the two scale vectors, lanes
    /// outside `keep` zeroed.
    @inline(__always)
    static func storeGroupBlock(
        _ v0: __m256i, _ v1: __m256i, _ v2: __m256i, _ v3: __m256i,
        _ v4: __m256i, _ v5: __m256i, _ v6: __m256i, _ v7: __m256i,
        d: __m256, m: __m256, keep: __m256i, _ g: UnsafeMutableRawPointer
    ) {
        let t0 = _mm256_unpacklo_epi32(v0, v1), t1 = _mm256_unpackhi_epi32(v0, v1)
        let t2 = _mm256_unpacklo_epi32(v2, v3), t3 = _mm256_unpackhi_epi32(v2, v3)
        let t4 = _mm256_unpacklo_epi32(v4, v5), t5 = _mm256_unpackhi_epi32(v4, v5)
        let t6 = _mm256_unpacklo_epi32(v6, v7), t7 = _mm256_unpackhi_epi32(v6, v7)
        // u0: word 0 of rows 0-3 | word 4 of rows 0-3, and so on.
        let u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2)
        let u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3)
        let u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6)
        let u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7)
        @inline(__always) func store(_ k: Int, _ lo: __m256i, _ hi: __m256i, high: Bool) {
            let a = unsafeBitCast(lo, to: SIMD8<Int32>.self), b = unsafeBitCast(hi, to: SIMD8<Int32>.self)
            let w =
                high
                ? SIMD8<Int32>(lowHalf: a.highHalf, highHalf: b.highHalf)
                : SIMD8<Int32>(lowHalf: a.lowHalf, highHalf: b.lowHalf)
            g.storeBytes(of: _mm256_and_si256(unsafeBitCast(w, to: __m256i.self), keep), toByteOffset: 32 * k, as: __m256i.self)
        }
        store(0, u0, u4, high: false)
        store(4, u0, u4, high: true)
        store(1, u1, u5, high: false)
        store(5, u1, u5, high: true)
        store(2, u2, u6, high: false)
        store(6, u2, u6, high: true)
        store(3, u3, u7, high: false)
        store(7, u3, u7, high: true)
        let keepF = unsafeBitCast(keep, to: __m256.self)
        g.storeBytes(of: _mm256_and_ps(d, keepF), toByteOffset: 256, as: __m256.self)
        g.storeBytes(of: _mm256_and_ps(m, keepF), toByteOffset: 288, as: __m256.self)
    }

    /// Packing of the 32-value formats: `levels` gives a block's levels and two scales.
    @inline(__always)
    static func packGroupAVX2(
        _ base: UnsafeRawPointer, rowBytes: Int, rows: Range<Int>, nb: Int, typeSize: Int,
        _ dst: UnsafeMutableRawPointer,
        _ levels: (UnsafeRawPointer) -> (__m256i, Float, Float)
    ) {
        let (rowBase, keep) = groupRowBases(base, rowBytes: rowBytes, rows: rows)
        rowBase.withUnsafeBufferPointer { rb in
            for i in 0..<nb {
                let off = i * typeSize
                let (v0, d0, m0) = levels(rb[0] + off), (v1, d1, m1) = levels(rb[1] + off)
                let (v2, d2, m2) = levels(rb[2] + off), (v3, d3, m3) = levels(rb[3] + off)
                let (v4, d4, m4) = levels(rb[4] + off), (v5, d5, m5) = levels(rb[5] + off)
                let (v6, d6, m6) = levels(rb[6] + off), (v7, d7, m7) = levels(rb[7] + off)
                storeGroupBlock(
                    v0, v1, v2, v3, v4, v5, v6, v7, d: SIMD8(d0, d1, d2, d3, d4, d5, d6, d7),
                    m: SIMD8(m0, m1, m2, m3, m4, m5, m6, m7), keep: keep, dst + i * groupBlockBytes)
            }
        }
    }

    /// Packing of the K-quants: `superBlock` writes the 8 level vectors and 16 scales of one
    /// row's super-block to a staging area (`levels[j]`, `d[j]`, `m[j]` for sub-block j),
    /// then each sub-block's 8 rows are transposed from there.
    @inline(__always)
    static func packGroupKQuantAVX2(
        _ base: UnsafeRawPointer, rowBytes: Int, rows: Range<Int>, nb: Int, typeSize: Int,
        _ dst: UnsafeMutableRawPointer,
        _ superBlock: (UnsafeRawPointer, UnsafeMutablePointer<__m256i>, UnsafeMutablePointer<Float>, UnsafeMutablePointer<Float>) -> Void
    ) {
        precondition(nb % 8 == 0)
        let (rowBase, keep) = groupRowBases(base, rowBytes: rowBytes, rows: rows)
        withUnsafeTemporaryAllocation(of: __m256i.self, capacity: 64) { levelBuffer in
            withUnsafeTemporaryAllocation(of: Float.self, capacity: 128) { scaleBuffer in
                packKQuantSuperBlocks(
                    rowBase, nb: nb, typeSize: typeSize, keep: keep, dst, levelBuffer.baseAddress!, scaleBuffer.baseAddress!,
                    superBlock)
            }
        }
    }

    @inline(__always)
    static func packKQuantSuperBlocks(
        _ rowBase: [UnsafeRawPointer], nb: Int, typeSize: Int, keep: __m256i, _ dst: UnsafeMutableRawPointer,
        _ levels: UnsafeMutablePointer<__m256i>, _ scales: UnsafeMutablePointer<Float>,
        _ superBlock: (UnsafeRawPointer, UnsafeMutablePointer<__m256i>, UnsafeMutablePointer<Float>, UnsafeMutablePointer<Float>) -> Void
    ) {
        for s in 0..<(nb / 8) {
            for r in 0..<8 {
                superBlock(rowBase[r] + s * typeSize, levels + 8 * r, scales + 8 * r, scales + 64 + 8 * r)
            }
            for j in 0..<8 {
                @inline(__always) func scaleLanes(_ at: Int) -> __m256 {
                    SIMD8(
                        scales[at + j], scales[at + 8 + j], scales[at + 16 + j], scales[at + 24 + j], scales[at + 32 + j],
                        scales[at + 40 + j], scales[at + 48 + j], scales[at + 56 + j])
                }
                storeGroupBlock(
                    levels[j], levels[8 + j], levels[16 + j], levels[24 + j], levels[32 + j], levels[40 + j], levels[48 + j],
                    levels[56 + j], d: scaleLanes(0), m: scaleLanes(64), keep: keep, dst + (8 * s + j) * groupBlockBytes)
            }
        }
    }

    /// A Q4_K super-block's 8 sub-blocks: nibbles, d * sc_j and -dmin * m_j.
    @inline(__always)
    static func q4KSuperBlock(
        _ b: UnsafeRawPointer, _ v: UnsafeMutablePointer<__m256i>, _ d: UnsafeMutablePointer<Float>,
        _ m: UnsafeMutablePointer<Float>
    ) {
        let m4 = _mm256_set1_epi8(0x0F)
        for k in 0..<4 {
            let raw = load256(b, 16 + 32 * k)
            v[2 * k] = _mm256_and_si256(raw, m4)
            v[2 * k + 1] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4)
        }
        kQuantScales(b, d, m)
    }

    /// A Q5_K super-block's 8 sub-blocks: nibbles with their fifth bits, and the scales.
    @inline(__always)
    static func q5KSuperBlock(
        _ b: UnsafeRawPointer, _ v: UnsafeMutablePointer<__m256i>, _ d: UnsafeMutablePointer<Float>,
        _ m: UnsafeMutablePointer<Float>
    ) {
        let m4 = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10)
        let hbits = load256(b, 16)
        @inline(__always) func high(_ j: Int) -> __m256i {
            let mask = _mm256_set1_epi8(Int8(bitPattern: UInt8(1) << UInt8(j)))
            return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hbits, mask), mask), bit4)
        }
        for k in 0..<4 {
            let raw = load256(b, 48 + 32 * k)
            v[2 * k] = _mm256_or_si256(_mm256_and_si256(raw, m4), high(2 * k))
            v[2 * k + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), m4), high(2 * k + 1))
        }
        kQuantScales(b, d, m)
    }

    /// `d * sc_j` and `-(dmin * m_j)` of a Q4_K/Q5_K super-block, as the reference computes them.
    @inline(__always)
    static func kQuantScales(_ b: UnsafeRawPointer, _ d: UnsafeMutablePointer<Float>, _ m: UnsafeMutablePointer<Float>) {
        let (sc, mins) = scalesMinsK4(b + 4)
        let scale = _mm256_mul_ps(_mm256_set1_ps(loadHalf(b, 0)), _mm256_cvtepi32_ps(sc))
        let minimum = _mm256_mul_ps(_mm256_set1_ps(loadHalf(b, 2)), _mm256_cvtepi32_ps(mins))
        UnsafeMutableRawPointer(d).storeBytes(of: scale, as: __m256.self)
        UnsafeMutableRawPointer(m).storeBytes(of: _mm256_xor_ps(minimum, _mm256_set1_ps(-0.0)), as: __m256.self)
    }

    /// A Q6_K super-block's 8 pairs of sub-blocks: 6-bit levels, d * sc of each half.
    @inline(__always)
    static func q6KSuperBlock(
        _ b: UnsafeRawPointer, _ v: UnsafeMutablePointer<__m256i>, _ d: UnsafeMutablePointer<Float>,
        _ m: UnsafeMutablePointer<Float>
    ) {
        (v[0], v[1], v[2], v[3]) = Q6_K.q6Levels(b, 0)
        (v[4], v[5], v[6], v[7]) = Q6_K.q6Levels(b, 1)
        let scale = _mm256_set1_ps(loadHalf(b, 208))
        // Scales 2j (even) and 2j + 1 (odd) of the 16 int8 scales, widened to Int32.
        let sc = _mm256_cvtepi8_epi16(b.loadUnaligned(fromByteOffset: 192, as: __m128i.self))
        // Int32 lane j holds scales 2j (low 16 bits) and 2j + 1 (high 16 bits): the two
        // halves of sub-block j.
        let even = _mm256_srai_epi32(_mm256_slli_epi32(sc, 16), 16), odd = _mm256_srai_epi32(sc, 16)
        UnsafeMutableRawPointer(d).storeBytes(of: _mm256_mul_ps(scale, _mm256_cvtepi32_ps(even)), as: __m256.self)
        UnsafeMutableRawPointer(m).storeBytes(of: _mm256_mul_ps(scale, _mm256_cvtepi32_ps(odd)), as: __m256.self)
    }
    #endif
}
