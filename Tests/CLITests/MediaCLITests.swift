import Foundation
import GGUF
import LeapJSON
import LeapSDKCore
import TestSupport
import Testing

@testable import leap_ref

/// The built `leap-ref` binary, run as a user runs it: `$LEAP_REF_BIN`, else the one beside
/// the test bundle (`swift build --build-tests` builds both into the same folder), else
/// `.build/debug/leap-ref` of this checkout.
enum LeapRefBinary {
    static var path: String {
        if let env = ProcessInfo.processInfo.environment["LEAP_REF_BIN"], !env.isEmpty { return env }
        var candidates: [URL] = []
        var bundle = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
        // .../debug/leap-refPackageTests.xctest[/Contents/MacOS/leap-refPackageTests]
        while bundle.pathComponents.count > 1, !bundle.lastPathComponent.hasSuffix(".xctest") { bundle.deleteLastPathComponent() }
        if bundle.lastPathComponent.hasSuffix(".xctest") { candidates.append(bundle.deletingLastPathComponent()) }
        let root = TestFixtures.directory.deletingLastPathComponent().deletingLastPathComponent()
        candidates.append(root.appendingPathComponent(".build/debug"))
        for folder in candidates {
            let binary = folder.appendingPathComponent("leap-ref").path
            if FileManager.default.isExecutableFile(atPath: binary) { return binary }
        }
        return root.appendingPathComponent(".build/debug/leap-ref").path
    }

    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs `leap-ref arguments`, `stdin` piped in; its output through files (no pipe to
    /// fill up).
    static func run(_ arguments: [String], stdin: String? = nil) throws -> Run {
        let binary = path
        try #require(FileManager.default.isExecutableFile(atPath: binary), "no leap-ref binary at \(binary): run swift build --build-tests")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("leap-ref-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let out = folder.appendingPathComponent("stdout"), err = folder.appendingPathComponent("stderr")
        let input = folder.appendingPathComponent("stdin")
        for file in [out, err] { FileManager.default.createFile(atPath: file.path, contents: nil) }
        FileManager.default.createFile(atPath: input.path, contents: Data((stdin ?? "").utf8))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        process.standardInput = try FileHandle(forReadingFrom: input)
        process.standardOutput = try FileHandle(forWritingTo: out)
        process.standardError = try FileHandle(forWritingTo: err)
        try process.run()
        process.waitUntilExit()
        return Run(
            status: process.terminationStatus,
            stdout: String(decoding: try Data(contentsOf: out), as: UTF8.self),
            stderr: String(decoding: try Data(contentsOf: err), as: UTF8.self))
    }
}

/// The command line's media flags (issues #25 and #26): `logits`, `chat`, `inspect` and
/// `bench` with an mmproj file and an image or a WAV clip, on the tiny LFM2-VL and
/// LFM2-Audio fixtures, checked against libmtmd's goldens where they apply.
@Suite(.serialized) struct MediaCLITests {
    static let vlModel = TestFixtures.path("models/lfm2-vl-tiny.gguf")
    static let vlProjector = TestFixtures.path("models/mmproj-lfm2-vl-tiny.gguf")
    static let audioModel = TestFixtures.path("models/lfm2-audio-tiny.gguf")
    static let audioProjector = TestFixtures.path("models/mmproj-lfm2-audio-tiny.gguf")
    static let textModel = TestFixtures.path("models/lfm2-tiny.gguf")
    static let smallImage = TestFixtures.path("images/small-40x30.png")
    static let shortClip = TestFixtures.path("audio/lfm2-audio-short-0.25s-16k.wav")

    static func golden(_ path: String) throws -> JSONValue {
        try JSONValue.parse(String(decoding: try Data(contentsOf: URL(fileURLWithPath: TestFixtures.path(path))), as: UTF8.self))
    }

    // MARK: logits

