/// One tensor of the table: its name, element type, shape and where its data lies.
public struct GGUFTensorInfo: Sendable, Equatable {
    public let name: String
    public let type: GGMLType
    /// Dimensions in ggml order: `shape[0]` is the row length (contiguous), `shape[1]` the
    /// number of rows, and so on. A matrix `W` of `out x in` is stored as shape `[in, out]`.
    public let shape: [Int]
    /// Offset of the data from the start of the data section.
    public let offset: Int
    /// Size of the data in bytes.
    public let byteCount: Int

    /// Number of elements.
    public var elementCount: Int { shape.reduce(1, *) }
    /// Row length (`shape[0]`).
    public var rowLength: Int { shape[0] }
    /// Number of rows (the product of the other dimensions).
    public var rowCount: Int { shape.dropFirst().reduce(1, *) }
}

/// A GGUF model file, memory-mapped read-only and validated when opened.
///
/// Opening checks everything that later code relies on: the header, every metadata
/// value, the tensor table (types, shapes, block multiples, sizes) and that each tensor's
/// data lies inside the file, aligned and without overlap. Tensor data is then exposed as
/// zero-copy views into the mapping.
public final class GGUFFile: Sendable {
    /// The format version (2 or 3).
    public let version: UInt32
    /// Key/value metadata in file order.
    public let metadata: GGUFMetadata
    /// The tensor table in file order.
    public let tensors: [GGUFTensorInfo]
    /// `general.alignment`, or 32 when absent.
    public let alignment: Int
    /// Byte offset of the data section from the start of the file.
    public let dataOffset: Int
    /// Total file size in bytes.
    public var fileSize: Int { storage.count }

    private let storage: GGUFStorage
    private let tensorIndex: [String: Int]

    /// Largest nesting of arrays accepted in metadata.
    static let maxArrayDepth = 4

    /// Opens and validates the GGUF file at `path`.
    public convenience init(path: String) throws(GGUFError) {
        try self.init(storage: GGUFStorage(path: path))
    }

    /// Parses and validates a GGUF image held in memory (the bytes are copied).
    public convenience init(bytes: [UInt8]) throws(GGUFError) {
        let storage = bytes.withUnsafeBytes { GGUFStorage(bytes: $0) }
        try self.init(storage: storage)
    }

    /// Parses and validates a GGUF image held in memory (the bytes are copied).
    public convenience init(buffer: UnsafeRawBufferPointer) throws(GGUFError) {
        try self.init(storage: GGUFStorage(bytes: buffer))
    }

