// Prompt processing with 8-bit integer products: `Y = X Wᵀ` for a batch of activation
// rows quantized like decode's (QuantizedActivations: int8 + fp32 scale per 32 values)
// and the weights' own integer levels, multiplied with AVX-512 VNNI `vpdpbusd`.
//
// Every 32-value block of the supported formats is an affine map of unsigned levels:
//
//   Q8_0  u = q + 128 (0...255)   value = d * u - 128 d
//   Q4_0  u = nibble  (0...15)    value = d * u - 8 d
//   Q4_1  u = nibble              value = d * u + m
//   Q5_0  u = 5 bits  (0...31)    value = d * u - 16 d
//   Q5_1  u = 5 bits              value = d * u + m
//
// so a block's dot product with an activation block (scale da, levels a, sa = da * sum(a))
// is  d * da * sum(u * a) + m * sa,  and for the symmetric formats (m = -c d)
// d * da * (sum(u * a) - c * sum(a)): the integer sum starts at -c * sum(a) and no second
// float term is needed.
//
// Packed weights. Before multiplying, each group of 8 weight rows is repacked into
// `nb` group blocks of 320 bytes (one per 32 columns):
//
//   bytes   0..<256  levels: 8 vectors of 32 bytes; vector k holds, for rows 0...7 in
//                    turn, the 4 levels 4k...4k+3 of that row's block
//   bytes 256..<288  d of rows 0...7 (Float)
//   bytes 288..<320  m of rows 0...7 (Float)
//
// With this layout `vpdpbusd(acc, levels[k], broadcast(4 activation bytes 4k...4k+3))`
// adds to lane r the products of row r, so 8 instructions give the 8 rows' block sums in
// the 8 lanes of one register: no horizontal sums. The 8 level vectors stay in registers
// while 4 activation rows go through them (register blocking), and a packed group
// (8 x cols bytes and scales, 10-15 KB) stays in L1 while every activation row of a chunk
// of 64 (in L2) is multiplied with it.
//
// Without VNNI (AVX2-only or portable builds) `matmul` on quantized activations runs the
// decode kernels (the multi-row `matvec`); the engine's prefill keeps using the F32
// sgemm path there (see `hasIntegerMatmul`).

import GGUF

#if LEAP_X86_AVX2
import _Builtin_intrinsics.intel
#endif

enum IntegerMatmul {
    /// Weight rows per packed group (the lanes of a 256-bit register of Int32).
    static let groupRows = 8
    /// Bytes of one packed group block: 256 bytes of levels, 8 scales, 8 mins.
    static let groupBlockBytes = 320
    /// Activation rows multiplied with a packed group before moving to the next group.
    static let activationChunk = 64

    /// Whether this build has the VNNI kernels.
    static var isAvailable: Bool {
        #if LEAP_X86_AVX512VNNI
        return true
        #else
        return false
        #endif
    }

    /// The formats with an integer level map.
    static func supports(_ type: GGMLType) -> Bool {
        switch type {
        case .q8_0, .q4_0, .q4_1, .q5_0, .q5_1: return true
        default: return false
        }
    }

    /// `c` of a symmetric format (value = d * (u - c)), nil for the formats with a min.
    static func symmetricOffset(_ type: GGMLType) -> Int32? {
        switch type {
        case .q8_0: return 128
        case .q4_0: return 8
        case .q5_0: return 16
        default: return nil
        }
    }

