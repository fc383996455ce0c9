// Decode's layout for Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0: the rows of a matrix repacked once, at load,
// into groups of 8 rows whose blocks are interleaved, so that one instruction works on 8
// rows at once and no horizontal sums are needed. (Q4_K's groups hold a super-block per
// chunk instead: InterleavedSuperBlocks.swift.)
//
// Why. A decode step is one matrix-vector product per matrix: every weight byte is used
// once, so the kernel should stream weights as fast as memory delivers them. In ggml's
// row-major layout the AVX2 kernel of a 4-bit row spends about 7 vector instructions per
// 32-value block (unpack, multiply, widen, convert, scale, offset), which on this
// project's Zen 3 machine caps one core at ~10 GB/s of Q4_0 weights, half the core's read
// bandwidth. With 8 rows interleaved, the widening, the conversion and the scaling are
// shared by the 8 rows: about 4 instructions per row-block, and the kernel runs at
// 2.5 times the speed on cached weights (docs/performance-log.md, "After: decode through
// the interleaved copy").
//
// The layout. Rows 8g..<8g+8 form group g. Its blocks go in pairs ("chunks"), each chunk
// the scales of its two blocks followed by their levels, so that the kernel reads one
// sequential stream:
//
//   chunk of blocks 2c, 2c+1   (288 bytes for Q4_0, 320 for Q4_1, 352 for Q5_0, 384 for
//                               Q5_1, 544 for Q8_0)
//     d        2 x 16 bytes    block 2c+k: the fp16 scales d of rows 0...7
//     m        2 x 16 bytes    (Q4_1, Q5_1) the fp16 minimums m of rows 0...7
//     levels   2 x L bytes     block 2c+k: vectors of 32 bytes; in vector j, bytes
//                              4r..<4r+4 are row r's qs[4j..<4j+4]
//
// Q4_0 and Q4_1 (L = 128): vector j holds the nibbles of values 4j..<4j+4 in its low
// halves and of values 16+4j..<20+4j in its high ones, so that
// `vpmaddubsw(levels[j] & 0x0F, broadcast(activations 4j..<4j+4))` puts row r's products
// in the 32-bit lane r. Q5_0 and Q5_1 (L = 160): the same 4 vectors of nibbles, then one
// vector of fifth bits whose byte 4r+j holds row r's qh bits 4j..<4j+4 (the low values of
// vector j) in its low half and 16+4j..<20+4j in its high half; the kernel spreads each
// bit to its byte (a shuffle and a compare) and ORs it in as 0x10. Q8_0 (L = 256): vector
// j holds values 4j..<4j+4. Either way the 8 rows' block sums come out in the 8 lanes of
// one register. A row of an odd number of
// blocks ends with a chunk of one block, which keeps the full chunk's offsets (so a group
// takes up to 272 bytes more than its 8 rows). Rows past the last whole group stay in the original layout and go
// through the row-major kernel.
//
// Streaming. One core keeps only about a dozen cache lines in flight when each line
// costs ~20 instructions, which caps a kernel at ~7 GB/s on this machine's DRAM, well
// under the ~13 GB/s a plain read loop gets. Each chunk therefore prefetches the lines
// `prefetchDistance` bytes ahead (CPUHints' `leap_prefetch`). Kept apart, in two streams
// per group, the scales cost as much again: that is why they sit inside the chunks.
//
// Numbers. Per (row, block) the integer sum is exact, as in every kernel; each row's
// float sum runs over the blocks in order in one lane: acc += (d * da) * sum, then
// acc - 8 * Σ d * sa (Q4_0), acc - 16 * Σ d * sa (Q5_0), acc + Σ m * sa (Q4_1, Q5_1)
// or acc (Q8_0, whose integer
// sums are the exact Σ w·a on every build). That is a different (equally
// accurate) order than the row-major kernel's, so a matrix's results depend on its
// layout, and only on it: the one-row, multi-row and threaded products of one matrix
// agree bit for bit.

import CPUHints
import GGUF

#if LEAP_X86_AVX2
import _Builtin_intrinsics.intel
#endif

/// A weight matrix's rows repacked in groups of 8 for the decode kernels of Q4_0, Q4_1,
/// Q5_0, Q5_1, Q8_0 (see the file header) and Q4_K (InterleavedSuperBlocks.swift). Made by ``WeightMatrix/interleavedForDecode()``; owns its
/// memory.
public final class InterleavedRows: @unchecked Sendable {
    // @unchecked: written once in init, read-only afterwards.

