/// Writes GGUF bytes field by field, with no validation, so tests can forge any header.
struct RawGGUF {
    var bytes: [UInt8] = []

    mutating func u8(_ v: UInt8) { bytes.append(v) }
    mutating func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { bytes += $0 } }
    mutating func u64(_ v: UInt64) { withUnsafeBytes(of: v.littleEndian) { bytes += $0 } }
    mutating func string(_ s: String) {
        u64(UInt64(s.utf8.count))
        bytes += Array(s.utf8)
    }
    mutating func header(version: UInt32 = 3, tensors: UInt64, kvs: UInt64) {
        bytes += Array("GGUF".utf8)
        u32(version)
        u64(tensors)
        u64(kvs)
    }
    mutating func kvU32(_ key: String, _ v: UInt32) {
        string(key)
        u32(4)
        u32(v)
    }
    mutating func kvString(_ key: String, _ v: String) {
        string(key)
        u32(8)
        string(v)
    }
    mutating func tensorInfo(_ name: String, dims: [UInt64], type: UInt32, offset: UInt64) {
        string(name)
        u32(UInt32(dims.count))
        for d in dims { u64(d) }
        u32(type)
        u64(offset)
    }
    mutating func padTo(_ alignment: Int) {
        while bytes.count % alignment != 0 { bytes.append(0) }
    }
    mutating func zeros(_ n: Int) { bytes += [UInt8](repeating: 0, count: n) }

    /// A valid file with one f32 tensor `t` of `count` floats.
    static func oneTensor(
        name: String = "t", dims: [UInt64] = [8], type: UInt32 = 0, offset: UInt64 = 0, dataBytes: Int = 32,
        extraKV: ((inout RawGGUF) -> Void)? = nil, kvCount: UInt64 = 1
    ) -> [UInt8] {
        var r = RawGGUF()
        r.header(tensors: 1, kvs: kvCount)
        r.kvString("general.architecture", "llama")
        extraKV?(&r)
        r.tensorInfo(name, dims: dims, type: type, offset: offset)
        r.padTo(32)
        r.zeros(dataBytes)
        return r.bytes
    }
}
