import Testing

@testable import GGUF

/// Every way a crafted or damaged file can be wrong must end in a specific `GGUFError`,
/// never a crash, a hang or an allocation sized by a forged count.
@Suite struct GGUFMalformedTests {
    func error(_ bytes: [UInt8]) -> GGUFError? {
        do {
            _ = try GGUFFile(bytes: bytes)
            return nil
        } catch { return error }
    }

    @Test func truncationAtEveryHeaderOffset() throws {
        let bytes = try sampleFile()
        let f = try GGUFFile(bytes: bytes)
        let headerEnd = f.dataOffset
        for cut in 0..<headerEnd {
            let e = error(Array(bytes[..<cut]))
            switch e {
            case .truncated?, .countTooLarge?: break
            case .tensorOutOfBounds? where cut >= headerEnd - 32:
                break  // only alignment padding was lost: the header is whole, the data is not
            default: Issue.record("cut at \(cut) of \(headerEnd): unexpected \(String(describing: e))")
            }
        }
        // Cutting into the data section loses tensor data.
        let lastEnd = f.dataOffset + f.tensors.map { $0.offset + $0.byteCount }.max()!
        for cut in stride(from: headerEnd, to: lastEnd, by: 3) {
            guard case .tensorOutOfBounds? = error(Array(bytes[..<cut])) else {
                Issue.record("cut at \(cut) in the data section was not reported as out of bounds")
                continue
            }
        }
        // Only trailing padding after the last tensor may go.
        #expect(error(Array(bytes[..<lastEnd])) == nil)
    }

    @Test func everySingleByteFlipOfTheHeaderIsHandled() throws {
        let bytes = try sampleFile()
        let headerEnd = try GGUFFile(bytes: bytes).dataOffset
        for i in 0..<headerEnd {
            for mask: UInt8 in [0xFF, 0x80, 0x01] {
                var b = bytes
                b[i] ^= mask
                _ = error(b)  // must return (valid or a GGUFError), not crash
            }
        }
        var b = bytes
        b[0] = 0x00
        #expect(error(b) == .badMagic(found: [0x00, 0x47, 0x55, 0x46]))
    }

    @Test func badMagicShowsTheBytes() {
        #expect(error(Array("PK\u{03}\u{04}rest".utf8)) == .badMagic(found: [0x50, 0x4B, 0x03, 0x04]))
        #expect(error([]) == .truncated(offset: 0, reading: "the magic"))
        #expect(GGUFError.badMagic(found: [0x50, 0x4B, 0x03, 0x04]).description.contains("50 4b 03 04"))
    }

    @Test func versions() {
        for v: UInt32 in [0, 1, 4, 99] {
            var r = RawGGUF()
            r.header(version: v, tensors: 0, kvs: 0)
            #expect(error(r.bytes) == .unsupportedVersion(v))
        }
        var r = RawGGUF()
        r.header(version: UInt32(3).byteSwapped, tensors: 0, kvs: 0)
        #expect(error(r.bytes) == .bigEndian)
        var v2 = RawGGUF()
        v2.header(version: 2, tensors: 0, kvs: 0)
        #expect(error(v2.bytes) == nil)
    }

    @Test func hugeCountsAreRefusedBeforeAllocating() {
        var r = RawGGUF()
        r.header(tensors: UInt64.max, kvs: 0)
        #expect(error(r.bytes) == .countTooLarge(what: "the tensor count", count: UInt64.max, offset: 8))
        r = RawGGUF()
        r.header(tensors: 0, kvs: 1 << 40)
        #expect(error(r.bytes) == .countTooLarge(what: "the metadata count", count: 1 << 40, offset: 16))
        // A string whose length exceeds the file.
        r = RawGGUF()
        r.header(tensors: 0, kvs: 1)
        r.u64(UInt64.max - 3)
        r.zeros(16)
        #expect(error(r.bytes) == .countTooLarge(what: "the length of metadata key #0", count: UInt64.max - 3, offset: 24))
        // Arrays with forged element counts, of fixed-size and of variable-size elements.
        for elementType: UInt32 in [0, 6, 10, 8, 9] {
            r = RawGGUF()
            r.header(tensors: 0, kvs: 1)
            r.string("a")
            r.u32(9)
            r.u32(elementType)
            r.u64(1 << 62)
            r.zeros(64)
            guard case .countTooLarge? = error(r.bytes) else {
                Issue.record("array of type \(elementType)")
                continue
            }
        }
    }

