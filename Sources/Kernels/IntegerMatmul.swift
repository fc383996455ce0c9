// Prompt processing with 8-bit integer products: `Y = X Wᵀ` for a batch of activation
// rows quantized like decode's (QuantizedActivations: int8 + fp32 scale per 32 values)
// and the weights' own integer levels, multiplied with `vpdpbusd` (AVX-512 VNNI) or
// `vpmaddubsw` + `vpmaddwd` (AVX2).
//
// Every 32-value block of the supported formats is one of three maps of unsigned levels u,
// which is all the kernel needs to know about the format:
//
//   symmetric  value = d * (u - c)          Q8_0 (u = q + 128, c = 128), Q4_0 (c = 8),
//                                           Q5_0 (c = 16)
//   affine     value = d * u + m            Q4_1, Q5_1; Q4_K and Q5_K sub-blocks of 32
//                                           (d = d_super * sc_j, m = -dmin * m_j)
//   halves     value = d0 * (u - 32) for values 0-15, d1 * (u - 32) for 16-31
//                                           Q6_K (two sub-blocks of 16, d_k = d * sc_k)
//
// so a block's dot product with an activation block (scale da, levels a, sum sa = da * Σa,
// half sums b0, b1) is
//
//   symmetric  d * da * (Σ u a - c Σ a)                  the integer sum starts at -c Σa
//   affine     d * da * Σ u a  +  m * sa
//   halves     da * (d0 * (Σ₀ u a - 32 b0) + d1 * (Σ₁ u a - 32 b1))
//
// The K-quants need no other activation format: a Q4_K/Q5_K sub-block is one activation
// block, a Q6_K sub-block half of one, whose sums (`bsums`) the activations carry.
//
// Packed weights. Before multiplying, each group of 8 weight rows is repacked into
// `nb` group blocks of 320 bytes (one per 32 columns):
//
//   bytes   0..<256  levels: 8 vectors of 32 bytes; vector k holds, for rows 0...7 in
//                    turn, the 4 levels 4k...4k+3 of that row's block
//   bytes 256..<288  d (symmetric, affine) or d0 (halves) of rows 0...7 (Float)
//   bytes 288..<320  m (affine), -c d (symmetric) or d1 (halves) of rows 0...7 (Float)
//
// With this layout `vpdpbusd(acc, levels[k], broadcast(4 activation bytes 4k...4k+3))`
// adds to lane r the products of row r, so 8 instructions give the 8 rows' block sums in
// the 8 lanes of one register: no horizontal sums. The 8 level vectors stay in registers
// while 4 activation rows go through them (register blocking), and a packed group
// (8 x cols bytes and scales, 10-15 KB) stays in L1 while every activation row of a chunk
// of 64 (in L2) is multiplied with it.
//
// AVX2 has no `vpdpbusd`: `vpmaddubsw` multiplies byte pairs into saturating Int16 sums,
// then `vpmaddwd` with ones widens pairs of those to Int32. The Int16 sums are added
// before widening as long as they cannot overflow: a `vpmaddubsw` lane is at most
// 2 * maxLevel * 127, so 8 of them fit for 4-bit levels (30,480), 4 for 5-bit and 2 for
// 6-bit ones (32,004). Q8_0's levels (0...255) would saturate, so Q8_0 needs VNNI.
//
// Without VNNI or AVX2 (portable builds), and for Q8_0 without VNNI, `matmul` on
// quantized activations runs the decode kernels (the multi-row `matvec`); the engine's
// prefill keeps using the F32 sgemm path there (see `hasIntegerMatmul`).
//
// A row's results never depend on the other activation rows of a call (how many, or
// where): each row has its own accumulators, and the 4-row register blocking runs the
// same instructions per row as the 1-row tail. Batched decoding relies on this.

import GGUF

#if LEAP_X86_AVX2
import _Builtin_intrinsics.intel
#endif

enum IntegerMatmul {
    /// Weight rows per packed group (the lanes of a 256-bit register of Int32).
    static let groupRows = 8
    /// Bytes of one packed group block: 256 bytes of levels, 8 + 8 scales.
    static let groupBlockBytes = 320
    /// Activation rows multiplied with a packed group before moving to the next group.
    static let activationChunk = 64

