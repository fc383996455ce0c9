import Foundation
import Grammar
import Hummingbird
import LeapJSON
import LeapSDKCore
import LeapServer
import Testing

/// An in-process server (requests go straight to the router: `InProcessClient`) over lfm2-tiny.
struct TestServer {
    let state: ModelState
    let metrics = ServerMetrics()
    let engine: ServingEngine?
    let responder: RouterResponder<ServerContext>

    init(
        configuration: ServerConfiguration = ServerConfiguration(metricsEnabled: true), slots: Int = 1, contextSize: Int = 512,
        queueLimit: Int = 8, schemaLimits: JSONSchemaCompiler.Limits = .init(), loaded: Bool = true
    ) async throws {
        let metrics = self.metrics
        engine =
            loaded
            ? try await tinyEngine(slots: slots, contextSize: contextSize, queueLimit: queueLimit, schemaLimits: schemaLimits) {
                metrics.completion($0, $1)
            } : nil
        state = ModelState(engine.map { .ready($0) } ?? .loading)
        responder = ServerRoutes.router(state: state, configuration: configuration, metrics: metrics).buildResponder()
    }

    func test<T: Sendable>(_ body: @Sendable @escaping (InProcessClient) async throws -> T) async throws -> T {
        try await body(InProcessClient(responder: responder))
    }
}

extension InProcessClient {
    /// POSTs `json` and returns the status, headers and body.
    func post(_ uri: String, _ json: String, headers: HTTPFields = [:]) async throws -> TestResponse {
        var h = headers
        h[.contentType] = "application/json"
        return try await execute(uri: uri, method: .post, headers: h, body: ByteBuffer(string: json))
    }

    func get(_ uri: String, headers: HTTPFields = [:]) async throws -> TestResponse {
        try await execute(uri: uri, method: .get, headers: headers)
    }
}

extension TestResponse {
    var text: String { String(buffer: body) }
    var json: JSONValue { (try? JSONValue.parse(text)) ?? .null }
    /// The `data:` payloads of a server-sent event stream.
    var events: [String] {
        text.components(separatedBy: "\n\n").filter { !$0.isEmpty }.map { String($0.dropFirst("data: ".count)) }
    }
}

/// The streamed chat chunks' content, concatenated.
func streamedContent(_ events: [String]) -> String {
    events.dropLast().compactMap { try? JSONValue.parse($0) }
        .compactMap { $0["choices"]?.arrayValue?.first?["delta"]?["content"]?.stringValue }.joined()
}

let userHello = #"[{"role": "user", "content": "Hello there, how are you?"}]"#

@Suite(.serialized) struct RouterTests {
    @Test func healthIs503WhileLoadingThen200() async throws {
        let server = try await TestServer(loaded: false)
        let engine = try await tinyEngine()
        try await server.test { client in
            let loading = try await client.get("/health")
            #expect(loading.status == .serviceUnavailable)
            #expect(loading.json["error"]?["message"] == "Loading model")
            #expect(loading.headers[.retryAfter] == "1")
            #expect(try await client.post("/v1/chat/completions", #"{"messages": \#(userHello)}"#).status == .serviceUnavailable)
            server.state.phase = .ready(engine)
            let ready = try await client.get("/health")
            #expect(ready.status == .ok && ready.json == ["status": "ok"])
            let models = try await client.get("/v1/models")
            #expect(models.json["data"]?.arrayValue?.first?["id"]?.stringValue == engine.modelId)
        }
    }

