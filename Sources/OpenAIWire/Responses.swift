import LeapJSON

/// Token counts of a completion (`usage`), with the prompt tokens served from the cache
/// (`prompt_tokens_details.cached_tokens`).
public struct WireUsage: Sendable, Equatable {
    public var promptTokens: Int
    public var completionTokens: Int
    public var cachedTokens: Int

    public init(promptTokens: Int, completionTokens: Int, cachedTokens: Int) {
        self.promptTokens = promptTokens
        self.completionTokens = completionTokens
        self.cachedTokens = cachedTokens
    }

    /// The `usage` object.
    public var json: JSONValue {
        [
            "prompt_tokens": .integer(promptTokens), "completion_tokens": .integer(completionTokens),
            "total_tokens": .integer(promptTokens + completionTokens),
            "prompt_tokens_details": ["cached_tokens": .integer(cachedTokens)]
        ]
    }
}

/// llama-server's `timings` extension: prompt and generation speed of one completion.
public struct WireTimings: Sendable, Equatable {
    public var promptTokens: Int
    public var promptMilliseconds: Double
    public var predictedTokens: Int
    public var predictedMilliseconds: Double
    public var cachedTokens: Int

    public init(promptTokens: Int, promptMilliseconds: Double, predictedTokens: Int, predictedMilliseconds: Double, cachedTokens: Int) {
        self.promptTokens = promptTokens
        self.promptMilliseconds = promptMilliseconds
        self.predictedTokens = predictedTokens
        self.predictedMilliseconds = predictedMilliseconds
        self.cachedTokens = cachedTokens
    }

    /// The `timings` object.
    public var json: JSONValue {
        func perSecond(_ n: Int, _ ms: Double) -> JSONValue { ms > 0 ? .double(Double(n) / ms * 1000) : .double(0) }
        return [
            "cache_n": .integer(cachedTokens),
            "prompt_n": .integer(promptTokens - cachedTokens), "prompt_ms": .double(promptMilliseconds),
            "prompt_per_second": perSecond(promptTokens - cachedTokens, promptMilliseconds),
            "predicted_n": .integer(predictedTokens), "predicted_ms": .double(predictedMilliseconds),
            "predicted_per_second": perSecond(predictedTokens, predictedMilliseconds)
        ]
    }
}

/// One token's log-probability entry (`logprobs.content[i]`).
public struct WireTokenLogprob: Sendable, Equatable {
    public struct Candidate: Sendable, Equatable {
        public var token: String
        public var bytes: [UInt8]
        public var logprob: Double

        public init(token: String, bytes: [UInt8], logprob: Double) {
            self.token = token
            self.bytes = bytes
            self.logprob = logprob
        }

        var json: JSONValue {
            // -inf (an impossible token) has no JSON form; OpenAI reports -9999 for it.
            [
                "token": .string(token), "logprob": .double(logprob.isFinite ? logprob : -9999),
                "bytes": .array(bytes.map { .integer(Int($0)) })
            ]
        }
    }
    public var chosen: Candidate
    public var top: [Candidate]

    public init(chosen: Candidate, top: [Candidate]) {
        self.chosen = chosen
        self.top = top
    }

    var chatJSON: JSONValue {
        guard case .object(var o) = chosen.json else { return .null }
        o["top_logprobs"] = .array(top.map(\.json))
        return .object(o)
    }
}

/// A tool call of the reply: `id`, function name and the arguments as JSON text.
public struct WireReplyToolCall: Sendable, Equatable {
    public var id: String
    public var name: String
    public var arguments: String

    public init(id: String, name: String, arguments: String) {
        self.id = id
        self.name = name
        self.arguments = arguments
    }

    func json(index: Int?) -> JSONValue {
        var o = JSONObject()
        if let index { o["index"] = .integer(index) }
        o["id"] = .string(id)
        o["type"] = "function"
        o["function"] = ["name": .string(name), "arguments": .string(arguments)]
        return .object(o)
    }
}