    /// How a format's 32-value blocks map onto the packed levels and scales.
    enum Layout: Equatable {
        /// value = d * (u - c).
        case symmetric(c: Int32)
        /// value = d * u + m.
        case affine
        /// value = d0 * (u - 32) for values 0..<16, d1 * (u - 32) for 16..<32 (Q6_K).
        case halves

        /// Int32 activation offsets per block: -c * Σa (symmetric), -32 * b0 and -32 * b1
        /// (halves).
        var offsetsPerBlock: Int {
            switch self {
            case .symmetric: return 1
            case .affine: return 0
            case .halves: return 2
            }
        }
    }

    /// The layout of `type`'s blocks, nil for the formats without integer levels.
    static func layout(_ type: GGMLType) -> Layout? {
        switch type {
        case .q8_0: return .symmetric(c: 128)
        case .q4_0: return .symmetric(c: 8)
        case .q5_0: return .symmetric(c: 16)
        case .q4_1, .q5_1, .q4_K, .q5_K: return .affine
        case .q6_K: return .halves
        default: return nil
        }
    }

    /// The largest level of `type` (which decides how AVX2 may accumulate in Int16).
    static func maxLevel(_ type: GGMLType) -> Int {
        switch type {
        case .q8_0: return 255
        case .q4_0, .q4_1, .q4_K: return 15
        case .q5_0, .q5_1, .q5_K: return 31
        default: return 63
        }
    }

    /// Whether this build multiplies `type` with the integer kernels: every format with a
    /// layout on VNNI builds, all but Q8_0 on AVX2 builds, none on portable builds.
    static func supports(_ type: GGMLType) -> Bool {
        guard layout(type) != nil else { return false }
        #if LEAP_X86_AVX512VNNI
        return true
        #elseif LEAP_X86_AVX2
        return maxLevel(type) <= 63
        #else
        return false
        #endif
    }

    /// Weight blocks of 32 values per row of `cols` values.
    static func blocksPerRow(_ cols: Int) -> Int { cols / 32 }

    // MARK: Multiplication

    /// Scalar reference of the packed kernel: `out[t * ldy + r]` for activation rows
    /// `0..<count` and the group's `valid` rows, from the packed group at `packed` (`nb`
    /// group blocks of a matrix of `type`), with the same integer sums as the fast kernel
    /// (so that with unit scales both are exact).
    static func multiplyGroupReference(
        _ type: GGMLType, _ packed: UnsafeRawPointer, nb: Int, _ a: ActivationView, count: Int,
        _ out: UnsafeMutablePointer<Float>, ldy: Int, valid: Int
    ) {
        guard let layout = layout(type) else { preconditionFailure("no integer levels for \(type)") }
        for t in 0..<count {
            for r in 0..<valid {
                var sum: Float = 0
                for i in 0..<nb {
                    let g = packed + i * groupBlockBytes, ab = t * nb + i
                    // Σ u a over values 0..<16 (s0) and 16..<32 (s1).
                    var s0: Int32 = 0, s1: Int32 = 0
                    for k in 0..<8 {
                        for j in 0..<4 {
                            let p = Int32(g.load(fromByteOffset: 32 * k + 4 * r + j, as: UInt8.self)) * Int32(a.qs[32 * ab + 4 * k + j])
                            if k < 4 { s0 += p } else { s1 += p }
                        }
                    }
                    let d = g.loadUnaligned(fromByteOffset: 256 + 4 * r, as: Float.self)
                    let m = g.loadUnaligned(fromByteOffset: 288 + 4 * r, as: Float.self)
                    let b0 = Int32(a.bsums[2 * ab]), b1 = Int32(a.bsums[2 * ab + 1])
                    switch layout {
                    case .symmetric(let c): sum += d * a.d[ab] * Float(s0 + s1 - c * (b0 + b1))
                    case .affine: sum += d * a.d[ab] * Float(s0 + s1) + m * a.s[ab]
                    case .halves: sum += a.d[ab] * (d * Float(s0 - 32 * b0) + m * Float(s1 - 32 * b1))
                    }
                }
                out[t * ldy + r] = sum
            }
        }
    }