    @Test func chatStreamedTextEqualsNonStreamedAtTemperatureZero() async throws {
        let server = try await TestServer()
        try await server.test { client in
            let body = #"{"model": "anything", "messages": \#(userHello), "temperature": 0, "max_tokens": 10"#
            let plain = try await client.post("/v1/chat/completions", body + "}")
            #expect(plain.status == .ok)
            let choice = plain.json["choices"]?.arrayValue?.first
            let content = choice?["message"]?["content"]?.stringValue ?? ""
            #expect(!content.isEmpty)
            #expect(choice?["finish_reason"] == "length")
            #expect(plain.json["model"] == "anything" && plain.json["object"] == "chat.completion")
            #expect(plain.json["usage"]?["completion_tokens"] == 10)
            #expect(plain.json["usage"]?["prompt_tokens_details"]?["cached_tokens"] == 0)

            let streamed = try await client.post(
                "/v1/chat/completions", body + #", "stream": true, "stream_options": {"include_usage": true}}"#)
            #expect(streamed.headers[.contentType] == "text/event-stream")
            let events = streamed.events
            #expect(events.last == "[DONE]")
            #expect(streamedContent(events) == content)
            let chunks = events.dropLast().compactMap { try? JSONValue.parse($0) }
            #expect(chunks.first?["choices"]?.arrayValue?.first?["delta"]?["role"] == "assistant")
            #expect(chunks.dropLast().last?["choices"]?.arrayValue?.first?["finish_reason"] == "length")
            let usage = chunks.last
            #expect(usage?["choices"] == [])
            #expect(usage?["usage"]?["completion_tokens"] == 10)
            // The same prompt again came from the slot's cache.
            #expect(usage?["usage"]?["prompt_tokens_details"]?["cached_tokens"] == usage?["usage"]?["prompt_tokens"])
            #expect(Set(chunks.map { $0["id"] }).count == 1)
        }
    }

    @Test func textCompletionsTokenizeAndDetokenize() async throws {
        let server = try await TestServer()
        try await server.test { client in
            let plain = try await client.post(
                "/v1/completions", #"{"prompt": "Once upon a time", "temperature": 0, "max_tokens": 6, "logprobs": 2}"#)
            #expect(plain.status == .ok)
            let choice = plain.json["choices"]?.arrayValue?.first
            let text = choice?["text"]?.stringValue ?? ""
            #expect(choice?["logprobs"]?["tokens"]?.arrayValue?.count == 6)
            #expect(choice?["logprobs"]?["tokens"]?.arrayValue?.compactMap(\.stringValue).joined() == text)
            let streamed = try await client.post(
                "/v1/completions", #"{"prompt": "Once upon a time", "temperature": 0, "max_tokens": 6, "stream": true}"#)
            let pieces = streamed.events.dropLast().compactMap { try? JSONValue.parse($0) }
            #expect(pieces.compactMap { $0["choices"]?.arrayValue?.first?["text"]?.stringValue }.joined() == text)
            #expect(pieces.last?["choices"]?.arrayValue?.first?["finish_reason"] == "length")

            let tokens = try await client.post("/tokenize", #"{"content": "Once upon a time", "with_pieces": true}"#)
            let list = tokens.json["tokens"]?.arrayValue ?? []
            #expect(list.compactMap { $0["piece"]?.stringValue }.joined() == "Once upon a time")
            let ids = list.compactMap { $0["id"]?.intValue }
            let back = try await client.post("/detokenize", #"{"tokens": \#(ids)}"#)
            #expect(back.json["content"] == "Once upon a time")
            let bad = try await client.post("/detokenize", #"{"tokens": [-1]}"#)
            #expect(bad.status == .badRequest && bad.json["error"]?["param"] == "tokens")
        }
    }

    @Test func jsonSchemaOutputSatisfiesTheSchemaAndBadSchemasAre400() async throws {
        let server = try await TestServer()
        try await server.test { client in
            let schema =
                #"{"type": "object", "properties": {"answer": {"enum": ["yes", "no"]}, "sure": {"type": "boolean"}}, "required": ["answer", "sure"], "additionalProperties": false}"#
            let r = try await client.post(
                "/v1/chat/completions",
                #"{"messages": \#(userHello), "max_tokens": 40, "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": \#(schema)}}}"#
            )
            let content = r.json["choices"]?.arrayValue?.first?["message"]?["content"]?.stringValue ?? ""
            let value = try JSONValue.parse(content)
            #expect(["yes", "no"].contains(value["answer"]?.stringValue ?? ""))
            #expect(value["sure"]?.boolValue != nil)
            #expect(value.objectValue?.keys.sorted() == ["answer", "sure"])
            #expect(r.json["choices"]?.arrayValue?.first?["finish_reason"] == "stop")

            // A schema the compiler cannot enforce: 400 with the compiler's own message.
            let unenforceable = #"{"type": "string", "pattern": "(?=a)b"}"#
            var compilerMessage = ""
            do {
                _ = try JSONSchemaCompiler.compile(unenforceable)
            } catch {
                compilerMessage = "\(error)"
            }
            #expect(!compilerMessage.isEmpty)
            let bad = try await client.post(
                "/v1/chat/completions",
                #"{"messages": \#(userHello), "response_format": {"type": "json_object", "schema": \#(unenforceable)}}"#)
            #expect(bad.status == .badRequest)
            #expect(bad.json["error"]?["message"]?.stringValue == "the JSON Schema cannot be enforced: \(compilerMessage)")
            #expect(bad.json["error"]?["type"] == "invalid_request_error")
        }
    }

    @Test func configuredSchemaLimitsTurnASchemaThatCompilesByDefaultInto400() async throws {
        // Closed objects nested five deep: within the compiler's default limits (depth 128),
        // past a depth of 6 (the compiler counts its own rewritings too: one closed object
        // needs a depth of 4, these five more than 10).
        func closed(_ name: String, _ inner: String) -> String {
            #"{"type": "object", "additionalProperties": false, "properties": {"\#(name)": \#(inner)}, "required": ["\#(name)"]}"#
        }
        let nested = closed("a", closed("b", closed("c", closed("d", closed("e", #"{"type": "boolean"}"#)))))
        let flat = closed("e", #"{"type": "boolean"}"#)
        @Sendable func request(_ schema: String) -> String {
            #"{"messages": \#(userHello), "max_tokens": 8, "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": \#(schema)}}}"#
        }
        let byDefault = try await TestServer()
        try await byDefault.test { client in
            let r = try await client.post("/v1/chat/completions", request(nested))
            #expect(r.status == .ok)
        }

        var tight = JSONSchemaCompiler.Limits()
        tight.maxDepth = 6
        var options = JSONSchemaCompiler.Options()
        options.limits = tight
        let compilerMessage: String
        do {
            _ = try JSONSchemaCompiler.compile(nested, options: options)
            compilerMessage = ""
        } catch {
            compilerMessage = "\(error)"
        }
        #expect(compilerMessage.contains("nested more than 6 deep"))
        let limited = try await TestServer(schemaLimits: tight)
        #expect(limited.engine?.configuration.schemaLimits == tight)
        try await limited.test { client in
            let r = try await client.post("/v1/chat/completions", request(nested))
            #expect(r.status == .badRequest)
            #expect(r.json["error"]?["message"]?.stringValue == "the JSON Schema cannot be enforced: \(compilerMessage)")
            #expect(r.json["error"]?["type"] == "invalid_request_error")
            // A schema within the tighter limits is still served.
            let within = try await client.post("/v1/chat/completions", request(flat))
            #expect(within.status == .ok)
        }
    }

    @Test func toolChoiceRequiredNamedAndNone() async throws {
        let server = try await TestServer()
        try await server.test { client in
            let tools =
                #"[{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Tokyo"]}, "days": {"type": "integer", "enum": [1, 2, 3]}}, "required": ["city", "days"]}}}, {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}]"#
            // Greedy: the random model then closes its call list (sampled, it may go on listing calls).
            let ask =
                #""messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": \#(tools), "max_tokens": 300, "temperature": 0"#
            let required = try await client.post("/v1/chat/completions", #"{\#(ask), "tool_choice": "required"}"#)
            let choice = required.json["choices"]?.arrayValue?.first
            #expect(choice?["finish_reason"] == "tool_calls")
            let calls = choice?["message"]?["tool_calls"]?.arrayValue ?? []
            #expect(calls.count >= 1)
            for call in calls {
                #expect(call["id"]?.stringValue?.hasPrefix("call_") == true && call["type"] == "function")
                let name = call["function"]?["name"]?.stringValue
                let args = try JSONValue.parse(call["function"]?["arguments"]?.stringValue ?? "")
                if name == "get_weather" {
                    // (An integer enum value may come back as 3.0: the grammar's enum literal allows it.)
                    #expect(["Paris", "Tokyo"].contains(args["city"]?.stringValue ?? "") && [1, 2, 3].contains(args["days"]?.intValue ?? 0))
                } else {
                    #expect(name == "get_time" && args == [:])
                }
            }
            #expect(Set(calls.compactMap { $0["id"] }).count == calls.count)

            let named = try await client.post(
                "/v1/chat/completions",
                #"{\#(ask), "stream": true, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}"#)
            let chunks = named.events.dropLast().compactMap { try? JSONValue.parse($0) }
            let deltas = chunks.compactMap { $0["choices"]?.arrayValue?.first?["delta"]?["tool_calls"]?.arrayValue }.flatMap { $0 }
            #expect(deltas.first?["index"] == 0)
            #expect(deltas.allSatisfy { $0["function"]?["name"] == "get_weather" })
            #expect(chunks.last?["choices"]?.arrayValue?.first?["finish_reason"] == "tool_calls")

            // The tool's answer goes back; with tool_choice none there is no call.
            let history =
                #"[{"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 1}"}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "18 C and sunny"}]"#
            let none = try await client.post(
                "/v1/chat/completions",
                #"{"messages": \#(history), "tools": \#(tools), "tool_choice": "none", "max_tokens": 8, "temperature": 0}"#)
            #expect(none.status == .ok)
            let message = none.json["choices"]?.arrayValue?.first?["message"]
            #expect(message?["tool_calls"] == nil)
            #expect(none.json["choices"]?.arrayValue?.first?["finish_reason"] != "tool_calls")
        }
    }

    @Test func requestErrorsAreOpenAIErrorObjects() async throws {
        let server = try await TestServer(
            configuration: ServerConfiguration(maxBodyBytes: 2048, maxTokensLimit: 100, metricsEnabled: false), contextSize: 64)
        try await server.test { client in
            func check(_ r: TestResponse, _ status: HTTPResponse.Status, _ message: String, param: String? = nil) {
                #expect(r.status == status)
                #expect(r.headers[.contentType] == "application/json")
                #expect(r.json["error"]?["message"]?.stringValue == message)
                #expect(r.json["error"]?["code"]?.intValue == status.code)
                if let param { #expect(r.json["error"]?["param"]?.stringValue == param) }
            }
            let malformed = try await client.post("/v1/chat/completions", #"{"messages": ["#)
            #expect(malformed.status == .badRequest)
            #expect(malformed.json["error"]?["message"]?.stringValue?.hasPrefix("the request body is not valid JSON") == true)
            check(try await client.post("/v1/chat/completions", "{}"), .badRequest, "'messages' is required", param: "messages")
            check(
                try await client.post("/v1/chat/completions", #"{"messages": \#(userHello), "n": 3}"#), .badRequest,
                "'n' must be 1: this server returns one choice per request, not 3", param: "n")
            check(
                try await client.post("/v1/chat/completions", #"{"messages": \#(userHello), "max_tokens": 101}"#), .badRequest,
                "'max_tokens' is 101, more than this server allows (100)", param: "max_tokens")
            let long = String(repeating: "word ", count: 300)
            let tooLong = try await client.post("/v1/chat/completions", #"{"messages": [{"role": "user", "content": "\#(long)"}]}"#)
            #expect(tooLong.status == .badRequest || tooLong.status == .contentTooLarge)
            let longPrompt = String(repeating: "word ", count: 100)
            let overContext = try await client.post("/v1/completions", #"{"prompt": "\#(longPrompt)"}"#)
            #expect(overContext.status == .badRequest)
            #expect(overContext.json["error"]?["message"]?.stringValue?.contains("does not fit in the context of 64 tokens") == true)
            let big = String(repeating: "x", count: 4096)
            check(
                try await client.post("/v1/completions", #"{"prompt": "\#(big)"}"#), .contentTooLarge,
                "the request body is larger than 2048 bytes (--max-body-bytes)")
            let notFound = try await client.get("/v1/nothing")
            #expect(notFound.status == .notFound && notFound.json["error"]?["type"] == "not_found_error")
            check(try await client.get("/metrics"), .notImplemented, "the metrics endpoint is off; start the server with --metrics")
            check(
                try await client.post(
                    "/v1/chat/completions",
                    #"{"messages": \#(userHello), "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "g"}}}"#
                ),
                .badRequest, "'tool_choice' names 'g', which is not in 'tools'")
            // Nothing a client sent left a slot busy.
            #expect(server.engine?.status.busySlots == 0)
        }
    }

    @Test func apiKeysGuardEverythingButHealthAndMetrics() async throws {
        let server = try await TestServer(configuration: ServerConfiguration(apiKeys: ["sekret"], metricsEnabled: true))
        try await server.test { client in
            #expect(try await client.get("/v1/models").status == .unauthorized)
            let wrong = try await client.get("/v1/models", headers: [.authorization: "Bearer nope"])
            #expect(wrong.status == .unauthorized && wrong.json["error"]?["type"] == "authentication_error")
            #expect(try await client.get("/v1/models", headers: [.authorization: "Bearer sekret"]).status == .ok)
            #expect(try await client.get("/v1/models", headers: [.init("X-Api-Key")!: "sekret"]).status == .ok)
            #expect(try await client.post("/v1/completions", #"{"prompt": "hi", "max_tokens": 1}"#).status == .unauthorized)
            #expect(try await client.get("/health").status == .ok)
            #expect(try await client.get("/metrics").status == .ok)
        }
    }

    @Test func busyServerAnswers503WithRetryAfter() async throws {
        let server = try await TestServer(slots: 1, contextSize: 4096, queueLimit: 0)
        let engine = try #require(server.engine)
        let running = try engine.submit(greedyChat("Keep going.", maxTokens: 4000))
        try await server.test { client in
            let r = try await client.post("/v1/chat/completions", #"{"messages": \#(userHello), "max_tokens": 2}"#)
            #expect(r.status == .serviceUnavailable)
            #expect(r.headers[.retryAfter] == "1")
            #expect(r.json["error"]?["type"] == "unavailable_error")
        }
        running.cancel()
        _ = try await collect(running)
        let after = try await server.test { client in
            try await client.post("/v1/chat/completions", #"{"messages": \#(userHello), "max_tokens": 2}"#).status
        }
        #expect(after == .ok)
    }

    @Test func metricsCountRequestsAndTokens() async throws {
        let server = try await TestServer()
        try await server.test { client in
            _ = try await client.post("/v1/chat/completions", #"{"messages": \#(userHello), "max_tokens": 5}"#)
            _ = try await client.post("/v1/chat/completions", "{}")
            let text = try await client.get("/metrics").text
            #expect(text.contains(#"leapref_requests_total{endpoint="/v1/chat/completions",code="200"} 1"#))
            #expect(text.contains(#"leapref_requests_total{endpoint="/v1/chat/completions",code="400"} 1"#))
            #expect(text.contains("leapref_tokens_predicted_total 5\n"))
            #expect(text.contains("leapref_slots 1\n") && text.contains("leapref_slots_busy 0\n"))
            #expect(text.contains("# TYPE leapref_prompt_tokens_total counter"))
        }
    }
}
