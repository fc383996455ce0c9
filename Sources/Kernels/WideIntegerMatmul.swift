// Prompt processing for Q8_0 weights with 16-bit activations: `Y = X Wᵀ` where each
// 32-value block of an activation row is rounded to 16 bits (WideActivations: Int16
// levels, fp32 scale max|x| / 32767) and multiplied with the weights' own 8-bit levels in
// 32-bit integer sums (`vpdpwssd` with AVX-512 VNNI, `vpmaddwd` + `vpaddd` with AVX2).
//
// Why not 8 bits: the 8-bit matmul (IntegerMatmul.swift) rounds activations as llama.cpp
// does, and for Q8_0 that put the LFM2-MoE fixture further than llama.cpp from its stored
// weights and Gemma 3 past its window (docs/numerics.md). Rounding to 16 bits is 258
// times finer (a block's error is at most max|x| / 65534): the products are those of the
// stored weights with the activations to within float rounding, as the F32 path computes
// them, at twice the multiplications per instruction of F32 (and without writing the
// dequantized matrix to memory).
//
// A block's dot product is exact in Int32: |a| <= 32767 and |q| <= 128, so 32 products sum
// to at most 2^27. The two instruction sets compute the same sums, so AVX2 and VNNI builds
// give the same bits, and every float step (one fused multiply-add per block, in block
// order) is the scalar reference's.
//
// Packed weights: each group of 8 weight rows becomes `nb` group blocks of 544 bytes (one
// per 32 columns):
//
//   bytes   0..<512  levels: 16 vectors of 32 bytes; vector j holds, for rows 0...7 in
//                    turn, the 2 levels 2j and 2j + 1 of that row's block as Int16
//   bytes 512..<544  d of rows 0...7 (Float)
//
// so `vpdpwssd(acc, levels[j], broadcast(activation levels 2j, 2j + 1))` adds to lane r the
// two products of row r, and 16 instructions give the 8 rows' block sums in the 8 lanes of
// one register, as in the 8-bit kernel. The groups are packed from the 8-bit packing
// (`IntegerMatmul`'s, which reads the decode copy), with the +128 bias taken off.

import GGUF

#if LEAP_X86_AVX2
import _Builtin_intrinsics.intel
#endif

/// Activation rows rounded to 16 bits per value in blocks of 32 (Int16 levels, an fp32
/// scale per block), the input of ``WeightMatrix/matmul(_:rows:into:scratch:scratchBytes:pool:)-(WideActivations,_,_,_,_,_)``.
public final class WideActivations {
    /// The largest number of values this buffer can hold.
    public let capacity: Int
    /// Values per row of the current contents (a multiple of 32).
    public private(set) var cols = 0
    /// Rows of the current contents.
    public private(set) var rows = 0

    /// Row `t`'s levels at `levels + t * cols`.
    let levels: UnsafeMutablePointer<Int16>
    /// Row `t`'s block scales at `scales + t * cols / 32`.
    let scales: UnsafeMutablePointer<Float>

    /// Creates a buffer for up to `capacity` values.
    public init(capacity: Int) {
        precondition(capacity >= 0)
        self.capacity = capacity
        let blocks = max(1, (capacity + 31) / 32)
        levels = UnsafeMutableRawPointer.allocate(byteCount: blocks * 64, alignment: 64).bindMemory(to: Int16.self, capacity: blocks * 32)
        scales = UnsafeMutableRawPointer.allocate(byteCount: blocks * 4, alignment: 64).bindMemory(to: Float.self, capacity: blocks)
    }

    deinit {
        levels.deallocate()
        scales.deallocate()
    }

