import Foundation
import GGUF
import TestSupport
import Testing

@testable import Kernels

/// The large-page allocator (LargePages.swift) and the weights' decode copies in it
/// (`WeightMatrix.copiedForDecode()`).
@Suite struct LargePagesTests {
    /// Pieces of assorted sizes (sharing a block, filling most of one, larger than a
    /// block) are 64-byte aligned, zeroed, writable and disjoint: each keeps the pattern
    /// written into it while the others are written.
    @Test func piecesAreAlignedZeroedAndDisjoint() {
        let sizes = [1, 63, 64, 4097, 100_000, LargePages.blockBytes / 4 + 1, 3 << 20, LargePages.blockBytes + 12345, 0, 77]
        let pieces = sizes.map { LargePages.allocate(byteCount: $0) }
        for (i, piece) in pieces.enumerated() {
            #expect(Int(bitPattern: piece.pointer) % 64 == 0, "piece \(i) at \(piece.pointer)")
            #expect(piece.byteCount == sizes[i])
            let bytes = UnsafeMutableRawBufferPointer(start: piece.pointer, count: piece.byteCount)
            #expect(bytes.allSatisfy { $0 == 0 }, "piece \(i) of \(sizes[i]) bytes is not zeroed")
            for j in 0..<bytes.count { bytes[j] = UInt8(truncatingIfNeeded: i * 31 + j) }
        }
        for (i, piece) in pieces.enumerated() {
            let bytes = UnsafeRawBufferPointer(start: piece.pointer, count: piece.byteCount)
            let intact = bytes.indices.allSatisfy { bytes[$0] == UInt8(truncatingIfNeeded: i * 31 + $0) }
            #expect(intact, "piece \(i) of \(sizes[i]) bytes was overwritten by another")
        }
    }

    /// Every block is aligned to a large page and at least a block long; a piece larger
    /// than a block gets one of its own, rounded up to whole large pages.
    @Test func blocksAreLargePageAligned() {
        let small = LargePages.allocate(byteCount: 1000)
        let large = LargePages.allocate(byteCount: LargePages.blockBytes + 1)
        for block in [small.block, large.block] {
            #expect(Int(bitPattern: block.base) % LargePages.pageBytes == 0)
            #expect(block.byteCount % LargePages.pageBytes == 0 && block.byteCount >= LargePages.blockBytes)
        }
        #expect(large.pointer == large.block.base)
        #expect(large.block.byteCount == LargePages.blockBytes + LargePages.pageBytes)
    }

    /// A block lives while a piece of it does, and is unmapped with the last one (so a
    /// released model gives its memory back).
    @Test func aBlockIsReleasedWithItsLastPiece() {
        var first: LargePageMemory? = LargePages.allocate(byteCount: 100)
        var second: LargePageMemory? = LargePages.allocate(byteCount: 100)
        if first!.block !== second!.block {  // the first piece filled a block
            first = second
            second = LargePages.allocate(byteCount: 100)
        }
        #expect(first!.block === second!.block)
        weak var shared = first!.block
        first = nil
        #expect(shared != nil, "released while a piece was alive")
        second = nil

        var own: LargePageMemory? = LargePages.allocate(byteCount: LargePages.blockBytes)
        weak var block = own!.block
        #if os(Linux)
        let address = UInt(bitPattern: own!.pointer)
        #expect(Self.mapping(containing: address) != nil)
        own = nil
        #expect(Self.mapping(containing: address) == nil, "the block at \(address) is still mapped")
        #else
        own = nil
        #endif
        #expect(block == nil)
        _ = (first, second, own)
    }