    /// Rows per group.
    public static let groupRows = 8

    /// Whether this build has interleaved kernels for `type` (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0
    /// and Q4_K on x86 with AVX2; no type in portable builds).
    public static func supports(_ type: GGMLType) -> Bool {
        #if LEAP_X86_AVX2
        return [.q4_0, .q4_1, .q5_0, .q5_1, .q8_0, .q4_K].contains(type)
        #else
        return false
        #endif
    }

    /// The storage type of the rows.
    let type: GGMLType
    /// Whole groups of 8 rows held here; rows `8 * groups...` stay in the original layout.
    let groups: Int
    /// 32-value blocks per row.
    let nb: Int
    /// Bytes of the scales at the start of a chunk: d (and m) of 2 blocks x 8 rows.
    let scaleBytes: Int
    /// Bytes of one block's levels for the 8 rows (`L` in the file header), with their
    /// fifth bits for Q5_0 and Q5_1.
    let levelBytes: Int
    /// Whether the format has a min per block (Q4_1, Q5_1).
    let hasMin: Bool
    /// Whether the levels have a fifth bit (Q5_0, Q5_1).
    let hasFifthBit: Bool
    /// Bytes of a chunk of two blocks.
    let chunkBytes: Int
    /// Bytes per group: its chunks.
    let groupBytes: Int
    /// Bytes of one row in the stored format.
    let rowBytes: Int
    /// The groups, in large pages (LargePages.swift).
    let memory: LargePageMemory
    var storage: UnsafeMutableRawPointer { memory.pointer }

    /// How far ahead of the chunk it works on the kernel prefetches (bytes). Measured on
    /// this project's machine: 1-2 KiB stream at the read loop's speed, no prefetch at
    /// 0.7 of it. `MemoryBandwidth.measureRead` prefetches as far ahead.
    public static let prefetchDistance = 2048

    /// Repacks the whole groups of `matrix`'s rows, in order. `sourceDone`, when given, is
    /// called now and then with the bytes of `matrix.data` read so far (a prefix of whole
    /// rows, not read again by the repacking): their owner may release them as it goes.
    init(_ matrix: WeightMatrix, sourceDone: ((Int) -> Void)? = nil) {
        precondition(Self.supports(matrix.type), "no interleaved kernels for \(matrix.type)")
        type = matrix.type
        groups = matrix.rows / Self.groupRows
        nb = matrix.cols / 32
        rowBytes = matrix.rowBytes
        if type == .q4_K {
            // Chunks of one super-block (InterleavedSuperBlocks.swift).
            hasMin = true
            hasFifthBit = false
            scaleBytes = Self.superBlockScaleBytes
            levelBytes = Self.superBlockPairBytes
            chunkBytes = scaleBytes + 4 * levelBytes
            groupBytes = nb / 8 * chunkBytes
        } else {
            hasMin = type == .q4_1 || type == .q5_1
            hasFifthBit = type == .q5_0 || type == .q5_1
            scaleBytes = hasMin ? 64 : 32
            levelBytes = type == .q8_0 ? 256 : hasFifthBit ? 160 : 128
            chunkBytes = scaleBytes + 2 * levelBytes
            groupBytes = (nb + 1) / 2 * chunkBytes
        }
        memory = LargePages.allocate(byteCount: groups * groupBytes)
        let groupsPerReport = max(1, WeightMatrix.releaseStepBytes / max(1, Self.groupRows * rowBytes))
        for g in 0..<groups {
            if let sourceDone, g > 0, g % groupsPerReport == 0 { sourceDone(g * Self.groupRows * rowBytes) }
            if type == .q4_K {
                repackSuperBlocks(matrix, group: g)
            } else {
                repackBlocks(matrix, group: g)
            }
        }
    }