    /// The 32 unsigned levels of the block at `b` into `u`, and its scale and offset:
    /// value j = d * u[j] + m. Scalar reference for the packing.
    static func levelsReference(_ type: GGMLType, _ b: UnsafeRawPointer, _ u: UnsafeMutablePointer<UInt8>) -> (d: Float, m: Float) {
        func nibbles(_ offset: Int) {
            for j in 0..<16 {
                u[j] = byte(b, offset + j) & 0x0F
                u[j + 16] = byte(b, offset + j) >> 4
            }
        }
        func fifthBits(_ qh: UInt32) {
            for j in 0..<32 { u[j] |= UInt8(truncatingIfNeeded: (qh >> UInt32(j)) & 1) << 4 }
        }
        switch type {
        case .q8_0:
            for j in 0..<32 { u[j] = byte(b, 2 + j) ^ 0x80 }
            let d = loadHalfReference(b, 0)
            return (d, -128 * d)
        case .q4_0:
            nibbles(2)
            let d = loadHalfReference(b, 0)
            return (d, -8 * d)
        case .q4_1:
            nibbles(4)
            return (loadHalfReference(b, 0), loadHalfReference(b, 2))
        case .q5_0:
            nibbles(6)
            fifthBits(b.loadUnaligned(fromByteOffset: 2, as: UInt32.self))
            let d = loadHalfReference(b, 0)
            return (d, -16 * d)
        case .q5_1:
            nibbles(8)
            fifthBits(b.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
            return (loadHalfReference(b, 0), loadHalfReference(b, 2))
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
                let (d, m) = levelsReference(type, base + row * rowBytes + i * type.typeSize, u)
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
        default: preconditionFailure("no integer levels for \(type)")
        }
        #else
        packGroupReference(type, base, rowBytes: rowBytes, rows: rows, nb: nb, dst)
        #endif
    }

    #if LEAP_X86_AVX2
    @inline(__always)
    static func packGroupAVX2(
        _ base: UnsafeRawPointer, rowBytes: Int, rows: Range<Int>, nb: Int, typeSize: Int,
        _ dst: UnsafeMutableRawPointer,
        _ levels: (UnsafeRawPointer) -> (__m256i, Float, Float)
    ) {
        let n = rows.count
        precondition(n >= 1 && n <= groupRows)
        // Missing rows read row 0 again; their lanes are cleared below.
        var rowBase = [UnsafeRawPointer](repeating: base + rows.lowerBound * rowBytes, count: 8)
        for r in 0..<n { rowBase[r] = base + (rows.lowerBound + r) * rowBytes }
        let keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(Int32(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
        rowBase.withUnsafeBufferPointer { rb in
            var d = SIMD8<Float>(), m = SIMD8<Float>()
            for i in 0..<nb {
                let off = i * typeSize
                let (v0, d0, m0) = levels(rb[0] + off), (v1, d1, m1) = levels(rb[1] + off)
                let (v2, d2, m2) = levels(rb[2] + off), (v3, d3, m3) = levels(rb[3] + off)
                let (v4, d4, m4) = levels(rb[4] + off), (v5, d5, m5) = levels(rb[5] + off)
                let (v6, d6, m6) = levels(rb[6] + off), (v7, d7, m7) = levels(rb[7] + off)
                d = SIMD8(d0, d1, d2, d3, d4, d5, d6, d7)
                m = SIMD8(m0, m1, m2, m3, m4, m5, m6, m7)
                // 8 x 8 transposition of 32-bit words: out[k] = word k of every row.
                let t0 = _mm256_unpacklo_epi32(v0, v1), t1 = _mm256_unpackhi_epi32(v0, v1)
                let t2 = _mm256_unpacklo_epi32(v2, v3), t3 = _mm256_unpackhi_epi32(v2, v3)
                let t4 = _mm256_unpacklo_epi32(v4, v5), t5 = _mm256_unpackhi_epi32(v4, v5)
                let t6 = _mm256_unpacklo_epi32(v6, v7), t7 = _mm256_unpackhi_epi32(v6, v7)
                // u0: word 0 of rows 0-3 | word 4 of rows 0-3, and so on.
                let u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2)
                let u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3)
                let u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6)
                let u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7)
                let g = dst + i * groupBlockBytes
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
        }
    }
    #endif