    /// `leap-ref logits` on a golden's image or clip and text, llama.cpp's greedy tokens
    /// followed: the golden's chunks, its embeddings within the tolerance of
    /// MultimodalGoldenTests (2e-3, llama.cpp's F16 activations), and the same top-1 where
    /// llama.cpp's top-2 margin exceeds 0.5 (after the prompt and after each greedy token).
    @Test(arguments: [
        ("vl/lfm2-vl-tiny.small-40x30.png.json", "--image", "images/small-40x30.png"),
        ("vl/lfm2-vl-tiny.big-640x600.png.json", "--image", "images/big-640x600.png"),
        ("audio/lfm2-audio-tiny.short-0.25s.transcribe.json", "--audio", "audio/lfm2-audio-short-0.25s-16k.wav"),
        ("audio/lfm2-audio-tiny.chirp-1s.asr.json", "--audio", "audio/lfm2-audio-chirp-1s-16k.wav")
    ])
    func logitsMatchesTheGolden(_ goldenFile: String, _ flag: String, _ media: String) throws {
        let g = try Self.golden("golden/" + goldenFile)
        let vision = flag == "--image"
        var arguments = [
            "logits", "--model", vision ? Self.vlModel : Self.audioModel, "--mmproj", vision ? Self.vlProjector : Self.audioProjector,
            flag, TestFixtures.path(media), "--top", "10", "--greedy", "16"
        ]
        let user = vision ? "Describe this picture." : (g["user"]?.stringValue ?? "").replacingOccurrences(of: "<__media__>", with: "")
        if !user.isEmpty { arguments += ["--user", user] }
        if let system = g["system"]?.stringValue { arguments += ["--system", system] }
        let follow = try #require(g["greedy"]?.arrayValue).compactMap(\.intValue)
        arguments += ["--follow", follow.map(String.init).joined(separator: ",")]
        let run = try LeapRefBinary.run(arguments)
        #expect(run.status == 0, "\(run.stderr)")
        let report = try JSONValue.parse(run.stdout)

        #expect(
            report.objectValue?.keys
                == ["n_vocab", "n_embd", vision ? "image" : "audio"] + (vision ? ["decoded"] : [])
                + ["prompt_tokens", "n_prompt", "embeddings", "top", "greedy", "greedy_top"])
        #expect(report["n_vocab"] == g["n_vocab"])
        #expect(report["prompt_tokens"] == g["prompt_tokens"])
        #expect(report["n_prompt"] == g["n_prompt"])
        if vision { #expect(report["decoded"] == g["decoded"]) }

        // Embeddings: [rows, width] and every value within 2e-3 of llama.cpp's.
        let theirRows = try #require(vision ? g["embeddings"]?["values"]?.arrayValue : g["embeddings"]?["data"]?.arrayValue)
        let shape = try #require(report["embeddings"]?["shape"]?.arrayValue).compactMap(\.intValue)
        #expect(shape == [theirRows.count, 128])
        let ours = try #require(report["embeddings"]?["values"]?.arrayValue).flatMap { $0.arrayValue ?? [] }.compactMap(\.doubleValue)
        let theirs = theirRows.flatMap { $0.arrayValue ?? [] }.compactMap(\.doubleValue)
        try #require(ours.count == theirs.count)
        let worst = zip(ours, theirs).map { abs($0 - $1) }.max() ?? 0
        #expect(worst <= 2e-3, "\(goldenFile): embeddings differ by up to \(worst)")

        // The logits: llama.cpp's rule, and the shape of the golden's rows.
        var clear = 0
        func check(_ ours: JSONValue?, _ theirs: JSONValue?, _ at: String) {
            let o = ours?.arrayValue ?? [], t = theirs?.arrayValue ?? []
            #expect(o.count == 10 && t.count == 10, "\(at)")
            guard o.count >= 1, t.count >= 2, let l0 = t[0][1]?.doubleValue, let l1 = t[1][1]?.doubleValue else { return }
            #expect(o[0].arrayValue?.count == 2)
            if l0 - l1 > 0.5 {
                #expect(o[0][0] == t[0][0], "\(goldenFile) \(at): top-1 \(o[0]), llama.cpp \(t[0])")
                clear += 1
            }
        }
        check(report["top"], g["top"], "the prompt's end")
        #expect(report["greedy"] == g["greedy"])
        let steps = try #require(report["greedy_top"]?.arrayValue)
        #expect(steps.count == follow.count)
        for (i, (o, t)) in zip(steps, g["greedy_top"]?.arrayValue ?? []).enumerated() { check(o, t, "greedy step \(i)") }
        // Each golden has at least 6 of its 17 positions past the 0.5 margin.
        #expect(clear >= 6, "\(goldenFile): only \(clear) top-1 comparisons")
    }