    #if LEAP_X86_AVX2
    /// Σ u a of one 32-value block for the 8 rows (lanes) of a packed group, starting at
    /// `start`: `w` the 8 level vectors, `a` the 8 broadcast activation words.
    @inline(__always)
    static func blockSum(
        _ start: __m256i, _ w: (__m256i, __m256i, __m256i, __m256i, __m256i, __m256i, __m256i, __m256i),
        _ a: (__m256i, __m256i, __m256i, __m256i, __m256i, __m256i, __m256i, __m256i), maxLevel: Int
    ) -> __m256i {
        #if LEAP_X86_AVX512VNNI
        // Two independent chains of 4 (half the dependency depth of one chain of 8).
        var s = mulSumU8S8(start, w.0, a.0)
        var s1 = mulSumU8S8(_mm256_setzero_si256(), w.1, a.1)
        s = mulSumU8S8(s, w.2, a.2)
        s1 = mulSumU8S8(s1, w.3, a.3)
        s = mulSumU8S8(s, w.4, a.4)
        s1 = mulSumU8S8(s1, w.5, a.5)
        s = mulSumU8S8(s, w.6, a.6)
        s1 = mulSumU8S8(s1, w.7, a.7)
        return _mm256_add_epi32(s, s1)
        #else
        let ones = _mm256_set1_epi16(1)
        let p0 = _mm256_maddubs_epi16(w.0, a.0), p1 = _mm256_maddubs_epi16(w.1, a.1)
        let p2 = _mm256_maddubs_epi16(w.2, a.2), p3 = _mm256_maddubs_epi16(w.3, a.3)
        let p4 = _mm256_maddubs_epi16(w.4, a.4), p5 = _mm256_maddubs_epi16(w.5, a.5)
        let p6 = _mm256_maddubs_epi16(w.6, a.6), p7 = _mm256_maddubs_epi16(w.7, a.7)
        let q0 = _mm256_add_epi16(_mm256_add_epi16(p0, p1), _mm256_add_epi16(p2, p3))
        let q1 = _mm256_add_epi16(_mm256_add_epi16(p4, p5), _mm256_add_epi16(p6, p7))
        if maxLevel <= 15 {
            // 8 Int16 terms of at most 2 * 15 * 127 each: no overflow.
            return _mm256_add_epi32(start, _mm256_madd_epi16(_mm256_add_epi16(q0, q1), ones))
        }
        precondition(maxLevel <= 31, "AVX2 block sums need levels below 32")
        return _mm256_add_epi32(start, _mm256_add_epi32(_mm256_madd_epi16(q0, ones), _mm256_madd_epi16(q1, ones)))
        #endif
    }

