import GGUF
import Models
import TestSupport
import Testing

/// A model file with the wrong architecture, hyper-parameters or tensors is a typed
/// `ModelError` that names what is wrong, never a crash.
@Suite struct LoadErrorTests {
    /// lfm2-tiny with its metadata and tensors edited by `edit`.
    func load(
        _ edit: (inout GGUFWriter, GGUFFile) throws -> Void = { _, _ in }, skipTensor: String? = nil,
        reshape: String? = nil
    ) throws -> ModelError? {
        let file = try GGUFFile(path: TestFixtures.path("models/lfm2-tiny.gguf"))
        var w = GGUFWriter(copyingMetadataOf: file)
        for t in file.tensors where t.name != skipTensor {
            if t.name == reshape {
                try w.addTensor(name: t.name, type: .f32, shape: [t.elementCount], data: [UInt8](repeating: 0, count: t.elementCount * 4))
            } else {
                try w.addTensor(name: t.name, type: t.type, shape: t.shape, data: Array(file.data(for: t)))
            }
        }
        try edit(&w, file)
        let image = try GGUFFile(bytes: try w.serialize())
        do {
            _ = try TransformerModel(file: image)
            return nil
        } catch { return error }
    }

    @Test func theUnmodifiedFileLoads() throws {
        #expect(try load() == nil)
    }

    @Test func unknownArchitecture() throws {
        let e = try load { w, _ in w.metadata.set("general.architecture", .string("mamba")) }
        #expect(e == .unsupportedArchitecture("mamba", supported: ["lfm2", "llama"]))
        #expect(e?.description.contains("llama") == true)
    }

    @Test func missingAndMistypedHyperParameters() throws {
        #expect(try load { w, _ in w.metadata.remove("lfm2.embedding_length") } == .file(.missingKey("lfm2.embedding_length")))
        #expect(
            try load { w, _ in w.metadata.set("lfm2.block_count", .string("six")) }
                == .file(.typeMismatch(key: "lfm2.block_count", expected: "an integer", found: "string")))
        #expect(
            try load { w, _ in w.metadata.set("lfm2.block_count", .uint32(0)) }
                == .invalidHyperParameter(key: "lfm2.block_count", value: "0", reason: "must be 1...1024"))
        #expect(
            try load { w, _ in w.metadata.set("lfm2.attention.head_count_kv", .array(.int32([0, 2]))) }
                == .invalidHyperParameter(key: "lfm2.attention.head_count_kv", value: "2 entries", reason: "needs one per layer (6)"))
        #expect(
            try load { w, _ in w.metadata.set("lfm2.attention.head_count_kv", .array(.int32([0, 0, 3, 0, 3, 0]))) }
                == .invalidHyperParameter(key: "lfm2.attention.head_count_kv", value: "3", reason: "must divide the head count 4"))
        #expect(
            try load { w, _ in w.metadata.set("lfm2.rope.freq_base", .float32(-1)) }
                == .invalidHyperParameter(key: "lfm2.rope.freq_base", value: "-1.0", reason: "must be positive"))
    }

    @Test func missingOrMisshapenTensors() throws {
        #expect(try load(skipTensor: "blk.2.attn_q_norm.weight") == .file(.missingTensor("blk.2.attn_q_norm.weight")))
        #expect(
            try load(reshape: "blk.3.ffn_up.weight")
                == .tensorShapeMismatch(name: "blk.3.ffn_up.weight", expected: [128, 384], found: [49152]))
    }
}