    @Test func unknownTypes() {
        var r = RawGGUF()
        r.header(tensors: 0, kvs: 1)
        r.string("k")
        r.u32(13)
        r.u32(0)
        #expect(error(r.bytes) == .unknownValueType(key: "k", raw: 13))
        r = RawGGUF()
        r.header(tensors: 0, kvs: 1)
        r.string("k")
        r.u32(9)
        r.u32(77)
        r.u64(0)
        #expect(error(r.bytes) == .unknownValueType(key: "k", raw: 77))
        for raw: UInt32 in [4, 5, 31, 40, 1000] {
            #expect(error(RawGGUF.oneTensor(type: raw)) == .unknownTensorType(tensor: "t", raw: raw))
        }
    }

    @Test func deepArrayNesting() {
        var r = RawGGUF()
        r.header(tensors: 0, kvs: 1)
        r.string("deep")
        r.u32(9)
        for _ in 0..<10 {
            r.u32(9)
            r.u64(1)
        }
        r.u32(0)
        r.u64(0)
        #expect(error(r.bytes) == .arrayNestingTooDeep(key: "deep"))
    }

    @Test func duplicates() {
        var r = RawGGUF()
        r.header(tensors: 0, kvs: 2)
        r.kvU32("a", 1)
        r.kvU32("a", 2)
        #expect(error(r.bytes) == .duplicateKey("a"))
        r = RawGGUF()
        r.header(tensors: 2, kvs: 0)
        r.tensorInfo("w", dims: [8], type: 0, offset: 0)
        r.tensorInfo("w", dims: [8], type: 0, offset: 32)
        r.padTo(32)
        r.zeros(64)
        #expect(error(r.bytes) == .duplicateTensor("w"))
    }

    @Test func shapes() {
        #expect(error(RawGGUF.oneTensor(dims: [1, 1, 1, 1, 1])) == .badDimensionCount(tensor: "t", count: 5))
        #expect(error(RawGGUF.oneTensor(dims: [])) == .badDimensionCount(tensor: "t", count: 0))
        #expect(
            error(RawGGUF.oneTensor(dims: [33], type: GGMLType.q4_0.rawValue))
                == .rowNotBlockMultiple(tensor: "t", rowLength: 33, type: .q4_0))
        #expect(error(RawGGUF.oneTensor(dims: [UInt64.max])) == .badDimension(tensor: "t", dimension: UInt64.max))
        #expect(error(RawGGUF.oneTensor(dims: [1 << 34, 1 << 34, 1 << 34])) == .sizeOverflow(tensor: "t"))
        // A zero-sized tensor is legal.
        #expect(error(RawGGUF.oneTensor(dims: [0], dataBytes: 0)) == nil)
    }

    @Test func dataPlacement() {
        #expect(error(RawGGUF.oneTensor(offset: 4)) == .misalignedTensor(tensor: "t", offset: 4, alignment: 32))
        #expect(error(RawGGUF.oneTensor(offset: 64)) == .tensorOutOfBounds(tensor: "t", offset: 64, bytes: 32, dataSectionBytes: 32))
        #expect(
            error(RawGGUF.oneTensor(offset: UInt64.max - 31))
                == .tensorOutOfBounds(tensor: "t", offset: UInt64.max - 31, bytes: 32, dataSectionBytes: 32))
        #expect(error(RawGGUF.oneTensor(dataBytes: 31)) == .tensorOutOfBounds(tensor: "t", offset: 0, bytes: 32, dataSectionBytes: 31))
        var r = RawGGUF()
        r.header(tensors: 2, kvs: 0)
        r.tensorInfo("a", dims: [16], type: 0, offset: 0)
        r.tensorInfo("b", dims: [8], type: 0, offset: 32)
        r.padTo(32)
        r.zeros(64)
        #expect(error(r.bytes) == .overlappingTensors("a", "b"))
    }

    @Test func alignmentValues() {
        for bad: UInt32 in [0, 3, 48, 1 << 20] {
            let bytes = RawGGUF.oneTensor(extraKV: { $0.kvU32("general.alignment", bad) }, kvCount: 2)
            #expect(error(bytes) == .badAlignment(String(bad)))
        }
        let bytes = RawGGUF.oneTensor(extraKV: { $0.kvString("general.alignment", "32") }, kvCount: 2)
        #expect(error(bytes) == .badAlignment("string"))
    }
}
