import GGUF
import Kernels
import Models
import Reference
import TestSupport
import Testing

/// A projector with the wrong type, keys or tensors, and a log-mel input of the wrong size,
/// give typed `ProjectorError`s that name the file and what is wrong, never a crash; the
/// reference path refuses what it cannot read the same way.
@Suite struct FastConformerEncoderErrorTests {
    static let name = "edited.gguf"
    static let pool = ThreadPool(threads: 1)

    /// The tiny mmproj with its metadata and tensors edited, loaded as `name`.
    func load(
        _ edit: (inout GGUFWriter, GGUFFile) throws -> Void = { _, _ in }, skipTensor: String? = nil,
        replace: (name: String, type: GGMLType, shape: [Int], data: [UInt8])? = nil
    ) throws -> ProjectorError? {
        let file = try GGUFFile(path: TestFixtures.path("models/mmproj-lfm2-audio-tiny.gguf"))
        var w = GGUFWriter(copyingMetadataOf: file)
        for t in file.tensors where t.name != skipTensor {
            if let r = replace, r.name == t.name {
                try w.addTensor(name: t.name, type: r.type, shape: r.shape, data: r.data)
            } else {
                try w.addTensor(name: t.name, type: t.type, shape: t.shape, data: Array(file.data(for: t)))
            }
        }
        try edit(&w, file)
        let image = try GGUFFile(bytes: try w.serialize())
        do {
            _ = try FastConformerEncoder(file: image, path: Self.name, pool: Self.pool)
            return nil
        } catch { return error }
    }

    @Test func theUnmodifiedFileLoads() throws {
        #expect(try load() == nil)
    }

