import Foundation
import TestSupport
import Testing

@testable import GGUF

/// A small but complete file: every metadata value type, arrays of each, and tensors of
/// several ggml types.
func sampleFile() throws -> [UInt8] {
    var w = GGUFWriter()
    w.metadata.set("general.architecture", .string("llama"))
    w.metadata.set("u8", .uint8(200))
    w.metadata.set("i8", .int8(-100))
    w.metadata.set("u16", .uint16(60000))
    w.metadata.set("i16", .int16(-30000))
    w.metadata.set("u32", .uint32(4_000_000_000))
    w.metadata.set("i32", .int32(-2_000_000_000))
    w.metadata.set("u64", .uint64(UInt64.max))
    w.metadata.set("i64", .int64(Int64.min))
    w.metadata.set("f32", .float32(1.5))
    w.metadata.set("f64", .float64(-2.25))
    w.metadata.set("bool", .bool(true))
    w.metadata.set("str", .string("héllo 🚀"))
    w.metadata.set("arr.u8", .array(.uint8([1, 2, 3])))
    w.metadata.set("arr.i32", .array(.int32([-1, 0, 1])))
    w.metadata.set("arr.f32", .array(.float32([0.5, -0.25])))
    w.metadata.set("arr.bool", .array(.bool([true, false])))
    w.metadata.set("arr.str", .array(.string(["a", "", "ü"])))
    w.metadata.set("arr.u64", .array(.uint64([7])))
    w.metadata.set("arr.f64", .array(.float64([1e300])))
    w.metadata.set("arr.nested", .array(.array([.int16([1, 2]), .string(["x"])])))
    try w.addTensor(name: "a.f32", type: .f32, shape: [3, 2], data: (0..<24).map { UInt8($0) })
    try w.addTensor(name: "b.q4_0", type: .q4_0, shape: [64, 1], data: [UInt8](repeating: 7, count: 36))
    try w.addTensor(name: "c.f16", type: .f16, shape: [5], data: [UInt8](repeating: 1, count: 10))
    return try w.serialize()
}

@Suite struct GGUFRoundTripTests {
    @Test func writerOutputReadsBackExactly() throws {
        let bytes = try sampleFile()
        let f = try GGUFFile(bytes: bytes)
        #expect(f.version == 3)
        #expect(f.metadata.keys.first == "general.architecture")
        #expect(f.metadata["u8"] == .uint8(200))
        #expect(f.metadata["i8"] == .int8(-100))
        #expect(f.metadata["u16"] == .uint16(60000))
        #expect(f.metadata["i16"] == .int16(-30000))
        #expect(f.metadata["u32"] == .uint32(4_000_000_000))
        #expect(f.metadata["i32"] == .int32(-2_000_000_000))
        #expect(f.metadata["u64"] == .uint64(UInt64.max))
        #expect(f.metadata["i64"] == .int64(Int64.min))
        #expect(f.metadata["f32"] == .float32(1.5))
        #expect(f.metadata["f64"] == .float64(-2.25))
        #expect(f.metadata["bool"] == .bool(true))
        #expect(try f.metadata.string("str") == "héllo 🚀")
        #expect(try f.metadata.intArray("arr.u8") == [1, 2, 3])
        #expect(try f.metadata.intArray("arr.i32") == [-1, 0, 1])
        #expect(try f.metadata.floatArray("arr.f32") == [0.5, -0.25])
        #expect(f.metadata["arr.bool"] == .array(.bool([true, false])))
        #expect(try f.metadata.stringArray("arr.str") == ["a", "", "ü"])
        #expect(f.metadata["arr.f64"] == .array(.float64([1e300])))
        #expect(f.metadata["arr.nested"] == .array(.array([.int16([1, 2]), .string(["x"])])))

        #expect(f.tensors.map(\.name) == ["a.f32", "b.q4_0", "c.f16"])
        let a = try f.requireTensor("a.f32")
        #expect(a.shape == [3, 2] && a.byteCount == 24 && a.rowLength == 3 && a.rowCount == 2)
        #expect(Array(f.data(for: a)) == (0..<24).map { UInt8($0) })
        let b = try f.requireTensor("b.q4_0")
        #expect(b.type == .q4_0 && b.byteCount == 36 && b.offset % 32 == 0)
        #expect(Array(f.data(for: b)) == [UInt8](repeating: 7, count: 36))
        #expect(f.dataOffset % 32 == 0)
    }

    @Test func writingTheReadFileAgainIsByteIdentical() throws {
        let bytes = try sampleFile()
        let f = try GGUFFile(bytes: bytes)
        var w = GGUFWriter(copyingMetadataOf: f)
        for t in f.tensors { try w.addTensor(name: t.name, type: t.type, shape: t.shape, data: Array(f.data(for: t))) }
        #expect(try w.serialize() == bytes)
    }