    /// Rounds `rows` rows of `cols` floats (row-major at `src`; `cols` a multiple of 32) to
    /// 16 bits, split over `pool` by rows. Each block equals ``quantizeBlockReference(_:_:_:)``'s.
    public func quantizeRows(_ src: UnsafePointer<Float>, rows: Int, cols: Int, pool: ThreadPool? = nil) {
        prepare(rows: rows, cols: cols)
        let nb = cols / 32
        let body: (Range<Int>) -> Void = { range in
            for i in (range.lowerBound * nb)..<(range.upperBound * nb) {
                #if LEAP_X86_AVX2
                Self.quantizeBlockAVX2(src + 32 * i, i, self)
                #else
                Self.quantizeBlockReference(src + 32 * i, i, self)
                #endif
            }
        }
        if let pool, pool.threads > 1, rows >= 8 {
            pool.parallelFor(count: rows, minChunk: 4, body)
        } else {
            body(0..<rows)
        }
    }

    /// ``quantizeRows(_:rows:cols:pool:)`` by the scalar reference only.
    public func quantizeRowsReference(_ src: UnsafePointer<Float>, rows: Int, cols: Int) {
        prepare(rows: rows, cols: cols)
        for i in 0..<(rows * cols / 32) { Self.quantizeBlockReference(src + 32 * i, i, self) }
    }

    private func prepare(rows: Int, cols: Int) {
        precondition(rows >= 0 && cols >= 0 && cols % 32 == 0, "WideActivations: rows of \(cols) values are not whole blocks of 32")
        precondition(rows * cols <= capacity, "WideActivations: \(rows) x \(cols) values exceed capacity \(capacity)")
        self.rows = rows
        self.cols = cols
    }

    /// Block `i`: d = max|x| / 32767, level = round-to-nearest-even(x / d) (by the
    /// reciprocal, as the 8-bit blocks are), saturated to Int16.
    static func quantizeBlockReference(_ x: UnsafePointer<Float>, _ i: Int, _ a: WideActivations) {
        var amax: Float = 0
        for j in 0..<32 { amax = max(amax, abs(x[j])) }
        let d = amax / 32767
        let id: Float = d != 0 ? 1 / d : 0
        for j in 0..<32 {
            let q = (x[j] * id).rounded(.toNearestOrEven)
            a.levels[32 * i + j] = Int16(min(32767, max(-32768, q)))
        }
        a.scales[i] = d
    }

    #if LEAP_X86_AVX2
    @inline(__always)
    static func quantizeBlockAVX2(_ x: UnsafePointer<Float>, _ i: Int, _ a: WideActivations) {
        let (v0, v1, v2, v3, amax) = loadBlockOf32(x)
        let d = amax / 32767
        let id: Float = d != 0 ? 1 / d : 0
        let vid = _mm256_set1_ps(id)
        // cvtps rounds to nearest even (the default MXCSR mode), packs saturates; the
        // permutation undoes the per-128-bit-lane interleaving of the pack.
        let p01 = _mm256_packs_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v0, vid)), _mm256_cvtps_epi32(_mm256_mul_ps(v1, vid)))
        let p23 = _mm256_packs_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v2, vid)), _mm256_cvtps_epi32(_mm256_mul_ps(v3, vid)))
        let order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7)
        let out = UnsafeMutableRawPointer(a.levels + 32 * i)
        out.storeBytes(of: _mm256_permutevar8x32_epi32(p01, order), toByteOffset: 0, as: __m256i.self)
        out.storeBytes(of: _mm256_permutevar8x32_epi32(p23, order), toByteOffset: 32, as: __m256i.self)
        a.scales[i] = d
    }
    #endif
}

/// The packed layout and kernels of the 16-bit-activation matmul (see the file header).
enum WideIntegerMatmul {
    /// Bytes of one packed group block: 512 bytes of Int16 levels and 8 scales.
    static let groupBlockBytes = 544

    /// Whether this build multiplies `type` with 16-bit activations: Q8_0 on x86 builds
    /// with AVX2 (VNNI or not); nothing else, and nothing on portable builds.
    /// Groups of 8 weight rows the kernel multiplies in one pass: 2 on VNNI builds
    /// (512-bit registers), else 1.
    static var groupsPerPass: Int {
        #if LEAP_X86_AVX512VNNI
        return 2
        #else
        return 1
        #endif
    }