    /// Σ u a over values 0..<16 and 16..<32 of one block (the Q6_K halves), starting at
    /// `start0` and `start1`.
    @inline(__always)
    static func halfSums(
        _ start0: __m256i, _ start1: __m256i,
        _ w: (__m256i, __m256i, __m256i, __m256i, __m256i, __m256i, __m256i, __m256i),
        _ a: (__m256i, __m256i, __m256i, __m256i, __m256i, __m256i, __m256i, __m256i)
    ) -> (__m256i, __m256i) {
        #if LEAP_X86_AVX512VNNI
        var s0 = mulSumU8S8(start0, w.0, a.0)
        var s1 = mulSumU8S8(start1, w.4, a.4)
        s0 = mulSumU8S8(s0, w.1, a.1)
        s1 = mulSumU8S8(s1, w.5, a.5)
        s0 = mulSumU8S8(s0, w.2, a.2)
        s1 = mulSumU8S8(s1, w.6, a.6)
        s0 = mulSumU8S8(s0, w.3, a.3)
        s1 = mulSumU8S8(s1, w.7, a.7)
        return (s0, s1)
        #else
        // 6-bit levels: two Int16 terms of at most 2 * 63 * 127 each fit, not more.
        let ones = _mm256_set1_epi16(1)
        @inline(__always) func pair(_ x: __m256i, _ ax: __m256i, _ y: __m256i, _ ay: __m256i) -> __m256i {
            _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(x, ax), _mm256_maddubs_epi16(y, ay)), ones)
        }
        let s0 = _mm256_add_epi32(_mm256_add_epi32(start0, pair(w.0, a.0, w.1, a.1)), pair(w.2, a.2, w.3, a.3))
        let s1 = _mm256_add_epi32(_mm256_add_epi32(start1, pair(w.4, a.4, w.5, a.5)), pair(w.6, a.6, w.7, a.7))
        return (s0, s1)
        #endif
    }

    /// Activation rows `0..<rowsHere` (1...4) of a chunk times one packed group:
    /// `out[t * ldy + lane]` for the group's `valid` lanes. `aq` is the first activation
    /// row's levels (rows `32 * nb` bytes apart), `ad`/`asum` its block scales and sums
    /// (`nb` per row), `offsets` its Int32 offsets (`layout.offsetsPerBlock` per block).
    @inline(__always)
    static func multiplyGroup(
        _ packed: UnsafeRawPointer, nb: Int, rowsHere: Int, layout: Layout, maxLevel: Int,
        _ aq: UnsafeRawPointer, _ ad: UnsafePointer<Float>, _ asum: UnsafePointer<Float>,
        _ offsets: UnsafePointer<Int32>?,
        _ out: UnsafeMutablePointer<Float>, ldy: Int, valid: Int
    ) {
        let stride = 32 * nb
        var acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps()
        var acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps()
        for i in 0..<nb {
            let g = packed + i * groupBlockBytes
            let w = (
                load256(g, 0), load256(g, 32), load256(g, 64), load256(g, 96),
                load256(g, 128), load256(g, 160), load256(g, 192), load256(g, 224)
            )
            let dw = g.loadUnaligned(fromByteOffset: 256, as: __m256.self)
            let mw = g.loadUnaligned(fromByteOffset: 288, as: __m256.self)
            @inline(__always) func row(_ t: Int, _ acc: inout __m256) {
                let p = aq + t * stride + 32 * i
                @inline(__always) func word(_ k: Int) -> __m256i {
                    _mm256_set1_epi32(p.loadUnaligned(fromByteOffset: 4 * k, as: Int32.self))
                }
                let a = (word(0), word(1), word(2), word(3), word(4), word(5), word(6), word(7))
                let ab = t * nb + i
                switch layout {
                case .halves:
                    let (s0, s1) = halfSums(
                        _mm256_set1_epi32(offsets![2 * ab]), _mm256_set1_epi32(offsets![2 * ab + 1]), w, a)
                    let u = _mm256_fmadd_ps(mw, _mm256_cvtepi32_ps(s1), _mm256_mul_ps(dw, _mm256_cvtepi32_ps(s0)))
                    acc = _mm256_fmadd_ps(u, _mm256_set1_ps(ad[ab]), acc)
                case .symmetric:
                    let s = blockSum(_mm256_set1_epi32(offsets![ab]), w, a, maxLevel: maxLevel)
                    acc = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(ad[ab])), _mm256_cvtepi32_ps(s), acc)
                case .affine:
                    let s = blockSum(_mm256_setzero_si256(), w, a, maxLevel: maxLevel)
                    acc = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(ad[ab])), _mm256_cvtepi32_ps(s), acc)
                    acc = _mm256_fmadd_ps(mw, _mm256_set1_ps(asum[ab]), acc)
                }
            }
            row(0, &acc0)
            if rowsHere > 1 { row(1, &acc1) }
            if rowsHere > 2 { row(2, &acc2) }
            if rowsHere > 3 { row(3, &acc3) }
        }
        storeRows(rowsHere, acc0, acc1, acc2, acc3, out, ldy: ldy, valid: valid)
    }

    /// Stores the first `rowsHere` of four accumulators (one activation row each) at `out`,
    /// rows `ldy` apart, each the group's `valid` lanes.
    @inline(__always)
    static func storeRows(
        _ rowsHere: Int, _ acc0: __m256, _ acc1: __m256, _ acc2: __m256, _ acc3: __m256, _ out: UnsafeMutablePointer<Float>,
        ldy: Int, valid: Int
    ) {
        @inline(__always) func store(_ t: Int, _ acc: __m256) {
            let y = out + t * ldy
            if valid == 8 {
                UnsafeMutableRawPointer(y).storeBytes(of: acc, as: __m256.self)
            } else {
                let v = acc
                for lane in 0..<valid { y[lane] = v[lane] }
            }
        }
        store(0, acc0)
        if rowsHere > 1 { store(1, acc1) }
        if rowsHere > 2 { store(2, acc2) }
        if rowsHere > 3 { store(3, acc3) }
    }

    /// The order both integer matmuls walk a call in: activation rows `rows` in chunks of
    /// `activationChunk` (in cache while every group of `groups` goes through them), each
    /// chunk through each group 4 rows at a time, then one at a time. `tile(group, t, n)`
    /// multiplies rows `t..<t + n` with `group`, whose `valid` rows of `weightRows` it is given.
    @inline(__always)
    static func forEachTile(
        rows: Range<Int>, groups: Range<Int>, weightRows: Int, groupRows: Int = groupRows,
        _ tile: (_ group: Int, _ t: Int, _ n: Int, _ valid: Int) -> Void
    ) {
        var t0 = rows.lowerBound
        while t0 < rows.upperBound {
            let t1 = Swift.min(rows.upperBound, t0 + activationChunk)
            for group in groups {
                let valid = Swift.min(groupRows, weightRows - group * groupRows)
                var t = t0
                while t + 4 <= t1 {
                    tile(group, t, 4, valid)
                    t += 4
                }
                while t < t1 {
                    tile(group, t, 1, valid)
                    t += 1
                }
            }
            t0 = t1
        }
    }

    /// Activation rows `rows` times packed groups `groups` (each `nb` group blocks at
    /// `packed + group * nb * groupBlockBytes`) of a matrix of `type`, into `y` (`ldy`
    /// floats per row).
    static func multiply(
        _ type: GGMLType, _ packed: UnsafeRawPointer, groups: Range<Int>, weightRows: Int, nb: Int,
        _ a: ActivationView, rows: Range<Int>, _ offsets: UnsafePointer<Int32>?,
        _ y: UnsafeMutablePointer<Float>, ldy: Int
    ) {
        // One specialized loop per layout and level width.
        switch (layout(type)!, maxLevel(type)) {
        case (.symmetric, 255): multiply(SymmetricBytes.self, packed, groups, weightRows, nb, a, rows, offsets, y, ldy)
        case (.symmetric, 15): multiply(Symmetric4Bits.self, packed, groups, weightRows, nb, a, rows, offsets, y, ldy)
        case (.symmetric, _): multiply(Symmetric5Bits.self, packed, groups, weightRows, nb, a, rows, offsets, y, ldy)
        case (.affine, 15): multiply(Affine4Bits.self, packed, groups, weightRows, nb, a, rows, offsets, y, ldy)
        case (.affine, _): multiply(Affine5Bits.self, packed, groups, weightRows, nb, a, rows, offsets, y, ldy)
        case (.halves, _): multiply(Halves6Bits.self, packed, groups, weightRows, nb, a, rows, offsets, y, ldy)
        }
    }

    private static func multiply<Kind: PackedKind>(
        _ kind: Kind.Type, _ packed: UnsafeRawPointer, _ groups: Range<Int>, _ weightRows: Int, _ nb: Int,
        _ a: ActivationView, _ rows: Range<Int>, _ offsets: UnsafePointer<Int32>?, _ y: UnsafeMutablePointer<Float>, _ ldy: Int
    ) {
        let perBlock = Kind.layout.offsetsPerBlock
        forEachTile(rows: rows, groups: groups, weightRows: weightRows) { group, t, n, valid in
            multiplyGroup(
                packed + group * nb * groupBlockBytes, nb: nb, rowsHere: n, layout: Kind.layout, maxLevel: Kind.maxLevel,
                UnsafeRawPointer(a.qs + t * nb * 32), a.d + t * nb, a.s + t * nb, offsets.map { $0 + t * nb * perBlock },
                y + t * ldy + group * groupRows, ldy: ldy, valid: valid)
        }
    }
    #endif
}

