import LeapJSON

/// The sampling and length fields shared by chat and text completions (OpenAI's, plus
/// llama-server's `top_k`, `min_p`, `repeat_penalty`, the `dry_*` fields, `cache_prompt`
/// and `ignore_eos`).
/// In this module a field named like a wire field (`topP` for `top_p`) holds that field,
/// validated; nil when the request left it out.
public struct SamplingFields: Sendable, Equatable {
    public var temperature: Double?
    public var topP: Double?
    public var topK: Int?
    public var minP: Double?
    public var repeatPenalty: Double?
    public var frequencyPenalty: Double?
    public var presencePenalty: Double?
    public var seed: Int?
    /// llama-server's DRY fields: `dry_multiplier` (0 to 100; 0 is off), `dry_base` (1 to
    /// 100), `dry_allowed_length` (at least 0), `dry_penalty_last_n` (at least -1: -1 the
    /// whole context, 0 off) and `dry_sequence_breakers` (1 to 16 non-empty strings).
    public var dryMultiplier: Double?
    public var dryBase: Double?
    public var dryAllowedLength: Int?
    public var dryPenaltyLastN: Int?
    public var drySequenceBreakers: [String]?
    /// `max_completion_tokens`, else `max_tokens`.
    public var maxTokens: Int?
    public var stop: [String]
    public var stream: Bool
    /// `stream_options.include_usage`.
    public var includeUsage: Bool
    /// llama-server's `cache_prompt` (default true).
    public var cachePrompt: Bool
    /// llama-server's `ignore_eos`: generate until `max_tokens` (for benchmarks).
    public var ignoreEOS: Bool

    /// The most stop strings a request may give.
    public static let maxStopStrings = 16
    /// The most DRY sequence breakers a request may give (each costs a pass over the
    /// vocabulary when first seen).
    public static let maxSequenceBreakers = 16

    init(_ r: FieldReader) throws(WireError) {
        temperature = try r.number("temperature", in: 0...2)
        topP = try r.number("top_p", in: 0...1)
        topK = try r.integer("top_k", in: 0...Int.max)
        minP = try r.number("min_p", in: 0...1)
        repeatPenalty = try r.number("repeat_penalty", in: 0...10)
        if repeatPenalty == 0 { throw WireError("'repeat_penalty' must be positive (1 is off)", param: "repeat_penalty") }
        frequencyPenalty = try r.number("frequency_penalty", in: -2...2)
        presencePenalty = try r.number("presence_penalty", in: -2...2)
        seed = try r.integer("seed", in: Int.min...Int.max)
        dryMultiplier = try r.number("dry_multiplier", in: 0...100)
        dryBase = try r.number("dry_base", in: 1...100)
        dryAllowedLength = try r.integer("dry_allowed_length", in: 0...Int.max)
        dryPenaltyLastN = try r.integer("dry_penalty_last_n", in: -1...Int.max)
        drySequenceBreakers = try Self.sequenceBreakers(r)
        let maxTokens = try r.integer("max_tokens", in: 1...Int.max)
        self.maxTokens = try r.integer("max_completion_tokens", in: 1...Int.max) ?? maxTokens
        if let n = try r.integer("n", in: Int.min...Int.max), n != 1 {
            throw WireError("'n' must be 1: this server returns one choice per request, not \(n)", param: "n")
        }
        switch r.value("stop") {
        case nil: stop = []
        case .string(let s)?: stop = [s]
        case .array(let items)?:
            stop = []
            for (i, item) in items.enumerated() {
                guard case .string(let s) = item else {
                    throw WireError("'stop[\(i)]' must be a string, not \(kindName(item))", param: "stop[\(i)]")
                }
                stop.append(s)
            }
        case let other?: throw r.error("stop", "a string or an array of strings", got: other)
        }
        if stop.count > Self.maxStopStrings {
            throw WireError("'stop' may hold at most \(Self.maxStopStrings) strings, not \(stop.count)", param: "stop")
        }
        stream = try r.bool("stream") ?? false
        let options = try r.reader("stream_options")
        if options != nil && !stream {
            throw WireError("'stream_options' is only allowed when 'stream' is true", param: "stream_options")
        }
        includeUsage = try options?.bool("include_usage") ?? false
        cachePrompt = try r.bool("cache_prompt") ?? true
        ignoreEOS = try r.bool("ignore_eos") ?? false
    }