/// A spoken chat reply's `message.audio`: the whole reply's audio (base64 in the requested
/// format), its text, and when the id stops being valid (OpenAI's shape).
public struct WireReplyAudio: Sendable, Equatable {
    public var id: String
    /// Base64 of the WAV file or the raw 16-bit samples.
    public var data: String
    public var transcript: String
    /// A unix time.
    public var expiresAt: Int

    /// The reply's audio.
    public init(id: String, data: String, transcript: String, expiresAt: Int) {
        self.id = id
        self.data = data
        self.transcript = transcript
        self.expiresAt = expiresAt
    }

    var json: JSONValue {
        ["id": .string(id), "data": .string(data), "expires_at": .integer(expiresAt), "transcript": .string(transcript)]
    }
}

/// `chat.completion`: the whole reply.
public struct ChatCompletionResponse: Sendable, Equatable {
    public var id: String
    public var created: Int
    public var model: String
    public var content: String
    public var reasoningContent: String?
    public var toolCalls: [WireReplyToolCall]
    /// nil when logprobs were not asked for.
    public var logprobs: [WireTokenLogprob]?
    public var finishReason: String
    public var usage: WireUsage
    public var timings: WireTimings?
    /// A spoken reply's audio (then `content` is null and the text is its transcript, as
    /// OpenAI answers); nil for text.
    public var audio: WireReplyAudio?

    public init(
        id: String, created: Int, model: String, content: String, reasoningContent: String?, toolCalls: [WireReplyToolCall],
        logprobs: [WireTokenLogprob]?, finishReason: String, usage: WireUsage, timings: WireTimings?, audio: WireReplyAudio? = nil
    ) {
        self.id = id
        self.created = created
        self.model = model
        self.content = content
        self.reasoningContent = reasoningContent
        self.toolCalls = toolCalls
        self.logprobs = logprobs
        self.finishReason = finishReason
        self.usage = usage
        self.timings = timings
        self.audio = audio
    }

    /// The JSON the API sends.
    public var json: JSONValue {
        var message = JSONObject([("role", "assistant")])
        message["content"] = (content.isEmpty && !toolCalls.isEmpty) || audio != nil ? .null : .string(content)
        if let r = reasoningContent { message["reasoning_content"] = .string(r) }
        if !toolCalls.isEmpty { message["tool_calls"] = .array(toolCalls.map { $0.json(index: nil) }) }
        if let a = audio { message["audio"] = a.json }
        let choice: JSONValue = [
            "index": 0, "message": .object(message),
            "logprobs": logprobs.map { ["content": .array($0.map(\.chatJSON))] } ?? .null,
            "finish_reason": .string(finishReason)
        ]
        var o = JSONObject([
            ("id", .string(id)), ("object", "chat.completion"), ("created", .integer(created)), ("model", .string(model)),
            ("system_fingerprint", "leap-ref"), ("choices", [choice]), ("usage", usage.json)
        ])
        if let t = timings { o["timings"] = t.json }
        return .object(o)
    }
}

/// `chat.completion.chunk`: one streamed event of a chat completion.
public struct ChatCompletionChunk: Sendable, Equatable {
    /// What the chunk's single choice carries.
    public enum Delta: Sendable, Equatable {
        /// The first chunk: `{"role": "assistant", "content": ""}`.
        case role
        case content(String, logprobs: [WireTokenLogprob]?)
        case reasoning(String)
        /// Tool calls, each with its position in the reply's call list.
        case toolCalls([(index: Int, call: WireReplyToolCall)])
        /// The last chunk of the choice: empty delta and the finish reason.
        case finish(String)
        /// The usage chunk (`stream_options.include_usage`): no choices.
        case usage(WireUsage, WireTimings?)
        /// A spoken reply's text: `{"audio": {"id": ..., "transcript": ...}}`.
        case audioTranscript(id: String, String, logprobs: [WireTokenLogprob]?)
        /// A spoken reply's new samples: `{"audio": {"id": ..., "data": base64 pcm16}}`.
        case audioData(id: String, String)

