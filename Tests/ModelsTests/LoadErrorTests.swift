import GGUF
import Models
import TestSupport
import Testing

/// A model file with the wrong architecture, hyper-parameters or tensors is a typed
/// `ModelError` that names what is wrong, never a crash.
@Suite struct LoadErrorTests {
    /// lfm2-tiny (or `model`) with its metadata and tensors edited by `edit`.
    func load(
        _ model: String = "lfm2-tiny", _ edit: (inout GGUFWriter, GGUFFile) throws -> Void = { _, _ in }, skipTensor: String? = nil,
        reshape: String? = nil
    ) throws -> ModelError? {
        let file = try GGUFFile(path: TestFixtures.path("models/\(model).gguf"))
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
        #expect(try load("lfm2moe-tiny") == nil)
    }

    @Test func unknownArchitecture() throws {
        let e = try load { w, _ in w.metadata.set("general.architecture", .string("mamba")) }
        #expect(e == .unsupportedArchitecture("mamba", supported: ["gemma3", "lfm2", "lfm2moe", "llama"]))
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

    // MARK: - lfm2moe

    func loadMoE(_ edit: @escaping (inout GGUFWriter) -> Void) throws -> ModelError? {
        try load("lfm2moe-tiny") { w, _ in edit(&w) }
    }

    @Test func unknownGatingFunctionsAreRefused() throws {
        for (value, name) in [(1, "softmax"), (0, "none"), (4, "sqrt-softplus"), (9, "unknown")] {
            let e = try loadMoE { $0.metadata.set("lfm2moe.expert_gating_func", .uint32(UInt32(value))) }
            #expect(
                e
                    == .invalidHyperParameter(
                        key: "lfm2moe.expert_gating_func", value: "\(value) (\(name))",
                        reason: "lfm2moe routes with sigmoid gating (2), the only one leap-ref implements"))
        }
        #expect(
            try loadMoE { $0.metadata.remove("lfm2moe.expert_gating_func") } == .file(.missingKey("lfm2moe.expert_gating_func")))
    }

    @Test func missingSelectionBiasOrExpertTensors() throws {
        #expect(try load("lfm2moe-tiny", skipTensor: "blk.3.exp_probs_b.bias") == .file(.missingTensor("blk.3.exp_probs_b.bias")))
        #expect(try load("lfm2moe-tiny", skipTensor: "blk.5.ffn_down_exps.weight") == .file(.missingTensor("blk.5.ffn_down_exps.weight")))
        #expect(try load("lfm2moe-tiny", skipTensor: "blk.2.ffn_gate_inp.weight") == .file(.missingTensor("blk.2.ffn_gate_inp.weight")))
        // A leading dense layer needs its dense feed-forward.
        #expect(try load("lfm2moe-tiny", skipTensor: "blk.1.ffn_up.weight") == .file(.missingTensor("blk.1.ffn_up.weight")))
        #expect(
            try load("lfm2moe-tiny", reshape: "blk.4.ffn_up_exps.weight")
                == .tensorShapeMismatch(name: "blk.4.ffn_up_exps.weight", expected: [128, 64, 8], found: [65536]))
    }

    @Test func expertCountsThatDoNotMatchTheTensors() throws {
        // 6 experts said, 8 stored: the router's shape shows it first.
        #expect(
            try loadMoE { $0.metadata.set("lfm2moe.expert_count", .uint32(6)) }
                == .tensorShapeMismatch(name: "blk.2.ffn_gate_inp.weight", expected: [128, 6], found: [128, 8]))
        #expect(
            try loadMoE { $0.metadata.set("lfm2moe.expert_feed_forward_length", .uint32(96)) }
                == .tensorShapeMismatch(name: "blk.2.ffn_gate_exps.weight", expected: [128, 96, 8], found: [128, 64, 8]))
        // More dense layers than the file has: layer 2's dense FFN is missing.
        #expect(
            try loadMoE { $0.metadata.set("lfm2moe.leading_dense_block_count", .uint32(3)) }
                == .file(.missingTensor("blk.2.ffn_gate.weight")))
        #expect(
            try loadMoE { $0.metadata.set("lfm2moe.expert_used_count", .uint32(9)) }
                == .invalidHyperParameter(key: "lfm2moe.expert_used_count", value: "9", reason: "must be 1...8 (the expert count)"))
        #expect(
            try loadMoE { $0.metadata.set("lfm2moe.expert_used_count", .uint32(0)) }
                == .invalidHyperParameter(key: "lfm2moe.expert_used_count", value: "0", reason: "must be 1...8 (the expert count)"))
        #expect(
            try loadMoE { $0.metadata.set("lfm2moe.expert_count", .uint32(5000)) }
                == .invalidHyperParameter(key: "lfm2moe.expert_count", value: "5000", reason: "must be 1...1024"))
        #expect(
            try loadMoE { $0.metadata.set("lfm2moe.leading_dense_block_count", .uint32(7)) }
                == .invalidHyperParameter(key: "lfm2moe.leading_dense_block_count", value: "7", reason: "must be 0...6 (the block count)"))
        #expect(try loadMoE { $0.metadata.remove("lfm2moe.expert_count") } == .file(.missingKey("lfm2moe.expert_count")))
        #expect(
            try loadMoE { $0.metadata.set("lfm2moe.expert_weights_norm", .string("yes")) }
                == .file(.typeMismatch(key: "lfm2moe.expert_weights_norm", expected: "a bool", found: "string")))
        #expect(
            try loadMoE { $0.metadata.set("lfm2moe.expert_weights_scale", .float32(-2)) }
                == .invalidHyperParameter(key: "lfm2moe.expert_weights_scale", value: "-2.0", reason: "must be a non-negative number"))
    }
}