    /// Writes group `g` of `matrix` (a legacy format) as chunks of two blocks.
    private func repackBlocks(_ matrix: WeightMatrix, group g: Int) {
        let (levelsOffset, fifthBitsOffset) = blockOffsets
        let words = type == .q8_0 ? 8 : 4  // 4-byte words of a row's block
        let dst = storage + g * groupBytes
        for r in 0..<Self.groupRows {
            let row = matrix.row(Self.groupRows * g + r)
            for i in 0..<nb {
                let block = row + matrix.type.typeSize * i
                let chunk = dst + chunkBytes * (i / 2), k = i % 2
                for j in 0..<words {
                    let word = block.loadUnaligned(fromByteOffset: levelsOffset + 4 * j, as: UInt32.self)
                    chunk.storeBytes(of: word, toByteOffset: scaleBytes + levelBytes * k + 32 * j + 4 * r, as: UInt32.self)
                }
                chunk.storeBytes(of: block.loadUnaligned(as: UInt16.self), toByteOffset: 16 * k + 2 * r, as: UInt16.self)
                if hasMin {
                    chunk.storeBytes(
                        of: block.loadUnaligned(fromByteOffset: 2, as: UInt16.self), toByteOffset: 32 + 16 * k + 2 * r, as: UInt16.self)
                }
                if hasFifthBit {
                    let qh = block.loadUnaligned(fromByteOffset: fifthBitsOffset, as: UInt32.self)
                    for j in 0..<4 {
                        let bits = UInt8(truncatingIfNeeded: (qh >> (4 * j)) & 0xF | ((qh >> (16 + 4 * j)) & 0xF) << 4)
                        chunk.storeBytes(of: bits, toByteOffset: scaleBytes + levelBytes * k + 128 + 4 * r + j, as: UInt8.self)
                    }
                }
            }
        }
    }

    /// Bytes this copy takes: the size of the rows it holds, plus 144 (Q4_0), 160 (Q4_1),
    /// 176 (Q5_0), 192 (Q5_1) or 272 (Q8_0) bytes per group when a row has an odd number
    /// of blocks; Q4_K's copy takes 32 bytes more per group and super-block (its 6-bit
    /// scales and mins a byte each).
    public var byteCount: Int { groups * groupBytes }

    /// Where a stored block's levels start (after d, m and qh) and where its fifth bits
    /// `qh` are (Q5_0, Q5_1; 0 otherwise).
    var blockOffsets: (levels: Int, fifthBits: Int) {
        switch type {
        case .q4_1: return (4, 0)
        case .q5_0: return (6, 2)
        case .q5_1: return (8, 4)
        default: return (2, 0)
        }
    }

    /// Group `g`'s first byte.
    @inline(__always)
    func group(_ g: Int) -> UnsafeRawPointer { UnsafeRawPointer(storage + g * groupBytes) }

    /// Writes row `r` (below `8 * groups`) in the stored format, `rowBytes` bytes at `dst`:
    /// the inverse of the repacking, so that nothing needs the original bytes again.
    func copyRow(_ r: Int, into dst: UnsafeMutableRawPointer) {
        precondition(r >= 0 && r < groups * Self.groupRows, "copyRow: row \(r) is not in a whole group")
        if type == .q4_K { return copySuperBlockRow(r, into: dst) }
        let src = group(r / Self.groupRows), lane = r % Self.groupRows
        let (levelsOffset, fifthBitsOffset) = blockOffsets, blockBytes = type.typeSize
        for i in 0..<nb {
            let chunk = src + chunkBytes * (i / 2), k = i % 2
            let block = dst + blockBytes * i
            block.storeBytes(of: chunk.loadUnaligned(fromByteOffset: 16 * k + 2 * lane, as: UInt16.self), as: UInt16.self)
            if hasMin {
                block.storeBytes(
                    of: chunk.loadUnaligned(fromByteOffset: 32 + 16 * k + 2 * lane, as: UInt16.self), toByteOffset: 2, as: UInt16.self)
            }
            for j in 0..<(type == .q8_0 ? 8 : 4) {
                let word = chunk.loadUnaligned(fromByteOffset: scaleBytes + levelBytes * k + 32 * j + 4 * lane, as: UInt32.self)
                block.storeBytes(of: word, toByteOffset: levelsOffset + 4 * j, as: UInt32.self)
            }
            if hasFifthBit {
                var qh: UInt32 = 0
                for j in 0..<4 {
                    let bits = UInt32(chunk.load(fromByteOffset: scaleBytes + levelBytes * k + 128 + 4 * lane + j, as: UInt8.self))
                    qh |= (bits & 0xF) << (4 * j) | (bits >> 4) << (16 + 4 * j)
                }
                block.storeBytes(of: qh, toByteOffset: fifthBitsOffset, as: UInt32.self)
            }
        }
    }
}

