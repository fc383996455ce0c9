#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

/// Builds a GGUF version 3 file: metadata in insertion order, then the tensor table, then
/// each tensor's data padded to `general.alignment`.
///
/// ```swift
/// var w = GGUFWriter()
/// w.metadata.set("general.architecture", .string("llama"))
/// try w.addTensor(name: "x", type: .f32, shape: [4], data: bytes)
/// try w.write(to: "out.gguf")
/// ```
public struct GGUFWriter: Sendable {
    public var metadata = GGUFMetadata()
    /// Alignment of tensor data. Written as `general.alignment` when not 32.
    public var alignment = 32

    private struct PendingTensor: Sendable {
        var name: String
        var type: GGMLType
        var shape: [Int]
        var data: [UInt8]
    }
    private var pending: [PendingTensor] = []
    private var names: Set<String> = []

    public init() {}

    /// Copies the metadata of `file` (all keys, in order).
    public init(copyingMetadataOf file: GGUFFile) {
        metadata = file.metadata
        alignment = file.alignment
    }

    /// Adds a tensor. `shape` is in ggml order (row length first); `data` must hold
    /// exactly the bytes the type and shape need.
    public mutating func addTensor(name: String, type: GGMLType, shape: [Int], data: [UInt8]) throws(GGUFError) {
        guard !names.contains(name) else { throw .invalidWriterInput("tensor '\(name)' added twice") }
        guard (1...4).contains(shape.count), shape.allSatisfy({ $0 >= 0 }) else {
            throw .invalidWriterInput("tensor '\(name)' has shape \(shape); GGUF needs 1 to 4 non-negative dimensions")
        }
        guard let rowBytes = type.rowBytes(count: shape[0]) else {
            throw .rowNotBlockMultiple(tensor: name, rowLength: shape[0], type: type)
        }
        let expected = shape.dropFirst().reduce(rowBytes, *)
        guard data.count == expected else {
            throw .invalidWriterInput("tensor '\(name)' of type \(type) and shape \(shape) needs \(expected) bytes, got \(data.count)")
        }
        names.insert(name)
        pending.append(PendingTensor(name: name, type: type, shape: shape, data: data))
    }

    /// The complete file image.
    public func serialize() throws(GGUFError) -> [UInt8] {
        guard alignment > 0, alignment & (alignment - 1) == 0 else { throw .badAlignment(String(alignment)) }
        var meta = metadata
        if alignment != 32 { meta.set("general.alignment", .uint32(UInt32(alignment))) }
        var out: [UInt8] = []
        out.reserveCapacity(pending.reduce(1 << 16) { $0 + $1.data.count + alignment })
        out += Array("GGUF".utf8)
        append(&out, UInt32(3))
        append(&out, UInt64(pending.count))
        append(&out, UInt64(meta.count))
        for (key, value) in meta.pairs {
            appendString(&out, key)
            append(&out, value.type.rawValue)
            appendValue(&out, value)
        }
        var offset = 0
        var offsets: [Int] = []
        for t in pending {
            offsets.append(offset)
            offset += (t.data.count + alignment - 1) / alignment * alignment
        }
        for (t, off) in zip(pending, offsets) {
            appendString(&out, t.name)
            append(&out, UInt32(t.shape.count))
            for d in t.shape { append(&out, UInt64(d)) }
            append(&out, t.type.rawValue)
            append(&out, UInt64(off))
        }
        pad(&out)
        for t in pending {
            out += t.data
            pad(&out)
        }
        return out
    }

    /// Writes the file to `path`, replacing it.
    public func write(to path: String) throws(GGUFError) {
        let image = try serialize()
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { throw .writeFailed(path: path, reason: String(cString: strerror(errno))) }
        defer { close(fd) }
        var written = 0
        while written < image.count {
            let n = image.withUnsafeBytes { systemWrite(fd, $0.baseAddress! + written, image.count - written) }
            guard n > 0 else { throw .writeFailed(path: path, reason: String(cString: strerror(errno))) }
            written += n
        }
    }

    private func pad(_ out: inout [UInt8]) {
        let r = out.count % alignment
        if r != 0 { out += [UInt8](repeating: 0, count: alignment - r) }
    }

    private func append<T: FixedWidthInteger>(_ out: inout [UInt8], _ v: T) {
        withUnsafeBytes(of: v.littleEndian) { out += $0 }
    }

    private func appendString(_ out: inout [UInt8], _ s: String) {
        let utf8 = Array(s.utf8)
        append(&out, UInt64(utf8.count))
        out += utf8
    }

    private func appendValue(_ out: inout [UInt8], _ v: GGUFValue) {
        switch v {
        case .uint8(let x): append(&out, x)
        case .int8(let x): append(&out, x)
        case .uint16(let x): append(&out, x)
        case .int16(let x): append(&out, x)
        case .uint32(let x): append(&out, x)
        case .int32(let x): append(&out, x)
        case .uint64(let x): append(&out, x)
        case .int64(let x): append(&out, x)
        case .float32(let x): append(&out, x.bitPattern)
        case .float64(let x): append(&out, x.bitPattern)
        case .bool(let x): append(&out, UInt8(x ? 1 : 0))
        case .string(let s): appendString(&out, s)
        case .array(let a): appendArray(&out, a)
        }
    }

    private func appendArray(_ out: inout [UInt8], _ a: GGUFArray) {
        append(&out, a.elementType.rawValue)
        append(&out, UInt64(a.count))
        switch a {
        case .uint8(let xs): out += xs
        case .int8(let xs): for x in xs { append(&out, x) }
        case .uint16(let xs): for x in xs { append(&out, x) }
        case .int16(let xs): for x in xs { append(&out, x) }
        case .uint32(let xs): for x in xs { append(&out, x) }
        case .int32(let xs): for x in xs { append(&out, x) }
        case .uint64(let xs): for x in xs { append(&out, x) }
        case .int64(let xs): for x in xs { append(&out, x) }
        case .float32(let xs): for x in xs { append(&out, x.bitPattern) }
        case .float64(let xs): for x in xs { append(&out, x.bitPattern) }
        case .bool(let xs): for x in xs { append(&out, UInt8(x ? 1 : 0)) }
        case .string(let xs): for x in xs { appendString(&out, x) }
        case .array(let xs): for x in xs { appendArray(&out, x) }
        }
    }
}

#if canImport(Glibc)
private func systemWrite(_ fd: Int32, _ p: UnsafeRawPointer, _ n: Int) -> Int { Glibc.write(fd, p, n) }
#elseif canImport(Darwin)
private func systemWrite(_ fd: Int32, _ p: UnsafeRawPointer, _ n: Int) -> Int { Darwin.write(fd, p, n) }
#elseif canImport(Musl)
private func systemWrite(_ fd: Int32, _ p: UnsafeRawPointer, _ n: Int) -> Int { Musl.write(fd, p, n) }
#endif
