import Foundation
import HTTPTypes
import Hummingbird
import LeapJSON
import LeapSDKCore
import OpenAIWire
import Testing

@testable import LeapServer

/// The chat page at `/`: its files, headers, caching, `--no-webui`, and the API key, which
/// guards `/v1` but not the page.
@Suite(.serialized) struct WebUITests {
    @Test func thePageAndItsFilesAreServedWithStrictHeaders() async throws {
        let server = try await TestServer()
        try await server.test { client in
            let page = try await client.get("/")
            #expect(page.status == .ok)
            #expect(page.headers[.contentType] == "text/html; charset=utf-8")
            #expect(page.headers[.cacheControl] == "no-cache")
            #expect(page.headers[.xContentTypeOptions] == "nosniff")
            let csp = try #require(page.headers[.contentSecurityPolicy])
            #expect(csp.contains("default-src 'none'") && csp.contains("script-src 'self'") && csp.contains("connect-src 'self'"))
            #expect(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"))
            // Attachments' thumbnails and players are data: URLs; nothing else is.
            #expect(csp.contains("img-src 'self' data:;") && csp.contains("media-src data:;"))
            #expect(page.text.contains("<input type=\"file\" id=\"attach-file\""))
            #expect(page.text.contains("<textarea id=\"message\""))
            // No inline script or style: everything comes from the versioned files.
            #expect(!page.text.contains("<script>") && !page.text.contains("<style") && !page.text.contains("style=\""))

            let assets = try WebUIAssets.bundled.get()
            for (name, type) in WebUIAssets.assetTypes {
                let hash = try #require(assets.files[name]?.hash)
                #expect(page.text.contains("\"/webui/\(name)?v=\(hash)\""), "index.html points at \(name)'s version")
                let versioned = try await client.get("/webui/\(name)?v=\(hash)")
                #expect(versioned.status == .ok)
                #expect(versioned.headers[.contentType] == type)
                #expect(versioned.headers[.cacheControl] == "public, max-age=31536000, immutable")
                #expect(versioned.headers[.eTag] == "\"\(hash)\"")
                #expect(versioned.body.readableBytes == assets.files[name]?.bytes.count)
                // An old or missing version is revalidated instead of cached for a year.
                #expect(try await client.get("/webui/\(name)?v=0000").headers[.cacheControl] == "no-cache")
                #expect(try await client.get("/webui/\(name)").headers[.cacheControl] == "no-cache")
            }
            #expect(try await client.get("/webui/chat.js").text.contains("textContent"))
            #expect(try await client.get("/webui/nothing.js").status == .notFound)
            #expect(try await client.get("/webui/../Package.swift").status == .notFound)
            #expect(try await client.get("/index.html").status == .notFound)
        }
    }