    private init(storage: GGUFStorage) throws(GGUFError) {
        self.storage = storage
        var cursor = GGUFCursor(bytes: storage.buffer)

        // Header: magic, version, counts.
        guard storage.count >= 4 else {
            let found = Array(storage.buffer)
            // A short prefix of the magic is a truncated file; anything else is not GGUF.
            throw found == Array("GGUF".utf8.prefix(found.count))
                ? .truncated(offset: found.count, reading: "the magic") : .badMagic(found: found)
        }
        let magic = Array(storage.buffer[0..<4])
        guard magic == Array("GGUF".utf8) else { throw .badMagic(found: magic) }
        cursor.offset = 4
        let version = try cursor.read(UInt32.self, "the version")
        if version > 0xFFFF && version.byteSwapped <= 3 { throw .bigEndian }
        guard version == 2 || version == 3 else { throw .unsupportedVersion(version) }
        self.version = version
        let tensorCountOffset = cursor.offset
        let tensorCount = try cursor.read(UInt64.self, "the tensor count")
        let kvCountOffset = cursor.offset
        let kvCount = try cursor.read(UInt64.self, "the metadata count")
        // Each key/value needs at least 8 (key length) + 4 (type) + 1 bytes; each tensor
        // info at least 8 + 4 + 8 + 4 + 8. Refuse counts that cannot fit before allocating.
        guard kvCount <= UInt64(cursor.remaining / 13) else {
            throw .countTooLarge(what: "the metadata count", count: kvCount, offset: kvCountOffset)
        }
        guard tensorCount <= UInt64(cursor.remaining / 32) else {
            throw .countTooLarge(what: "the tensor count", count: tensorCount, offset: tensorCountOffset)
        }

        // Metadata.
        var metadata = GGUFMetadata()
        for i in 0..<Int(kvCount) {
            let key = try cursor.readString("metadata key #\(i)")
            guard !metadata.contains(key) else { throw .duplicateKey(key) }
            let rawType = try cursor.read(UInt32.self, "the type of '\(key)'")
            guard let type = GGUFValueType(rawValue: rawType) else { throw .unknownValueType(key: key, raw: rawType) }
            metadata.set(key, try GGUFFile.readValue(&cursor, type: type, key: key, depth: 0))
        }
        self.metadata = metadata

        // Alignment.
        var alignment = 32
        if let a = metadata["general.alignment"] {
            guard let v = a.intValue, v > 0, v <= 65536, v & (v - 1) == 0 else {
                throw .badAlignment(a.intValue.map(String.init) ?? a.typeDescription)
            }
            alignment = v
        }
        self.alignment = alignment

        // Tensor table.
        var tensors: [GGUFTensorInfo] = []
        tensors.reserveCapacity(Int(tensorCount))
        var index: [String: Int] = [:]
        var rawOffsets: [UInt64] = []
        for i in 0..<Int(tensorCount) {
            let name = try cursor.readString("the name of tensor #\(i)")
            guard index[name] == nil else { throw .duplicateTensor(name) }
            let nDims = try cursor.read(UInt32.self, "the dimension count of '\(name)'")
            guard nDims >= 1 && nDims <= 4 else { throw .badDimensionCount(tensor: name, count: nDims) }
            var shape: [Int] = []
            for _ in 0..<nDims {
                let d = try cursor.read(UInt64.self, "the shape of '\(name)'")
                guard d <= UInt64(Int32.max) * 16 else { throw .badDimension(tensor: name, dimension: d) }
                shape.append(Int(d))
            }
            let rawType = try cursor.read(UInt32.self, "the type of '\(name)'")
            guard let type = GGMLType(rawValue: rawType) else { throw .unknownTensorType(tensor: name, raw: rawType) }
            let offset = try cursor.read(UInt64.self, "the data offset of '\(name)'")
            guard shape[0] % type.blockSize == 0 else {
                throw .rowNotBlockMultiple(tensor: name, rowLength: shape[0], type: type)
            }
            var rows = 1
            for d in shape.dropFirst() {
                let (r, o) = rows.multipliedReportingOverflow(by: d)
                guard !o else { throw .sizeOverflow(tensor: name) }
                rows = r
            }
            guard let rowBytes = type.rowBytes(count: shape[0]) else { throw .sizeOverflow(tensor: name) }
            let (bytes, o) = rowBytes.multipliedReportingOverflow(by: rows)
            guard !o else { throw .sizeOverflow(tensor: name) }
            index[name] = tensors.count
            rawOffsets.append(offset)
            tensors.append(GGUFTensorInfo(name: name, type: type, shape: shape, offset: 0, byteCount: bytes))
        }

        // Data section: starts at the next multiple of the alignment after the header.
        let headerEnd = cursor.offset
        let dataOffset = (headerEnd + alignment - 1) / alignment * alignment
        let dataBytes = max(0, storage.count - dataOffset)
        self.dataOffset = dataOffset
        for i in tensors.indices {
            let t = tensors[i]
            let offset = rawOffsets[i]
            guard offset % UInt64(alignment) == 0 else {
                throw .misalignedTensor(tensor: t.name, offset: offset, alignment: alignment)
            }
            guard offset <= UInt64(dataBytes), UInt64(t.byteCount) <= UInt64(dataBytes) - offset else {
                throw .tensorOutOfBounds(tensor: t.name, offset: offset, bytes: t.byteCount, dataSectionBytes: dataBytes)
            }
            tensors[i] = GGUFTensorInfo(name: t.name, type: t.type, shape: t.shape, offset: Int(offset), byteCount: t.byteCount)
        }
        let byStart = tensors.indices.filter { tensors[$0].byteCount > 0 }.sorted { tensors[$0].offset < tensors[$1].offset }
        for (a, b) in zip(byStart, byStart.dropFirst()) where tensors[a].offset + tensors[a].byteCount > tensors[b].offset {
            throw .overlappingTensors(tensors[a].name, tensors[b].name)
        }
        self.tensors = tensors
        self.tensorIndex = index
    }

    private static func readValue(_ c: inout GGUFCursor, type: GGUFValueType, key: String, depth: Int) throws(GGUFError) -> GGUFValue {
        switch type {
        case .uint8: return .uint8(try c.read(UInt8.self, "the value of '\(key)'"))
        case .int8: return .int8(try c.read(Int8.self, "the value of '\(key)'"))
        case .uint16: return .uint16(try c.read(UInt16.self, "the value of '\(key)'"))
        case .int16: return .int16(try c.read(Int16.self, "the value of '\(key)'"))
        case .uint32: return .uint32(try c.read(UInt32.self, "the value of '\(key)'"))
        case .int32: return .int32(try c.read(Int32.self, "the value of '\(key)'"))
        case .uint64: return .uint64(try c.read(UInt64.self, "the value of '\(key)'"))
        case .int64: return .int64(try c.read(Int64.self, "the value of '\(key)'"))
        case .float32: return .float32(try c.readFloat("the value of '\(key)'"))
        case .float64: return .float64(try c.readDouble("the value of '\(key)'"))
        case .bool: return .bool(try c.readBool("the value of '\(key)'"))
        case .string: return .string(try c.readString("the value of '\(key)'"))
        case .array: return .array(try readArray(&c, key: key, depth: depth + 1))
        }
    }