    /// `dry_sequence_breakers`: a non-empty array of non-empty strings, as llama-server takes.
    static func sequenceBreakers(_ r: FieldReader) throws(WireError) -> [String]? {
        guard let items = try r.array("dry_sequence_breakers") else { return nil }
        guard !items.isEmpty else {
            throw WireError("'dry_sequence_breakers' must be a non-empty array of strings", param: "dry_sequence_breakers")
        }
        guard items.count <= maxSequenceBreakers else {
            throw WireError(
                "'dry_sequence_breakers' may hold at most \(maxSequenceBreakers) strings, not \(items.count)",
                param: "dry_sequence_breakers")
        }
        var breakers: [String] = []
        for (i, item) in items.enumerated() {
            let param = "dry_sequence_breakers[\(i)]"
            guard case .string(let s) = item else { throw WireError("'\(param)' must be a string, not \(kindName(item))", param: param) }
            guard !s.isEmpty else { throw WireError("'\(param)' must not be empty", param: param) }
            breakers.append(s)
        }
        return breakers
    }
}

/// A function the model may call (`tools[i]`).
public struct WireTool: Sendable, Equatable {
    public var name: String
    public var description: String
    /// The JSON Schema of the arguments (an empty object schema when absent).
    public var parameters: JSONValue

    init(_ value: JSONValue, path: String) throws(WireError) {
        let r = try FieldReader(value, path: path)
        guard try r.choice("type", ["function"]) != nil else {
            throw WireError("'\(path).type' is required ('function')", param: "\(path).type")
        }
        guard let f = try r.reader("function") else {
            throw WireError("'\(path).function' is required", param: "\(path).function")
        }
        guard let name = try f.string("name") else { throw WireError("'\(f.field("name"))' is required", param: f.field("name")) }
        let valid =
            !name.isEmpty && name.unicodeScalars.count <= 64
            && name.unicodeScalars.allSatisfy {
                $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "_" || $0 == "-")
            }
        guard valid else {
            throw WireError("'\(f.field("name"))' must be 1 to 64 letters, digits, '_' or '-', not '\(name)'", param: f.field("name"))
        }
        self.name = name
        description = try f.string("description") ?? ""
        if let p = try f.objectValue("parameters") {
            parameters = .object(p)
        } else {
            parameters = ["type": "object", "properties": [:]]
        }
    }
}

/// `tool_choice`.
public enum WireToolChoice: Sendable, Equatable {
    case auto, none, required
    case function(String)
}

/// `response_format` (or llama-server's top-level `json_schema`).
public enum WireResponseFormat: Sendable, Equatable {
    case text
    /// Any JSON object (`json_object` without a schema).
    case jsonObject
    case jsonSchema(JSONValue)
}

/// One content part of a message.
public enum WireMessageContent: Sendable, Equatable {
    /// A `text` part.
    case text(String)
    /// An `image_url` part: the bytes of its base64 data URL and the URL's media type
    /// (`image/png`, `image/jpeg`, or "" when the URL names none). Remote URLs are refused.
    case image(bytes: [UInt8], mediaType: String)
    /// An `input_audio` part: the decoded `data` of a WAV clip (`format: "wav"`).
    case audio(bytes: [UInt8])