#if LEAP_X86_AVX2
extension InterleavedRows {
    /// The 8 rows' integer sums of one Q4_0/Q4_1 block's levels at `w` with the
    /// activation block at `a` (lane r: row r).
    @inline(__always)
    static func nibbleSums(_ w: UnsafeRawPointer, _ a: UnsafeRawPointer) -> __m256i {
        let m4 = _mm256_set1_epi8(0x0F)
        #if LEAP_X86_AVX512VNNI
        var p = _mm256_setzero_si256()
        for j in 0..<4 {
            let t = load256(w, 32 * j)
            p = mulSumU8S8(p, _mm256_and_si256(t, m4), broadcastWord(a, j))
            p = mulSumU8S8(p, _mm256_and_si256(_mm256_srli_epi16(t, 4), m4), broadcastWord(a, 4 + j))
        }
        return p
        #else
        // A vpmaddubsw lane is at most 2 * 15 * 128 = 3,840: eight of them fit in Int16.
        var s = _mm256_setzero_si256()
        for j in 0..<4 {
            let t = load256(w, 32 * j)
            let lo = _mm256_maddubs_epi16(_mm256_and_si256(t, m4), broadcastWord(a, j))
            let hi = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(t, 4), m4), broadcastWord(a, 4 + j))
            s = _mm256_add_epi16(s, _mm256_add_epi16(lo, hi))
        }
        return _mm256_madd_epi16(s, _mm256_set1_epi16(1))
        #endif
    }

    /// Values 4j..<4j+4 (`low`) and 16+4j..<20+4j (`high`) of the 8 rows of a Q5_0/Q5_1
    /// block at `w` as bytes 0...31, in 4-byte row lanes: the nibbles of vector j with the
    /// fifth bits put back from byte 4r+j of the bit vector at `w + 128` (its low half the
    /// low values' bits, its high half the high values').
    @inline(__always)
    static func fiveBitLevels(_ w: UnsafeRawPointer, _ j: Int) -> (low: __m256i, high: __m256i) {
        let m4 = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10)
        let t = load256(w, 32 * j)
        // Byte 4r+b of each half takes byte 4r+j: the row's bits of vector j in all four.
        let select = _mm256_add_epi8(
            _mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12, 0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12),
            _mm256_set1_epi8(Int8(j)))
        let bits = _mm256_shuffle_epi8(load256(w, 128), select)
        // Byte b tests bit b (the low value 4j+b) or bit 4+b (the high value 16+4j+b).
        let lowBit = _mm256_set1_epi32(0x0804_0201), highBit = _mm256_set1_epi32(Int32(bitPattern: 0x8040_2010))
        let lowSet = _mm256_cmpeq_epi8(_mm256_and_si256(bits, lowBit), lowBit)
        let highSet = _mm256_cmpeq_epi8(_mm256_and_si256(bits, highBit), highBit)
        return (
            _mm256_or_si256(_mm256_and_si256(t, m4), _mm256_and_si256(lowSet, bit4)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(t, 4), m4), _mm256_and_si256(highSet, bit4))
        )
    }

    /// The 8 rows' integer sums of one Q5_0/Q5_1 block's levels at `w` with the
    /// activation block at `a` (lane r: row r).
    @inline(__always)
    static func fiveBitSums(_ w: UnsafeRawPointer, _ a: UnsafeRawPointer) -> __m256i {
        #if LEAP_X86_AVX512VNNI
        // Two chains of 4 dependent vpdpbusd rather than one of 8: the bit spreading before
        // them makes the block's latency, not its instructions, the limit (KernelBench
        // --count, hot: 8-10% less time; integer sums, so the same bits in any order).
        var lowSums = _mm256_setzero_si256(), highSums = _mm256_setzero_si256()
        for j in 0..<4 {
            let (low, high) = fiveBitLevels(w, j)
            lowSums = mulSumU8S8(lowSums, low, broadcastWord(a, j))
            highSums = mulSumU8S8(highSums, high, broadcastWord(a, 4 + j))
        }
        return _mm256_add_epi32(lowSums, highSums)
        #else
        // A vpmaddubsw lane is at most 2 * 31 * 128 = 7,936: four of them fit in Int16.
        var p = _mm256_setzero_si256()
        for half in 0..<2 {
            var s = _mm256_setzero_si256()
            for j in (2 * half)..<(2 * half + 2) {
                let (low, high) = fiveBitLevels(w, j)
                s = _mm256_add_epi16(
                    s, _mm256_add_epi16(_mm256_maddubs_epi16(low, broadcastWord(a, j)), _mm256_maddubs_epi16(high, broadcastWord(a, 4 + j)))
                )
            }
            p = _mm256_add_epi32(p, _mm256_madd_epi16(s, _mm256_set1_epi16(1)))
        }
        return p
        #endif
    }

    /// The 8 rows' integer sums of one Q8_0 block's levels at `w` with the activation
    /// block at `a` (lane r: row r), by the sign trick on every build (|w| times a with
    /// w's sign; a `vpmaddubsw` lane is at most 2 · 128 · 127, so every vector is widened
    /// to Int32 on its own): exact Σ w·a, so VNNI and AVX2 builds give the same bits.
    @inline(__always)
    static func byteSums(_ w: UnsafeRawPointer, _ a: UnsafeRawPointer) -> __m256i {
        var p = _mm256_setzero_si256()
        for j in 0..<8 {
            let t = load256(w, 32 * j)
            p = mulSumU8S8(p, _mm256_sign_epi8(t, t), _mm256_sign_epi8(broadcastWord(a, j), t))
        }
        return p
    }

    /// Bytes `4j..<4j+4` of the activation block at `a`, in all 8 lanes.
    @inline(__always)
    static func broadcastWord(_ a: UnsafeRawPointer, _ j: Int) -> __m256i {
        _mm256_set1_epi32(a.loadUnaligned(fromByteOffset: 4 * j, as: Int32.self))
    }

    /// Prefetches the chunk `prefetchDistance` bytes after `chunk`.
    @inline(__always)
    func prefetchAhead(_ chunk: UnsafeRawPointer) {
        let ahead = chunk + Self.prefetchDistance
        var offset = 0
        while offset < chunkBytes {
            leap_prefetch(ahead + offset)
            offset += 64
        }
    }

    /// How a format turns the running sums into dot products.
    enum Offset {
        /// acc - factor * Σ d sa (Q4_0: 8, Q5_0: 16).
        case minus(Float)
        /// acc + Σ m sa (Q4_1, Q5_1).
        case plusMin
        /// acc (Q8_0, by the sign trick).
        case none
    }

    /// One activation row's running sums over a group: `acc` (Σ d da sum) and `offset`
    /// (Σ d sa, or Σ m sa for Q4_1), lane r for row r.
    struct Sums {
        var acc = _mm256_setzero_ps()
        var offset = _mm256_setzero_ps()

        @inline(__always)
        mutating func add(_ sums: __m256i, d: __m256, second: __m256, _ a: ActivationView, _ i: Int, _ kind: Offset) {
            acc = _mm256_fmadd_ps(_mm256_mul_ps(d, broadcastFloat(a.d, i)), _mm256_cvtepi32_ps(sums), acc)
            if case .none = kind { return }
            offset = _mm256_fmadd_ps(second, broadcastFloat(a.s, i), offset)
        }

        /// The 8 rows' dot products.
        @inline(__always)
        func result(_ kind: Offset) -> __m256 {
            switch kind {
            case .minus(let factor): return _mm256_fnmadd_ps(_mm256_set1_ps(factor), offset, acc)
            case .plusMin: return _mm256_add_ps(acc, offset)
            case .none: return acc
            }
        }
    }

    /// The dot products of group `g`'s 8 rows with the first `count` (1, 2 or 4) of the
    /// activation rows `a`, stored at `y.k + 8 * g` for row k: every chunk is loaded and
    /// unpacked once for all of them, and each row gets the float operations it gets alone.
    @inline(__always)
    func dotGroup(
        _ g: Int, _ a: ActivationRows, count: Int, kind: Offset, blockSums: (UnsafeRawPointer, UnsafeRawPointer) -> __m256i
    ) {
        let p = group(g)
        var s0 = Sums(), s1 = Sums(), s2 = Sums(), s3 = Sums()
        let q0 = UnsafeRawPointer(a.views.0.qs), q1 = UnsafeRawPointer(a.views.1.qs)
        let q2 = UnsafeRawPointer(a.views.2.qs), q3 = UnsafeRawPointer(a.views.3.qs)
        for i in 0..<nb {
            let chunk = p + chunkBytes * (i >> 1), k = i & 1
            if k == 0 { prefetchAhead(chunk) }
            let d = _mm256_cvtph_ps(chunk.loadUnaligned(fromByteOffset: 16 * k, as: __m128i.self))
            let second = hasMin ? _mm256_cvtph_ps(chunk.loadUnaligned(fromByteOffset: 32 + 16 * k, as: __m128i.self)) : d
            let w = chunk + scaleBytes + levelBytes * k
            s0.add(blockSums(w, q0 + 32 * i), d: d, second: second, a.views.0, i, kind)
            if count > 1 { s1.add(blockSums(w, q1 + 32 * i), d: d, second: second, a.views.1, i, kind) }
            if count > 2 {
                s2.add(blockSums(w, q2 + 32 * i), d: d, second: second, a.views.2, i, kind)
                s3.add(blockSums(w, q3 + 32 * i), d: d, second: second, a.views.3, i, kind)
            }
        }
        UnsafeMutableRawPointer(a.outputs.0 + 8 * g).storeBytes(of: s0.result(kind), as: __m256.self)
        if count > 1 { UnsafeMutableRawPointer(a.outputs.1 + 8 * g).storeBytes(of: s1.result(kind), as: __m256.self) }
        if count > 2 {
            UnsafeMutableRawPointer(a.outputs.2 + 8 * g).storeBytes(of: s2.result(kind), as: __m256.self)
            UnsafeMutableRawPointer(a.outputs.3 + 8 * g).storeBytes(of: s3.result(kind), as: __m256.self)
        }
    }

    /// `dotGroup` for this matrix's format.
    @inline(__always)
    func dotGroup(_ g: Int, _ a: ActivationRows, count: Int) {
        switch type {
        case .q4_K: dotSuperBlockGroup(g, a, count: count)
        case .q4_0: dotGroup(g, a, count: count, kind: .minus(8), blockSums: Self.nibbleSums)
        case .q4_1: dotGroup(g, a, count: count, kind: .plusMin, blockSums: Self.nibbleSums)
        case .q5_0: dotGroup(g, a, count: count, kind: .minus(16), blockSums: Self.fiveBitSums)
        case .q5_1: dotGroup(g, a, count: count, kind: .plusMin, blockSums: Self.fiveBitSums)
        default: dotGroup(g, a, count: count, kind: .none, blockSums: Self.byteSums)
        }
    }

    /// Up to four activation rows of one pass over a group and where each row's 8 products
    /// go (unused places repeat the first row).
    struct ActivationRows {
        var views: (ActivationView, ActivationView, ActivationView, ActivationView)
        var outputs: (UnsafeMutablePointer<Float>, UnsafeMutablePointer<Float>, UnsafeMutablePointer<Float>, UnsafeMutablePointer<Float>)
    }

    /// Writes group `g` in the integer matmul's packed layout (`nb` group blocks of
    /// `IntegerMatmul.groupBlockBytes` at `dst`): the same bytes `IntegerMatmul.packGroup`
    /// makes from the stored rows. The levels are already in 4-byte row lanes here, so
    /// packing is a mask (nibbles, with the fifth bits put back for Q5_0 and Q5_1) or a
    /// bias (Q8_0's + 128) per vector, with no transposition.
    func packForMatmul(_ g: Int, into dst: UnsafeMutableRawPointer) {
        if type == .q4_K { return packSuperBlocksForMatmul(g, into: dst) }
        let p = group(g), m4 = _mm256_set1_epi8(0x0F)
        for i in 0..<nb {
            let chunk = p + chunkBytes * (i >> 1), k = i & 1
            let w = chunk + scaleBytes + levelBytes * k
            let out = dst + i * IntegerMatmul.groupBlockBytes
            let d = _mm256_cvtph_ps(chunk.loadUnaligned(fromByteOffset: 16 * k, as: __m128i.self))
            let m: __m256
            switch type {
            case .q4_0, .q4_1:
                for j in 0..<4 {
                    let t = load256(w, 32 * j)
                    out.storeBytes(of: _mm256_and_si256(t, m4), toByteOffset: 32 * j, as: __m256i.self)
                    out.storeBytes(of: _mm256_and_si256(_mm256_srli_epi16(t, 4), m4), toByteOffset: 32 * (4 + j), as: __m256i.self)
                }
                m =
                    type == .q4_1
                    ? _mm256_cvtph_ps(chunk.loadUnaligned(fromByteOffset: 32 + 16 * k, as: __m128i.self))
                    : _mm256_mul_ps(_mm256_set1_ps(-8), d)
            case .q5_0, .q5_1:
                for j in 0..<4 {
                    let (low, high) = Self.fiveBitLevels(w, j)
                    out.storeBytes(of: low, toByteOffset: 32 * j, as: __m256i.self)
                    out.storeBytes(of: high, toByteOffset: 32 * (4 + j), as: __m256i.self)
                }
                m =
                    type == .q5_1
                    ? _mm256_cvtph_ps(chunk.loadUnaligned(fromByteOffset: 32 + 16 * k, as: __m128i.self))
                    : _mm256_mul_ps(_mm256_set1_ps(-16), d)
            default:
                for j in 0..<8 {
                    out.storeBytes(of: _mm256_xor_si256(load256(w, 32 * j), _mm256_set1_epi8(-128)), toByteOffset: 32 * j, as: __m256i.self)
                }
                m = _mm256_mul_ps(_mm256_set1_ps(-128), d)
            }
            out.storeBytes(of: d, toByteOffset: 256, as: __m256.self)
            out.storeBytes(of: m, toByteOffset: 288, as: __m256.self)
        }
    }

    /// Groups `groups` times activation rows `activationRows` of `a` (rows of `cols`; row
    /// `t`'s results at `y + t * outputs`), four activation rows at a time, then two, then one.
    func dotGroups(
        _ groups: Range<Int>, _ a: ActivationView, cols: Int, activationRows: Range<Int>, _ y: UnsafeMutablePointer<Float>,
        outputs: Int
    ) {
        @inline(__always) func rows(_ t: Int, _ count: Int) -> ActivationRows {
            func view(_ k: Int) -> ActivationView { a.row(t + (k < count ? k : 0), cols: cols) }
            func output(_ k: Int) -> UnsafeMutablePointer<Float> { y + (t + (k < count ? k : 0)) * outputs }
            return ActivationRows(views: (view(0), view(1), view(2), view(3)), outputs: (output(0), output(1), output(2), output(3)))
        }
        // Batches outside, groups inside: a batch's rows are set up once, and a thread's
        // range of groups (tens to hundreds of KiB) stays in its caches for the next batch.
        var t = activationRows.lowerBound
        while t + 4 <= activationRows.upperBound {
            let batch = rows(t, 4)
            for g in groups { dotGroup(g, batch, count: 4) }
            t += 4
        }
        if t + 2 <= activationRows.upperBound {
            let batch = rows(t, 2)
            for g in groups { dotGroup(g, batch, count: 2) }
            t += 2
        }
        if t < activationRows.upperBound {
            let batch = rows(t, 1)
            for g in groups { dotGroup(g, batch, count: 1) }
        }
    }
}
#endif

