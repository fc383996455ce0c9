import ChatTemplates
import LeapJSON
import Tokenizers

/// Renders a conversation into prompt text with the model's own chat template, and
/// tokenizes it.
struct PromptBuilder: Sendable {
    let tokenizer: Tokenizer
    let template: ChatTemplate
    /// Whether the template reads the `tools` variable; if not, tool definitions are put
    /// into the system message in LFM2's format.
    let templateReadsTools: Bool

    /// ChatML, used when the GGUF carries no template.
    static let fallbackTemplateSource = """
        {% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}
        """

    init(tokenizer: Tokenizer, templateSource: String?) throws(LeapError) {
        self.tokenizer = tokenizer
        let source = templateSource ?? PromptBuilder.fallbackTemplateSource
        do {
            template = try ChatTemplate(source: source)
        } catch {
            throw .modelLoadingFailure("the model's chat template does not parse (\(error)); fix tokenizer.chat_template in the GGUF")
        }
        templateReadsTools = source.contains("tools")
    }

    /// The prompt text for `messages` followed by the assistant's generation prompt, with
    /// the tools given as the JSON the template receives (`{"name", "description",
    /// "parameters"}` each). An image or audio part becomes `mediaMarker` in its message's
    /// text (the caller splits the text there and puts the media's positions in its place,
    /// as llama.cpp's libmtmd does with its `<__media__>` marker); without a marker (a model
    /// with no media encoder), such a part is an error. An assistant message's audio (a
    /// spoken reply) is left out: its text part stands for it; with
    /// `spokenRepliesAsMarkers`, an assistant message with `speechSteps` is the marker alone
    /// (its steps go there).
    func render(
        messages: [ChatMessage], tools: [JSONValue], callFormat: LeapFunctionCallParserProtocol,
        enableThinking: Bool?, mediaMarker: String? = nil, spokenRepliesAsMarkers: Bool = false
    ) throws(ServingError) -> String {
        var rendered: [JSONValue] = []
        var toolsInSystem: String?
        if !tools.isEmpty, !templateReadsTools {
            toolsInSystem =
                "List of tools: <|tool_list_start|>["
                + tools.map { $0.serialized(.python) }.joined(separator: ", ") + "]<|tool_list_end|>\n"
                + "To call tools, reply with \(callFormat.formatCalls([LeapFunctionCall(name: "tool_name", arguments: ["argument": "value"])]))."
        }
        for (index, message) in messages.enumerated() {
            var text = ""
            if spokenRepliesAsMarkers, let marker = mediaMarker, message.role == .assistant, message.speechSteps?.isEmpty == false {
                // A spoken reply: its steps take its content's place.
                rendered.append(["role": .string(message.role.rawValue), "content": .string(marker)])
                continue
            }
            for part in message.content {
                switch part {
                case .text(let t): text += t
                case .audio where message.role == .assistant:
                    // A spoken reply's waveform: its text stands for it. (The reference feeds
                    // the reply's audio codes back; leap-ref does not keep them yet.)
                    continue
                case .image where mediaMarker != nil, .audio where mediaMarker != nil:
                    text += mediaMarker ?? ""
                case .image:
                    throw .unsupportedContent(
                        "this model has no vision encoder, so it cannot read image content; send text only, or load a vision model with its mmproj file"
                    )
                case .audio:
                    throw .unsupportedContent(
                        "this model has no audio encoder, so it cannot hear audio content; send text only, or load an audio-capable model")
                }
            }
            if message.role == .assistant, let calls = message.functionCalls, !calls.isEmpty {
                text = callFormat.formatCalls(calls) + text
            }
            if index == 0, message.role == .system, let extra = toolsInSystem {
                text += "\n" + extra
                toolsInSystem = nil
            }
            rendered.append(["role": .string(message.role.rawValue), "content": .string(text)])
        }
        if let extra = toolsInSystem {
            rendered.insert(["role": "system", "content": .string(extra)], at: 0)
        }
        var extras: [String: JSONValue] = [:]
        if let enableThinking { extras["enable_thinking"] = .bool(enableThinking) }
        do {
            return try template.render(
                messages: rendered, tools: tools.isEmpty || !templateReadsTools ? nil : tools,
                addGenerationPrompt: true,
                bosToken: tokenizer.bosID.map { tokenizer.tokenText($0) },
                eosToken: tokenizer.eosID.map { tokenizer.tokenText($0) },
                extraVariables: extras)
        } catch {
            throw .invalidRequest("the model's chat template failed on this conversation: \(error)")
        }
    }

    /// Token ids of rendered prompt text: special tokens parsed; BOS added only when the
    /// tokenizer asks for it and the template did not already write it.
    func tokenize(_ text: String) -> [Int] {
        tokenize(text, stoppingAbove: .max).tokens.map(Int.init)
    }

    /// `tokenize(_:)`, stopping once the text is known to have more than `limit` tokens
    /// (`Tokenizer.encode(_:addSpecial:parseSpecial:stoppingAbove:)`).
    func tokenize(_ text: String, stoppingAbove limit: Int) -> LimitedEncoding {
        var encoded = tokenizer.encode(text, addSpecial: false, parseSpecial: true, stoppingAbove: limit)
        if tokenizer.addBOS, let bos = tokenizer.bosID, encoded.tokens.first != bos {
            encoded.tokens.insert(bos, at: 0)
            encoded.count += 1
        }
        return encoded
    }
}
