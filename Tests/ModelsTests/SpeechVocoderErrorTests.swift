import GGUF
import Kernels
import Models
import Reference
import TestSupport
import Testing

/// A vocoder file with missing or inconsistent keys and tensors gives a typed
/// `SpeechError` naming the file and the key or tensor, never a crash.
@Suite struct SpeechVocoderErrorTests {
    static let name = "vocoder-edited.gguf"
    static let pool = ThreadPool(threads: 1)

    /// Zero bytes of a tensor of `type` and ggml `shape`.
    static func zeros(_ type: GGMLType, _ shape: [Int]) -> [UInt8] {
        [UInt8](repeating: 0, count: type.rowBytes(count: shape[0])! * shape.dropFirst().reduce(1, *))
    }

    /// The tiny vocoder with its metadata and tensors edited, loaded as `name` (both
    /// weight storages must give the same answer).
    func load(
        _ edit: (inout GGUFWriter) throws -> Void = { _ in }, skip: Set<String> = [],
        replace: [String: (type: GGMLType, shape: [Int])] = [:]
    ) throws -> SpeechError? {
        let file = try GGUFFile(path: TestFixtures.path("models/vocoder-lfm2-audio-tiny.gguf"))
        var w = GGUFWriter(copyingMetadataOf: file)
        for t in file.tensors where !skip.contains(t.name) {
            if let r = replace[t.name] {
                try w.addTensor(name: t.name, type: r.type, shape: r.shape, data: Self.zeros(r.type, r.shape))
            } else {
                try w.addTensor(name: t.name, type: t.type, shape: t.shape, data: Array(file.data(for: t)))
            }
        }
        try edit(&w)
        let image = try GGUFFile(bytes: try w.serialize())
        var errors: [SpeechError?] = []
        for storage in [SpeechVocoder.WeightStorage.asStored, .float32] {
            do {
                _ = try SpeechVocoder(file: image, path: Self.name, pool: Self.pool, weights: storage)
                errors.append(nil)
            } catch { errors.append(error) }
        }
        #expect(errors[0] == errors[1])
        return errors[0]
    }

    @Test func theUnmodifiedFileLoads() throws {
        #expect(try load() == nil)
    }

