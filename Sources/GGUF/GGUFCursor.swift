/// A bounds-checked little-endian reader over the file's bytes. Every read checks the
/// remaining length first and throws `GGUFError.truncated` rather than reading past the end.
struct GGUFCursor {
    let bytes: UnsafeRawBufferPointer
    var offset = 0

    var remaining: Int { bytes.count - offset }

    mutating func read<T: FixedWidthInteger>(_: T.Type, _ what: @autoclosure () -> String) throws(GGUFError) -> T {
        let size = MemoryLayout<T>.size
        guard remaining >= size else { throw .truncated(offset: bytes.count, reading: what()) }
        let v = bytes.loadUnaligned(fromByteOffset: offset, as: T.self)
        offset += size
        return T(littleEndian: v)
    }

    mutating func readFloat(_ what: @autoclosure () -> String) throws(GGUFError) -> Float {
        Float(bitPattern: try read(UInt32.self, what()))
    }

    mutating func readDouble(_ what: @autoclosure () -> String) throws(GGUFError) -> Double {
        Double(bitPattern: try read(UInt64.self, what()))
    }

    mutating func readBool(_ what: @autoclosure () -> String) throws(GGUFError) -> Bool {
        try read(UInt8.self, what()) != 0
    }

    /// A GGUF string: u64 byte length then UTF-8 bytes (invalid UTF-8 is repaired with U+FFFD).
    mutating func readString(_ what: @autoclosure () -> String) throws(GGUFError) -> String {
        let start = offset
        let length = try read(UInt64.self, what())
        guard length <= UInt64(remaining) else {
            throw .countTooLarge(what: "the length of \(what())", count: length, offset: start)
        }
        let n = Int(length)
        let s = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + n]), as: UTF8.self)
        offset += n
        return s
    }

    /// Reads `count` fixed-size little-endian values into an array after checking the
    /// file holds them, so a forged count cannot make us allocate more than the file size.
    mutating func readArray<T: FixedWidthInteger>(_: T.Type, count: UInt64, _ what: @autoclosure () -> String) throws(GGUFError) -> [T] {
        let size = MemoryLayout<T>.size
        let start = offset
        guard count <= UInt64(remaining / size) else {
            throw .countTooLarge(what: "the element count of \(what())", count: count, offset: start)
        }
        let n = Int(count)
        let out = [T](unsafeUninitializedCapacity: n) { buf, initialized in
            for i in 0..<n {
                buf[i] = T(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + i * size, as: T.self))
            }
            initialized = n
        }
        offset += n * size
        return out
    }
}