    /// Reads one part of `messages[i].content`.
    init(_ value: JSONValue, path: String) throws(WireError) {
        let p = try FieldReader(value, path: path)
        guard let type = try p.string("type") else {
            throw WireError(
                "'\(p.field("type"))' is required: 'text', 'image_url' or 'input_audio'", param: p.field("type"))
        }
        switch type {
        case "text":
            guard let text = try p.string("text") else { throw WireError("'\(p.field("text"))' is required", param: p.field("text")) }
            self = .text(text)
        case "image_url":
            // {"image_url": {"url": "data:image/png;base64,..."}}, or the URL as a string.
            let url: String
            let field: String
            switch p.value("image_url") {
            case .string(let s)?:
                url = s
                field = p.field("image_url")
            case .object?:
                let i = try p.reader("image_url")!
                guard let s = try i.string("url") else {
                    throw WireError(
                        "'\(i.field("url"))' is required: a data URL such as data:image/png;base64,...", param: i.field("url"))
                }
                url = s
                field = i.field("url")
            case let other?:
                throw p.error("image_url", "an object with a 'url'", got: other)
            case nil:
                throw WireError(
                    "'\(p.field("image_url"))' is required: {\"url\": \"data:image/png;base64,...\"}", param: p.field("image_url"))
            }
            let (bytes, mediaType) = try Self.imageDataURL(url, field: field)
            self = .image(bytes: bytes, mediaType: mediaType)
        case "input_audio":
            guard let a = try p.reader("input_audio") else {
                throw WireError(
                    "'\(p.field("input_audio"))' is required: {\"data\": \"<base64 WAV>\", \"format\": \"wav\"}",
                    param: p.field("input_audio"))
            }
            if let format = try a.string("format"), format.lowercased() != "wav" {
                throw WireError(
                    "'\(a.field("format"))' is '\(format)': this server reads WAV only; send a WAV file with \"format\": \"wav\"",
                    param: a.field("format"))
            }
            guard var data = try a.string("data") else {
                throw WireError("'\(a.field("data"))' is required: the base64 bytes of a WAV file", param: a.field("data"))
            }
            // Some clients send a data URL here; its payload is the same base64.
            if data.hasPrefix("data:"), let comma = data.firstIndex(of: ","), data[..<comma].hasSuffix(";base64") {
                data = String(data[data.index(after: comma)...])
            }
            let bytes: [UInt8]
            switch Base64.decode(data) {
            case .success(let b): bytes = b
            case .failure(let why):
                throw WireError("'\(a.field("data"))' is not valid base64: \(why.message)", param: a.field("data"))
            }
            guard !bytes.isEmpty else {
                throw WireError("'\(a.field("data"))' is empty: send the base64 bytes of a WAV file", param: a.field("data"))
            }
            self = .audio(bytes: bytes)
        default:
            throw WireError(
                "'\(p.field("type"))': content part '\(type)' is not supported; send 'text', 'image_url' or 'input_audio' parts",
                param: p.field("type"))
        }
    }

    /// The bytes and media type of an image's data URL (`data:image/png;base64,...`).
    static func imageDataURL(_ url: String, field: String) throws(WireError) -> ([UInt8], String) {
        let lower = url.prefix(16).lowercased()
        if lower.hasPrefix("http://") || lower.hasPrefix("https://") {
            throw WireError(
                "'\(field)': remote image URLs are not fetched; send a data: URL (data:image/jpeg;base64,... or data:image/png;base64,...)",
                param: field)
        }
        guard lower.hasPrefix("data:"), let comma = url.firstIndex(of: ",") else {
            throw WireError(
                "'\(field)' must be a data: URL such as data:image/png;base64,... (file and other URLs are not read)", param: field)
        }
        let header = url[url.index(url.startIndex, offsetBy: 5)..<comma].lowercased()
        var parameters = header.split(separator: ";", omittingEmptySubsequences: false).map(String.init)
        let mediaType = parameters.removeFirst().trimmingSpaces
        guard parameters.contains("base64") else {
            throw WireError(
                "'\(field)': the data URL must be base64-encoded (data:\(mediaType.isEmpty ? "image/png" : mediaType);base64,...)",
                param: field)
        }
        switch mediaType {
        case "", "image/png", "image/jpeg", "image/jpg", "image/pjpeg", "application/octet-stream": break
        case let other where other.hasPrefix("image/"):
            throw WireError(
                "'\(field)': \(other) images are not supported; send a PNG or a JPEG (data:image/png;base64,... or data:image/jpeg;base64,...)",
                param: field)
        case let other:
            throw WireError("'\(field)': the data URL holds \(other), not an image; send a PNG or a JPEG", param: field)
        }
        switch Base64.decode(url[url.index(after: comma)...]) {
        case .success(let bytes):
            guard !bytes.isEmpty else { throw WireError("'\(field)': the data URL holds no image data", param: field) }
            return (bytes, mediaType)
        case .failure(let why):
            throw WireError("'\(field)': the data URL's base64 is not valid: \(why.message)", param: field)
        }
    }
}