    /// Scalar reference of the packed kernel: `out[t * ldy + r] = sum over blocks of
    /// d_r * da * sum(u * a) + m_r * sa` for activation rows `0..<count` and the group's
    /// `valid` rows. For tests of the packed layout.
    static func multiplyGroupReference(
        _ packed: UnsafeRawPointer, nb: Int, _ a: ActivationView, count: Int,
        _ out: UnsafeMutablePointer<Float>, ldy: Int, valid: Int
    ) {
        for t in 0..<count {
            for r in 0..<valid {
                var sum: Float = 0
                for i in 0..<nb {
                    let g = packed + i * groupBlockBytes
                    var s: Int32 = 0
                    for k in 0..<8 {
                        for j in 0..<4 {
                            s +=
                                Int32(g.load(fromByteOffset: 32 * k + 4 * r + j, as: UInt8.self))
                                * Int32(a.qs[(t * nb + i) * 32 + 4 * k + j])
                        }
                    }
                    let d = g.loadUnaligned(fromByteOffset: 256 + 4 * r, as: Float.self)
                    let m = g.loadUnaligned(fromByteOffset: 288 + 4 * r, as: Float.self)
                    sum += d * a.d[t * nb + i] * Float(s) + m * a.s[t * nb + i]
                }
                out[t * ldy + r] = sum
            }
        }
    }

    #if LEAP_X86_AVX512VNNI
    /// Activation rows `0..<rowsHere` (1...4) of a chunk times one packed group:
    /// `out[t * ldy + lane]` for the group's `valid` lanes. `aq` is the first activation
    /// row's levels (rows `cols` bytes apart), `ad`/`asum` its block scales and sums
    /// (`nb` per row), `offsets` (symmetric formats) its -c * sum(a) per block.
    @inline(__always)
    static func multiplyGroup(
        _ packed: UnsafeRawPointer, nb: Int, rowsHere: Int,
        _ aq: UnsafeRawPointer, _ ad: UnsafePointer<Float>, _ asum: UnsafePointer<Float>,
        _ offsets: UnsafePointer<Int32>?,
        _ out: UnsafeMutablePointer<Float>, ldy: Int, valid: Int
    ) {
        let stride = 32 * nb
        var acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps()
        var acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps()
        for i in 0..<nb {
            let g = packed + i * groupBlockBytes
            let w0 = load256(g, 0), w1 = load256(g, 32), w2 = load256(g, 64), w3 = load256(g, 96)
            let w4 = load256(g, 128), w5 = load256(g, 160), w6 = load256(g, 192), w7 = load256(g, 224)
            let dw = g.loadUnaligned(fromByteOffset: 256, as: __m256.self)
            let mw = g.loadUnaligned(fromByteOffset: 288, as: __m256.self)
            @inline(__always) func row(_ t: Int, _ acc: inout __m256) {
                let a = aq + t * stride + 32 * i
                // Two independent chains of 4 (half the dependency depth of one chain of 8).
                var s = offsets.map { _mm256_set1_epi32($0[t * nb + i]) } ?? _mm256_setzero_si256()
                var s1 = _mm256_setzero_si256()
                s = mulSumU8S8(s, w0, _mm256_set1_epi32(a.loadUnaligned(fromByteOffset: 0, as: Int32.self)))
                s1 = mulSumU8S8(s1, w1, _mm256_set1_epi32(a.loadUnaligned(fromByteOffset: 4, as: Int32.self)))
                s = mulSumU8S8(s, w2, _mm256_set1_epi32(a.loadUnaligned(fromByteOffset: 8, as: Int32.self)))
                s1 = mulSumU8S8(s1, w3, _mm256_set1_epi32(a.loadUnaligned(fromByteOffset: 12, as: Int32.self)))
                s = mulSumU8S8(s, w4, _mm256_set1_epi32(a.loadUnaligned(fromByteOffset: 16, as: Int32.self)))
                s1 = mulSumU8S8(s1, w5, _mm256_set1_epi32(a.loadUnaligned(fromByteOffset: 20, as: Int32.self)))
                s = mulSumU8S8(s, w6, _mm256_set1_epi32(a.loadUnaligned(fromByteOffset: 24, as: Int32.self)))
                s1 = mulSumU8S8(s1, w7, _mm256_set1_epi32(a.loadUnaligned(fromByteOffset: 28, as: Int32.self)))
                s = _mm256_add_epi32(s, s1)
                acc = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(ad[t * nb + i])), _mm256_cvtepi32_ps(s), acc)
                if offsets == nil {
                    acc = _mm256_fmadd_ps(mw, _mm256_set1_ps(asum[t * nb + i]), acc)
                }
            }
            row(0, &acc0)
            if rowsHere > 1 { row(1, &acc1) }
            if rowsHere > 2 { row(2, &acc2) }
            if rowsHere > 3 { row(3, &acc3) }
        }
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

    /// Activation rows `rows` times packed groups `groups` (each `nb` group blocks at
    /// `packed + group * nb * groupBlockBytes`), into `y` (`ldy` floats per row).
    static func multiply(
        _ packed: UnsafeRawPointer, groups: Range<Int>, weightRows: Int, nb: Int,
        _ a: ActivationView, rows: Range<Int>, _ offsets: UnsafePointer<Int32>?,
        _ y: UnsafeMutablePointer<Float>, ldy: Int
    ) {
        var t0 = rows.lowerBound
        while t0 < rows.upperBound {
            let t1 = Swift.min(rows.upperBound, t0 + activationChunk)
            for group in groups {
                let p = packed + group * nb * groupBlockBytes
                let valid = Swift.min(groupRows, weightRows - group * groupRows)
                var t = t0
                @inline(__always) func run(_ n: Int, _ symmetric: Bool) {
                    let aq = UnsafeRawPointer(a.qs + t * nb * 32)
                    multiplyGroup(
                        p, nb: nb, rowsHere: n, aq, a.d + t * nb, a.s + t * nb,
                        symmetric ? offsets! + t * nb : nil, y + t * ldy + group * groupRows, ldy: ldy, valid: valid)
                }
                if offsets != nil {
                    while t + 4 <= t1 {
                        run(4, true)
                        t += 4
                    }
                    while t < t1 {
                        run(1, true)
                        t += 1
                    }
                } else {
                    while t + 4 <= t1 {
                        run(4, false)
                        t += 4
                    }
                    while t < t1 {
                        run(1, false)
                        t += 1
                    }
                }
            }
            t0 = t1
        }
    }
    #endif
}

