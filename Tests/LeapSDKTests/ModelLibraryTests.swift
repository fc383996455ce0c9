import Foundation
import LeapJSON
import TestSupport
import Testing

@testable import LeapSDK
@testable import LeapSDKCore

/// A model library on 127.0.0.1: LEAP's `model-manifest` endpoint, manifests under
/// `/bundles/NAME/QUANT.json` and files under `/files/`, each file with its sha256 as ETag
/// (as Hugging Face sends it) unless the test says otherwise. No test reaches the network.
final class FakeLibrary: @unchecked Sendable {
    struct State {
        var files: [String: Data] = [:]
        var etags: [String: String] = [:]
        var manifests: [String: String] = [:]
        /// Paths whose first GET stops after this many body bytes.
        var dropFirst: [String: Int] = [:]
        var chunkDelay = 0.0
    }

    let state = Locked(State())
    let cache: URL
    private(set) var server: LocalHTTPServer!
    private(set) var library: LeapModelLibrary!

    init() throws {
        cache = FileManager.default.temporaryDirectory.appendingPathComponent("leap-ref-library-\(UUID().uuidString)")
        let state = self.state
        server = try LocalHTTPServer { request in
            let host = request.headers["host"] ?? "127.0.0.1"
            if request.path == "/api/edge-sdk/model-manifest" {
                let key = (request.query["model_name"] ?? "") + "/" + (request.query["quantization_method"] ?? "")
                guard state.withLock({ $0.manifests[key] }) != nil else { return .status(404) }
                return .json(#"{"manifest_url": "http://\#(host)/bundles/\#(key).json"}"#)
            }
            if request.path.hasPrefix("/bundles/"), request.path.hasSuffix(".json") {
                let key = String(request.path.dropFirst("/bundles/".count).dropLast(".json".count))
                guard let text = state.withLock({ $0.manifests[key] }) else { return .status(404) }
                return .json(text)
            }
            let (data, etag, drop, delay) = state.withLock { s in
                (s.files[request.path], s.etags[request.path], s.dropFirst.removeValue(forKey: request.path), s.chunkDelay)
            }
            guard let data else { return .status(404) }
            var response = LocalHTTPServer.Response.file(data, request: request, etag: etag)
            if request.method == "GET", let drop, response.status == 200 { response.dropAfter = drop }
            response.chunkDelay = delay
            return response
        }
        library = LeapModelLibrary(baseURL: server.baseURL, cacheDirectory: cache, requestTimeout: 10)
    }

    deinit {
        server.stop()
        try? FileManager.default.removeItem(at: cache)
    }

    /// Serves `data` at `/files/NAME` with its sha256 as ETag; returns the URL.
    @discardableResult
    func addFile(_ name: String, _ data: Data, etag: String? = nil) -> String {
        let path = "/files/" + name
        state.withLock {
            $0.files[path] = data
            $0.etags[path] = etag ?? SHA256.hex(data)
        }
        return server.baseURL.absoluteString + path
    }

    /// Serves a manifest for `model` at `quantization`.
    func addManifest(model: String, quantization: String, _ text: String) {
        state.withLock { $0.manifests[model + "/" + quantization] = text }
    }

    /// Serves `data` at `/files/NAME` and a text-to-text manifest of it for `model` at
    /// `quantization`; returns the file's URL.
    @discardableResult
    func addTextModel(_ name: String, _ data: Data, model: String = "T", quantization: String = "Q") -> String {
        let url = addFile(name, data)
        addManifest(model: model, quantization: quantization, Self.textManifest(url))
        return url
    }

    /// A text-to-text manifest of `modelURL`, with sampling parameters and a field of a
    /// later schema.
    static func textManifest(_ modelURL: String, type: String = "llama.cpp/text-to-text") -> String {
        """
        {
          "inference_type": "\(type)",
          "schema_version": "1.0.0",
          "load_time_parameters": {"model": "\(modelURL)", "a_future_option": 3},
          "generation_time_parameters": {
            "sampling_parameters": {"temperature": 0.3, "min_p": 0.15, "top_p": 0.9, "top_k": 7, "repetition_penalty": 1.05}
          },
          "a_future_section": {"x": 1}
        }
        """
    }
}

/// Every report of a progress closure, for the checks that they only grow and end at 1.
final class ProgressLog: @unchecked Sendable {
    let reports = Locked<[(Double, Int64)]>([])
    var closure: @Sendable (Double, Int64) -> Void { { [reports] p, s in reports.withLock { $0.append((p, s)) } } }
    var fractions: [Double] { reports.withLock { $0.map(\.0) } }

