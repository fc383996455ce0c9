import Foundation
import LeapJSON

// Messages in OpenAI's chat-completions form (`ChatCompletionRequestMessage`):
//
//     {"role": "user", "content": "Hello"}
//     {"role": "user", "content": [{"type": "text", "text": "..."},
//                                  {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,..."}},
//                                  {"type": "input_audio", "input_audio": {"data": "<base64>", "format": "wav"}}]}
//     {"role": "assistant", "content": "...", "reasoning_content": "...",
//      "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]}
//     {"role": "tool", "content": "..."}
//
// A message whose content is one text part is exported with a plain string `content`.

extension ChatMessageContent {
    /// Reads one OpenAI content part (`{"type": "text" | "image_url" | "input_audio", ...}`).
    public init(from json: [String: Any]) throws {
        try self.init(json: AnyJSON.fromAny(json))
    }

    init(json: JSONValue) throws(LeapError) {
        guard let type = json["type"]?.stringValue else {
            throw .serializationFailure("a content part needs a string \"type\" (\"text\", \"image_url\" or \"input_audio\")")
        }
        switch type {
        case "text":
            guard let text = json["text"]?.stringValue else { throw .serializationFailure("a text part needs a string \"text\"") }
            self = .text(text)
        case "image_url":
            guard let url = json["image_url"]?["url"]?.stringValue ?? json["image_url"]?.stringValue else {
                throw .serializationFailure("an image_url part needs \"image_url\": {\"url\": \"data:image/jpeg;base64,...\"}")
            }
            guard let comma = url.firstIndex(of: ","), url.hasPrefix("data:"), url[..<comma].hasSuffix(";base64"),
                let data = Data(base64Encoded: String(url[url.index(after: comma)...]))
            else {
                throw .serializationFailure(
                    "an image_url must be a base64 data URL (data:image/jpeg;base64,...); remote URLs are not fetched")
            }
            self = .image(data)
        case "input_audio":
            guard let b64 = json["input_audio"]?["data"]?.stringValue else {
                throw .serializationFailure("an input_audio part needs \"input_audio\": {\"data\": \"<base64 WAV>\", \"format\": \"wav\"}")
            }
            if let format = json["input_audio"]?["format"]?.stringValue, format.lowercased() != "wav" {
                throw .serializationFailure("input_audio format '\(format)' is not supported; only WAV audio is accepted")
            }
            guard let data = Data(base64Encoded: b64) else { throw .serializationFailure("input_audio data is not valid base64") }
            self = .audio(data)
        default:
            throw .serializationFailure("unknown content part type '\(type)'")
        }
    }

    /// The OpenAI content-part object of this fragment.
    var json: JSONValue {
        switch self {
        case .text(let t):
            return ["type": "text", "text": .string(t)]
        case .image(let d):
            return ["type": "image_url", "image_url": ["url": .string("data:image/jpeg;base64," + d.base64EncodedString())]]
        case .audio(let d):
            return ["type": "input_audio", "input_audio": ["data": .string(d.base64EncodedString()), "format": "wav"]]
        }
    }
}

extension ChatMessage {
    /// Reads a message in OpenAI's chat-completions form (what `Conversation.exportToJSON`
    /// writes): `role`, `content` (a string or an array of parts), and optionally
    /// `reasoning_content` and `tool_calls`.
    public init(from json: [String: Any]) throws {
        try self.init(json: AnyJSON.fromAny(json))
    }

    init(json: JSONValue) throws(LeapError) {
        guard json.objectValue != nil else { throw .serializationFailure("a message must be a JSON object") }
        guard let roleName = json["role"]?.stringValue else { throw .serializationFailure("a message needs a string \"role\"") }
        guard let role = ChatMessageRole(rawValue: roleName) else {
            throw .serializationFailure("unknown role '\(roleName)' (expected user, system, assistant or tool)")
        }
        var content: [ChatMessageContent] = []
        switch json["content"] {
        case .string(let s)?: content = [.text(s)]
        case .array(let parts)?:
            for part in parts { content.append(try ChatMessageContent(json: part)) }
        case .null?, nil: content = []
        default: throw .serializationFailure("\"content\" must be a string, an array of parts, or null")
        }
        var calls: [LeapFunctionCall]?
        if let list = json["tool_calls"], !list.isNull {
            guard let items = list.arrayValue else { throw .serializationFailure("\"tool_calls\" must be an array") }
            calls = []
            for item in items {
                let function = item["function"] ?? item
                guard let name = function["name"]?.stringValue else {
                    throw .serializationFailure("a tool call needs \"function\": {\"name\": ..., \"arguments\": ...}")
                }
                var arguments = JSONObject()
                switch function["arguments"] {
                case .string(let text)?:
                    guard let parsed = try? JSONValue.parse(text), let object = parsed.objectValue else {
                        throw .serializationFailure("the arguments of tool call '\(name)' are not a JSON object")
                    }
                    arguments = object
                case .object(let object)?: arguments = object
                case .null?, nil: break
                default: throw .serializationFailure("the arguments of tool call '\(name)' must be a JSON object or a JSON string")
                }
                calls?.append(LeapFunctionCall(name: name, argumentsJSON: arguments))
            }
        }
        self.init(
            role: role, content: content, reasoningContent: json["reasoning_content"]?.stringValue,
            functionCalls: calls)
    }

    /// The message in OpenAI's chat-completions form, keys in a fixed order.
    var json: JSONValue {
        var o = JSONObject()
        o["role"] = .string(role.rawValue)
        if content.count == 1, case .text(let t) = content[0] {
            o["content"] = .string(t)
        } else if content.isEmpty {
            o["content"] = functionCalls?.isEmpty == false ? .null : .string("")
        } else {
            o["content"] = .array(content.map(\.json))
        }
        if let reasoningContent { o["reasoning_content"] = .string(reasoningContent) }
        if let functionCalls, !functionCalls.isEmpty {
            o["tool_calls"] = .array(
                functionCalls.map { call in
                    [
                        "type": "function",
                        "function": [
                            "name": .string(call.name),
                            "arguments": .string(call.argumentsJSONString())
                        ]
                    ]
                })
        }
        return .object(o)
    }

    /// The message as a `[String: Any]` in OpenAI's chat-completions form.
    public func toJSON() -> [String: Any] {
        AnyJSON.toAny(json) as? [String: Any] ?? [:]
    }
}
