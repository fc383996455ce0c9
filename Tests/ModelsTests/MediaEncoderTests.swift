import GGUF
import Kernels
import Models
import TestSupport
import Testing

/// `MediaEncoder.load`: the encoder an mmproj file's projector type names, the
/// output width and its check against a language model, and the files it refuses.
@Suite struct MediaEncoderTests {
    static let vision = TestFixtures.path("models/mmproj-lfm2-vl-tiny.gguf")
    static let audio = TestFixtures.path("models/mmproj-lfm2-audio-tiny.gguf")
    static let pool = ThreadPool(threads: 2)

    @Test func eachFixtureLoadsItsEncoder() throws {
        #expect(MediaEncoder.supportedTypes == ["lfm2", "lfm2a"])
        #expect(try MediaEncoder.type(of: GGUFFile(path: Self.vision), path: Self.vision) == "lfm2")
        #expect(try MediaEncoder.type(of: GGUFFile(path: Self.audio), path: Self.audio) == "lfm2a")

        let v = try MediaEncoder.load(path: Self.vision, pool: Self.pool)
        guard case .vision(let encoder) = v else {
            Issue.record("\(Self.vision) loaded as \(v)")
            return
        }
        #expect(v.path == Self.vision && v.outputWidth == 128 && encoder.pool === Self.pool && encoder.weightStorage == .asStored)
        #expect(try encoder.encode(pixels: [Float](repeating: 0.1, count: 64 * 32 * 3), width: 64, height: 32).count == 2 * 128)

        let a = try MediaEncoder.load(path: Self.audio, pool: Self.pool, weights: .float32)
        guard case .audio(let audioEncoder) = a else {
            Issue.record("\(Self.audio) loaded as \(a)")
            return
        }
        #expect(a.path == Self.audio && a.outputWidth == 128 && audioEncoder.pool === Self.pool && audioEncoder.weightStorage == .float32)
        #expect(try audioEncoder.encode(mel: [Float](repeating: 0.1, count: 128 * 17), frames: 17).count == 3 * 128)
    }

    @Test func theLanguageModelsWidthIsChecked() throws {
        let lm = TestFixtures.path("models/lfm2-vl-tiny.gguf")
        for path in [Self.vision, Self.audio] {
            let projector = try MediaEncoder.load(path: path, pool: Self.pool)
            try projector.checkLanguageModelWidth(128, languageModel: lm)
            let expected = ProjectorError.widthMismatch(path: path, projectorWidth: 128, languageModel: lm, languageModelWidth: 96)
            #expect(throws: expected) { try projector.checkLanguageModelWidth(96, languageModel: lm) }
            #expect(expected.description.contains(path) && expected.description.contains(lm))
            #expect(expected.description.contains("128") && expected.description.contains("96"))
        }
    }

    @Test func otherFilesAreRefused() throws {
        // A language model, a missing file, a projector type neither encoder runs.
        let lm = TestFixtures.path("models/lfm2-audio-tiny.gguf")
        #expect(throws: ProjectorError.notAProjector(path: lm, architecture: "lfm2")) {
            try MediaEncoder.load(path: lm, pool: Self.pool)
        }
        do {
            _ = try MediaEncoder.load(path: "/nonexistent/mmproj.gguf", pool: Self.pool)
            Issue.record("a missing file loaded")
        } catch {
            guard case .file("/nonexistent/mmproj.gguf", .cannotOpen) = error else {
                Issue.record("a missing file: \(error)")
                return
            }
        }
        let file = try GGUFFile(path: Self.vision)
        var w = GGUFWriter(copyingMetadataOf: file)
        for t in file.tensors { try w.addTensor(name: t.name, type: t.type, shape: t.shape, data: Array(file.data(for: t))) }
        w.metadata.set("clip.projector_type", .string("gemma3"))
        let gemma = try GGUFFile(bytes: try w.serialize())
        let error = ProjectorError.unsupportedProjectorType(path: "edited.gguf", type: "gemma3", expected: ["lfm2", "lfm2a"])
        #expect(throws: error) { try MediaEncoder.load(file: gemma, path: "edited.gguf", pool: Self.pool) }
        #expect(error.description == "edited.gguf: clip.projector_type is 'gemma3'; supported here: 'lfm2', 'lfm2a'.")
        // Without clip.projector_type, the per-modality key names the type.
        w.metadata.remove("clip.projector_type")
        w.metadata.set("clip.vision.projector_type", .string("lfm2"))
        let perModality = try MediaEncoder.load(file: GGUFFile(bytes: try w.serialize()), path: "edited.gguf", pool: Self.pool)
        #expect(perModality.outputWidth == 128)
    }

    /// One rule reads the projector type, for the loader and for each encoder:
    /// `clip.projector_type`, else a modality's own key (the loader tries vision, then audio;
    /// an encoder only its own), else `missingKey` naming `clip.projector_type`.
    @Test func theProjectorTypeIsReadByOneRule() throws {
        let file = try GGUFFile(path: Self.audio)
        func edited(_ edit: (inout GGUFMetadata) -> Void) throws -> GGUFFile {
            var w = GGUFWriter(copyingMetadataOf: file)
            for t in file.tensors { try w.addTensor(name: t.name, type: t.type, shape: t.shape, data: Array(file.data(for: t))) }
            w.metadata.remove("clip.projector_type")
            edit(&w.metadata)
            return try GGUFFile(bytes: try w.serialize())
        }
        let audioKey = try edited { $0.set("clip.audio.projector_type", .string("lfm2a")) }
        #expect(try MediaEncoder.type(of: audioKey, path: "edited.gguf") == "lfm2a")
        guard case .audio = try MediaEncoder.load(file: audioKey, path: "edited.gguf", pool: Self.pool) else {
            Issue.record("clip.audio.projector_type did not load the audio encoder")
            return
        }
        // The vision encoder does not read the audio modality's key.
        #expect(throws: ProjectorError.missingKey(path: "edited.gguf", key: "clip.projector_type")) {
            try SigLIP2VisionEncoder(file: audioKey, path: "edited.gguf", pool: Self.pool)
        }
        let none = try edited { _ in }
        #expect(throws: ProjectorError.missingKey(path: "edited.gguf", key: "clip.projector_type")) {
            try MediaEncoder.type(of: none, path: "edited.gguf")
        }
    }
}