    static func supports(_ type: GGMLType) -> Bool {
        #if LEAP_X86_AVX2
        return type == .q8_0
        #else
        return false
        #endif
    }

    /// Scalar reference packing: rows `rows` (at most 8; missing rows are zero) of the Q8_0
    /// matrix at `base` into `nb` group blocks at `dst`.
    static func packGroupReference(
        _ base: UnsafeRawPointer, rowBytes: Int, rows: Range<Int>, nb: Int, _ dst: UnsafeMutableRawPointer
    ) {
        dst.initializeMemory(as: UInt8.self, repeating: 0, count: nb * groupBlockBytes)
        for (lane, r) in rows.enumerated() {
            for i in 0..<nb {
                let block = base + r * rowBytes + 34 * i
                let out = dst + i * groupBlockBytes
                out.storeBytes(
                    of: FloatBits.halfToFloat(block.loadUnaligned(as: UInt16.self)), toByteOffset: 512 + 4 * lane, as: Float.self)
                for j in 0..<32 {
                    let q = Int16(block.load(fromByteOffset: 2 + j, as: Int8.self))
                    out.storeBytes(of: q, toByteOffset: 32 * (j / 2) + 4 * lane + 2 * (j % 2), as: Int16.self)
                }
            }
        }
    }

    /// Scalar reference of the kernel: `out[t * ldy + r]` for activation rows `0..<count`
    /// of `a` and the group's `valid` rows, with the same integer sums and the same float
    /// steps (one fused multiply-add per block, in block order) as the fast kernel.
    static func multiplyGroupReference(
        _ packed: UnsafeRawPointer, nb: Int, _ a: WideActivations, rows count: Int, _ out: UnsafeMutablePointer<Float>, ldy: Int,
        valid: Int
    ) {
        for t in 0..<count {
            for r in 0..<valid {
                var acc: Float = 0
                for i in 0..<nb {
                    let g = packed + i * groupBlockBytes
                    var sum: Int32 = 0
                    for j in 0..<32 {
                        let w = g.load(fromByteOffset: 32 * (j / 2) + 4 * r + 2 * (j % 2), as: Int16.self)
                        sum += Int32(w) * Int32(a.levels[t * a.cols + 32 * i + j])
                    }
                    let dw = g.load(fromByteOffset: 512 + 4 * r, as: Float.self)
                    acc = acc.addingProduct(dw * a.scales[t * nb + i], Float(sum))
                }
                out[t * ldy + r] = acc
            }
        }
    }