        public static func == (a: Delta, b: Delta) -> Bool {
            switch (a, b) {
            case (.role, .role): return true
            case (.content(let x, let lx), .content(let y, let ly)): return x == y && lx == ly
            case (.reasoning(let x), .reasoning(let y)): return x == y
            case (.toolCalls(let x), .toolCalls(let y)): return x.map(\.index) == y.map(\.index) && x.map(\.call) == y.map(\.call)
            case (.finish(let x), .finish(let y)): return x == y
            case (.usage(let x, let tx), .usage(let y, let ty)): return x == y && tx == ty
            case (.audioTranscript(let i, let x, let lx), .audioTranscript(let j, let y, let ly)): return i == j && x == y && lx == ly
            case (.audioData(let i, let x), .audioData(let j, let y)): return i == j && x == y
            default: return false
            }
        }
    }
    public var id: String
    public var created: Int
    public var model: String
    public var delta: Delta

    public init(id: String, created: Int, model: String, delta: Delta) {
        self.id = id
        self.created = created
        self.model = model
        self.delta = delta
    }

    /// The JSON the API sends.
    public var json: JSONValue {
        var o = JSONObject([
            ("id", .string(id)), ("object", "chat.completion.chunk"), ("created", .integer(created)),
            ("model", .string(model)), ("system_fingerprint", "leap-ref")
        ])
        var delta = JSONObject()
        var logprobs: JSONValue = .null
        var finish: JSONValue = .null
        switch self.delta {
        case .role:
            delta["role"] = "assistant"
            delta["content"] = ""
        case .content(let text, let lp):
            delta["content"] = .string(text)
            if let lp { logprobs = ["content": .array(lp.map(\.chatJSON))] }
        case .reasoning(let text):
            delta["reasoning_content"] = .string(text)
        case .toolCalls(let calls):
            delta["tool_calls"] = .array(calls.map { $0.call.json(index: $0.index) })
        case .finish(let reason):
            finish = .string(reason)
        case .audioTranscript(let id, let text, let lp):
            delta["audio"] = ["id": .string(id), "transcript": .string(text)]
            if let lp { logprobs = ["content": .array(lp.map(\.chatJSON))] }
        case .audioData(let id, let data):
            delta["audio"] = ["id": .string(id), "data": .string(data)]
        case .usage(let usage, let timings):
            o["choices"] = []
            o["usage"] = usage.json
            if let t = timings { o["timings"] = t.json }
            return .object(o)
        }
        o["choices"] = [["index": 0, "delta": .object(delta), "logprobs": logprobs, "finish_reason": finish]]
        return .object(o)
    }
}

/// `text_completion`: a whole text completion, or (streamed) one piece of it.
public struct TextCompletionResponse: Sendable, Equatable {
    public var id: String
    public var created: Int
    public var model: String
    public var text: String
    /// The legacy logprobs object's per-token entries; nil when not asked for.
    public var logprobs: [WireTokenLogprob]?
    /// nil on streamed pieces before the last.
    public var finishReason: String?
    /// Present on the whole response and on the usage chunk.
    public var usage: WireUsage?
    public var timings: WireTimings?
    /// A streamed usage chunk: no choices.
    public var usageOnly: Bool

    public init(
        id: String, created: Int, model: String, text: String, logprobs: [WireTokenLogprob]?, finishReason: String?,
        usage: WireUsage?, timings: WireTimings? = nil, usageOnly: Bool = false
    ) {
        self.id = id
        self.created = created
        self.model = model
        self.text = text
        self.logprobs = logprobs
        self.finishReason = finishReason
        self.usage = usage
        self.timings = timings
        self.usageOnly = usageOnly
    }