/// A layout and level width, as a type, so that each kernel loop is compiled for one.
protocol PackedKind {
    static var layout: IntegerMatmul.Layout { get }
    static var maxLevel: Int { get }
}
enum SymmetricBytes: PackedKind {
    static var layout: IntegerMatmul.Layout { .symmetric(c: 128) }
    static var maxLevel: Int { 255 }
}
enum Symmetric4Bits: PackedKind {
    static var layout: IntegerMatmul.Layout { .symmetric(c: 8) }
    static var maxLevel: Int { 15 }
}
enum Symmetric5Bits: PackedKind {
    static var layout: IntegerMatmul.Layout { .symmetric(c: 16) }
    static var maxLevel: Int { 31 }
}
enum Affine4Bits: PackedKind {
    static var layout: IntegerMatmul.Layout { .affine }
    static var maxLevel: Int { 15 }
}
enum Affine5Bits: PackedKind {
    static var layout: IntegerMatmul.Layout { .affine }
    static var maxLevel: Int { 31 }
}
enum Halves6Bits: PackedKind {
    static var layout: IntegerMatmul.Layout { .halves }
    static var maxLevel: Int { 63 }
}

extension WeightMatrix {
    /// Whether ``matmul(_:rows:into:scratch:scratchBytes:pool:)`` multiplies this matrix
    /// with 8-bit integer products in this build: Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and
    /// Q6_K weights on x86 with AVX2, and Q8_0 too with AVX-512 VNNI. Where false, prompt
    /// processing should use the F32 ``matmul(_:count:into:scratch:scratchCount:pool:)``
    /// (OpenBLAS), which is faster than the row-by-row fallback.
    public var hasIntegerMatmul: Bool { IntegerMatmul.supports(type) }