/// A tool call carried by an assistant message in the history.
public struct WireToolCall: Sendable, Equatable {
    public var id: String
    public var name: String
    /// The arguments object, parsed from the JSON text the API carries.
    public var arguments: JSONObject

    public init(id: String, name: String, arguments: JSONObject) {
        self.id = id
        self.name = name
        self.arguments = arguments
    }
}

/// One message of `messages`.
public struct WireMessage: Sendable, Equatable {
    public enum Role: String, Sendable, Equatable {
        case system, user, assistant, tool
    }
    public var role: Role
    /// The text (string content, or the concatenated text parts).
    public var content: String
    /// The content as parts, in order: one text part for string content, none for null,
    /// else each part of the array (`parts[j]` is `content[j]`).
    public var parts: [WireMessageContent]
    /// Whether a part is an image or audio.
    public var hasMedia: Bool { parts.contains { if case .text = $0 { return false } else { return true } } }
    public var reasoningContent: String?
    public var toolCalls: [WireToolCall]
    /// The call a tool message answers.
    public var toolCallID: String?

    init(_ value: JSONValue, path: String) throws(WireError) {
        let r = try FieldReader(value, path: path)
        guard let roleName = try r.choice("role", ["system", "developer", "user", "assistant", "tool"]) else {
            throw WireError("'\(r.field("role"))' is required", param: r.field("role"))
        }
        role = roleName == "developer" ? .system : Role(rawValue: roleName)!
        switch r.value("content") {
        case nil:
            content = ""
            parts = []
        case .string(let s)?:
            content = s
            parts = [.text(s)]
        case .array(let list)?:
            content = ""
            parts = []
            for (i, part) in list.enumerated() {
                let decoded = try WireMessageContent(part, path: r.field("content") + "[\(i)]")
                if case .text(let text) = decoded { content += text }
                parts.append(decoded)
            }
        case let other?:
            throw r.error("content", "a string or an array of content parts", got: other)
        }
        reasoningContent = try r.string("reasoning_content")
        toolCalls = []
        if let calls = try r.array("tool_calls") {
            guard role == .assistant else {
                throw WireError("'\(r.field("tool_calls"))' is only allowed on assistant messages", param: r.field("tool_calls"))
            }
            for (i, call) in calls.enumerated() {
                let c = try FieldReader(call, path: r.field("tool_calls") + "[\(i)]")
                guard let f = try c.reader("function") else {
                    throw WireError("'\(c.field("function"))' is required", param: c.field("function"))
                }
                guard let name = try f.string("name") else { throw WireError("'\(f.field("name"))' is required", param: f.field("name")) }
                let argumentsText = try f.string("arguments") ?? "{}"
                guard case .object(let arguments)? = try? JSONValue.parse(argumentsText) else {
                    throw WireError("'\(f.field("arguments"))' must be a JSON object encoded as a string", param: f.field("arguments"))
                }
                toolCalls.append(WireToolCall(id: try c.string("id") ?? "", name: name, arguments: arguments))
            }
        }
        toolCallID = try r.string("tool_call_id")
        if role == .tool && toolCallID == nil {
            throw WireError("'\(r.field("tool_call_id"))' is required on tool messages", param: r.field("tool_call_id"))
        }
    }
}

/// `POST /v1/chat/completions`.
/// A request body the wire layer decodes, naming the bad field when it cannot.
public protocol WireRequest: Sendable {
    init(json: JSONValue) throws(WireError)
}