    @Test func wrongKindOfFile() throws {
        #expect(
            try load { w, _ in w.metadata.set("general.architecture", .string("lfm2")) }
                == .notAProjector(path: Self.name, architecture: "lfm2"))
        #expect(
            try load { w, _ in w.metadata.set("clip.projector_type", .string("lfm2")) }
                == .unsupportedProjectorType(path: Self.name, type: "lfm2", expected: ["lfm2a"]))
        #expect(
            try load { w, _ in w.metadata.set("clip.has_audio_encoder", .bool(false)) }
                == .invalidValue(path: Self.name, key: "clip.has_audio_encoder", value: "false", reason: "the file has no audio encoder"))
        #expect(
            try load { w, _ in w.metadata.remove("clip.has_audio_encoder") } == .missingKey(path: Self.name, key: "clip.has_audio_encoder"))
        // A file with several modalities names the audio projector under clip.audio.
        #expect(
            try load { w, _ in
                w.metadata.remove("clip.projector_type")
                w.metadata.set("clip.audio.projector_type", .string("lfm2a"))
            } == nil)
        // Only the audio modality's key stands in for clip.projector_type.
        #expect(
            try load { w, _ in
                w.metadata.remove("clip.projector_type")
                w.metadata.set("clip.vision.projector_type", .string("lfm2a"))
            } == .missingKey(path: Self.name, key: "clip.projector_type"))
        let error = try load { w, _ in w.metadata.set("clip.projector_type", .string("whisper")) }
        #expect(error?.description.contains(Self.name) == true && error?.description.contains("lfm2a") == true)
        // A path that is no GGUF at all.
        do {
            _ = try FastConformerEncoder(path: Self.name + ".missing", pool: Self.pool)
            Issue.record("a missing file loaded")
        } catch {
            guard case .file(let file, .cannotOpen) = error else {
                Issue.record("a missing file: \(error)")
                return
            }
            #expect(file == Self.name + ".missing")
        }
    }

    @Test func missingAndInvalidKeys() throws {
        #expect(
            try load { w, _ in w.metadata.remove("clip.audio.num_mel_bins") }
                == .missingKey(path: Self.name, key: "clip.audio.num_mel_bins"))
        #expect(
            try load { w, _ in w.metadata.remove("clip.audio.attention.layer_norm_epsilon") }
                == .missingKey(path: Self.name, key: "clip.audio.attention.layer_norm_epsilon"))
        #expect(
            try load { w, _ in w.metadata.set("clip.audio.block_count", .string("two")) }
                == .invalidValue(path: Self.name, key: "clip.audio.block_count", value: "string", reason: "expected an integer"))
        #expect(
            try load { w, _ in w.metadata.set("clip.audio.block_count", .uint32(0)) }
                == .invalidValue(path: Self.name, key: "clip.audio.block_count", value: "0", reason: "must be 1...1024"))
        #expect(
            try load { w, _ in w.metadata.set("clip.audio.attention.head_count", .uint32(3)) }
                == .invalidValue(path: Self.name, key: "clip.audio.attention.head_count", value: "3", reason: "must divide the width 64"))
        for bad in [GGUFValue.float32(-1), .float32(.nan), .float32(.infinity), .float32(0)] {
            let e = try load { w, _ in w.metadata.set("clip.audio.attention.layer_norm_epsilon", bad) }
            guard case .invalidValue(_, let key, _, _) = e else {
                Issue.record("eps \(bad): \(String(describing: e))")
                continue
            }
            #expect(key == "clip.audio.attention.layer_norm_epsilon")
        }
        #expect(
            try load { w, _ in w.metadata.set("clip.audio.embedding_length", .uint64(UInt64.max)) }
                == .invalidValue(
                    path: Self.name, key: "clip.audio.embedding_length", value: "18446744073709551615", reason: "out of range"))
    }

    @Test func keysInconsistentWithTheTensors() throws {
        // More blocks than the file holds: the first missing tensor.
        #expect(
            try load { w, _ in w.metadata.set("clip.audio.block_count", .uint32(3)) }
                == .missingTensor(path: Self.name, name: "a.blk.2.ffn_norm.weight"))
        // 80 mel bins leave 10 bins after subsampling, 160 inputs for pre_encode.out, not 256.
        #expect(
            try load { w, _ in w.metadata.set("clip.audio.num_mel_bins", .uint32(80)) }
                == .tensorShape(path: Self.name, name: "a.pre_encode.out.weight", expected: [160, 64], found: [256, 64]))
        #expect(
            try load { w, _ in w.metadata.set("clip.audio.embedding_length", .uint32(128)) }
                == .tensorShape(path: Self.name, name: "a.blk.0.ffn_up.weight", expected: [128, 256], found: [64, 256]))
        #expect(
            try load { w, _ in w.metadata.set("clip.audio.projection_dim", .uint32(100)) }
                == .tensorShape(path: Self.name, name: "a.position_embd.weight", expected: [100, 2056], found: [128, 2056]))
    }

    @Test func missingReshapedAndMistypedTensors() throws {
        #expect(try load(skipTensor: "a.blk.1.conv_dw.bias") == .missingTensor(path: Self.name, name: "a.blk.1.conv_dw.bias"))
        #expect(try load(skipTensor: "mm.a.mlp.3.weight") == .missingTensor(path: Self.name, name: "mm.a.mlp.3.weight"))
        #expect(try load(skipTensor: "a.conv1d.0.weight") == .missingTensor(path: Self.name, name: "a.conv1d.0.weight"))
        let zeros = { (n: Int) in [UInt8](repeating: 0, count: n) }
        #expect(
            try load(replace: ("a.blk.0.pos_bias_u", .f32, [64], zeros(256)))
                == .tensorShape(path: Self.name, name: "a.blk.0.pos_bias_u", expected: [16, 4], found: [64]))
        #expect(
            try load(replace: ("a.blk.1.attn_q.weight", .f16, [64, 32], zeros(64 * 32 * 2)))
                == .tensorShape(path: Self.name, name: "a.blk.1.attn_q.weight", expected: [64, 64], found: [64, 32]))
        #expect(
            try load(replace: ("a.conv1d.3.weight", .f32, [1, 1, 16, 8], zeros(16 * 8 * 4)))
                == .tensorShape(path: Self.name, name: "a.conv1d.3.weight", expected: [1, 1, 16, 16], found: [1, 1, 16, 8]))
        #expect(
            try load(replace: ("a.blk.0.conv_dw.weight", .f32, [8, 64], zeros(8 * 64 * 4)))
                == .tensorShape(path: Self.name, name: "a.blk.0.conv_dw.weight", expected: [9, 64], found: [8, 64]))
        // A LayerNorm weight in Q8_0 (two blocks of 34 bytes): small tensors must be floats.
        #expect(
            try load(replace: ("a.blk.0.ln1.weight", .q8_0, [64], zeros(68)))
                == .tensorType(path: Self.name, name: "a.blk.0.ln1.weight", type: .q8_0, accepted: [.f32, .f16, .bf16]))
        // A matrix in a type without kernels.
        let e = try load(replace: ("a.blk.0.attn_k.weight", .i32, [64, 64], zeros(64 * 64 * 4)))
        guard case .tensorType(Self.name, "a.blk.0.attn_k.weight", .i32, GGMLType.kernelTypes) = e else {
            Issue.record("attn_k as I32: \(String(describing: e))")
            return
        }
    }

    @Test func aQ8_0MatrixLoadsAndEncodes() throws {
        // Matrices may be in any type with kernels (a quantized mmproj): attn_q as Q8_0.
        let file = try GGUFFile(path: TestFixtures.path("models/mmproj-lfm2-audio-tiny.gguf"))
        let t = try file.requireTensor("a.blk.0.attn_q.weight")
        var floats = [Float](repeating: 0, count: t.elementCount)
        floats.withUnsafeMutableBufferPointer {
            t.type.dequantizeRow(file.data(for: t).baseAddress!, into: $0.baseAddress!, count: t.elementCount)
        }
        var q8 = [UInt8](repeating: 0, count: GGMLType.q8_0.rowBytes(count: 64)! * 64)
        q8.withUnsafeMutableBytes { dst in
            floats.withUnsafeBufferPointer { GGMLType.q8_0.quantizeRow($0.baseAddress!, into: dst.baseAddress!, count: t.elementCount) }
        }
        #expect(try load(replace: (t.name, .q8_0, t.shape, q8)) == nil)
    }

    @Test func inputsOfTheWrongSize() throws {
        let encoder = try FastConformerEncoder(path: TestFixtures.path("models/mmproj-lfm2-audio-tiny.gguf"), pool: Self.pool)
        let mel = { (frames: Int) in [Float](repeating: 0.5, count: 128 * frames) }
        let frames = "the frame count of the log-mel input"
        #expect(throws: ProjectorError.inputTooSmall(what: frames, value: 2, minimum: 3)) { _ = try encoder.encode(mel: mel(2), frames: 2) }
        #expect(throws: ProjectorError.inputTooSmall(what: frames, value: 0, minimum: 3)) { _ = try encoder.encode(mel: [], frames: 0) }
        #expect(throws: ProjectorError.inputTooLarge(what: frames, value: 4114, maximum: 4113)) {
            _ = try encoder.encode(mel: mel(4114), frames: 4114)
        }
        #expect(throws: ProjectorError.inputTooSmall(what: frames, value: 2, minimum: 3)) { _ = try encoder.tokenCount(frames: 2) }
        #expect(throws: ProjectorError.invalidInput("a log-mel input of 11 frames has 1408 values (128 bins x 11), got 1280")) {
            _ = try encoder.encode(mel: mel(10), frames: 11)
        }
        var bad = mel(5)
        bad[77] = .nan
        #expect(throws: ProjectorError.invalidInput("the log-mel input holds a NaN or infinite value at index 77 (nan)")) {
            _ = try encoder.encode(mel: bad, frames: 5)
        }
        var small = [Float](repeating: 0, count: 10)
        #expect(throws: ProjectorError.invalidInput("the output holds 10 floats, 1 embeddings of 128 need 128")) {
            try mel(3).withUnsafeBufferPointer { (m) throws(ProjectorError) in
                try small.withUnsafeMutableBufferPointer { (o) throws(ProjectorError) in try encoder.encode(mel: m, frames: 3, into: o) }
            }
        }
        #expect(try encoder.encode(mel: mel(3), frames: 3).count == 128)
        #expect(ProjectorError.inputTooLarge(what: frames, value: 4114, maximum: 4113).description.contains("4113"))
    }

    @Test func theReferenceRefusesWhatItCannotRead() throws {
        let file = try GGUFFile(path: TestFixtures.path("models/mmproj-lfm2-audio-tiny.gguf"))
        var w = GGUFWriter(copyingMetadataOf: file)
        for t in file.tensors where t.name != "a.blk.1.ln2.bias" {
            try w.addTensor(name: t.name, type: t.type, shape: t.shape, data: Array(file.data(for: t)))
        }
        let image = try GGUFFile(bytes: try w.serialize())
        #expect(throws: ProjectorError.missingTensor(path: Self.name, name: "a.blk.1.ln2.bias")) {
            _ = try ReferenceFastConformerEncoder(file: image, path: Self.name)
        }
        w.metadata.set("clip.projector_type", .string("lfm2"))
        #expect(throws: ProjectorError.unsupportedProjectorType(path: Self.name, type: "lfm2", expected: ["lfm2a"])) {
            _ = try ReferenceFastConformerEncoder(file: try GGUFFile(bytes: try w.serialize()), path: Self.name)
        }
        let reference = try ReferenceFastConformerEncoder(
            file: GGUFFile(path: TestFixtures.path("models/mmproj-lfm2-audio-tiny.gguf")), path: Self.name)
        #expect(throws: ProjectorError.self) { _ = try reference.encode(mel: [Float](repeating: 0, count: 100), frames: 3) }
    }
}
