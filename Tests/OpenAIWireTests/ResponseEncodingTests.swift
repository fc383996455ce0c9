import LeapJSON
import OpenAIWire
import Testing

@Suite struct ResponseEncodingTests {
    let usage = WireUsage(promptTokens: 10, completionTokens: 3, cachedTokens: 4)

    @Test func chatCompletionShape() {
        let call = WireReplyToolCall(id: "call_a", name: "f", arguments: #"{"x":1}"#)
        let r = ChatCompletionResponse(
            id: "chatcmpl-1", created: 7, model: "m", content: "", reasoningContent: nil, toolCalls: [call], logprobs: nil,
            finishReason: "tool_calls", usage: usage, timings: nil)
        #expect(
            r.json.serialized()
                == #"{"id":"chatcmpl-1","object":"chat.completion","created":7,"model":"m","system_fingerprint":"leap-ref","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_a","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13,"prompt_tokens_details":{"cached_tokens":4}}}"#
        )
    }

    @Test func chunksAndLogprobs() {
        func chunk(_ d: ChatCompletionChunk.Delta) -> JSONValue { ChatCompletionChunk(id: "c", created: 1, model: "m", delta: d).json }
        #expect(chunk(.role)["choices"]?.arrayValue?[0]["delta"] == ["role": "assistant", "content": ""])
        let lp = WireTokenLogprob(
            chosen: .init(token: "a", bytes: [97], logprob: -0.5), top: [.init(token: "a", bytes: [97], logprob: -0.5)])
        let content = chunk(.content("a", logprobs: [lp]))["choices"]?.arrayValue?[0]
        #expect(content?["delta"] == ["content": "a"])
        #expect(
            content?["logprobs"]
                == [
                    "content": [
                        ["token": "a", "logprob": -0.5, "bytes": [97], "top_logprobs": [["token": "a", "logprob": -0.5, "bytes": [97]]]]
                    ]
                ])
        #expect(chunk(.finish("length"))["choices"]?.arrayValue?[0]["finish_reason"] == "length")
        let u = chunk(.usage(usage, nil))
        #expect(u["choices"] == [] && u["usage"]?["total_tokens"] == 13)
        let calls = chunk(.toolCalls([(index: 1, call: WireReplyToolCall(id: "i", name: "f", arguments: "{}"))]))
        #expect(calls["choices"]?.arrayValue?[0]["delta"]?["tool_calls"]?.arrayValue?[0]["index"] == 1)
        // An impossible token's log-probability (-inf) has no JSON form.
        let impossible = WireTokenLogprob(chosen: .init(token: "z", bytes: [122], logprob: -.infinity), top: [])
        #expect(chunk(.content("z", logprobs: [impossible])).serialized().contains("-9999"))
    }

    @Test func textCompletionAndErrors() {
        let lp = WireTokenLogprob(
            chosen: .init(token: "ab", bytes: [97, 98], logprob: -1), top: [.init(token: "ab", bytes: [97, 98], logprob: -1)])
        let t = TextCompletionResponse(
            id: "cmpl-1", created: 1, model: "m", text: "abab", logprobs: [lp, lp], finishReason: "length", usage: usage)
        let choice = t.json["choices"]?.arrayValue?[0]
        #expect(choice?["logprobs"]?["text_offset"] == [0, 2])
        #expect(choice?["logprobs"]?["top_logprobs"] == [["ab": -1.0], ["ab": -1.0]])
        #expect(
            WireErrorBody(status: 400, message: "bad", param: "n").json.serialized()
                == #"{"error":{"message":"bad","type":"invalid_request_error","param":"n","code":400}}"#)
        #expect(WireErrorBody.type(forStatus: 401) == "authentication_error")
        #expect(WireErrorBody.type(forStatus: 503) == "unavailable_error")
        #expect(ServerSentEvents.event(["a": 1]) == "data: {\"a\":1}\n\n")
        #expect(ModelList(ids: ["x"], created: 3).json["data"]?.arrayValue?[0]["id"] == "x")
    }
}