public struct ChatCompletionRequest: WireRequest, Equatable {
    public var model: String?
    public var messages: [WireMessage]
    public var sampling: SamplingFields
    /// `logprobs: true` with `top_logprobs` alternatives (0 when absent); nil without logprobs.
    public var topLogprobs: Int?
    public var tools: [WireTool]
    public var toolChoice: WireToolChoice
    public var responseFormat: WireResponseFormat
    /// llama-server's `chat_template_kwargs.enable_thinking`.
    public var enableThinking: Bool?
    /// leap-ref's `response_format.json_schema.property_order`: `"any"` lets an object's
    /// properties come in any order (each once, the required ones all); false (`"schema"`,
    /// the default) keeps the schema's order.
    public var anyPropertyOrder = false
    /// A spoken reply (`modalities` with `"audio"` and its `audio` parameters); nil: text only.
    public var audioOutput: WireChatAudio?

    /// The most messages and tools a request may carry.
    public static let maxMessages = 4096
    public static let maxTools = 128

    /// Decodes and validates a request body.
    public init(json: JSONValue) throws(WireError) {
        let r = try FieldReader(json, path: "")
        model = try r.string("model")
        guard let messages = try r.array("messages") else { throw WireError("'messages' is required", param: "messages") }
        guard !messages.isEmpty else { throw WireError("'messages' must hold at least one message", param: "messages") }
        guard messages.count <= Self.maxMessages else {
            throw WireError("'messages' may hold at most \(Self.maxMessages) messages", param: "messages")
        }
        var decoded: [WireMessage] = []
        for (i, m) in messages.enumerated() { decoded.append(try WireMessage(m, path: "messages[\(i)]")) }
        self.messages = decoded
        sampling = try SamplingFields(r)
        let logprobs = try r.bool("logprobs") ?? false
        let top = try r.integer("top_logprobs", in: 0...20)
        if top != nil && !logprobs {
            throw WireError("'top_logprobs' needs 'logprobs': true", param: "top_logprobs")
        }
        topLogprobs = logprobs ? (top ?? 0) : nil

        tools = []
        if let list = try r.array("tools") {
            guard list.count <= Self.maxTools else { throw WireError("'tools' may hold at most \(Self.maxTools) tools", param: "tools") }
            for (i, t) in list.enumerated() { tools.append(try WireTool(t, path: "tools[\(i)]")) }
        }
        switch r.value("tool_choice") {
        case nil: toolChoice = .auto
        case .string?:
            switch try r.choice("tool_choice", ["auto", "none", "required"]) {
            case "none": toolChoice = .none
            case "required": toolChoice = .required
            default: toolChoice = .auto
            }
        case let v?:
            let c = try FieldReader(v, path: "tool_choice")
            guard try c.choice("type", ["function"]) != nil, let f = try c.reader("function"), let name = try f.string("name") else {
                throw WireError(
                    "'tool_choice' must be 'auto', 'none', 'required' or {\"type\": \"function\", \"function\": {\"name\": ...}}",
                    param: "tool_choice")
            }
            toolChoice = .function(name)
        }
        if toolChoice != .auto && toolChoice != .none && tools.isEmpty {
            throw WireError("'tool_choice' asks for a tool call but 'tools' is empty", param: "tool_choice")
        }
        if case .function(let name) = toolChoice, !tools.contains(where: { $0.name == name }) {
            throw WireError("'tool_choice' names '\(name)', which is not in 'tools'", param: "tool_choice.function.name")
        }

        responseFormat = .text
        if let f = try r.reader("response_format") {
            switch try f.choice("type", ["text", "json_object", "json_schema"]) {
            case nil:
                throw WireError("'response_format.type' is required", param: "response_format.type")
            case "json_object":
                responseFormat = try f.objectValue("schema").map { .jsonSchema(.object($0)) } ?? .jsonObject
            case "json_schema":
                if let s = try f.objectValue("schema") {
                    responseFormat = .jsonSchema(.object(s))
                } else {
                    guard let js = try f.reader("json_schema") else {
                        throw WireError(
                            "'response_format.json_schema' is required for type 'json_schema'", param: "response_format.json_schema")
                    }
                    guard let schema = try js.objectValue("schema") else {
                        throw WireError("'response_format.json_schema.schema' is required", param: "response_format.json_schema.schema")
                    }
                    responseFormat = .jsonSchema(.object(schema))
                    anyPropertyOrder = try js.choice("property_order", ["schema", "any"]) == "any"
                }
            default:
                break
            }
        }
        if let schema = try r.objectValue("json_schema") {
            guard responseFormat == .text else {
                throw WireError("give the schema in 'response_format' or in 'json_schema', not both", param: "json_schema")
            }
            responseFormat = .jsonSchema(.object(schema))
        }
        if responseFormat != .text && !tools.isEmpty && toolChoice != .none {
            throw WireError(
                "'response_format' with a schema cannot be combined with 'tools'; send one or the other", param: "response_format")
        }
        enableThinking = try r.reader("chat_template_kwargs")?.bool("enable_thinking")
        audioOutput = try WireChatAudio.decode(r)
        if audioOutput != nil {
            if responseFormat != .text {
                throw WireError(
                    "'response_format' with a schema cannot be combined with audio output: a spoken reply is not constrained",
                    param: "response_format")
            }
            if !tools.isEmpty {
                throw WireError("'tools' cannot be combined with audio output: a spoken reply calls no tools", param: "tools")
            }
        }
    }
}