    private static func readArray(_ c: inout GGUFCursor, key: String, depth: Int) throws(GGUFError) -> GGUFArray {
        guard depth <= maxArrayDepth else { throw .arrayNestingTooDeep(key: key) }
        let rawType = try c.read(UInt32.self, "the element type of '\(key)'")
        guard let type = GGUFValueType(rawValue: rawType) else { throw .unknownValueType(key: key, raw: rawType) }
        let countOffset = c.offset
        let count = try c.read(UInt64.self, "the element count of '\(key)'")
        let what = "'\(key)'"
        switch type {
        case .uint8: return .uint8(try c.readArray(UInt8.self, count: count, what))
        case .int8: return .int8(try c.readArray(Int8.self, count: count, what))
        case .uint16: return .uint16(try c.readArray(UInt16.self, count: count, what))
        case .int16: return .int16(try c.readArray(Int16.self, count: count, what))
        case .uint32: return .uint32(try c.readArray(UInt32.self, count: count, what))
        case .int32: return .int32(try c.readArray(Int32.self, count: count, what))
        case .uint64: return .uint64(try c.readArray(UInt64.self, count: count, what))
        case .int64: return .int64(try c.readArray(Int64.self, count: count, what))
        case .float32: return .float32(try c.readArray(UInt32.self, count: count, what).map(Float.init(bitPattern:)))
        case .float64: return .float64(try c.readArray(UInt64.self, count: count, what).map(Double.init(bitPattern:)))
        case .bool: return .bool(try c.readArray(UInt8.self, count: count, what).map { $0 != 0 })
        case .string, .array:
            // Each string needs at least its 8-byte length; each array its 12-byte header.
            let minimum = type == .string ? 8 : 12
            guard count <= UInt64(c.remaining / minimum) else {
                throw .countTooLarge(what: "the element count of \(what)", count: count, offset: countOffset)
            }
            if type == .string {
                var out: [String] = []
                out.reserveCapacity(Int(count))
                for i in 0..<Int(count) { out.append(try c.readString("element \(i) of \(what)")) }
                return .string(out)
            }
            var out: [GGUFArray] = []
            for _ in 0..<Int(count) { out.append(try readArray(&c, key: key, depth: depth + 1)) }
            return .array(out)
        }
    }

    /// The tensor called `name`, or nil.
    public func tensor(named name: String) -> GGUFTensorInfo? {
        tensorIndex[name].map { tensors[$0] }
    }

    /// The tensor called `name`, or `GGUFError.missingTensor`.
    public func requireTensor(_ name: String) throws(GGUFError) -> GGUFTensorInfo {
        guard let t = tensor(named: name) else { throw .missingTensor(name) }
        return t
    }

    /// A zero-copy view of a tensor's bytes. Valid as long as this file object lives.
    public func data(for tensor: GGUFTensorInfo) -> UnsafeRawBufferPointer {
        guard tensor.byteCount > 0, let base = storage.base else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        return UnsafeRawBufferPointer(start: base + dataOffset + tensor.offset, count: tensor.byteCount)
    }

    /// The whole file's bytes (zero-copy).
    public var bytes: UnsafeRawBufferPointer { storage.buffer }

    /// Tells the system that `tensor`'s bytes will not be needed soon: for a memory-mapped
    /// file its whole pages leave this process's resident memory (they stay readable and
    /// come back from the file if read). For a file given as bytes, nothing happens. Use
    /// it after copying a tensor into another layout.
    public func releaseResidentPages(of tensor: GGUFTensorInfo) {
        releaseResidentPages(of: tensor, prefix: tensor.byteCount)
    }

    /// ``releaseResidentPages(of:)`` for the whole pages of `tensor`'s first `byteCount`
    /// bytes: for a tensor copied in order, releasing what has been copied so far. Calls
    /// with growing prefixes release each page once.
    public func releaseResidentPages(of tensor: GGUFTensorInfo, prefix byteCount: Int) {
        guard tensor.byteCount > 0, let base = storage.base else { return }
        let start = data(for: tensor).baseAddress! - base
        storage.releaseResidentPages(start..<(start + min(max(0, byteCount), tensor.byteCount)))
    }

    /// Reads one byte of every page of the file except the pages given up by
    /// ``releaseResidentPages(of:)``, calling `progress` with the fraction done (about 100
    /// times), so that the bytes still read in place are in memory before the first token.
    /// The released pages stay out: a tensor copied into another layout is held once.
    public func touchPages(_ progress: (Double) -> Void) {
        storage.touchPages(progress)
    }
}