extension WeightMatrix {
    /// Whether ``matmul(_:rows:into:scratch:scratchBytes:pool:)`` multiplies this matrix
    /// with 8-bit integer products in this build (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 weights on
    /// x86 with AVX-512 VNNI). Where false, prompt processing should use the F32
    /// ``matmul(_:count:into:scratch:scratchCount:pool:)`` (OpenBLAS), which is faster
    /// than the row-by-row fallback.
    public var hasIntegerMatmul: Bool { IntegerMatmul.isAvailable && IntegerMatmul.supports(type) }

    /// Bytes of scratch ``matmul(_:rows:into:scratch:scratchBytes:pool:)`` needs for
    /// `rows` activation rows: the packed weights and, for the symmetric formats, one
    /// Int32 per activation block.
    public func integerMatmulScratchBytes(rows activationRows: Int) -> Int {
        let groups = (rows + IntegerMatmul.groupRows - 1) / IntegerMatmul.groupRows
        return groups * (cols / 32) * IntegerMatmul.groupBlockBytes + activationRows * (cols / 32) * 4
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
    /// `rows.count`; allocated per call when nil or too small) and multiplied with VNNI,
    /// split over `pool` by groups of 8 weight rows; otherwise the rows go through
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
        #if LEAP_X86_AVX512VNNI
        let count = rows.count, nb = cols / 32
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
        if let c = IntegerMatmul.symmetricOffset(type) {
            let o = (packed + groups * nb * IntegerMatmul.groupBlockBytes).bindMemory(to: Int32.self, capacity: count * nb)
            for k in 0..<(count * nb) { o[k] = -c * (Int32(a.bsums[2 * k]) + Int32(a.bsums[2 * k + 1])) }
            offsets = UnsafePointer(o)
        }
        let t = type, base = data, stride = rowBytes, weightRows = self.rows, offs = offsets
        let body: (Range<Int>) -> Void = { range in
            for g in range {
                let r0 = g * IntegerMatmul.groupRows
                IntegerMatmul.packGroup(
                    t, base, rowBytes: stride, rows: r0..<Swift.min(weightRows, r0 + IntegerMatmul.groupRows),
                    nb: nb, packed + g * nb * IntegerMatmul.groupBlockBytes)
            }
            IntegerMatmul.multiply(
                UnsafeRawPointer(packed), groups: range, weightRows: weightRows, nb: nb, a,
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