    /// Non-decreasing, within 0...1, ending at exactly 1.
    var isMonotonicToOne: Bool {
        let f = fractions
        return !f.isEmpty && f.last == 1 && zip(f, f.dropFirst()).allSatisfy { $0 <= $1 } && f.allSatisfy { (0...1).contains($0) }
    }
}

/// A store written as LiquidAI's v0.10 example apps write their model loading (the audio
/// demo's `setupModel`), with the model's name and the cache path as parameters.
@MainActor final class V010LoadingStore {
    var status = "Ready"
    var isModelReady = false
    private var modelRunner: (any ModelRunner)?

    func setupModel(modelName: String, quantization: String, cachePath: String) async {
        guard modelRunner == nil else { return }
        do {
            status = "Downloading \(modelName) model..."
            let runner = try await Leap.shared.load(
                model: modelName,
                quantization: quantization,
                options: LiquidInferenceEngineManifestOptions(
                    cacheOptions: .enabled(path: cachePath),
                    contextSize: 1024,
                    nGpuLayers: 0
                ),
                progress: { [weak self] progress, speed in
                    Task { @MainActor in
                        if progress < 1.0 {
                            self?.status = "Downloading: \(Int(progress * 100))%"
                        } else {
                            self?.status = "Loading model into memory..."
                        }
                    }
                }
            )
            modelRunner = runner
            isModelReady = true
            status = "Model ready"
        } catch {
            status = "Error loading model: \(error.localizedDescription)"
        }
    }
}

@Suite(.serialized) struct ModelLibraryTests {
    static let tinyPath = TestFixtures.path("models/lfm2-tiny.gguf")

    static func tiny() throws -> Data { try Data(contentsOf: URL(fileURLWithPath: tinyPath)) }