    /// Bytes of scratch ``matmul(_:rows:into:scratch:scratchBytes:pool:)`` needs for
    /// `rows` activation rows: the packed weights and the activations' Int32 offsets (one
    /// per block for the symmetric formats, two for Q6_K).
    public func integerMatmulScratchBytes(rows activationRows: Int) -> Int {
        let groups = (rows + IntegerMatmul.groupRows - 1) / IntegerMatmul.groupRows
        let nb = IntegerMatmul.blocksPerRow(cols)
        return groups * nb * IntegerMatmul.groupBlockBytes + activationRows * nb * 4 * 2
    }

    /// `Y = X Wᵀ` for `count` activation rows quantized by
    /// ``QuantizedActivations/quantizeRows(_:rows:cols:keepingFloats:pool:)`` (`x` holds
    /// `count x cols` values); `y` receives `count x rows` floats, row-major. The same as
    /// ``matmul(_:rows:into:scratch:scratchBytes:pool:)-(_,Range<Int>,_,_,_,_)`` over rows `0..<count`.
    public func matmul(
        _ x: QuantizedActivations, rows count: Int, into y: UnsafeMutablePointer<Float>,
        scratch: UnsafeMutableRawPointer? = nil, scratchBytes: Int = 0, pool: ThreadPool? = nil
    ) {
        precondition(count >= 0 && x.count == count * cols, "matmul: \(x.count) activations for \(count) rows of \(cols)")
        matmul(x, rows: 0..<count, into: y, scratch: scratch, scratchBytes: scratchBytes, pool: pool)
    }