    @Test func customAlignmentIsWrittenAndHonoured() throws {
        var w = GGUFWriter()
        w.alignment = 64
        try w.addTensor(name: "x", type: .f32, shape: [3], data: [UInt8](repeating: 1, count: 12))
        try w.addTensor(name: "y", type: .f32, shape: [1], data: [1, 2, 3, 4])
        let f = try GGUFFile(bytes: try w.serialize())
        #expect(f.alignment == 64)
        #expect(try f.metadata.int("general.alignment") == 64)
        #expect(f.tensors[1].offset == 64 && f.dataOffset % 64 == 0)
    }

    @Test func writerRejectsInconsistentTensors() throws {
        var w = GGUFWriter()
        #expect(throws: GGUFError.rowNotBlockMultiple(tensor: "q", rowLength: 33, type: .q4_0)) {
            try w.addTensor(name: "q", type: .q4_0, shape: [33], data: [])
        }
        #expect(throws: GGUFError.self) { try w.addTensor(name: "f", type: .f32, shape: [4], data: [0, 0]) }
        try w.addTensor(name: "ok", type: .f32, shape: [1], data: [0, 0, 0, 0])
        #expect(throws: GGUFError.self) { try w.addTensor(name: "ok", type: .f32, shape: [1], data: [0, 0, 0, 0]) }
    }

    @Test func typedAccessorsNameKeyAndTypeFound() throws {
        let f = try GGUFFile(bytes: try sampleFile())
        #expect(throws: GGUFError.missingKey("nope")) { try f.metadata.int("nope") }
        #expect(throws: GGUFError.typeMismatch(key: "str", expected: "an integer", found: "string")) { try f.metadata.int("str") }
        #expect(throws: GGUFError.typeMismatch(key: "u32", expected: "a string", found: "u32")) { try f.metadata.string("u32") }
        #expect(throws: GGUFError.valueOutOfRange(key: "u64", value: "18446744073709551615")) { try f.metadata.int("u64") }
        #expect(throws: GGUFError.typeMismatch(key: "arr.f32", expected: "an array of string", found: "array of f32")) {
            try f.metadata.stringArray("arr.f32")
        }
        #expect(try f.metadata.int("u16") == 60000)
        #expect(try f.metadata.float("u8") == 200)
        #expect(try f.metadata.optional("absent", f.metadata.int) == nil)
        #expect(try f.metadata.optional("i32", f.metadata.int) == -2_000_000_000)
        #expect(throws: GGUFError.missingTensor("zz")) { try f.requireTensor("zz") }
        #expect(GGUFError.missingKey("llama.block_count").description.contains("llama.block_count"))
    }
}

@Suite struct GGUFRealFileTests {
    @Test func lfm2TinyFixture() throws {
        let f = try GGUFFile(path: TestFixtures.path("models/lfm2-tiny.gguf"))
        #expect(try f.metadata.string("general.architecture") == "lfm2")
        let types = Set(f.tensors.map(\.type))
        #expect(types.isSuperset(of: [.q4_0, .q4_1, .q8_0, .f16, .f32]))
        #expect(try f.metadata.stringArray("tokenizer.ggml.tokens").count > 49152)
        for t in f.tensors { #expect(f.data(for: t).count == t.byteCount) }
    }

    /// Releasing a tensor's resident pages (after the kernels copied it) leaves its bytes
    /// readable and unchanged, mapped or held in memory, and touches no other tensor.
    @Test func releasedPagesStayReadable() throws {
        let path = TestFixtures.path("models/lfm2-tiny.gguf")
        let mapped = try GGUFFile(path: path)
        let inMemory = try GGUFFile(bytes: [UInt8](try Data(contentsOf: URL(fileURLWithPath: path))))
        for f in [mapped, inMemory] {
            let before = f.tensors.map { Array(f.data(for: $0)) }
            for t in f.tensors where t.byteCount >= 1 << 16 { f.releaseResidentPages(of: t) }
            for (t, bytes) in zip(f.tensors, before) { #expect(Array(f.data(for: t)) == bytes, "\(t.name)") }
        }
    }

    @Test func kQuantSample() throws {
        let f = try GGUFFile(path: TestFixtures.path("models/kquants-sample.gguf"))
        #expect(Set(f.tensors.map(\.type)) == [.q5_0, .q5_1, .q8_0, .q4_K, .q5_K, .q6_K])
        let t = try f.requireTensor("q4_k_m.blk.0.ffn_down.weight")
        #expect(t.type == .q6_K && t.shape == [1536, 576] && t.byteCount == 1536 / 256 * 210 * 576)
    }

    @Test func smolLM2HasAll272Tensors() throws {
        let f = try GGUFFile(path: try TestFixtures.require(TestFixtures.smolLM2Q4_1))
        #expect(f.tensors.count == 272)
        #expect(try f.metadata.string("general.architecture") == "llama")
        #expect(try f.metadata.int("llama.block_count") == 30)
        #expect(try f.metadata.stringArray("tokenizer.ggml.tokens").count == 49152)
        #expect(try f.requireTensor("token_embd.weight").type == .q8_0)
    }

    @Test func missingAndInvalidPaths() {
        #expect(throws: GGUFError.self) { try GGUFFile(path: "/nonexistent/model.gguf") }
        #expect(throws: GGUFError.cannotOpen(path: "/tmp", reason: "not a regular file")) { try GGUFFile(path: "/tmp") }
    }
}