    /// LiquidAI's manifest format as leap-bundle 0.9.0 reads it: the file references, the
    /// sampling parameters, unknown fields kept, relative references and Hugging Face page
    /// URLs resolved.
    @Test func aManifestIsReadInLiquidAIsFormat() throws {
        let text = """
            {"inference_type": "llama.cpp/lfm2-audio-v1", "schema_version": "1.0.0",
             "load_time_parameters": {"model": "../LFM2.5-Audio-1.5B-Q4_0.gguf",
               "multimodal_projector": "https://huggingface.co/LiquidAI/LFM2.5-Audio-1.5B-GGUF/blob/main/mmproj-Q4_0.gguf",
               "audio_decoder": "https://example.com/vocoder.gguf", "audio_tokenizer": "https://example.com/tokenizer.gguf",
               "chat_template": "{{ messages }}", "unknown": true},
             "generation_time_parameters": {"number_of_decoding_threads": 4, "sampling_parameters": {"top_k": 50}},
             "extra": [1, 2]}
            """
        let m = try LeapManifest(text: text, modelName: "LFM2.5-Audio-1.5B")
        #expect(m.inferenceType == .lfm2AudioV1 && m.schemaVersion == "1.0.0")
        #expect(m.files.map(\.key) == ["model", "multimodal_projector", "audio_decoder", "audio_tokenizer"])
        #expect(m.chatTemplate == "{{ messages }}" && m.numberOfDecodingThreads == 4 && m.sampling.topK == 50)
        #expect(m.sampling.temperature == nil)
        #expect(m.json["extra"]?.arrayValue?.count == 2 && m.json["load_time_parameters"]?["unknown"] == .bool(true))
        let manifestURL = URL(string: "https://huggingface.co/LiquidAI/LeapBundles/resolve/main/LFM2.5-Audio-1.5B/Q4_0.json")!
        #expect(
            LeapManifest.resolve(m.model, against: manifestURL)?.absoluteString
                == "https://huggingface.co/LiquidAI/LeapBundles/resolve/main/LFM2.5-Audio-1.5B-Q4_0.gguf")
        #expect(
            LeapManifest.resolve(m.multimodalProjector!, against: manifestURL)?.absoluteString
                == "https://huggingface.co/LiquidAI/LFM2.5-Audio-1.5B-GGUF/resolve/main/mmproj-Q4_0.gguf")
        #expect(throws: ModelLibraryError.unsupportedInferenceType(model: "M", type: "executorch/text-to-text")) {
            let text = #"{"inference_type": "executorch/text-to-text", "load_time_parameters": {"model": "m"}}"#
            _ = try LeapManifest(text: text, modelName: "M")
        }
        #expect(throws: ModelLibraryError.self) {
            try LeapManifest(text: #"{"inference_type": "llama.cpp/text-to-text", "load_time_parameters": {}}"#, modelName: "M")
        }
        #expect(ModelFileDownloader.sha256(fromETag: "\"\(String(repeating: "AB", count: 32))\"") == String(repeating: "ab", count: 32))
        #expect(ModelFileDownloader.sha256(fromETag: "W/\"abc\"") == nil)
    }

    /// v0.10's call, `Leap.shared.load(model:quantization:options:progress:)`, asks the
    /// endpoint, downloads the manifest and the model, checks its sha256 against the ETag,
    /// caches it with a recorded sha256, applies the manifest's sampling parameters, and the
    /// model generates; a second load takes everything from the cache.
    @Test func loadByNameDownloadsVerifiesCachesAndGenerates() async throws {
        let lib = try FakeLibrary()
        lib.addTextModel("LFM2-Tiny-Q4_0.gguf", try Self.tiny(), model: "LFM2-Tiny", quantization: "Q4_0")
        let saved = Leap.shared.baseURL
        Leap.shared.baseURL = lib.server.baseURL
        defer { Leap.shared.baseURL = saved }
        let log = ProgressLog()
        let runner = try await Leap.shared.load(
            model: "LFM2-Tiny", quantization: "Q4_0",
            options: LiquidInferenceEngineManifestOptions(
                cacheOptions: .enabled(path: lib.cache.path), contextSize: 256, nGpuLayers: 0,
                engineOptions: LiquidInferenceEngineOptions(defaultRNGSeed: 1)),
            progress: log.closure)
        let endpoint = try #require(lib.server.requests.first)
        #expect(endpoint.path == "/api/edge-sdk/model-manifest")
        #expect(endpoint.query == ["model_name": "LFM2-Tiny", "quantization_method": "Q4_0"])
        #expect(log.isMonotonicToOne)
        // The speed, in bytes per second, of a download that took some time.
        #expect(log.reports.withLock { $0.allSatisfy { $0.1 >= 0 } && ($0.last?.1 ?? 0) > 0 })
        let folder = lib.cache.appendingPathComponent("LFM2-Tiny/Q4_0")
        let cached = folder.appendingPathComponent("LFM2-Tiny-Q4_0.gguf").path
        #expect(FileManager.default.contentsEqual(atPath: cached, andPath: Self.tinyPath))
        let record = try String(contentsOfFile: cached + ".sha256", encoding: .utf8)
        #expect(record.split(separator: " ").first.map(String.init) == SHA256.hex(try Self.tiny()))
        #expect(!FileManager.default.fileExists(atPath: cached + ".partial"))
        #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent("manifest.json").path))

        let engine = try #require(runner as? LiquidInferenceEngineRunner)
        #expect(engine.contextSize == 256)
        let defaults = engine.loaded.defaults
        #expect(defaults.temperature == 0.3 && defaults.topK == 7 && defaults.minP == 0.15)
        #expect(defaults.topP == 0.9 && defaults.repetitionPenalty == 1.05)
        let reply = try await collect(
            runner.createConversation(systemPrompt: nil).generateResponse(
                userTextMessage: "Hello", generationOptions: GenerationOptions(rngSeed: 3, maxOutputTokens: 6)))
        #expect(reply.completion?.stats?.completionTokens == 6)
        await runner.unload()

        // Again: the manifest and the file come from the cache (checked against the record).
        let before = lib.server.requests.count
        let again = ProgressLog()
        let files = try await lib.library.fetch(model: "LFM2-Tiny", quantization: "Q4_0", progress: again.closure)
        #expect(lib.server.requests.count == before)
        #expect(files.downloadedFiles == 0 && files.modelPath == cached)
        #expect(again.fractions == [1])
    }

    /// v0.10's example code, as written, loads by name through `Leap.shared`.
    @Test @MainActor func v010ExampleCodeLoadsByName() async throws {
        let lib = try FakeLibrary()
        lib.addTextModel("LFM2-Tiny-Q4_0.gguf", try Self.tiny(), model: "LFM2-Tiny", quantization: "Q4_0")
        let saved = Leap.shared.baseURL
        Leap.shared.baseURL = lib.server.baseURL
        defer { Leap.shared.baseURL = saved }
        let store = V010LoadingStore()
        await store.setupModel(modelName: "LFM2-Tiny", quantization: "Q4_0", cachePath: lib.cache.path)
        #expect(store.isModelReady && store.status == "Model ready")
    }

    /// A full disk while writing a file is `diskFull`, naming the model and the file (the
    /// partial file is made a link to `/dev/full`, whose writes fail with ENOSPC).
    @Test func aFullDiskIsDiskFull() async throws {
        guard FileManager.default.fileExists(atPath: "/dev/full") else { return }
        let lib = try FakeLibrary()
        lib.addTextModel("tiny.gguf", try Self.tiny())
        let folder = lib.cache.appendingPathComponent("T/Q")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let partial = folder.appendingPathComponent("tiny.gguf.partial").path
        try FileManager.default.createSymbolicLink(atPath: partial, withDestinationPath: "/dev/full")
        await #expect(throws: ModelLibraryError.diskFull(model: "T", file: "tiny.gguf", path: partial)) {
            _ = try await lib.library.fetch(model: "T", quantization: "Q")
        }
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("tiny.gguf").path))
    }

    /// A connection dropped halfway through the model: the download resumes with a Range
    /// request for the rest, and the whole file's sha256 holds.
    @Test func aDroppedConnectionResumesAndTheChecksumHolds() async throws {
        let lib = try FakeLibrary()
        let data = try Self.tiny()
        lib.addTextModel("tiny.gguf", data)
        lib.state.withLock { $0.dropFirst["/files/tiny.gguf"] = data.count / 2 }
        let log = ProgressLog()
        let files = try await lib.library.fetch(model: "T", quantization: "Q", progress: log.closure)
        let gets = lib.server.requests.filter { $0.path == "/files/tiny.gguf" && $0.method == "GET" }
        #expect(gets.count == 2)
        #expect(gets[0].headers["range"] == nil)
        let range = try #require(gets[1].headers["range"])
        let start = try #require(Int(range.dropFirst("bytes=".count).dropLast()))
        #expect(start > 0 && start <= data.count / 2)
        #expect(try Data(contentsOf: URL(fileURLWithPath: files.modelPath)) == data)
        #expect(log.isMonotonicToOne)
        #expect(log.fractions.contains { $0 > 0 && $0 < 1 })
    }

    /// Cancelling the loading task stops the download (`cancelled`, the partial file
    /// kept), and the next load resumes it with a Range request.
    @Test func aCancelledLoadStopsAndTheNextResumes() async throws {
        let lib = try FakeLibrary()
        let data = try Self.tiny()
        lib.addTextModel("tiny.gguf", data)
        lib.state.withLock { $0.chunkDelay = 0.02 }
        let log = ProgressLog()
        let library = lib.library!
        let task = Task { try await library.fetch(model: "T", quantization: "Q", progress: log.closure) }
        let deadline = Date().addingTimeInterval(20)
        while !log.fractions.contains(where: { $0 > 0 }), Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        task.cancel()
        let result = await task.result
        #expect(throws: ModelLibraryError.cancelled(model: "T")) { _ = try result.get() }
        let partial = lib.cache.appendingPathComponent("T/Q/tiny.gguf.partial").path
        let kept = try #require(ModelFileDownloader.fileSize(partial))
        #expect(kept > 0 && kept < data.count)
        lib.state.withLock { $0.chunkDelay = 0 }
        let files = try await library.fetch(model: "T", quantization: "Q")
        #expect(try Data(contentsOf: URL(fileURLWithPath: files.modelPath)) == data)
        let gets = lib.server.requests.filter { $0.path == "/files/tiny.gguf" && $0.method == "GET" }
        #expect(gets.count == 2 && gets[1].headers["range"] != nil)
    }

    /// A file whose bytes are not the sha256 its ETag states: a typed error naming the
    /// model and the file, and nothing left in the cache (neither the file nor its partial).
    @Test func aWrongChecksumIsAnErrorAndLeavesNoFile() async throws {
        let lib = try FakeLibrary()
        let url = lib.addFile("tiny.gguf", try Self.tiny(), etag: SHA256.hex(Data("something else".utf8)))
        lib.addManifest(model: "T", quantization: "Q", FakeLibrary.textManifest(url))
        do {
            _ = try await lib.library.fetch(model: "T", quantization: "Q")
            Issue.record("a wrong checksum was accepted")
        } catch let error as ModelLibraryError {
            guard case .checksumMismatch(let model, let file, let expected, let actual) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(model == "T" && file == "tiny.gguf")
            let tinySHA = SHA256.hex(try Self.tiny())
            #expect(expected == SHA256.hex(Data("something else".utf8)) && actual == tinySHA)
            #expect(error.description.contains("T") && error.description.contains("tiny.gguf"))
        }
        let folder = lib.cache.appendingPathComponent("T/Q")
        for name in ["tiny.gguf", "tiny.gguf.partial", "tiny.gguf.sha256"] {
            #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent(name).path))
        }
    }

    /// A sha256 stated as the `X-Linked-Etag` of a redirect (Hugging Face's way) is
    /// checked too: the redirect says one thing, the file is another.
    @Test func aRedirectsLinkedETagIsChecked() async throws {
        let data = try Self.tiny()
        let stated = SHA256.hex(Data("not the file".utf8))
        let server = try LocalHTTPServer { request in
            let host = request.headers["host"] ?? "127.0.0.1"
            switch request.path {
            case "/manifest.json": return .json(FakeLibrary.textManifest("http://\(host)/resolve/tiny.gguf"))
            case "/resolve/tiny.gguf":
                return LocalHTTPServer.Response(
                    status: 302, headers: [("Location", "http://\(host)/store/tiny.gguf"), ("X-Linked-Etag", "\"\(stated)\"")])
            case "/store/tiny.gguf": return .file(data, request: request, etag: nil)
            default: return .status(404)
            }
        }
        defer { server.stop() }
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("leap-ref-library-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let library = LeapModelLibrary(baseURL: server.baseURL, cacheDirectory: cache, requestTimeout: 10)
        let manifest = server.baseURL.appendingPathComponent("manifest.json")
        let failure = Self.failure { _ = try library.pull(manifestURL: manifest) }
        guard case .checksumMismatch(let model, let file, let expected, _) = failure else {
            Issue.record("unexpected \(String(describing: failure))")
            return
        }
        #expect(model == "manifest" && file == "tiny.gguf" && expected == stated)
        #expect(server.count("/store/tiny.gguf") == 1)
    }

    /// The `ModelLibraryError` a call throws (nil: it did not throw one).
    static func failure(_ body: () throws -> Void) -> ModelLibraryError? {
        do {
            try body()
            return nil
        } catch {
            return error as? ModelLibraryError
        }
    }

    /// Two loads of one model at once (a slow server keeps the first downloading while the
    /// second starts): the file is downloaded once, and both get it.
    @Test func twoConcurrentLoadsDownloadOnce() async throws {
        let lib = try FakeLibrary()
        let data = try Self.tiny()
        lib.addTextModel("tiny.gguf", data)
        lib.state.withLock { $0.chunkDelay = 0.002 }
        // The manifest first, so that both loads reach the file together.
        let library = lib.library!
        async let a = library.fetch(model: "T", quantization: "Q")
        async let b = library.fetch(model: "T", quantization: "Q")
        let (first, second) = try await (a, b)
        #expect(lib.server.count("/files/tiny.gguf") == 1)
        #expect(first.modelPath == second.modelPath)
        #expect(first.downloadedFiles + second.downloadedFiles == 1)
        #expect(try Data(contentsOf: URL(fileURLWithPath: first.modelPath)) == data)
    }

    /// A file the manifest names that the server does not have (404).
    @Test func aMissingFileIsFileNotFound() async throws {
        let lib = try FakeLibrary()
        let url = lib.server.baseURL.absoluteString + "/files/gone.gguf"
        lib.addManifest(model: "T", quantization: "Q", FakeLibrary.textManifest(url))
        await #expect(throws: ModelLibraryError.fileNotFound(model: "T", file: "gone.gguf", url: url)) {
            _ = try await lib.library.fetch(model: "T", quantization: "Q")
        }
        #expect(!FileManager.default.fileExists(atPath: lib.cache.appendingPathComponent("T/Q/gone.gguf.partial").path))
    }

    /// A name the library does not know: the endpoint's 404 is `unknownModel`.
    @Test func anUnknownNameIsUnknownModel() async throws {
        let lib = try FakeLibrary()
        await #expect(throws: ModelLibraryError.unknownModel(model: "LFM9-Nope", quantization: "Q4_0", status: 404)) {
            _ = try await lib.library.load(model: "LFM9-Nope", quantization: "Q4_0")
        }
    }

    /// No server: the refused connection is `networkUnavailable`, naming the model.
    @Test func aRefusedConnectionIsNetworkUnavailable() async throws {
        let port = try LocalHTTPServer.closedPort()
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("leap-ref-library-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let library = LeapModelLibrary(baseURL: URL(string: "http://127.0.0.1:\(port)")!, cacheDirectory: cache, requestTimeout: 5)
        do {
            _ = try await library.fetch(model: "LFM2-Tiny", quantization: "Q4_0")
            Issue.record("no error without a server")
        } catch let error as ModelLibraryError {
            guard case .networkUnavailable(let model, _, _, let reason) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(model == "LFM2-Tiny" && reason == "connection refused")
        }
    }

    /// A manifest of a runtime leap-ref does not have: a typed error, and no file fetched.
    @Test func anUnknownInferenceTypeIsRefused() async throws {
        let lib = try FakeLibrary()
        let url = lib.addFile("tiny.pte", Data([1, 2, 3]))
        lib.addManifest(model: "T", quantization: "Q", FakeLibrary.textManifest(url, type: "executorch/text-to-text"))
        await #expect(throws: ModelLibraryError.unsupportedInferenceType(model: "T", type: "executorch/text-to-text")) {
            _ = try await lib.library.fetch(model: "T", quantization: "Q")
        }
        #expect(lib.server.count("/files/tiny.pte") == 0)
    }

    /// A cached file that no longer matches its recorded sha256 is downloaded again.
    @Test func aCachedFileIsCheckedAgainstItsRecord() async throws {
        let lib = try FakeLibrary()
        let data = try Self.tiny()
        lib.addTextModel("tiny.gguf", data)
        let files = try await lib.library.fetch(model: "T", quantization: "Q")
        let handle = try #require(FileHandle(forWritingAtPath: files.modelPath))
        try handle.seek(toOffset: 1000)
        try handle.write(contentsOf: Data([0xFF, 0xFE]))
        try handle.close()
        let again = try await lib.library.fetch(model: "T", quantization: "Q")
        #expect(again.downloadedFiles == 1 && lib.server.count("/files/tiny.gguf") == 2)
        #expect(try Data(contentsOf: URL(fileURLWithPath: again.modelPath)) == data)

        // Without hashing at every load, a file whose size and time are the recorded ones
        // is trusted; one whose time changed is hashed (and here downloaded again).
        lib.library.verifiesCachedFiles = false
        let record = try String(contentsOfFile: again.modelPath + ".sha256", encoding: .utf8).split(separator: " ")
        #expect(record.count == 3 && record[0] == SHA256.hex(data) && record[1] == "\(data.count)")
        #expect(try await lib.library.fetch(model: "T", quantization: "Q").downloadedFiles == 0)
        let touched = try #require(FileHandle(forWritingAtPath: again.modelPath))
        try touched.seek(toOffset: 1000)
        try touched.write(contentsOf: Data([0xFF, 0xFE]))
        try touched.close()
        #expect(try await lib.library.fetch(model: "T", quantization: "Q").downloadedFiles == 1)
        #expect(lib.server.count("/files/tiny.gguf") == 3)
    }

    /// An image-to-text manifest: the model and its vision tower load together, and the
    /// manifest's `chat_template` replaces the GGUF's (a template that ignores the
    /// messages gives every conversation the same prompt).
    @Test func anImageToTextManifestLoadsWithItsProjectorAndTemplate() async throws {
        let lib = try FakeLibrary()
        func add(_ name: String) throws -> String {
            lib.addFile(name, try Data(contentsOf: URL(fileURLWithPath: TestFixtures.path("models/" + name))))
        }
        let text = """
            {"inference_type": "llama.cpp/image-to-text", "schema_version": "1.0.0",
             "load_time_parameters": {"model": "\(try add("lfm2-vl-tiny.gguf"))",
               "multimodal_projector": "\(try add("mmproj-lfm2-vl-tiny.gguf"))",
               "chat_template": "<|im_start|>assistant\\n"}}
            """
        lib.addManifest(model: "LFM2-VL-Tiny", quantization: "F32", text)
        let runner = try await lib.library.load(model: "LFM2-VL-Tiny", quantization: "F32")
        let engine = try #require(runner as? LiquidInferenceEngineRunner)
        #expect(engine.loaded.projector != nil)
        let hi = [ChatMessage(role: .user, textContent: "Hi")]
        let long = [ChatMessage(role: .user, textContent: "A much longer message, of many more words than the other one.")]
        let short = try engine.getPromptTokensSize(messages: hi)
        #expect(try engine.getPromptTokensSize(messages: long) == short)
        let plain = try await Leap.load(path: TestFixtures.path("models/lfm2-vl-tiny.gguf"))
        let gguf = try #require(plain as? LiquidInferenceEngineRunner)
        #expect(try gguf.getPromptTokensSize(messages: hi) > short)
        await runner.unload()
        await plain.unload()
    }

    /// An LFM2-Audio manifest: four files, cached under the names leap-ref finds beside a
    /// model, passed to the loader as its mmproj, vocoder and audio tokenizer; the model loads.
    @Test func anAudioManifestMapsItsFilesToTheLoader() async throws {
        let lib = try FakeLibrary()
        func add(_ name: String) throws -> String {
            lib.addFile(name, try Data(contentsOf: URL(fileURLWithPath: TestFixtures.path("models/" + name))))
        }
        let text = """
            {"inference_type": "llama.cpp/lfm2-audio-v1", "schema_version": "1.0.0",
             "load_time_parameters": {"model": "\(try add("lfm2-audio-out-tiny.gguf"))",
               "multimodal_projector": "\(try add("mmproj-lfm2-audio-tiny.gguf"))",
               "audio_decoder": "\(try add("vocoder-lfm2-audio-tiny.gguf"))",
               "audio_tokenizer": "\(try add("tokenizer-lfm2-audio-tiny.gguf"))"},
             "generation_time_parameters": {"number_of_decoding_threads": 2}}
            """
        lib.addManifest(model: "LFM2.5-Audio-Tiny", quantization: "F32", text)
        let log = ProgressLog()
        let files = try await lib.library.fetch(model: "LFM2.5-Audio-Tiny", quantization: "F32", progress: log.closure)
        #expect(log.isMonotonicToOne)
        #expect(files.downloadedFiles == 4 && files.manifest.numberOfDecodingThreads == 2)
        let folder = files.directory.path
        #expect(files.multimodalProjectorPath == folder + "/mmproj-lfm2-audio-out-tiny.gguf")
        #expect(files.audioDecoderPath == folder + "/vocoder-lfm2-audio-out-tiny.gguf")
        #expect(files.audioTokenizerPath == folder + "/tokenizer-lfm2-audio-out-tiny.gguf")
        #expect(CompanionFile.vocoder.companion(of: files.modelPath) == files.audioDecoderPath)
        let options = files.engineOptions(LiquidInferenceEngineManifestOptions(contextSize: 1024, nGpuLayers: 0))
        #expect(options.mmProjPath == files.multimodalProjectorPath && options.contextSize == 1024)
        let runner = try await lib.library.load(
            model: "LFM2.5-Audio-Tiny", quantization: "F32", options: LiquidInferenceEngineManifestOptions(contextSize: 1024))
        let engine = try #require(runner as? LiquidInferenceEngineRunner)
        #expect(engine.loaded.projector != nil && engine.loaded.speech != nil)
        await runner.unload()
    }
}