    @Test func modulesImportTheVersionsOfTheModulesTheyImport() async throws {
        let assets = try WebUIAssets.bundled.get()
        let page = String(decoding: try #require(assets.files["index.html"]).bytes, as: UTF8.self)
        #expect(page.contains("<script type=\"module\" src=\"/webui/chat.js?v="))
        var imports = 0
        for name in WebUIAssets.modules {
            let text = String(decoding: try #require(assets.files[name]).bytes, as: UTF8.self)
            // Every "./NAME" in a served module is a listed module at its current version.
            for piece in text.components(separatedBy: "\"./").dropFirst() {
                let quote = try #require(piece.firstIndex(of: "\""))
                let specifier = String(piece[..<quote])
                let parts = specifier.split(separator: "?v=", omittingEmptySubsequences: false)
                #expect(parts.count == 2, "\(name) imports \(specifier) without a version")
                let imported = String(parts[0])
                #expect(WebUIAssets.modules.contains(imported), "\(name) imports \(imported)")
                #expect(parts.count == 2 && String(parts[1]) == assets.files[imported]?.hash, "\(name): \(specifier)")
                imports += 1
            }
        }
        #expect(imports >= WebUIAssets.modules.count - 1, "every module but one is imported somewhere")

        // A change to a module deep down changes the versions of the modules above it and of
        // the page, and of nothing else.
        let directory = try #require(WebUIAssets.bundledDirectory())
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("webui-\(UUID().uuidString)")
        try FileManager.default.copyItem(at: directory, to: copy)
        defer { try? FileManager.default.removeItem(at: copy) }
        let dom = copy.appendingPathComponent("dom.js")
        let original = try String(contentsOf: dom, encoding: .utf8)
        try (original + "\n// changed\n").write(to: dom, atomically: true, encoding: .utf8)
        let changed = try WebUIAssets(directory: copy)
        for name in ["dom.js", "messages.js", "chat.js", "index.html"] {
            #expect(changed.files[name]?.hash != assets.files[name]?.hash, "\(name) has a new version")
        }
        for name in ["markup.js", "chat.css", "icon.svg"] {
            #expect(changed.files[name]?.hash == assets.files[name]?.hash, "\(name) keeps its version")
        }
        let messages = String(decoding: try #require(changed.files["messages.js"]).bytes, as: UTF8.self)
        #expect(messages.contains("\"./dom.js?v=\(try #require(changed.files["dom.js"]).hash)\""))

        // An import of a file that is not served, a quote the rewriting would miss, or a
        // cycle is refused when the files are read.
        for (text, reason) in [
            ("import \"./nothing.js\";", "not one of the served modules"), ("import './markup.js';", "write \"./NAME.js\""),
            ("import \"./chat.js\";", "cycle")
        ] {
            try (text + "\n" + original).write(to: dom, atomically: true, encoding: .utf8)
            #expect {
                _ = try WebUIAssets(directory: copy)
            } throws: { error in
                "\(error)".contains(reason)
            }
        }
    }

    @Test func aMatchingETagGets304() async throws {
        let server = try await TestServer()
        try await server.test { client in
            let first = try await client.get("/")
            let tag = try #require(first.headers[.eTag])
            let again = try await client.get("/", headers: [.ifNoneMatch: tag])
            #expect(again.status == .notModified)
            #expect(again.body.readableBytes == 0)
            #expect(try await client.get("/", headers: [.ifNoneMatch: "\"x\", \(tag)"]).status == .notModified)
            #expect(try await client.get("/", headers: [.ifNoneMatch: "\"other\""]).status == .ok)
        }
    }

    @Test func noWebUIMakesThePage404AndKeepsTheAPI() async throws {
        let server = try await TestServer(configuration: ServerConfiguration(webUI: false))
        try await server.test { client in
            let page = try await client.get("/")
            #expect(page.status == .notFound)
            #expect(page.json["error"]?["code"] == 404)
            #expect(try await client.get("/webui/chat.js").status == .notFound)
            #expect(try await client.get("/v1/models").status == .ok)
        }
        // With a key too: the page is still 404, not 401.
        let keyed = try await TestServer(configuration: ServerConfiguration(apiKeys: ["k"], webUI: false))
        try await keyed.test { client in
            let page = try await client.get("/")
            #expect(page.status == .notFound)
        }
    }

    @Test func theAPIKeyGuardsV1ButNotThePage() async throws {
        let server = try await TestServer(configuration: ServerConfiguration(apiKeys: ["sekret"]))
        try await server.test { client in
            #expect(try await client.get("/").status == .ok)
            #expect(try await client.get("/webui/chat.css").status == .ok)
            #expect(try await client.get("/webui/icon.svg").status == .ok)
            let refused = try await client.get("/v1/models")
            #expect(refused.status == .unauthorized)
            #expect(refused.json["error"]?["message"] == "an API key is required: send 'Authorization: Bearer KEY'")
            #expect(try await client.post("/v1/chat/completions", #"{"messages": \#(userHello)}"#).status == .unauthorized)
            #expect(try await client.get("/v1/models", headers: [.authorization: "Bearer wrong"]).status == .unauthorized)
            #expect(try await client.get("/v1/models", headers: [.authorization: "Bearer sekret"]).status == .ok)
            // Paths that only look like the page's are not open.
            #expect(try await client.get("/webuix/chat.css").status == .unauthorized)
        }
    }

    @Test func missingFilesAnswer500WithTheReason() async throws {
        let state = ModelState(.loading)
        let router = ServerRoutes.router(
            state: state, configuration: ServerConfiguration(), metrics: ServerMetrics(),
            webUIAssets: .failure(WebUIError("the chat page's files are missing")))
        let client = InProcessClient(responder: router.buildResponder())
        let page = try await client.get("/")
        #expect(page.status == .internalServerError)
        #expect(page.json["error"]?["message"] == "the chat page's files are missing")
        #expect(try await client.get("/health").status == .serviceUnavailable)
    }

    @Test func dryFieldsReachTheEngineAndBadOnesAre400() async throws {
        let server = try await TestServer()
        try await server.test { client in
            let bad = try await client.post(
                "/v1/chat/completions", #"{"messages": \#(userHello), "dry_sequence_breakers": []}"#)
            #expect(bad.status == .badRequest)
            #expect(bad.json["error"]?["param"] == "dry_sequence_breakers")
            let text = try await client.post("/v1/completions", #"{"prompt": "Hello", "dry_base": 0.9}"#)
            #expect(text.status == .badRequest)
            #expect(text.json["error"]?["message"] == "'dry_base' must be between 1 and 100, not 0.9")
            let ok = try await client.post(
                "/v1/chat/completions",
                #"{"messages": \#(userHello), "max_tokens": 8, "dry_multiplier": 2, "dry_allowed_length": 1, "dry_penalty_last_n": 32, "dry_sequence_breakers": ["\n", "."]}"#
            )
            #expect(ok.status == .ok)
            #expect(ok.json["usage"]?["completion_tokens"]?.intValue ?? 0 > 0)
        }
    }

    @Test func serverDefaultsFillTheFieldsARequestLeavesOut() throws {
        let defaults = SamplingOverrides(temperature: 0.3, topK: 7, dryMultiplier: 1.5, drySequenceBreakers: ["\n"])
        let request = try ChatCompletionRequest(json: JSONValue.parse(#"{"messages": \#(userHello), "temperature": 0.9, "dry_base": 2}"#))
        let s = WireMapping.sampling(request.sampling, defaults: defaults)
        #expect(s.temperature == 0.9)  // the request's
        #expect(s.topK == 7 && s.dryMultiplier == 1.5 && s.drySequenceBreakers == ["\n"])  // the server's
        #expect(s.dryBase == 2)
        #expect(s.topP == nil && s.dryAllowedLength == nil)  // the model's
    }
}