#if LEAP_X86_AVX2
extension InterleavedRows {
    /// Dequantizes the 8 rows of group `g` into `dst` (row `r` of the group at
    /// `dst + r * stride`), bit for bit what the format's `dequantize` makes of each row:
    /// the same levels, the same `d * q` (and `+ m`). Read straight from the interleaved
    /// chunks (a 4 x 8 transpose of 32-bit lanes puts each row's levels back together), so
    /// the prompt path needs no row-by-row copy into the stored format.
    func dequantize(group g: Int, into dst: UnsafeMutablePointer<Float>, stride: Int) {
        if type == .q4_K { return dequantizeSuperBlocks(group: g, into: dst, stride: stride) }
        let src = group(g)
        // Q5_0/Q5_1: each block's levels as Q8_0 lays them out (vector j: values 4j..<4j+4
        // of every row), made from the nibbles and fifth bits (Q5_0's less 16).
        withUnsafeTemporaryAllocation(byteCount: 256, alignment: 32) { buffer in
            dequantize(src, fiveBitLevels: buffer.baseAddress!, into: dst, stride: stride)
        }
    }

    private func dequantize(
        _ src: UnsafeRawPointer, fiveBitLevels: UnsafeMutableRawPointer, into dst: UnsafeMutablePointer<Float>, stride: Int
    ) {
        for i in 0..<nb {
            let chunk = src + chunkBytes * (i / 2), k = i % 2
            var levels = chunk + scaleBytes + levelBytes * k
            let d = chunk + 16 * k, m = chunk + 32 + 16 * k
            if hasFifthBit {
                let offset = _mm256_set1_epi8(hasMin ? 0 : 16)
                for j in 0..<4 {
                    let (low, high) = Self.fiveBitLevels(levels, j)
                    fiveBitLevels.storeBytes(of: _mm256_sub_epi8(low, offset), toByteOffset: 32 * j, as: __m256i.self)
                    fiveBitLevels.storeBytes(of: _mm256_sub_epi8(high, offset), toByteOffset: 32 * (4 + j), as: __m256i.self)
                }
                levels = UnsafeRawPointer(fiveBitLevels)
            }
            if type == .q8_0 || hasFifthBit {
                // Vector j holds values 4j..<4j+4 of every row: rows' bytes 0..<16 from
                // vectors 0...3, bytes 16..<32 from vectors 4...7.
                let low = Self.transpose(levels, 0), high = Self.transpose(levels, 4)
                func emit(_ lo: __m256i, _ hi: __m256i, _ r: Int) {
                    for h in 0..<2 {
                        let row = r + 4 * h, upper = h == 1
                        let scale = loadHalf(d, 2 * row), add: Float? = hasMin ? loadHalf(m, 2 * row) : nil
                        let y = dst + row * stride + 32 * i
                        storeLevels16(Self.half(lo, upper: upper), scale: scale, add: add, y)
                        storeLevels16(Self.half(hi, upper: upper), scale: scale, add: add, y + 16)
                    }
                }
                emit(low.0, high.0, 0)
                emit(low.1, high.1, 1)
                emit(low.2, high.2, 2)
                emit(low.3, high.3, 3)
            } else {
                // Each row's 16 bytes of nibbles, as in the stored block.
                let qs = Self.transpose(levels, 0)
                let mask = _mm_set1_epi8(0x0F), offset = _mm_set1_epi8(8)
                func emit(_ v: __m256i, _ r: Int) {
                    for h in 0..<2 {
                        let row = r + 4 * h, upper = h == 1
                        let bytes = Self.half(v, upper: upper)
                        var lo = _mm_and_si128(bytes, mask), hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask)
                        if !hasMin {
                            lo = _mm_sub_epi8(lo, offset)
                            hi = _mm_sub_epi8(hi, offset)
                        }
                        let scale = loadHalf(d, 2 * row), add: Float? = hasMin ? loadHalf(m, 2 * row) : nil
                        let y = dst + row * stride + 32 * i
                        storeLevels16(lo, scale: scale, add: add, y)
                        storeLevels16(hi, scale: scale, add: add, y + 16)
                    }
                }
                emit(qs.0, 0)
                emit(qs.1, 1)
                emit(qs.2, 2)
                emit(qs.3, 3)
            }
        }
    }

    /// The 4 vectors of 32 bytes at `p + 32 * first ...` transposed as 4 x 8 lanes of 32
    /// bits: result `r` holds lane `r` of the 4 vectors in its low 128 bits and lane `r + 4`
    /// in its high 128 bits.
    @inline(__always)
    private static func transpose(_ p: UnsafeRawPointer, _ first: Int) -> (__m256i, __m256i, __m256i, __m256i) {
        let v0 = load256(p, 32 * first), v1 = load256(p, 32 * first + 32)
        let v2 = load256(p, 32 * first + 64), v3 = load256(p, 32 * first + 96)
        let t0 = _mm256_unpacklo_epi32(v0, v1), t1 = _mm256_unpackhi_epi32(v0, v1)
        let t2 = _mm256_unpacklo_epi32(v2, v3), t3 = _mm256_unpackhi_epi32(v2, v3)
        return (
            _mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
            _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3)
        )
    }

    @inline(__always)
    private static func half(_ v: __m256i, upper: Bool) -> __m128i { upper ? high128(v) : _mm256_castsi256_si128(v) }
}
#endif
