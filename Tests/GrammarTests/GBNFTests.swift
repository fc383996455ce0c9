import LeapJSON
import Testing

@testable import Grammar

@Suite struct GBNFTests {
    @Test func arithmetic() throws {
        let g = try GBNF.parse(
            #"""
            # integers with + and *, parenthesized
            root ::= expr
            expr ::= term ("+" term)*
            term ::= factor ("*" factor)*
            factor ::= [0-9]+ | "(" expr ")"
            """#)
        #expect(valid(g, "1+2*(3+4)") && valid(g, "42"))
        #expect(!valid(g, "1+") && !valid(g, "(1") && !valid(g, "a"))
        #expect(prefix(g, "1+("))
    }

    @Test func classesEscapesAndRepetition() throws {
        let g = try GBNF.parse(
            #"""
            root ::= "é" [^"\n]{2,3} "\x41" [\u0100-\U0001F600]? "."
            """#)
        #expect(valid(g, "éabA.") && valid(g, "éabcA😀.") && valid(g, "é\u{3}bAĀ."))
        #expect(!valid(g, "éaA.") && !valid(g, "éabcdA.") && !valid(g, "éa\"A.") && !valid(g, "éabAz."))
        let dot = try GBNF.parse(#"root ::= . ."#)
        #expect(valid(dot, "a😀") && !valid(dot, "a"))
    }

    /// LFM2's Pythonic tool calls with registered names, and Hermes-style JSON calls whose
    /// arguments follow a schema bound to a rule.
    @Test func toolCallGrammars() throws {
        let lfm = try GBNF.parse(
            #"""
            root ::= "<|tool_call_start|>[" call ("," " "? call)* "]<|tool_call_end|>"
            call ::= "get_weather(" "city=" str ")" | "get_time(" ")"
            str ::= "\"" [^"\\]* "\""
            """#)
        #expect(valid(lfm, #"<|tool_call_start|>[get_weather(city="NYC"), get_time()]<|tool_call_end|>"#))
        #expect(!valid(lfm, #"<|tool_call_start|>[get_wether(city="NYC")]<|tool_call_end|>"#))
        let schema = try JSONValue.parse(
            #"{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}"#)
        let hermes = try GBNF.parse(
            #"""
            root ::= "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " args "}\n</tool_call>"
            """#, schemas: ["args": schema])
        #expect(valid(hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"))
        #expect(!valid(hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"town\": \"Paris\"}}\n</tool_call>"))
    }

    @Test func errors() {
        func message(_ text: String) -> String {
            do {
                _ = try GBNF.parse(text)
                return ""
            } catch { return error.message }
        }
        #expect(message("root ::= missing").contains("undefined rule 'missing'"))
        #expect(message("root ::= root \"a\" | \"b\"").contains("left recursion"))
        #expect(message("root ::= \"a").contains("unterminated"))
        #expect(message("start ::= \"a\"").contains("no rule named 'root'"))
        #expect(message("root ::= [b-a]").contains("bad range"))
    }
}
