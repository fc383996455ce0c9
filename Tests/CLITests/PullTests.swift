import Foundation
import LeapSDKCore
import TestSupport
import Testing

@testable import leap_ref

/// `leap-ref pull NAME QUANT` and `--model NAME:QUANT`, against a model library served on
/// 127.0.0.1 (no test reaches the network).
@Suite(.serialized) struct PullTests {
    /// A library with one model, `T` at `Q`: lfm2-tiny.
    static func library() throws -> LocalHTTPServer {
        let data = try Data(contentsOf: URL(fileURLWithPath: TestFixtures.path("models/lfm2-tiny.gguf")))
        let sha = SHA256.hex(data)
        return try LocalHTTPServer { request in
            let host = request.headers["host"] ?? "127.0.0.1"
            switch request.path {
            case "/api/edge-sdk/model-manifest":
                guard request.query["model_name"] == "T", request.query["quantization_method"] == "Q" else { return .status(404) }
                return .json(#"{"manifest_url": "http://\#(host)/bundles/T/Q.json"}"#)
            case "/bundles/T/Q.json":
                let files = #"{"model": "../../files/T-Q.gguf"}"#
                return .json(#"{"inference_type": "llama.cpp/text-to-text", "load_time_parameters": \#(files)}"#)
            case "/files/T-Q.gguf": return .file(data, request: request, etag: sha)
            default: return .status(404)
            }
        }
    }

    static func temporaryFolder() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("leap-ref-pull-\(UUID().uuidString)")
    }

    @Test func nameColonQuantIsALibraryModelAndAnythingElseAPath() {
        #expect(LibraryPull.parse("LFM2.5-1.2B-Instruct:Q4_0")! == ("LFM2.5-1.2B-Instruct", "Q4_0"))
        #expect(LibraryPull.parse("models/a:b.gguf") == nil)
        #expect(LibraryPull.parse("model.gguf") == nil)
        #expect(LibraryPull.parse(":Q4_0") == nil && LibraryPull.parse("LFM2:") == nil)
    }

    /// `pull T Q` downloads into --cache (the manifest's relative file reference resolved
    /// against its URL); then `--model T:Q` resolves to the cached file without downloading
    /// it again, and an existing file whose name has a colon stays a path.
    @Test func pullDownloadsAndModelFlagResolvesFromTheCache() async throws {
        let server = try Self.library()
        defer { server.stop() }
        let cache = Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: cache) }
        var pull = try Pull.parse(["T", "Q", "--library", server.baseURL.absoluteString, "--cache", cache.path, "--quiet"])
        try await pull.run()
        let cached = cache.appendingPathComponent("T/Q/T-Q.gguf").path
        #expect(FileManager.default.contentsEqual(atPath: cached, andPath: TestFixtures.path("models/lfm2-tiny.gguf")))
        #expect(server.count("/files/T-Q.gguf") == 1)

        let shared = LeapModelLibrary.shared
        let (savedBase, savedCache) = (shared.baseURL, shared.cacheDirectory)
        shared.baseURL = server.baseURL
        shared.cacheDirectory = cache
        defer { (shared.baseURL, shared.cacheDirectory) = (savedBase, savedCache) }
        #expect(try ModelCache.resolve("T:Q") == cached)
        #expect(server.count("/files/T-Q.gguf") == 1)
        let colon = cache.appendingPathComponent("a:b.gguf").path
        FileManager.default.createFile(atPath: colon, contents: Data())
        #expect(try ModelCache.resolve(colon) == colon)
        #expect(throws: ModelLibraryError.unknownModel(model: "Nope", quantization: "Q", status: 404)) {
            _ = try ModelCache.resolve("Nope:Q")
        }
    }
}