    @Test func missingAndInvalidKeys() throws {
        #expect(try load { $0.metadata.remove("depthformer_n_layer") } == .missingKey(path: Self.name, key: "depthformer_n_layer"))
        #expect(try load { $0.metadata.remove("depthformer_n_embd") } == .missingKey(path: Self.name, key: "depthformer_n_embd"))
        #expect(
            try load { $0.metadata.set("depthformer_n_embd", .string("128")) }
                == .invalidValue(path: Self.name, key: "depthformer_n_embd", value: "string", reason: "expected an integer"))
        #expect(
            try load { $0.metadata.set("depthformer_n_embd", .uint32(0)) }
                == .invalidValue(path: Self.name, key: "depthformer_n_embd", value: "0", reason: "must be 1...65536"))
        #expect(
            try load { $0.metadata.set("depthformer_n_embd", .uint64(1 << 40)) }
                == .invalidValue(path: Self.name, key: "depthformer_n_embd", value: "1099511627776", reason: "must be 1...65536"))
        #expect(
            try load { $0.metadata.set("depthformer_n_layer", .uint32(100_000)) }
                == .invalidValue(path: Self.name, key: "depthformer_n_layer", value: "100000", reason: "must be 1...256"))
        // 32 heads of an even size: the width is a multiple of 64.
        #expect(
            try load { $0.metadata.set("depthformer_n_embd", .uint32(96)) }
                == .invalidValue(
                    path: Self.name, key: "depthformer_n_embd", value: "96", reason: "must be a multiple of 64: 32 heads of an even size"))
        // Keys that disagree with the tensors.
        #expect(
            try load { $0.metadata.set("depthformer_n_embd", .uint32(256)) }
                == .tensorShape(path: Self.name, name: "depth_linear.weight", expected: [128, 2048], found: [128, 1024]))
        #expect(
            try load { $0.metadata.set("depthformer_n_layer", .uint32(3)) }
                == .missingTensor(path: Self.name, name: "depthformer.layers.2.operator_norm.weight"))
    }

    @Test func codebookCount() throws {
        let seventh = ["embedding.weight", "to_logits.weight", "embedding_norm.weight"].map { "depth_embeddings.7." + $0 }
        #expect(try load(skip: Set(seventh)) == .codebookCount(path: Self.name, found: 7, expected: 8))
        #expect(
            try load {
                try $0.addTensor(name: "depth_embeddings.8.embedding.weight", type: .f32, shape: [128, 4], data: Self.zeros(.f32, [128, 4]))
            }
                == .codebookCount(path: Self.name, found: 9, expected: 8))
        #expect(
            try load(skip: ["depth_embeddings.3.to_logits.weight"])
                == .missingTensor(path: Self.name, name: "depth_embeddings.3.to_logits.weight"))
        #expect(
            try load(replace: ["depth_embeddings.2.embedding.weight": (.q4_0, [128, 2048])])
                == .tensorShape(path: Self.name, name: "depth_embeddings.2.embedding.weight", expected: [128, 2049], found: [128, 2048]))
        let error = try load(skip: Set(seventh))
        #expect(error?.description.contains(Self.name) == true && error?.description.contains("8") == true)
    }

    @Test func missingTensors() throws {
        for name in [
            "depth_linear.bias", "audio_embedding.embedding.weight", "emb.emb.weight", "depthformer.layers.1.feed_forward.w2.weight",
            "depthformer.layers.0.operator.attention.k_layernorm.weight", "depth_linear.weight",
            "depthformer.layers.0.feed_forward.w1.weight"
        ] {
            let error = try load(skip: [name])
            #expect(error == .missingTensor(path: Self.name, name: name))
            #expect(error?.description.contains(name) == true && error?.description.contains(Self.name) == true)
        }
        // audio_embedding's norm and output head are unused at inference: not required.
        #expect(try load(skip: ["audio_embedding.to_logits.weight", "audio_embedding.embedding_norm.weight"]) == nil)
    }

    @Test func wrongShapesAndTypes() throws {
        #expect(
            try load(replace: ["depthformer.layers.1.operator.qkv_proj.weight": (.q4_0, [128, 160])])
                == .tensorShape(
                    path: Self.name, name: "depthformer.layers.1.operator.qkv_proj.weight", expected: [128, 192], found: [128, 160]))
        #expect(
            try load(replace: ["depthformer.layers.0.operator.attention.q_layernorm.weight": (.f32, [8])])
                == .tensorShape(
                    path: Self.name, name: "depthformer.layers.0.operator.attention.q_layernorm.weight", expected: [4], found: [8]))
        #expect(
            try load(replace: ["depth_linear.weight": (.q4_0, [128 * 1024])])
                == .tensorShape(path: Self.name, name: "depth_linear.weight", expected: [131072, 1024], found: [131072]))
        #expect(
            try load(replace: ["depthformer.layers.0.feed_forward.w1.weight": (.f32, [512])])
                == .tensorShape(path: Self.name, name: "depthformer.layers.0.feed_forward.w1.weight", expected: [128, 0], found: [512]))
        // The feed-forward width is w1's; the other layers' must agree.
        #expect(
            try load(replace: ["depthformer.layers.1.feed_forward.w3.weight": (.q4_0, [128, 256])])
                == .tensorShape(
                    path: Self.name, name: "depthformer.layers.1.feed_forward.w3.weight", expected: [128, 512], found: [128, 256]))
        // audio_embedding writes the language model's width, depth_linear reads it.
        #expect(
            try load(replace: ["audio_embedding.embedding.weight": (.q4_0, [64, 16392])])
                == .tensorShape(path: Self.name, name: "audio_embedding.embedding.weight", expected: [128, 16392], found: [64, 16392]))
        #expect(
            try load(replace: ["emb.emb.weight": (.q4_0, [64, 16392])])
                == .tensorShape(path: Self.name, name: "emb.emb.weight", expected: [64, 16384], found: [64, 16392]))
        #expect(
            try load(replace: ["depth_linear.bias": (.f32, [1000])])
                == .tensorShape(path: Self.name, name: "depth_linear.bias", expected: [1024], found: [1000]))
        // Types: a matrix without kernels, a norm that is not a float vector.
        #expect(
            try load(replace: ["depthformer.layers.0.operator.out_proj.weight": (.i32, [128, 128])])
                == .tensorType(
                    path: Self.name, name: "depthformer.layers.0.operator.out_proj.weight", type: .i32, accepted: GGMLType.kernelTypes))
        #expect(
            try load(replace: ["depthformer.layers.0.ffn_norm.weight": (.q4_0, [128])])
                == .tensorType(path: Self.name, name: "depthformer.layers.0.ffn_norm.weight", type: .q4_0, accepted: [.f32, .f16, .bf16]))
        // Other stored types with kernels load (F16 norms, F32 and Q8_0 matrices).
        #expect(
            try load(replace: [
                "depthformer.layers.0.ffn_norm.weight": (.f16, [128]), "depth_linear.weight": (.f32, [128, 1024]),
                "depth_embeddings.5.to_logits.weight": (.q8_0, [128, 2049])
            ]) == nil)
    }

    @Test func widthOfTheLanguageModel() throws {
        let vocoder = try SpeechVocoder(path: TestFixtures.path("models/vocoder-lfm2-audio-tiny.gguf"), pool: Self.pool)
        #expect(throws: Never.self) { try vocoder.checkLanguageModelWidth(128, languageModel: "lm.gguf") }
        #expect(
            throws: SpeechError.widthMismatch(
                path: TestFixtures.path("models/vocoder-lfm2-audio-tiny.gguf"), tensor: "depth_linear.weight", vocoderWidth: 128,
                languageModel: "lm.gguf", languageModelWidth: 2048)
        ) { try vocoder.checkLanguageModelWidth(2048, languageModel: "lm.gguf") }
        // A vocoder made for a 256-wide language model.
        let error = try load(replace: [
            "depth_linear.weight": (.q4_0, [256, 1024]), "audio_embedding.embedding.weight": (.q4_0, [256, 16392])
        ])
        #expect(error == nil)
    }

    @Test func otherFiles() throws {
        // Not a file, and a language model given as the vocoder.
        do {
            _ = try SpeechVocoder(path: Self.name + ".missing", pool: Self.pool)
            Issue.record("a missing file loaded")
        } catch {
            guard case .file(let path, .cannotOpen) = error else {
                Issue.record("a missing file: \(error)")
                return
            }
            #expect(path == Self.name + ".missing")
        }
        let lm = TestFixtures.path("models/lfm2-audio-out-tiny.gguf")
        #expect(throws: SpeechError.missingKey(path: lm, key: "depthformer_n_layer")) { _ = try SpeechVocoder(path: lm, pool: Self.pool) }
        // The reference refuses what it cannot read the same way.
        let file = try GGUFFile(path: lm)
        #expect(throws: SpeechError.missingKey(path: lm, key: "depthformer_n_layer")) { _ = try ReferenceDepthformer(file: file, path: lm) }
    }
}
