/// The function-call syntaxes leap-ref reads and writes, and how to tell which one a model
/// uses from its chat template and vocabulary.
public enum FunctionCallFormat: String, Sendable, Equatable, CaseIterable {
    /// LFM2's Pythonic calls: `<|tool_call_start|>[get_weather(city="Paris")]<|tool_call_end|>`.
    case lfm
    /// Hermes-style JSON calls (Qwen, Hermes, ...):
    /// `<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>`.
    case hermes

    /// The parser that reads and writes this syntax.
    public var parser: any LeapFunctionCallParserProtocol {
        switch self {
        case .lfm: return LFMFunctionCallParser()
        case .hermes: return HermesFunctionCallParser()
        }
    }

    /// The syntax a model writes, read from what it was trained with:
    ///
    /// 1. its chat template: one that writes LFM2's markers (`<|tool_call_start|>`, or the
    ///    `<|tool_list_start|>` of its tool list) is `.lfm`; one that writes `<tool_call>`
    ///    blocks holding JSON objects with `"arguments"` is `.hermes`; one whose
    ///    `<tool_call>` blocks hold XML (`<function=...>`, `<arg_key>`) is neither (nil);
    /// 2. failing that, its special tokens: `<|tool_call_start|>` gives `.lfm`,
    ///    `<tool_call>` gives `.hermes`.
    ///
    /// Nil when neither says: the model has no call syntax leap-ref knows.
    ///
    /// - Parameters:
    ///   - chatTemplate: the GGUF's `tokenizer.chat_template`, if any.
    ///   - hasToken: whether the vocabulary has this text as one (control) token.
    public static func detect(chatTemplate: String?, hasToken: (String) -> Bool) -> FunctionCallFormat? {
        if let template = chatTemplate {
            if template.contains("<|tool_call_start|>") || template.contains("<|tool_list_start|>") { return .lfm }
            let writesJSONCalls = template.contains("\"arguments\":") || template.contains("\\\"arguments\\\":")
            let writesXMLCalls = template.contains("<function=") || template.contains("<arg_key>")
            if template.contains("<tool_call>") { return writesJSONCalls && !writesXMLCalls ? .hermes : nil }
        }
        if hasToken("<|tool_call_start|>") { return .lfm }
        if hasToken("<tool_call>") { return .hermes }
        return nil
    }
}