/// The audio format of a spoken chat reply (`audio.format`).
public enum WireChatAudioFormat: String, Sendable, Equatable, CaseIterable {
    /// A WAV file: 16-bit PCM, mono, 24 kHz (as `/v1/audio/speech` writes it).
    case wav
    /// Raw samples: 16-bit signed little-endian, mono, 24 kHz.
    case pcm16
}

/// A chat completion's spoken reply: `modalities: ["text", "audio"]` with
/// `audio: {"voice": ..., "format": "wav" | "pcm16"}`.
public struct WireChatAudio: Sendable, Equatable {
    /// The voice asked for (the names `/v1/audio/speech` takes).
    public var voice: WireSpeechVoice
    /// The voice as the request named it.
    public var voiceName: String
    /// The format of the non-streamed reply's `message.audio.data` (streamed chunks are pcm16).
    public var format: WireChatAudioFormat

    /// The formats OpenAI has and this server does not write.
    public static let unsupportedFormats = ["mp3", "flac", "opus", "aac"]

    /// A spoken reply in `voice` (named `voiceName`) as `format`.
    public init(voice: WireSpeechVoice, voiceName: String, format: WireChatAudioFormat) {
        self.voice = voice
        self.voiceName = voiceName
        self.format = format
    }

    /// A spoken reply when `modalities` holds `"audio"` (then `audio` is required); nil when
    /// `modalities` is absent or text only (`audio` is then ignored, as before).
    static func decode(_ r: FieldReader) throws(WireError) -> WireChatAudio? {
        var speaks = false
        if let list = try r.array("modalities") {
            for (i, m) in list.enumerated() {
                guard case .string(let name) = m, name == "text" || name == "audio" else {
                    let got: String
                    if case .string(let s) = m { got = "'\(s)'" } else { got = kindName(m) }
                    throw WireError("'modalities[\(i)]' must be \"text\" or \"audio\", not \(got)", param: "modalities")
                }
                if name == "audio" { speaks = true }
            }
        }
        guard speaks else { return nil }
        guard let a = try r.reader("audio") else {
            throw WireError(
                "'audio' is required when 'modalities' includes \"audio\": {\"voice\": ..., \"format\": \"wav\" or \"pcm16\"}",
                param: "audio")
        }
        guard let name = try a.string("voice") else {
            throw WireError("'audio.voice' is required: one of \(WireSpeechVoice.acceptedNames)", param: "audio.voice")
        }
        guard let voice = WireSpeechVoice(name: name) else {
            throw WireError(
                "'audio.voice' '\(name)' is not a voice of this model; the voices are \(WireSpeechVoice.acceptedNames)",
                param: "audio.voice")
        }
        let supported = WireChatAudioFormat.allCases.map { "'\($0.rawValue)'" }.joined(separator: " or ")
        guard let formatName = try a.string("format") else {
            throw WireError("'audio.format' is required: \(supported)", param: "audio.format")
        }
        guard let format = WireChatAudioFormat(rawValue: formatName.lowercased()) else {
            let why = unsupportedFormats.contains(formatName.lowercased()) ? "is not supported" : "is not a known format"
            throw WireError(
                "'audio.format' '\(formatName)' \(why): this server writes \(supported) (16-bit PCM, mono, 24 kHz)",
                param: "audio.format")
        }
        return WireChatAudio(voice: voice, voiceName: name, format: format)
    }
}