    #if os(Linux)
    /// On Linux the kernel is asked for huge pages: a block's mapping is eligible for
    /// transparent huge pages exactly when they are not turned off
    /// (/sys/kernel/mm/transparent_hugepage/enabled).
    @Test func blocksAskLinuxForHugePages() throws {
        let piece = LargePages.allocate(byteCount: 2 * LargePages.blockBytes)
        piece.pointer.storeBytes(of: 1, as: UInt8.self)
        let smaps = try #require(Self.mapping(containing: UInt(bitPattern: piece.pointer)), "no mapping for the block")
        let eligible = smaps.split(separator: "\n").first { $0.hasPrefix("THPeligible:") }
        let flag = try #require(eligible, "no THPeligible line in /proc/self/smaps").split(separator: " ").last.map(String.init)
        let requested = LargePages.areRequested
        #expect(flag == (requested ? "1" : "0"), "THPeligible \(flag ?? "?") with huge pages requested: \(requested)")
        #expect(smaps.contains("hg"), "VmFlags lacks hg (MADV_HUGEPAGE)")
    }

    /// The /proc/self/smaps entry of the mapping that holds `address`, if any.
    static func mapping(containing address: UInt) -> String? {
        // Read to the end: /proc files report no size, and String(contentsOfFile:) stops at
        // the first page.
        guard let file = FileHandle(forReadingAtPath: "/proc/self/smaps"), let data = try? file.readToEnd() else { return nil }
        let text = String(decoding: data, as: UTF8.self)
        var entry: [Substring] = []
        var inside = false
        for line in text.split(separator: "\n") {
            let head = line.split(separator: " ", maxSplits: 1).first ?? ""
            let bounds = head.split(separator: "-")
            if bounds.count == 2, let lo = UInt(bounds[0], radix: 16), let hi = UInt(bounds[1], radix: 16) {
                if inside { break }
                inside = lo <= address && address < hi
            }
            if inside { entry.append(line) }
        }
        return entry.isEmpty ? nil : entry.joined(separator: "\n")
    }
    #endif

    /// `copiedForDecode()` of every kernel type: the interleaved copy where the build has
    /// one, else a copy of the rows in memory of its own, whose products are the stored
    /// matrix's bit for bit; either way the products stay the same after the original bytes
    /// are overwritten (the copy does not read them).
    @Test(arguments: GGMLType.kernelTypes)
    func decodeCopyOwnsItsRows(_ type: GGMLType) throws {
        let rows = 40, cols = testCols(type)
        var bytes = randomWeights(type, rows: rows, cols: cols, seed: 70 + UInt64(type.rawValue))
        var rng = SeededRandom(seed: 5)
        let x = rng.normal(cols, scale: 1.1)
        let activations = QuantizedActivations(capacity: cols)
        activations.quantize(x)
        let pool = ThreadPool(threads: 2)
        var expected = [Float](repeating: .nan, count: rows)
        var copied: WeightMatrix?
        try bytes.withUnsafeBytes { raw in
            let stored = try WeightMatrix(type: type, rows: rows, cols: cols, data: raw.baseAddress!)
            let copy = stored.copiedForDecode()
            copied = copy
            #expect(copy.data != stored.data || InterleavedRows.supports(type))
            if InterleavedRows.supports(type) {
                #expect(copy.interleaved != nil && copy.decodeCopyByteCount == copy.interleavedByteCount)
                stored.interleavedForDecode().matvec(activations, into: &expected, pool: pool)
            } else {
                #expect(copy.interleaved == nil && copy.decodeCopyByteCount == stored.byteCount)
                #expect(memcmp(copy.data, stored.data, stored.byteCount) == 0)
                stored.matvec(activations, into: &expected, pool: pool)
            }
            #expect(copy.copiedForDecode().decodeCopyByteCount == copy.decodeCopyByteCount)
        }
        let bytesBefore = bytes
        for i in bytes.indices { bytes[i] = ~bytes[i] }
        #expect(bytes != bytesBefore)
        var again = [Float](repeating: .nan, count: rows)
        try #require(copied).matvec(activations, into: &again, pool: pool)
        #expect(sameBits(again, expected), "\(type): \(firstDifference(again, expected))")
    }
}
