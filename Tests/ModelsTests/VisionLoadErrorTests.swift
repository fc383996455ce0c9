import GGUF
import Kernels
import Models
import Reference
import TestSupport
import Testing

/// An mmproj file with the wrong projector, keys or tensors, and inputs of the wrong size,
/// are typed `ProjectorError`s that name the file and what is wrong, never a crash; the
/// reference path refuses what it cannot read the same way.
@Suite struct VisionLoadErrorTests {
    static let mmproj = TestFixtures.path("models/mmproj-lfm2-vl-tiny.gguf")
    static let edited = "edited-mmproj.gguf"
    static let pool = ThreadPool(threads: 1)

    enum Tensor {
        case keep
        case drop
        /// Replaced by a tensor of this type and shape (zeros).
        case replace(GGMLType, [Int])
    }

    /// The fixture with its metadata edited by `edit`, its tensors changed by `tensors`, and
    /// `extra` tensors added (F32 zeros of the given shapes).
    static func file(
        _ edit: (inout GGUFMetadata) -> Void = { _ in }, tensors: [String: Tensor] = [:], extra: [String: [Int]] = [:]
    ) throws -> GGUFFile {
        let file = try GGUFFile(path: mmproj)
        var w = GGUFWriter(copyingMetadataOf: file)
        edit(&w.metadata)
        for t in file.tensors {
            switch tensors[t.name] ?? .keep {
            case .keep: try w.addTensor(name: t.name, type: t.type, shape: t.shape, data: Array(file.data(for: t)))
            case .drop: break
            case .replace(let type, let shape):
                let bytes = shape.dropFirst().reduce(type.rowBytes(count: shape[0])!, *)
                try w.addTensor(name: t.name, type: type, shape: shape, data: [UInt8](repeating: 0, count: bytes))
            }
        }
        for (name, shape) in extra.sorted(by: { $0.key < $1.key }) {
            try w.addTensor(name: name, type: .f32, shape: shape, data: [UInt8](repeating: 0, count: shape.reduce(4, *)))
        }
        return try GGUFFile(bytes: try w.serialize())
    }

    /// The error loading `file` gives (nil if it loads), from the encoder and from the
    /// reference path.
    static func errors(_ file: GGUFFile) -> (encoder: ProjectorError?, reference: ProjectorError?) {
        var encoder: ProjectorError?, reference: ProjectorError?
        do { _ = try SigLIP2VisionEncoder(file: file, path: edited, pool: pool) } catch { encoder = error }
        do { _ = try ReferenceSigLIP2VisionEncoder(file: file, path: edited) } catch { reference = error }
        return (encoder, reference)
    }

    static func encoderError(
        _ edit: (inout GGUFMetadata) -> Void = { _ in }, tensors: [String: Tensor] = [:], extra: [String: [Int]] = [:]
    ) throws -> ProjectorError? {
        errors(try file(edit, tensors: tensors, extra: extra)).encoder
    }

    @Test func theUnmodifiedFileLoads() throws {
        let e = Self.errors(try Self.file())
        #expect(e.encoder == nil && e.reference == nil)
    }

