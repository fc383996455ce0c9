import Foundation
import LeapSDKCore
import TestSupport
import Testing

/// `FunctionCallFormat.detect`: the call syntax from a chat template (excerpts of real
/// templates) and, failing that, from the special tokens.
@Suite struct FunctionCallFormatTests {
    struct Case: CustomStringConvertible {
        let name: String
        let template: String?
        let tokens: Set<String>
        let expected: FunctionCallFormat?
        var description: String { name }
    }

    static let cases: [Case] = [
        Case(
            name: "LFM2 (tool list markers)",
            template: #"{{- "List of tools: <|tool_list_start|>[" }}{{- tool | tojson }}{{- "]<|tool_list_end|>" }}"#,
            tokens: [], expected: .lfm),
        Case(name: "LFM2 (call markers)", template: "<|tool_call_start|>[f()]<|tool_call_end|>", tokens: ["<tool_call>"], expected: .lfm),
        Case(
            name: "Qwen3",
            template: #"{{- '<tool_call>\n{"name": "' }}{{- tool_call.name }}{{- '", "arguments": ' }}"#,
            tokens: ["<tool_call>", "<|tool_call_start|>"], expected: .hermes),
        Case(
            name: "Qwen3 system text",
            template: #"<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>"#,
            tokens: [], expected: .hermes),
        Case(
            name: "Qwen3-Coder (XML calls)",
            template: #"{{- '\n<tool_call>\n<function=' + tool_call.name + '>\n' }} "arguments": "#,
            tokens: ["<tool_call>"], expected: nil),
        Case(name: "GLM (arg_key calls)", template: "{{- '<tool_call>' + tc.name }}<arg_key>", tokens: ["<tool_call>"], expected: nil),
        Case(name: "ChatML without tools, LFM2 tokens", template: "{{ '<|im_start|>' }}", tokens: ["<|tool_call_start|>"], expected: .lfm),
        Case(name: "ChatML without tools, Hermes token", template: "{{ '<|im_start|>' }}", tokens: ["<tool_call>"], expected: .hermes),
        Case(name: "no template, no tokens", template: nil, tokens: [], expected: nil)
    ]

    @Test(arguments: cases) func detects(_ c: Case) {
        #expect(FunctionCallFormat.detect(chatTemplate: c.template, hasToken: { c.tokens.contains($0) }) == c.expected)
    }

    /// The fixture copy of Qwen3's template, whole.
    @Test func qwen3TemplateIsHermes() throws {
        let template = try String(contentsOfFile: TestFixtures.path("chat-templates/Qwen-Qwen3-0.6B.jinja"), encoding: .utf8)
        #expect(FunctionCallFormat.detect(chatTemplate: template, hasToken: { _ in false }) == .hermes)
        #expect(FunctionCallFormat.hermes.parser is HermesFunctionCallParser)
        #expect(FunctionCallFormat.lfm.parser is LFMFunctionCallParser)
    }
}
