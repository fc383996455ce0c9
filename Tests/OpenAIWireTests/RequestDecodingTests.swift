import LeapJSON
import OpenAIWire
import Testing

@Suite struct RequestDecodingTests {
    @Test func decodesAFullChatRequest() throws {
        let r = try chat(
            """
            {"model": "m", "messages": [
               {"role": "developer", "content": "Be brief."},
               {"role": "user", "content": [{"type": "text", "text": "Weather in "}, {"type": "text", "text": "Paris?"}]},
               {"role": "assistant", "content": null, "tool_calls": [
                  {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}}]},
               {"role": "tool", "tool_call_id": "call_1", "content": "18 C"}],
             "temperature": 0, "top_p": 0.9, "top_k": 20, "min_p": 0.1, "seed": -5, "max_tokens": 10,
             "max_completion_tokens": 12, "stop": "\\n\\n", "frequency_penalty": 0.5, "presence_penalty": -1,
             "n": 1, "logprobs": true, "top_logprobs": 3, "stream": true, "stream_options": {"include_usage": true},
             "tools": [{"type": "function", "function": {"name": "get_weather", "description": "d",
                        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
             "tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "user": "ignored"}
            """)
        #expect(r.model == "m")
        #expect(r.messages.map(\.role) == [.system, .user, .assistant, .tool])
        #expect(r.messages[1].content == "Weather in Paris?")
        #expect(r.messages[2].toolCalls == [WireToolCall(id: "call_1", name: "get_weather", arguments: JSONObject([("city", "Paris")]))])
        #expect(r.messages[3].toolCallID == "call_1")
        #expect(r.sampling.temperature == 0 && r.sampling.topK == 20 && r.sampling.seed == -5)
        #expect(r.sampling.maxTokens == 12)  // max_completion_tokens wins
        #expect(r.sampling.stop == ["\n\n"])
        #expect(r.sampling.stream && r.sampling.includeUsage && r.sampling.cachePrompt)
        #expect(r.topLogprobs == 3)
        #expect(r.tools.map(\.name) == ["get_weather"])
        #expect(r.toolChoice == .function("get_weather"))
        #expect(r.responseFormat == .text)
    }