    #if LEAP_X86_AVX2
    /// Turns `nb` blocks of the 8-bit packing of a Q8_0 group (levels q + 128 in 4-byte
    /// row lanes, `IntegerMatmul.groupBlockBytes` each) into `nb` wide group blocks.
    static func widen(_ narrow: UnsafeRawPointer, nb: Int, into dst: UnsafeMutableRawPointer) {
        // Per 128-bit lane (4 rows of 4 levels): levels 0, 1 of each row, then 2, 3.
        let pairs = unsafeBitCast(
            SIMD32<Int8>(
                0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
                0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15), to: __m256i.self)
        let bias = _mm256_set1_epi8(-128)
        // Dwords: rows 0-3 then 4-7, levels 0, 1 (the first half); levels 2, 3 (the second).
        let low = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7), high = _mm256_setr_epi32(2, 3, 6, 7, 0, 1, 4, 5)
        for i in 0..<nb {
            let src = narrow + i * IntegerMatmul.groupBlockBytes, out = dst + i * groupBlockBytes
            for k in 0..<8 {
                let q = _mm256_xor_si256(load256(src, 32 * k), bias)
                // Qwords: rows 0-3 levels 0,1 | rows 0-3 levels 2,3 | rows 4-7 levels 0,1 | rows 4-7 levels 2,3.
                let split = _mm256_shuffle_epi8(q, pairs)
                let first = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(split, low))
                let second = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(split, high))
                out.storeBytes(of: _mm256_cvtepi8_epi16(first), toByteOffset: 64 * k, as: __m256i.self)
                out.storeBytes(of: _mm256_cvtepi8_epi16(second), toByteOffset: 64 * k + 32, as: __m256i.self)
            }
            out.storeBytes(of: src.loadUnaligned(fromByteOffset: 256, as: __m256.self), toByteOffset: 512, as: __m256.self)
        }
    }

    #if !LEAP_X86_AVX512VNNI
    /// `acc + Σ pairs of products` of Int16 lanes: `vpmaddwd` + `vpaddd` (the exact sums
    /// `vpdpwssd` gives on VNNI builds).
    @inline(__always)
    static func mulSum(_ acc: __m256i, _ w: __m256i, _ a: __m256i) -> __m256i {
        _mm256_add_epi32(acc, _mm256_madd_epi16(w, a))
    }

    /// AVX2 builds' kernel. Activation rows `0..<rowsHere` (1...4) times one packed group: `out[t * ldy + lane]`
    /// for the group's `valid` lanes. `levels` is the first row's levels (rows `cols`
    /// apart), `scales` its block scales (rows `nb` apart).
    @inline(__always)
    static func multiplyGroup(
        _ packed: UnsafeRawPointer, nb: Int, rowsHere: Int, _ levels: UnsafePointer<Int16>, _ scales: UnsafePointer<Float>,
        _ out: UnsafeMutablePointer<Float>, ldy: Int, valid: Int
    ) {
        let cols = 32 * nb
        var acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps()
        var acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps()
        for i in 0..<nb {
            let g = packed + i * groupBlockBytes
            let dw = g.loadUnaligned(fromByteOffset: 512, as: __m256.self)
            // Two chains per row (even and odd level pairs): half the dependency depth.
            var e0 = _mm256_setzero_si256(), o0 = _mm256_setzero_si256(), e1 = _mm256_setzero_si256(), o1 = _mm256_setzero_si256()
            var e2 = _mm256_setzero_si256(), o2 = _mm256_setzero_si256(), e3 = _mm256_setzero_si256(), o3 = _mm256_setzero_si256()
            let a = UnsafeRawPointer(levels + 32 * i)
            @inline(__always) func word(_ t: Int, _ j: Int) -> __m256i {
                _mm256_set1_epi32(a.loadUnaligned(fromByteOffset: 2 * t * cols + 4 * j, as: Int32.self))
            }
            for j in stride(from: 0, to: 16, by: 2) {
                let we = load256(g, 32 * j), wo = load256(g, 32 * j + 32)
                e0 = mulSum(e0, we, word(0, j))
                o0 = mulSum(o0, wo, word(0, j + 1))
                if rowsHere > 1 {
                    e1 = mulSum(e1, we, word(1, j))
                    o1 = mulSum(o1, wo, word(1, j + 1))
                }
                if rowsHere > 2 {
                    e2 = mulSum(e2, we, word(2, j))
                    o2 = mulSum(o2, wo, word(2, j + 1))
                }
                if rowsHere > 3 {
                    e3 = mulSum(e3, we, word(3, j))
                    o3 = mulSum(o3, wo, word(3, j + 1))
                }
            }
            @inline(__always) func add(_ t: Int, _ e: __m256i, _ o: __m256i, _ acc: inout __m256) {
                let scale = _mm256_mul_ps(dw, _mm256_set1_ps(scales[t * nb + i]))
                acc = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(_mm256_add_epi32(e, o)), acc)
            }
            add(0, e0, o0, &acc0)
            if rowsHere > 1 { add(1, e1, o1, &acc1) }
            if rowsHere > 2 { add(2, e2, o2, &acc2) }
            if rowsHere > 3 { add(3, e3, o3, &acc3) }
        }
        IntegerMatmul.storeRows(rowsHere, acc0, acc1, acc2, acc3, out, ldy: ldy, valid: valid)
    }
    #else
    /// VNNI builds' kernel: `multiplyGroup` (the AVX2 builds') of two neighbouring packed
    /// groups at once, `first` in the low and `second` in the high halves of 512-bit
    /// registers: 16 weight rows per activation broadcast instead of 8. Each lane gets the
    /// same integer sums (`vpdpwssd`) and float steps as there, so both builds give the
    /// same bits; `valid` counts the lanes (up to 16) to store. A last odd group passes
    /// itself as `second` (its high half is computed and not stored).
    @inline(__always)
    static func multiplyGroupPair(
        _ first: UnsafeRawPointer, _ second: UnsafeRawPointer, nb: Int, rowsHere: Int, _ levels: UnsafePointer<Int16>,
        _ scales: UnsafePointer<Float>, _ out: UnsafeMutablePointer<Float>, ldy: Int, valid: Int
    ) {
        let cols = 32 * nb
        var acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps()
        var acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps()
        for i in 0..<nb {
            let g0 = first + i * groupBlockBytes, g1 = second + i * groupBlockBytes
            @inline(__always) func both(_ offset: Int) -> __m512i {
                _mm512_mask_broadcast_i64x4(_mm512_castsi256_si512(load256(g0, offset)), 0xF0, load256(g1, offset))
            }
            let dw = _mm512_castsi512_ps(both(512))
            var e0 = _mm512_setzero_si512(), o0 = _mm512_setzero_si512(), e1 = _mm512_setzero_si512(), o1 = _mm512_setzero_si512()
            var e2 = _mm512_setzero_si512(), o2 = _mm512_setzero_si512(), e3 = _mm512_setzero_si512(), o3 = _mm512_setzero_si512()
            let a = UnsafeRawPointer(levels + 32 * i)
            @inline(__always) func word(_ t: Int, _ j: Int) -> __m512i {
                _mm512_set1_epi32(a.loadUnaligned(fromByteOffset: 2 * t * cols + 4 * j, as: Int32.self))
            }
            for j in stride(from: 0, to: 16, by: 2) {
                let we = both(32 * j), wo = both(32 * j + 32)
                e0 = _mm512_dpwssd_epi32(e0, we, word(0, j))
                o0 = _mm512_dpwssd_epi32(o0, wo, word(0, j + 1))
                if rowsHere > 1 {
                    e1 = _mm512_dpwssd_epi32(e1, we, word(1, j))
                    o1 = _mm512_dpwssd_epi32(o1, wo, word(1, j + 1))
                }
                if rowsHere > 2 {
                    e2 = _mm512_dpwssd_epi32(e2, we, word(2, j))
                    o2 = _mm512_dpwssd_epi32(o2, wo, word(2, j + 1))
                }
                if rowsHere > 3 {
                    e3 = _mm512_dpwssd_epi32(e3, we, word(3, j))
                    o3 = _mm512_dpwssd_epi32(o3, wo, word(3, j + 1))
                }
            }
            @inline(__always) func add(_ t: Int, _ e: __m512i, _ o: __m512i, _ acc: inout __m512) {
                let scale = _mm512_mul_ps(dw, _mm512_set1_ps(scales[t * nb + i]))
                acc = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(_mm512_add_epi32(e, o)), acc)
            }
            add(0, e0, o0, &acc0)
            if rowsHere > 1 { add(1, e1, o1, &acc1) }
            if rowsHere > 2 { add(2, e2, o2, &acc2) }
            if rowsHere > 3 { add(3, e3, o3, &acc3) }
        }
        @inline(__always) func store(_ t: Int, _ acc: __m512) {
            let y = out + t * ldy
            if valid == 16 {
                UnsafeMutableRawPointer(y).storeBytes(of: acc, as: __m512.self)
            } else {
                let v = unsafeBitCast(acc, to: SIMD16<Float>.self)
                for lane in 0..<valid { y[lane] = v[lane] }
            }
        }
        store(0, acc0)
        if rowsHere > 1 { store(1, acc1) }
        if rowsHere > 2 { store(2, acc2) }
        if rowsHere > 3 { store(3, acc3) }
    }
    #endif

    /// Activation rows `rows` of `a` times packed groups `groups` (each `nb` group blocks at
    /// `packed + group * nb * groupBlockBytes`) of a matrix of `weightRows` rows, into `y`
    /// (`ldy` floats per row), in the 8-bit matmul's order (`IntegerMatmul.forEachTile`);
    /// on VNNI builds two groups at a time (`multiplyGroupPair`).
    static func multiply(
        _ packed: UnsafeRawPointer, groups: Range<Int>, weightRows: Int, nb: Int, _ a: WideActivations, rows: Range<Int>,
        _ y: UnsafeMutablePointer<Float>, ldy: Int
    ) {
        #if LEAP_X86_AVX512VNNI
        let pairs = (groups.lowerBound / 2)..<((groups.upperBound + 1) / 2)
        precondition(groups.lowerBound % 2 == 0, "multiply: groups must start at an even group on VNNI builds")
        IntegerMatmul.forEachTile(rows: rows, groups: pairs, weightRows: weightRows, groupRows: 16) { pair, t, n, valid in
            let group = 2 * pair
            let first = packed + group * nb * groupBlockBytes
            let second = group + 1 < groups.upperBound ? first + nb * groupBlockBytes : first
            multiplyGroupPair(
                first, second, nb: nb, rowsHere: n, a.levels + t * a.cols, a.scales + t * nb,
                y + t * ldy + group * IntegerMatmul.groupRows, ldy: ldy, valid: group + 1 < groups.upperBound ? valid : Swift.min(valid, 8))
        }
        #else
        IntegerMatmul.forEachTile(rows: rows, groups: groups, weightRows: weightRows) { group, t, n, valid in
            multiplyGroup(
                packed + group * nb * groupBlockBytes, nb: nb, rowsHere: n, a.levels + t * a.cols, a.scales + t * nb,
                y + t * ldy + group * IntegerMatmul.groupRows, ldy: ldy, valid: valid)
        }
        #endif
    }
    #endif
}