    /// `Y = X Wᵀ` for the activation rows `rows` of `x` (quantized by
    /// ``QuantizedActivations/quantizeRows(_:rows:cols:keepingFloats:pool:)`` in rows of
    /// `cols`): activation row `t`'s products go to `y + t * self.rows`. Each product
    /// equals ``GGMLType/dotReference(_:_:)`` of the weight row with the activation row up
    /// to float summation order, and a row's results do not depend on the other rows of
    /// the call (how many, or where). With ``hasIntegerMatmul`` the weights are packed
    /// into `scratch` (at least ``integerMatmulScratchBytes(rows:)`` bytes for
    /// `rows.count`; allocated per call when nil or too small) and multiplied with integer
    /// products, split over `pool` by groups of 8 weight rows; otherwise the rows go through
    /// ``matvec(_:rows:into:pool:)``.
    public func matmul(
        _ x: QuantizedActivations, rows: Range<Int>, into y: UnsafeMutablePointer<Float>,
        scratch: UnsafeMutableRawPointer? = nil, scratchBytes: Int = 0, pool: ThreadPool? = nil
    ) {
        precondition(
            rows.lowerBound >= 0 && x.count >= rows.upperBound * cols, "matmul: \(x.count) activations for rows \(rows) of \(cols)")
        precondition(type.usesQuantizedActivations, "matmul: \(type) weights multiply float activations")
        precondition(x.blockCount * 32 == x.count, "matmul: activations are not whole blocks of 32")
        if rows.isEmpty || self.rows == 0 { return }
        guard hasIntegerMatmul else {
            matvec(x, rows: rows, into: y, pool: pool)
            return
        }
        #if LEAP_X86_AVX2
        let count = rows.count, nb = IntegerMatmul.blocksPerRow(cols)
        let a = x.view.row(rows.lowerBound, cols: cols)
        let y = y + rows.lowerBound * self.rows
        let needed = integerMatmulScratchBytes(rows: count)
        let owned: UnsafeMutableRawPointer? =
            (scratch == nil || scratchBytes < needed)
            ? .allocate(byteCount: needed, alignment: 64) : nil
        defer { owned?.deallocate() }
        let packed = owned ?? scratch!
        let groups = (self.rows + IntegerMatmul.groupRows - 1) / IntegerMatmul.groupRows
        var offsets: UnsafePointer<Int32>? = nil
        let layout = IntegerMatmul.layout(type)!
        if layout != .affine {
            let blocks = count * nb
            let o = (packed + groups * nb * IntegerMatmul.groupBlockBytes)
                .bindMemory(to: Int32.self, capacity: blocks * layout.offsetsPerBlock)
            switch layout {
            case .symmetric(let c):
                for k in 0..<blocks { o[k] = -c * (Int32(a.bsums[2 * k]) + Int32(a.bsums[2 * k + 1])) }
            default:
                for k in 0..<(2 * blocks) { o[k] = -32 * Int32(a.bsums[k]) }
            }
            offsets = UnsafePointer(o)
        }
        let t = type, weightRows = self.rows, offs = offsets
        let body: (Range<Int>) -> Void = { range in
            for g in range { self.packIntegerGroup(g, nb: nb, into: packed + g * nb * IntegerMatmul.groupBlockBytes) }
            IntegerMatmul.multiply(
                t, UnsafeRawPointer(packed), groups: range, weightRows: weightRows, nb: nb, a,
                rows: 0..<count, offs, y, ldy: weightRows)
        }
        if let pool, pool.threads > 1, groups > 1 {
            pool.parallelFor(count: groups, minChunk: 2, body)
        } else {
            body(0..<groups)
        }
        #endif
    }
}

#if LEAP_X86_AVX2
extension WeightMatrix {
    /// Packs group `g` (rows `8g..<8g + 8`; missing rows zero) in the 8-bit matmul's layout:
    /// from the decode copy when it holds the group (the pages of `data` may have been
    /// released), else from the stored rows. `nb` is the blocks of 32 per row.
    func packIntegerGroup(_ g: Int, nb: Int, into dst: UnsafeMutableRawPointer) {
        if let interleaved, g < interleaved.groups {
            interleaved.packForMatmul(g, into: dst)
            return
        }
        let r0 = g * IntegerMatmul.groupRows
        IntegerMatmul.packGroup(type, data, rowBytes: rowBytes, rows: r0..<Swift.min(rows, r0 + IntegerMatmul.groupRows), nb: nb, dst)
    }
}
#endif