    @Test func otherProjectorsAndFilesAreRefused() throws {
        for type in ["lfm2a", "gemma3", "idefics3"] {
            let e = Self.errors(try Self.file { $0.set("clip.projector_type", .string(type)) })
            #expect(e.encoder == .unsupportedProjectorType(path: Self.edited, type: type, expected: ["lfm2"]))
            #expect(e.reference == .unsupportedProjectorType(path: Self.edited, type: type, expected: ["lfm2"]))
            #expect(e.encoder?.description.contains(Self.edited) == true && e.encoder?.description.contains("clip.projector_type") == true)
        }
        #expect(
            try Self.encoderError { $0.set("general.architecture", .string("lfm2")) }
                == .notAProjector(path: Self.edited, architecture: "lfm2"))
        #expect(try Self.encoderError { $0.remove("clip.projector_type") } == .missingKey(path: Self.edited, key: "clip.projector_type"))
        // The real neighbours: the audio projector and the language model of the pair.
        let audio = TestFixtures.path("models/mmproj-lfm2-audio-tiny.gguf")
        #expect(throws: ProjectorError.unsupportedProjectorType(path: audio, type: "lfm2a", expected: ["lfm2"])) {
            try SigLIP2VisionEncoder(path: audio, pool: Self.pool)
        }
        let lm = TestFixtures.path("models/lfm2-vl-tiny.gguf")
        #expect(throws: ProjectorError.notAProjector(path: lm, architecture: "lfm2")) {
            try SigLIP2VisionEncoder(path: lm, pool: Self.pool)
        }
        #expect(throws: ProjectorError.self) { try SigLIP2VisionEncoder(path: "/nonexistent/mmproj.gguf", pool: Self.pool) }
    }

    @Test func missingMistypedAndHostileKeys() throws {
        let p = "clip.vision.", path = Self.edited
        func invalid(_ key: String, _ value: String, _ reason: String) -> ProjectorError {
            .invalidValue(path: path, key: key, value: value, reason: reason)
        }
        #expect(try Self.encoderError { $0.remove(p + "embedding_length") } == .missingKey(path: path, key: p + "embedding_length"))
        #expect(try Self.encoderError { $0.remove("clip.has_vision_encoder") } == .missingKey(path: path, key: "clip.has_vision_encoder"))
        #expect(
            try Self.encoderError { $0.set("clip.has_vision_encoder", .bool(false)) }
                == invalid("clip.has_vision_encoder", "false", "the file has no vision encoder"))
        #expect(
            try Self.encoderError { $0.set(p + "block_count", .string("two")) }
                == invalid(p + "block_count", "string", "expected an integer"))
        #expect(
            try Self.encoderError { $0.set(p + "attention.head_count", .uint32(0)) }
                == invalid(p + "attention.head_count", "0", "must be 1...256"))
        #expect(
            try Self.encoderError { $0.set(p + "attention.head_count", .uint32(3)) }
                == invalid(p + "attention.head_count", "3", "must divide the width 64"))
        #expect(
            try Self.encoderError { $0.set(p + "embedding_length", .uint64(1 << 40)) }
                == invalid(p + "embedding_length", "1099511627776", "must be 1...8192"))
        #expect(
            try Self.encoderError { $0.set(p + "block_count", .uint32(1_000_000_000)) }
                == invalid(p + "block_count", "1000000000", "must be 1...256"))
        #expect(try Self.encoderError { $0.set(p + "patch_size", .uint32(0)) } == invalid(p + "patch_size", "0", "must be 1...64"))
        #expect(
            try Self.encoderError { $0.set(p + "image_size", .uint32(250)) }
                == invalid(p + "image_size", "250", "must be a multiple of the patch size 16, at most 256 patches per side"))
        #expect(
            try Self.encoderError { $0.set(p + "projector.scale_factor", .uint32(1)) }
                == invalid(p + "projector.scale_factor", "1", "must be 2...8"))
        #expect(
            try Self.encoderError { $0.set(p + "image_std", .array(.float32([0.5, 0, 0.5]))) }
                == invalid(p + "image_std", "[0.5, 0.0, 0.5]", "must not be 0"))
        #expect(
            try Self.encoderError { $0.set(p + "image_mean", .array(.float32([0.5, 0.5]))) }
                == invalid(p + "image_mean", "2 values", "needs 3"))
        let eps = try Self.encoderError { $0.set(p + "attention.layer_norm_epsilon", .float32(.nan)) }
        #expect({ if case .invalidValue(_, let key, _, _) = eps { key == p + "attention.layer_norm_epsilon" } else { false } }())
        #expect(
            try Self.encoderError { $0.set(p + "attention.head_count_kv", .uint32(2)) }
                == invalid(p + "attention.head_count_kv", "2", "must equal the head count 4"))
        #expect(
            try Self.encoderError { $0.set("clip.use_gelu", .bool(false)) }
                == invalid(
                    "clip.use_gelu", "false (or clip.use_silu true)",
                    "LFM2-VL's SigLIP2 tower uses GELU in its tanh form (clip.use_gelu true); other activations are not implemented"))
        // A projection width that disagrees with mm.2.
        #expect(
            try Self.encoderError { $0.set(p + "projection_dim", .uint32(64)) }
                == .tensorShape(path: path, name: "mm.2.weight", expected: [256, 64], found: [256, 128]))
        // More blocks than the file has.
        #expect(try Self.encoderError { $0.set(p + "block_count", .uint32(3)) } == .missingTensor(path: path, name: "v.blk.2.ln1.weight"))
        // The reference path refuses what it cannot read, too.
        #expect(Self.errors(try Self.file { $0.remove(p + "patch_size") }).reference == .missingKey(path: path, key: p + "patch_size"))
        #expect(
            Self.errors(try Self.file { $0.set(p + "block_count", .uint32(3)) }).reference
                == .missingTensor(path: path, name: "v.blk.2.ln1.weight"))
    }

    @Test func missingMisshapenMistypedAndUnexpectedTensors() throws {
        let path = Self.edited
        #expect(try Self.encoderError(tensors: ["mm.2.bias": .drop]) == .missingTensor(path: path, name: "mm.2.bias"))
        #expect(try Self.encoderError(tensors: ["v.post_ln.weight": .drop]) == .missingTensor(path: path, name: "v.post_ln.weight"))
        #expect(
            try Self.encoderError(tensors: ["v.blk.1.attn_q.weight": .replace(.f16, [64, 32])])
                == .tensorShape(path: path, name: "v.blk.1.attn_q.weight", expected: [64, 64], found: [64, 32]))
        #expect(
            try Self.encoderError(tensors: ["v.patch_embd.weight": .replace(.f16, [16, 16, 4, 64])])
                == .tensorShape(path: path, name: "v.patch_embd.weight", expected: [16, 16, 3, 64], found: [16, 16, 4, 64]))
        #expect(
            try Self.encoderError(tensors: ["v.position_embd.weight": .replace(.f32, [64, 255])])
                == .tensorShape(path: path, name: "v.position_embd.weight", expected: [64, 256], found: [64, 255]))
        #expect(
            try Self.encoderError(tensors: ["v.position_embd.weight": .replace(.q8_0, [64, 256])])
                == .tensorType(path: path, name: "v.position_embd.weight", type: .q8_0, accepted: [.f32, .f16, .bf16]))
        #expect(
            try Self.encoderError(tensors: ["v.blk.0.ffn_up.weight": .replace(.i32, [64, 128])])
                == .tensorType(path: path, name: "v.blk.0.ffn_up.weight", type: .i32, accepted: GGMLType.kernelTypes))
        // A Q8_0 matrix is accepted (quantized mmproj files exist) and runs.
        #expect(try Self.encoderError(tensors: ["v.blk.0.ffn_up.weight": .replace(.q8_0, [64, 128])]) == nil)
        // Tensors llama.cpp would apply that this encoder has no step for.
        for name in ["v.pre_ln.weight", "v.blk.1.attn_q_norm.weight", "v.blk.0.ffn_gate.weight", "v.blk.0.ls1.weight"] {
            let e = try Self.encoderError(extra: [name: [64]])
            #expect({ if case .unsupportedTensor(path, name, _) = e { true } else { false } }(), "\(name): \(String(describing: e))")
        }
        // The projector's input norm is optional, but as a pair.
        #expect(try Self.encoderError(tensors: ["mm.input_norm.weight": .drop, "mm.input_norm.bias": .drop]) == nil)
        let half = try Self.encoderError(tensors: ["mm.input_norm.bias": .drop])
        #expect({ if case .unsupportedTensor(path, "mm.input_norm.weight", _) = half { true } else { false } }())
        // The reference path checks its tensors too.
        #expect(Self.errors(try Self.file(tensors: ["mm.2.bias": .drop])).reference == .missingTensor(path: path, name: "mm.2.bias"))
        #expect(
            Self.errors(try Self.file(tensors: ["mm.1.bias": .replace(.f32, [255])])).reference
                == .tensorShape(path: path, name: "mm.1.bias", expected: [256], found: [255]))
    }

    @Test func wrongInputSizes() throws {
        let e = try SigLIP2VisionEncoder(path: Self.mmproj, pool: Self.pool)
        func failure(_ width: Int, _ height: Int, values: Int? = nil, output: Int? = nil) -> ProjectorError? {
            let pixels = [Float](repeating: 0, count: values ?? max(0, min(width * height * 3, 1 << 22)))
            var out = [Float](repeating: 0, count: output ?? 1 << 16)
            do {
                try pixels.withUnsafeBufferPointer { (p) throws(ProjectorError) in
                    try out.withUnsafeMutableBufferPointer { (o) throws(ProjectorError) in
                        try e.encode(pixels: p, width: width, height: height, into: o)
                    }
                }
                return nil
            } catch { return error }
        }
        #expect(failure(0, 64) == .inputTooSmall(what: "the slice width", value: 0, minimum: 32))
        #expect(failure(64, 16) == .inputTooSmall(what: "the slice height", value: 16, minimum: 32))
        #expect(failure(-32, 64) == .inputTooSmall(what: "the slice width", value: -32, minimum: 32))
        #expect(failure(48, 64) == .invalidInput("the slice width 48 is not a multiple of 32 (patch 16 x merge)"))
        #expect(failure(1 << 40, 64) == .inputTooLarge(what: "the slice width", value: 1 << 40, maximum: 65_536))
        #expect(failure(2048, 2048) == .inputTooLarge(what: "the patches of a 2048x2048 slice", value: 16_384, maximum: 4096))
        #expect(failure(64, 64, values: 100) == .invalidInput("a 64x64 slice has 12288 RGB values, got 100"))
        #expect(failure(64, 64, output: 10) == .invalidInput("the output holds 10 floats, 4 embeddings of 128 need 512"))
        #expect(failure(64, 64) == nil)
        #expect(throws: ProjectorError.invalidInput("the slice height 33 is not a multiple of 32 (patch 16 x merge)")) {
            try e.tokenCount(width: 64, height: 33)
        }
        var nan = [Float](repeating: 0, count: 64 * 64 * 3)
        nan[100] = .nan
        #expect(throws: ProjectorError.invalidInput("the slice holds a NaN or infinite value at index 100 (nan)")) {
            try e.encode(pixels: nan, width: 64, height: 64)
        }
        let reference = try ReferenceSigLIP2VisionEncoder(file: GGUFFile(path: Self.mmproj), path: Self.mmproj)
        #expect(throws: ProjectorError.self) { try reference.encode(pixels: [0, 0, 0], width: 48, height: 32) }
    }
}