/// The prompt of a text completion.
public enum WirePrompt: Sendable, Equatable {
    case text(String)
    case tokens([Int])
}

/// `POST /v1/completions`.
public struct TextCompletionRequest: WireRequest, Equatable {
    public var model: String?
    public var prompt: WirePrompt
    public var sampling: SamplingFields
    /// `logprobs` (0 to 5 alternatives); nil without.
    public var logprobs: Int?

    /// OpenAI's default `max_tokens` for text completions.
    public static let defaultMaxTokens = 16

    public init(json: JSONValue) throws(WireError) {
        let r = try FieldReader(json, path: "")
        model = try r.string("model")
        switch r.value("prompt") {
        case nil: throw WireError("'prompt' is required", param: "prompt")
        case .string(let s)?: prompt = .text(s)
        case .array(let items)?:
            if items.count == 1, case .string(let s) = items[0] {
                prompt = .text(s)
            } else if !items.isEmpty, items.allSatisfy({ $0.intValue != nil }) {
                prompt = .tokens(items.map { $0.intValue! })
            } else {
                throw WireError("'prompt' must be a string, an array of one string, or an array of token ids", param: "prompt")
            }
        case let other?: throw r.error("prompt", "a string or an array of token ids", got: other)
        }
        if let suffix = try r.string("suffix"), !suffix.isEmpty {
            throw WireError("'suffix' (fill-in-the-middle) is not supported", param: "suffix")
        }
        if try r.bool("echo") == true { throw WireError("'echo' is not supported", param: "echo") }
        if let best = try r.integer("best_of", in: Int.min...Int.max), best != 1 {
            throw WireError("'best_of' must be 1, not \(best)", param: "best_of")
        }
        sampling = try SamplingFields(r)
        if sampling.maxTokens == nil { sampling.maxTokens = Self.defaultMaxTokens }
        logprobs = try r.integer("logprobs", in: 0...5)
    }
}

/// llama-server's `POST /tokenize`: `content`, `add_special`, `parse_special`, `with_pieces`.
public struct TokenizeRequest: WireRequest, Equatable {
    public var content: String
    public var addSpecial: Bool
    public var parseSpecial: Bool
    public var withPieces: Bool

    public init(json: JSONValue) throws(WireError) {
        let r = try FieldReader(json, path: "")
        guard let content = try r.string("content") else { throw WireError("'content' is required", param: "content") }
        self.content = content
        addSpecial = try r.bool("add_special") ?? false
        parseSpecial = try r.bool("parse_special") ?? true
        withPieces = try r.bool("with_pieces") ?? false
    }
}

/// llama-server's `POST /detokenize`: `tokens`.
public struct DetokenizeRequest: WireRequest, Equatable {
    public var tokens: [Int]

    public init(json: JSONValue) throws(WireError) {
        let r = try FieldReader(json, path: "")
        guard let items = try r.array("tokens") else { throw WireError("'tokens' is required", param: "tokens") }
        tokens = []
        for (i, item) in items.enumerated() {
            guard let id = item.intValue else {
                throw WireError("'tokens[\(i)]' must be an integer token id, not \(kindName(item))", param: "tokens[\(i)]")
            }
            tokens.append(id)
        }
    }
}