    /// Without --follow the continuation is the model's own argmax: the first greedy token
    /// is the top-1 after the prompt, and each next one the top-1 of the step before.
    @Test func logitsGreedyFollowsItsOwnArgmax() async throws {
        let command = try Logits.parse([
            "--model", Self.vlModel, "--image", Self.smallImage, "--user", "Describe this picture.", "--top", "3", "--greedy", "4"
        ])
        let report = try await command.conversationReport(modelPath: Self.vlModel)
        let greedy = try #require(report["greedy"]?.arrayValue).compactMap(\.intValue)
        #expect(greedy.count == 4)
        #expect(report["top"]?[0]?[0]?.intValue == greedy[0])
        let steps = try #require(report["greedy_top"]?.arrayValue)
        for i in 1..<4 { #expect(steps[i - 1][0]?[0]?.intValue == greedy[i]) }
        // The companion mmproj file was found beside the model (no --mmproj).
        #expect(report["prompt_tokens"]?[1] == .object(JSONObject([("image", 70), ("slice", 0)])))
    }

    // MARK: errors

    /// The media flags' typed errors, from the command's own code, and from the binary as
    /// one line on stderr and exit status 1.
    @Test func mediaFlagErrorsAreTypedAndClear() async throws {
        func error(_ arguments: [String]) async -> MediaFlagError? {
            do {
                let command = try Logits.parse(arguments)
                _ = try await command.conversationReport(modelPath: command.model ?? "")
                return nil
            } catch {
                return error as? MediaFlagError
            }
        }
        // lfm2-tiny has no mmproj file of its own beside it (two others, neither its name).
        #expect(await error(["--model", Self.textModel, "--image", Self.smallImage]) == .noProjector(model: Self.textModel, kind: .image))
        #expect(
            await error(["--model", Self.audioModel, "--mmproj", Self.audioProjector, "--image", Self.smallImage])
                == .wrongKind(projector: Self.audioProjector, encodes: .audio, asked: .image))
        #expect(
            await error(["--model", Self.vlModel, "--audio", Self.shortClip])
                == .wrongKind(projector: Self.vlProjector, encodes: .image, asked: .audio))
        #expect(
            await error(["--model", Self.vlModel, "--image", "/nonexistent/x.png"])
                == .missingFile(flag: "--image", path: "/nonexistent/x.png"))
        #expect(
            await error(["--model", Self.vlModel, "--mmproj", "/nonexistent/mmproj.gguf", "--image", Self.smallImage])
                == .missingFile(flag: "--mmproj", path: "/nonexistent/mmproj.gguf"))
        guard case .notWAV(let path, let reason)? = await error(["--model", Self.audioModel, "--audio", Self.smallImage]) else {
            Issue.record("a PNG given as --audio is not notWAV")
            return
        }
        #expect(path == Self.smallImage && reason.contains("WAV"))
        guard case .notAnImage? = await error(["--model", Self.vlModel, "--image", Self.shortClip]) else {
            Issue.record("a WAV file given as --image is not notAnImage")
            return
        }
        guard
            case .badProjector(let bad, let why)? = await error([
                "--model", Self.vlModel, "--mmproj", Self.textModel, "--image", Self.smallImage
            ])
        else {
            Issue.record("a language model given as --mmproj is not badProjector")
            return
        }
        #expect(bad == Self.textModel && why.contains("clip"))
        #expect(await error(["--model", Self.vlModel, "--image", Self.smallImage, "--audio", Self.shortClip]) == .bothKinds)

        let run = try LeapRefBinary.run(["logits", "--model", Self.audioModel, "--audio", Self.smallImage])
        #expect(run.status == 1)
        #expect(run.stdout.isEmpty)
        #expect(run.stderr.hasPrefix("leap-ref: error: --audio: '\(Self.smallImage)' is not a WAV file"), "\(run.stderr)")
        #expect(run.stderr.split(separator: "\n").count == 1)
        let noProjector = try LeapRefBinary.run(["bench", "--model", Self.textModel, "--image", Self.smallImage])
        #expect(noProjector.status == 1)
        #expect(
            noProjector.stderr.contains("--image needs the model's media encoder, an mmproj file: pass --mmproj FILE"),
            "\(noProjector.stderr)")
    }

    // MARK: chat

    /// `leap-ref chat` with stdin piped: /help lists /image and /audio; /image attaches
    /// (and says what), the next message is answered with the image in its prompt (86
    /// positions, the golden's); a missing file, and audio for a vision model, print an
    /// error and the chat goes on.
    @Test func chatAttachesAnImageAndSurvivesBadFiles() throws {
        let script = [
            "/help",
            "/image \(Self.smallImage)",
            "Describe this picture.",
            "/image /nonexistent/picture.png",
            "/audio \(Self.shortClip)",
            "And now?"
        ].joined(separator: "\n")
        let run = try LeapRefBinary.run(
            ["chat", "--model", Self.vlModel, "--temp", "0", "--max-tokens", "6", "--ctx", "1024"], stdin: script + "\n")
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("/image FILE      attach a JPEG or PNG image"))
        #expect(run.stderr.contains("/audio FILE.wav  attach a WAV clip"))
        #expect(run.stderr.contains("[attached image 40x30 (PNG): \(Self.smallImage)]"), "\(run.stderr)")
        #expect(run.stderr.contains("[error: /image: the file '/nonexistent/picture.png' does not exist or cannot be read]"))
        #expect(run.stderr.contains("[error: this model's mmproj file encodes images, not audio; use /image FILE]"))
        // Both messages answered: a reply line each on stdout, a stats line each on stderr.
        let stats = run.stderr.split(separator: "\n").filter { $0.hasPrefix("{\"promptTokens\"") }
        #expect(stats.count == 2)
        #expect(stats.first?.hasPrefix("{\"promptTokens\": 86,") == true, "\(stats)")
        #expect(run.stdout.split(separator: "\n", omittingEmptySubsequences: false).count >= 2)
        #expect(!run.stdout.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty)
    }

    /// A text-only model answers /image with a clear message and keeps chatting.
    @Test func chatWithATextOnlyModelRefusesAttachments() throws {
        let run = try LeapRefBinary.run(
            ["chat", "--model", Self.textModel, "--temp", "0", "--max-tokens", "4"], stdin: "/image \(Self.smallImage)\nHello\n")
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("[error: this model reads text only: it has no mmproj file"), "\(run.stderr)")
        #expect(run.stderr.split(separator: "\n").filter { $0.hasPrefix("{\"promptTokens\"") }.count == 1)
    }

    /// The session keeps attachments for the next message only, in its content before the
    /// text; /reset drops them.
    @Test func chatSessionSendsAttachmentsWithTheNextMessage() async throws {
        let runner = try await Leap.load(path: Self.audioModel, options: LiquidInferenceEngineOptions(contextSize: 512))
        var chat = ChatSession(
            runner: runner, system: nil, interactive: false, options: GenerationOptions(temperature: 0, maxOutputTokens: 3))
        chat.media = .audio
        #expect(try await chat.handle("/audio \(Self.shortClip)"))
        #expect(chat.attachments.map(\.summary) == ["audio 0.25 s (16000 Hz)"])
        #expect(try await chat.handle("/reset"))
        #expect(chat.attachments.isEmpty)
        #expect(try await chat.handle("/audio \"\(Self.shortClip)\""))
        #expect(try await chat.handle("Transcribe this audio."))
        #expect(chat.attachments.isEmpty)
        let user = try #require(chat.conversation.history.first)
        #expect(user.role == .user)
        let wav = try Data(contentsOf: URL(fileURLWithPath: Self.shortClip))
        #expect(user.content == [.audio(wav), .text("Transcribe this audio.")])
        #expect(chat.conversation.history.count == 2)
        #expect(try await chat.handle("/image \(Self.smallImage)"))
        #expect(chat.attachments.isEmpty)
        await runner.unload()
    }

    // MARK: inspect

    @Test func inspectDescribesTheVisionProjector() throws {
        let file = try GGUFFile(path: Self.vlProjector)
        let text = Inspect.textReport(file, path: Self.vlProjector)
        #expect(text.contains("architecture:  clip"))
        #expect(text.contains("multimodal projector (mmproj):"))
        #expect(text.contains("  projector type:         lfm2\n"))
        #expect(text.contains("  encoder:                vision\n"))
        #expect(text.contains("  tensors:                \(file.tensors.count)\n"))
        #expect(text.contains("  output width:           128 (fits a language model whose embedding width"))
        let projector = try #require(Inspect.jsonReport(file, path: Self.vlProjector)["projector"]?.objectValue)
        #expect(
            projector.keys == [
                "projector_type", "tensor_count", "encoder", "model", "image_size", "patch_size", "layers", "width", "heads",
                "feed_forward_length", "merge_factor", "projector_hidden_width", "min_image_tokens", "max_image_tokens", "image_mean",
                "image_std", "weights", "output_width"
            ])
        #expect(projector["encoder"] == "vision")
        #expect(projector["patch_size"] == 16)
        #expect(projector["output_width"] == 128)
        #expect(projector["tensor_count"] == .integer(file.tensors.count))
        // A language model has no projector section.
        #expect(Inspect.jsonReport(try GGUFFile(path: Self.textModel))["projector"] == nil)
        #expect(!Inspect.textReport(try GGUFFile(path: Self.textModel), path: Self.textModel).contains("multimodal projector"))
    }

    @Test func inspectDescribesTheAudioProjector() throws {
        let file = try GGUFFile(path: Self.audioProjector)
        let projector = try #require(Inspect.jsonReport(file, path: Self.audioProjector)["projector"]?.objectValue)
        #expect(projector["projector_type"] == "lfm2a")
        #expect(projector["encoder"] == "audio")
        #expect(projector["mel_bins"] == 128)
        #expect(projector["output_width"] == 128)
        #expect(projector["layers"]?.intValue ?? 0 >= 1)
        #expect(projector["max_mel_frames"]?.intValue ?? 0 > 100)
        let run = try LeapRefBinary.run(["inspect", Self.audioProjector])
        #expect(run.status == 0)
        #expect(run.stdout.contains("  encoder:                audio\n"))
        #expect(run.stdout.contains("  mel bins:               128\n"))
    }

    // MARK: bench

    /// The media bench's fields (never its speed).
    @Test func benchReportsPreprocessingAndEncoderTimes() throws {
        let image = try LeapRefBinary.run([
            "bench", "--model", Self.vlModel, "--image", TestFixtures.path("images/big-640x600.png"), "-r", "2", "-t", "1", "--json"
        ])
        #expect(image.status == 0, "\(image.stderr)")
        let i = try JSONValue.parse(image.stdout)
        #expect(
            i.objectValue?.keys == [
                "kind", "input", "width", "height", "slices", "positions", "output_width", "threads", "repetitions", "preprocess_ms",
                "encode_ms", "total_ms", "ms_per_image", "products_gflop", "sgemm_roof_ms", "sgemm_peak_gflops", "peak_ms",
                "fraction_of_peak"
            ])
        #expect(i["width"] == 640 && i["height"] == 600)
        // The roof of the encode's products: their FLOPs (the tiny tower's, for its slices) timed as F32 sgemms.
        #expect((i["products_gflop"]?.doubleValue ?? 0) > 0 && (i["sgemm_peak_gflops"]?.doubleValue ?? 0) > 0)
        #expect((i["peak_ms"]?.doubleValue ?? 0) > 0 && (i["sgemm_roof_ms"]?.doubleValue ?? 0) >= (i["peak_ms"]?.doubleValue ?? 0))
        #expect(i["positions"] == 240)  // the golden's image chunk
        #expect(i["preprocess_ms"]?["runs"]?.arrayValue?.count == 2)
        #expect((i["encode_ms"]?["median"]?.doubleValue ?? 0) > 0)

        let audio = try LeapRefBinary.run([
            "bench", "--model", Self.audioModel, "--mmproj", Self.audioProjector, "--audio",
            TestFixtures.path("audio/lfm2-audio-chirp-1s-16k.wav"), "-r", "1", "-t", "1", "--json"
        ])
        #expect(audio.status == 0, "\(audio.stderr)")
        let a = try JSONValue.parse(audio.stdout)
        #expect(a["kind"] == "audio")
        #expect(a["positions"] == 13)  // one second: 13 positions, as the golden
        #expect(a["seconds"]?.doubleValue.map { abs($0 - 1) < 0.01 } == true)
        #expect(a["ms_per_audio_second"]?.doubleValue.map { $0 > 0 } == true)

        let table = try LeapRefBinary.run(["bench", "--model", Self.vlModel, "--image", Self.smallImage, "-r", "1", "-t", "1"])
        #expect(table.status == 0, "\(table.stderr)")
        #expect(table.stdout.hasPrefix("| input | media | threads | positions | preprocess ms | encoder ms | total ms | ms per image |"))
        #expect(table.stdout.contains("| small-40x30.png | 40x30, 1 slice | 1 | 70 | "))
    }

    @Test func medianOfRuns() {
        #expect(MediaBenchResult.median([3, 1, 2]) == 2)
        #expect(MediaBenchResult.median([4, 1, 3, 2]) == 2.5)
        #expect(MediaBenchResult.median([]) == 0)
    }
}

extension JSONValue {
    /// An array's element, nil out of range or for a non-array.
    fileprivate subscript(_ index: Int) -> JSONValue? {
        guard let a = arrayValue, a.indices.contains(index) else { return nil }
        return a[index]
    }
}