extension WeightMatrix {
    /// Whether ``matmul(_:rows:into:scratch:scratchBytes:pool:)-(WideActivations,_,_,_,_,_)``
    /// multiplies this matrix with 16-bit activations in this build (Q8_0 on x86 builds
    /// with AVX2). Where false, prompt processing uses the F32 path.
    public var hasWideIntegerMatmul: Bool { WideIntegerMatmul.supports(type) && cols % 32 == 0 }

    /// Bytes of scratch the 16-bit-activation matmul needs: the packed weights.
    public var wideMatmulScratchBytes: Int {
        let groups = (rows + IntegerMatmul.groupRows - 1) / IntegerMatmul.groupRows
        return groups * (cols / 32) * WideIntegerMatmul.groupBlockBytes
    }

    /// `Y = X Wᵀ` for the activation rows `rows` of `x` (rounded to 16 bits by
    /// ``WideActivations/quantizeRows(_:rows:cols:pool:)`` in rows of `cols`): row `t`'s
    /// products go to `y + t * self.rows`. Each product equals the dot product of the
    /// dequantized weight row with the row's 16-bit activations up to float rounding, and a
    /// row's results do not depend on the other rows of the call. The weights are packed
    /// into `scratch` (at least ``wideMatmulScratchBytes`` bytes; allocated per call when
    /// nil or too small), split over `pool` by groups of 8 rows.
    public func matmul(
        _ x: WideActivations, rows: Range<Int>, into y: UnsafeMutablePointer<Float>,
        scratch: UnsafeMutableRawPointer? = nil, scratchBytes: Int = 0, pool: ThreadPool? = nil
    ) {
        precondition(hasWideIntegerMatmul, "matmul: \(type) weights have no 16-bit-activation kernel in this build")
        precondition(x.cols == cols, "matmul: activation rows of \(x.cols) values for a matrix of \(cols) columns")
        precondition(rows.lowerBound >= 0 && rows.upperBound <= x.rows, "matmul: rows \(rows) of \(x.rows) activation rows")
        if rows.isEmpty || self.rows == 0 { return }
        #if LEAP_X86_AVX2
        let nb = cols / 32, needed = wideMatmulScratchBytes
        let owned: UnsafeMutableRawPointer? = (scratch == nil || scratchBytes < needed) ? .allocate(byteCount: needed, alignment: 64) : nil
        defer { owned?.deallocate() }
        let packed = owned ?? scratch!
        let groups = (self.rows + IntegerMatmul.groupRows - 1) / IntegerMatmul.groupRows
        let weightRows = self.rows
        let body: (Range<Int>) -> Void = { range in
            if rows.count <= IntegerMatmul.activationChunk {
                // One pass over the rows: each group is multiplied while its packing is in cache.
                var g = range.lowerBound
                while g < range.upperBound {
                    let next = Swift.min(range.upperBound, g + WideIntegerMatmul.groupsPerPass)
                    for h in g..<next { self.packWideGroup(h, into: packed + h * nb * WideIntegerMatmul.groupBlockBytes) }
                    WideIntegerMatmul.multiply(
                        UnsafeRawPointer(packed), groups: g..<next, weightRows: weightRows, nb: nb, x, rows: rows, y, ldy: weightRows)
                    g = next
                }
                return
            }
            for g in range { self.packWideGroup(g, into: packed + g * nb * WideIntegerMatmul.groupBlockBytes) }
            WideIntegerMatmul.multiply(
                UnsafeRawPointer(packed), groups: range, weightRows: weightRows, nb: nb, x, rows: rows, y, ldy: weightRows)
        }
        // Threads take whole passes (pairs of groups on VNNI builds).
        let passes = (groups + WideIntegerMatmul.groupsPerPass - 1) / WideIntegerMatmul.groupsPerPass
        let passBody: (Range<Int>) -> Void = { range in
            body(
                (range.lowerBound * WideIntegerMatmul.groupsPerPass)..<Swift.min(groups, range.upperBound * WideIntegerMatmul.groupsPerPass)
            )
        }
        if let pool, pool.threads > 1, passes > 1 {
            pool.parallelFor(count: passes, minChunk: Swift.max(1, 2 / WideIntegerMatmul.groupsPerPass), passBody)
        } else {
            passBody(0..<passes)
        }
        #endif
    }
}

extension WeightMatrix {
    /// Packs group `g` (rows `8g..<8g + 8`) of this Q8_0 matrix in the wide layout (`cols /
    /// 32` group blocks at `dst`): through the 8-bit packing, which reads the decode copy
    /// when it holds the group. Lanes of missing rows have scale 0 (their levels are
    /// unspecified). x86 builds with AVX2 only.
    func packWideGroup(_ g: Int, into dst: UnsafeMutableRawPointer) {
        precondition(hasWideIntegerMatmul, "packWideGroup: \(type) weights have no 16-bit-activation kernel in this build")
        #if LEAP_X86_AVX2
        let nb = cols / 32
        withUnsafeTemporaryAllocation(byteCount: nb * IntegerMatmul.groupBlockBytes, alignment: 64) { stage in
            packIntegerGroup(g, nb: nb, into: stage.baseAddress!)
            WideIntegerMatmul.widen(UnsafeRawPointer(stage.baseAddress!), nb: nb, into: dst)
        }
        #endif
    }
}