    /// The JSON the API sends.
    public var json: JSONValue {
        var o = JSONObject([
            ("id", .string(id)), ("object", "text_completion"), ("created", .integer(created)), ("model", .string(model)),
            ("system_fingerprint", "leap-ref")
        ])
        if usageOnly {
            o["choices"] = []
        } else {
            var lp: JSONValue = .null
            if let entries = logprobs {
                var offsets: [JSONValue] = []
                var offset = 0
                for e in entries {
                    offsets.append(.integer(offset))
                    offset += e.chosen.token.count
                }
                lp = [
                    "tokens": .array(entries.map { .string($0.chosen.token) }),
                    "token_logprobs": .array(entries.map { .double($0.chosen.logprob.isFinite ? $0.chosen.logprob : -9999) }),
                    "top_logprobs": .array(
                        entries.map { e in
                            .object(JSONObject(e.top.map { ($0.token, .double($0.logprob.isFinite ? $0.logprob : -9999)) }))
                        }),
                    "text_offset": .array(offsets)
                ]
            }
            o["choices"] = [
                ["index": 0, "text": .string(text), "logprobs": lp, "finish_reason": finishReason.map { .string($0) } ?? .null]
            ]
        }
        if let usage { o["usage"] = usage.json }
        if let t = timings { o["timings"] = t.json }
        return .object(o)
    }
}

/// `GET /v1/models`.
public struct ModelList: Sendable, Equatable {
    public var ids: [String]
    public var created: Int
    /// What the models read: `"text"`, plus `"image"` with a vision encoder and `"audio"`
    /// with an audio encoder.
    public var inputModalities: [String]
    /// What the models write: `"text"`, plus `"audio"` for a model that speaks.
    public var outputModalities: [String]

    public init(ids: [String], created: Int, inputModalities: [String] = ["text"], outputModalities: [String] = ["text"]) {
        self.ids = ids
        self.created = created
        self.inputModalities = inputModalities
        self.outputModalities = outputModalities
    }

    /// The JSON the API sends: each model with `input_modalities`, and the same under
    /// `architecture` (with `output_modalities`), as OpenRouter's model list has it.
    public var json: JSONValue {
        let inputs = JSONValue.array(inputModalities.map { .string($0) })
        let outputs = JSONValue.array(outputModalities.map { .string($0) })
        return [
            "object": "list",
            "data": .array(
                ids.map {
                    [
                        "id": .string($0), "object": "model", "created": .integer(created), "owned_by": "leap-ref",
                        "input_modalities": inputs,
                        "architecture": ["input_modalities": inputs, "output_modalities": outputs]
                    ]
                })
        ]
    }
}

/// An OpenAI error object: `{"error": {"message", "type", "param", "code"}}` (`code` is
/// the HTTP status, as llama-server sends it).
public struct WireErrorBody: Sendable, Equatable {
    public var status: Int
    public var message: String
    public var type: String
    public var param: String?

    public init(status: Int, message: String, type: String, param: String? = nil) {
        self.status = status
        self.message = message
        self.type = type
        self.param = param
    }

    /// The OpenAI error type for an HTTP status.
    public static func type(forStatus status: Int) -> String {
        switch status {
        case 401: return "authentication_error"
        case 403: return "permission_error"
        case 404: return "not_found_error"
        case 413: return "request_too_large"
        case 429: return "rate_limit_error"
        case 503: return "unavailable_error"
        case 400..<500: return "invalid_request_error"
        default: return "server_error"
        }
    }

    public init(status: Int, message: String, param: String? = nil) {
        self.init(status: status, message: message, type: Self.type(forStatus: status), param: param)
    }

    /// The JSON the API sends.
    public var json: JSONValue {
        [
            "error": [
                "message": .string(message), "type": .string(type), "param": param.map { .string($0) } ?? .null,
                "code": .integer(status)
            ]
        ]
    }
}

/// Server-sent events framing: `data: <json>\n\n`, and the final `data: [DONE]\n\n`.
public enum ServerSentEvents {
    public static func event(_ json: JSONValue) -> String { "data: " + json.serialized() + "\n\n" }
    public static let done = "data: [DONE]\n\n"
}