    @Test func mediaPartsAreDecoded() throws {
        // "Hello, world!" is SGVsbG8sIHdvcmxkIQ== in base64.
        let request = try chat(
            #"{"messages": [{"role": "user", "content": [{"type": "text", "text": "Look: "}, "#
                + #"{"type": "image_url", "image_url": {"url": "data:image/png;base64,SGVsbG8sIHdvcmxkIQ==", "detail": "auto"}}, "#
                + #"{"type": "input_audio", "input_audio": {"data": "SGVs\nbG8sIHdvcmxkIQ", "format": "WAV"}}, "#
                + #"{"type": "image_url", "image_url": "data:;base64,AQID"}, {"type": "text", "text": "and this."}]}]}"#)
        let hello = Array("Hello, world!".utf8)
        let m = request.messages[0]
        #expect(m.content == "Look: and this.")
        #expect(m.hasMedia)
        #expect(
            m.parts == [
                .text("Look: "), .image(bytes: hello, mediaType: "image/png"), .audio(bytes: hello),
                .image(bytes: [1, 2, 3], mediaType: ""), .text("and this.")
            ])
        let plain = try chat(#"{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": null}]}"#)
        #expect(plain.messages[0].parts == [.text("Hi")] && !plain.messages[0].hasMedia)
        #expect(plain.messages[1].parts.isEmpty)
    }

    @Test func responseFormats() throws {
        let base = #"{"messages": [{"role": "user", "content": "hi"}], "#
        #expect(try chat(base + #""response_format": {"type": "text"}}"#).responseFormat == .text)
        #expect(try chat(base + #""response_format": {"type": "json_object"}}"#).responseFormat == .jsonObject)
        let schema: JSONValue = ["type": "integer"]
        #expect(
            try chat(base + #""response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "integer"}}}}"#)
                .responseFormat == .jsonSchema(schema))
        // llama-server's spellings: the schema directly in response_format, or a top-level json_schema.
        #expect(
            try chat(base + #""response_format": {"type": "json_object", "schema": {"type": "integer"}}}"#).responseFormat
                == .jsonSchema(schema))
        #expect(try chat(base + #""json_schema": {"type": "integer"}}"#).responseFormat == .jsonSchema(schema))
        #expect(try chat(base + #""stop": ["a", "b"], "logprobs": true}"#).sampling.stop == ["a", "b"])
        #expect(try chat(base + #""logprobs": true}"#).topLogprobs == 0)
        #expect(try chat(base + #""tool_choice": "none"}"#).toolChoice == WireToolChoice.none)
    }

    @Test(
        arguments: [
            ("[1]", "the request body must be a JSON object, not an array", nil),
            (#"{}"#, "'messages' is required", "messages"),
            (#"{"messages": []}"#, "'messages' must hold at least one message", "messages"),
            (#"{"messages": {"role": "user"}}"#, "'messages' must be an array, not an object", "messages"),
            (#"{"messages": [{"content": "x"}]}"#, "'messages[0].role' is required", "messages[0].role"),
            (
                #"{"messages": [{"role": "bot", "content": "x"}]}"#,
                "'messages[0].role' must be one of 'system', 'developer', 'user', 'assistant', 'tool', not 'bot'", "messages[0].role"
            ),
            (
                #"{"messages": [{"role": "user", "content": 5}]}"#,
                "'messages[0].content' must be a string or an array of content parts, not an integer", "messages[0].content"
            ),
            (
                #"{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}"#,
                "'messages[0].content[0].image_url.url' must be a data: URL such as data:image/png;base64,... (file and other URLs are not read)",
                "messages[0].content[0].image_url.url"
            ),
            (
                #"{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}]}"#,
                "'messages[0].content[0].image_url.url': remote image URLs are not fetched; send a data: URL (data:image/jpeg;base64,... or data:image/png;base64,...)",
                "messages[0].content[0].image_url.url"
            ),
            (
                #"{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVB*"}}]}]}"#,
                "'messages[0].content[0].image_url.url': the data URL's base64 is not valid: '*' at offset 3 is not a base64 character",
                "messages[0].content[0].image_url.url"
            ),
            (
                #"{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/webp;base64,AAAA"}}]}]}"#,
                "'messages[0].content[0].image_url.url': image/webp images are not supported; send a PNG or a JPEG (data:image/png;base64,... or data:image/jpeg;base64,...)",
                "messages[0].content[0].image_url.url"
            ),
            (
                #"{"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "AAAA", "format": "mp3"}}]}]}"#,
                "'messages[0].content[0].input_audio.format' is 'mp3': this server reads WAV only; send a WAV file with \"format\": \"wav\"",
                "messages[0].content[0].input_audio.format"
            ),
            (
                #"{"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "AAAAA", "format": "wav"}}]}]}"#,
                "'messages[0].content[0].input_audio.data' is not valid base64: it ends with a lone character (5 base64 characters; a valid length is not 1 more than a multiple of 4)",
                "messages[0].content[0].input_audio.data"
            ),
            (
                #"{"messages": [{"role": "user", "content": [{"type": "video_url", "video_url": {"url": "x"}}]}]}"#,
                "'messages[0].content[0].type': content part 'video_url' is not supported; send 'text', 'image_url' or 'input_audio' parts",
                "messages[0].content[0].type"
            ),
            (
                #"{"messages": [{"role": "tool", "content": "x"}]}"#, "'messages[0].tool_call_id' is required on tool messages",
                "messages[0].tool_call_id"
            ),
            (
                #"{"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[1"}}]}]}"#,
                "'messages[0].tool_calls[0].function.arguments' must be a JSON object encoded as a string",
                "messages[0].tool_calls[0].function.arguments"
            ),
            (
                #"{"messages": [{"role": "user", "content": "x"}], "temperature": 3}"#, "'temperature' must be between 0 and 2, not 3",
                "temperature"
            ),
            (
                #"{"messages": [{"role": "user", "content": "x"}], "temperature": "hot"}"#, "'temperature' must be a number, not a string",
                "temperature"
            ),
            (#"{"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}"#, "'max_tokens' must be at least 1, not 0", "max_tokens"),
            (
                #"{"messages": [{"role": "user", "content": "x"}], "max_tokens": 1.5}"#, "'max_tokens' must be an integer, not a number",
                "max_tokens"
            ),
            (
                #"{"messages": [{"role": "user", "content": "x"}], "n": 2}"#,
                "'n' must be 1: this server returns one choice per request, not 2", "n"
            ),
            (#"{"messages": [{"role": "user", "content": "x"}], "stop": [1]}"#, "'stop[0]' must be a string, not an integer", "stop[0]"),
            (
                #"{"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2}"#, "'top_logprobs' needs 'logprobs': true",
                "top_logprobs"
            ),
            (
                #"{"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 21}"#,
                "'top_logprobs' must be at least 0 and at most 20, not 21", "top_logprobs"
            ),
            (
                #"{"messages": [{"role": "user", "content": "x"}], "stream_options": {"include_usage": true}}"#,
                "'stream_options' is only allowed when 'stream' is true", "stream_options"
            ),
            (
                #"{"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"}"#,
                "'tool_choice' asks for a tool call but 'tools' is empty", "tool_choice"
            ),
            (
                #"{"messages": [{"role": "user", "content": "x"}], "tool_choice": "sometimes"}"#,
                "'tool_choice' must be one of 'auto', 'none', 'required', not 'sometimes'", "tool_choice"
            ),
            (
                #"{"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "a b"}}]}"#,
                "'tools[0].function.name' must be 1 to 64 letters, digits, '_' or '-', not 'a b'", "tools[0].function.name"
            ),
            (
                #"{"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "g"}}}"#,
                "'tool_choice' names 'g', which is not in 'tools'", "tool_choice.function.name"
            ),
            (
                #"{"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "xml"}}"#,
                "'response_format.type' must be one of 'text', 'json_object', 'json_schema', not 'xml'", "response_format.type"
            ),
            (
                #"{"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}"#,
                "'response_format.json_schema.schema' is required", "response_format.json_schema.schema"
            )
        ] as [(String, String, String?)])
    func rejectsBadChatRequests(body: String, message: String, param: String?) {
        let error = chatError(body)
        #expect(error?.message == message)
        #expect(error?.param == param)
    }

    @Test func textCompletionRequests() throws {
        let r = try TextCompletionRequest(json: try JSONValue.parse(#"{"prompt": "Once", "logprobs": 2}"#))
        #expect(r.prompt == .text("Once"))
        #expect(r.sampling.maxTokens == TextCompletionRequest.defaultMaxTokens)
        #expect(r.logprobs == 2)
        #expect(try TextCompletionRequest(json: try JSONValue.parse(#"{"prompt": [1, 2, 3]}"#)).prompt == .tokens([1, 2, 3]))
        #expect(try TextCompletionRequest(json: try JSONValue.parse(#"{"prompt": ["x"]}"#)).prompt == .text("x"))
        for (body, message) in [
            (#"{}"#, "'prompt' is required"),
            (#"{"prompt": ["a", "b"]}"#, "'prompt' must be a string, an array of one string, or an array of token ids"),
            (#"{"prompt": "x", "echo": true}"#, "'echo' is not supported"),
            (#"{"prompt": "x", "suffix": "y"}"#, "'suffix' (fill-in-the-middle) is not supported"),
            (#"{"prompt": "x", "logprobs": 6}"#, "'logprobs' must be at least 0 and at most 5, not 6")
        ] {
            #expect(throws: WireError.self) { try TextCompletionRequest(json: try JSONValue.parse(body)) }
            do {
                _ = try TextCompletionRequest(json: try JSONValue.parse(body))
            } catch let e as WireError {
                #expect(e.message == message)
            } catch {}
        }
    }

    @Test func tokenizeRequests() throws {
        let t = try TokenizeRequest(json: try JSONValue.parse(#"{"content": "hi", "with_pieces": true}"#))
        #expect(t.content == "hi" && t.withPieces && !t.addSpecial && t.parseSpecial)
        #expect(try DetokenizeRequest(json: try JSONValue.parse(#"{"tokens": [1, 2]}"#)).tokens == [1, 2])
        #expect(throws: WireError("'tokens[1]' must be an integer token id, not a string", param: "tokens[1]")) {
            try DetokenizeRequest(json: try JSONValue.parse(#"{"tokens": [1, "x"]}"#))
        }
    }

    @Test func malformedBodies() {
        #expect(throws: WireError("the request body is empty; send a JSON object")) { try JSONValue.parseRequestBody([]) }
        #expect(throws: WireError.self) { try JSONValue.parseRequestBody(Array("{\"messages\": [".utf8)) }
        // Nesting is bounded, so a hostile body cannot exhaust the stack.
        #expect(throws: WireError.self) { try JSONValue.parseRequestBody(Array((String(repeating: "[", count: 100_000)).utf8)) }
    }
}
