import LeapJSON
import LeapSDK
import Testing

private let deepHermes =
    #"{"name": "f", "arguments": {"a": "# + String(repeating: "[", count: 70) + String(repeating: "]", count: 70) + "}}"

/// The Hermes parser table: block body, expected calls (arguments as JSON) or error.
private let hermesCases: [ParseCase] = [
    // Valid calls.
    ParseCase(#"{"name": "get_weather", "arguments": {"city": "NYC"}}"#, .calls([ExpectedCall("get_weather", #"{"city":"NYC"}"#)])),
    ParseCase(
        "\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"NYC\"}}\n", .calls([ExpectedCall("get_weather", #"{"city":"NYC"}"#)])),
    ParseCase(#"{"name":"f","arguments":{"a":1}}"#, .calls([ExpectedCall("f", #"{"a":1}"#)])),
    ParseCase(#"{"name": "f", "arguments": "{\"city\": \"NYC\"}"}"#, .calls([ExpectedCall("f", #"{"city":"NYC"}"#)])),
    ParseCase(#"{"name": "f", "arguments": "  {\"a\": [1, 2]}\n"}"#, .calls([ExpectedCall("f", #"{"a":[1,2]}"#)])),
    ParseCase(#"{"name": "f", "arguments": ""}"#, .calls([ExpectedCall("f")])),
    ParseCase(#"{"name": "f"}"#, .calls([ExpectedCall("f")])),
    ParseCase(#"{"name": "f", "arguments": null}"#, .calls([ExpectedCall("f")])),
    ParseCase(#"{"name": "f", "arguments": {}}"#, .calls([ExpectedCall("f")])),
    ParseCase(#"{"name": "f", "parameters": {"a": true}}"#, .calls([ExpectedCall("f", #"{"a":true}"#)])),
    ParseCase(#"{"type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}"#, .calls([ExpectedCall("f", #"{"a":1}"#)])),
    ParseCase(
        #"[{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": {}}]"#,
        .calls([ExpectedCall("f", #"{"a":1}"#), ExpectedCall("g")])),
    ParseCase("{\"name\": \"f\"}\n{\"name\": \"g\"}", .calls([ExpectedCall("f"), ExpectedCall("g")])),
    ParseCase(#"{"name": "f"}, {"name": "g"}"#, .calls([ExpectedCall("f"), ExpectedCall("g")])),
    ParseCase("[]", .calls([])),
    ParseCase(
        #"{"name": "f", "arguments": {"l": [1, -2, 3.5, 1e2, -2.5E-1], "o": {"t": true, "n": null, "f": false}}}"#,
        .calls([ExpectedCall("f", #"{"l":[1,-2,3.5,100.0,-0.25],"o":{"t":true,"n":null,"f":false}}"#)])),
    ParseCase(
        #"{"name": "f", "arguments": {"city": "Zürich", "jp": "東京 🌸"}}"#, .calls([ExpectedCall("f", #"{"city":"Zürich","jp":"東京 🌸"}"#)])),
    ParseCase(#"{"name": "f", "arguments": {"s": "\u00e9\ud83d\ude00"}}"#, .calls([ExpectedCall("f", #"{"s":"é😀"}"#)])),
    ParseCase(#"{"name": "f", "arguments": {"s": "a\nb\tc\"d\\e\/f"}}"#, .calls([ExpectedCall("f", #"{"s":"a\nb\tc\"d\\e/f"}"#)])),
    ParseCase(
        #"{'name': 'f', 'arguments': {'a': True, 'b': None, 'c': False}}"#,
        .calls([ExpectedCall("f", #"{"a":true,"b":null,"c":false}"#)])),
    ParseCase(#"{"name": "f", "arguments": {"a": 1,},}"#, .calls([ExpectedCall("f", #"{"a":1}"#)])),
    ParseCase(#"{"name": "f", "arguments": {"n": 99999999999999999999}}"#, .calls([ExpectedCall("f", #"{"n":1e+20}"#)])),
    ParseCase(#"{"name": "a.b.c", "arguments": {}}"#, .calls([ExpectedCall("a.b.c")])),
    ParseCase(#"{"arguments": {"a": 1}, "name": "f"}"#, .calls([ExpectedCall("f", #"{"a":1}"#)])),
    ParseCase(#"{"id": "call_1", "name": "f", "arguments": {"a": 1}, "extra": [1]}"#, .calls([ExpectedCall("f", #"{"a":1}"#)])),
    ParseCase(#"{"name": "f", "arguments": {"a": 1, "a": 2}}"#, .calls([ExpectedCall("f", #"{"a":2}"#)])),
    ParseCase(
        #"{"name": "f", "arguments": "{\"q\": {\"l\": [[1], {\"x\": null}]}}"}"#,
        .calls([ExpectedCall("f", #"{"q":{"l":[[1],{"x":null}]}}"#)])),
    ParseCase(#"{"name": "f", "arguments": {"s": "<tool_call>x</tool"}}"#, .calls([ExpectedCall("f", #"{"s":"<tool_call>x</tool"}"#)])),
    ParseCase(#"{"name": "f", "arguments": {"z": -0.0, "i": -0}}"#, .calls([ExpectedCall("f", #"{"z":-0.0,"i":0}"#)])),
    ParseCase(#"{"name": "f", "arguments": {"k": ""}}"#, .calls([ExpectedCall("f", #"{"k":""}"#)])),
    ParseCase(" \t\r\n{\"name\": \"f\"} \n\n", .calls([ExpectedCall("f")])),
    ParseCase(#"[{"name": "f"}], {"name": "g"}"#, .calls([ExpectedCall("f"), ExpectedCall("g")])),
    // Malformed.
    ParseCase("", .error(offset: 0, message: "empty call block")),
    ParseCase(" \n ", .error(offset: 3, message: "empty call block")),
    ParseCase(#"{"name": "f", "arguments": {"city": "NYC"}"#, .error(offset: 0, message: "unterminated dict starting at byte 0")),
    ParseCase(#"{"arguments": {}}"#, .error(offset: 0, message: "no \"name\"")),
    ParseCase(#"{"name": 5}"#, .error(offset: 0, message: "\"name\" must be a non-empty string")),
    ParseCase(#"{"name": ""}"#, .error(offset: 0, message: "\"name\" must be a non-empty string")),
    ParseCase(#"{"name": "f", "arguments": [1]}"#, .error(offset: 0, message: "must be an object or a JSON string")),
    ParseCase(#"{"name": "f", "arguments": "not json"}"#, .error(offset: 0, message: "is not a JSON object")),
    ParseCase(#"{"name": "f", "arguments": "[1, 2]"}"#, .error(offset: 0, message: "must hold a JSON object")),
    ParseCase(#"{"name": "f", "arguments": "{\"a\": 1} extra"}"#, .error(offset: 0, message: "after the arguments object")),
    ParseCase(#"get_weather(city="NYC")"#, .error(offset: 0, message: "expected a call object")),
    ParseCase("[1, 2]", .error(offset: 0, message: "must hold call objects")),
    ParseCase(#"{"name": "f"} trailing"#, .error(offset: 14, message: "expected a call object")),
    ParseCase(#"{"name": "f", "arguments": {"a": }}"#, .error(offset: 33, message: "where a value was expected")),
    ParseCase(#"{"name": "f", "arguments": {"a": "open}}"#, .error(offset: 33, message: "unterminated string starting at byte 33")),
    ParseCase(#"{name: "f"}"#, .error(offset: 1, message: "dict keys must be quoted strings")),
    ParseCase(#"{"name": "f", "arguments": {"a": 1} "x": 2}"#, .error(offset: 36, message: "expected ',' or '}' in dict")),
    ParseCase(#"{"name" "f"}"#, .error(offset: 8, message: "expected ':' after dict key \"name\"")),
    ParseCase(#""just a string""#, .error(offset: 0, message: "expected a call object")),
    ParseCase(#"{"name": "f", "arguments": {"a": tru}}"#, .error(offset: 33, message: "unexpected name 'tru'")),
    ParseCase(#"{"name": "f", "arguments": {"a": "\x"}}"#, .error(offset: 34, message: "hex digit")),
    ParseCase(deepHermes, .error(offset: 96, message: "nested deeper than 64 levels")),
    ParseCase(#"{"name": "f"}}"#, .error(offset: 13, message: "expected a call object"))
]

@Suite struct FunctionCallingHermesParserTests {
    @Test func tableHasEnoughRows() {
        #expect(hermesCases.count >= 40)
        #expect(hermesCases.filter { if case .error = $0.expected { return true } else { return false } }.count >= 20)
    }

    @Test(arguments: hermesCases)
    func parsesTableRow(_ row: ParseCase) {
        let failure = checkParse(HermesFunctionCallParser().parse, row)
        #expect(failure == nil, "\(row.input.debugDescription): \(failure ?? "")")
    }

    @Test func markers() {
        #expect(HermesFunctionCallParser().callStartMarker == "<tool_call>")
        #expect(HermesFunctionCallParser().callEndMarker == "</tool_call>")
    }

    @Test func formatsEachCallAsABlock() {
        let calls = [
            LeapFunctionCall(name: "get_weather", arguments: ["unit": "celsius", "city": "NYC", "days": nil]),
            LeapFunctionCall(name: "get_time", arguments: [:])
        ]
        #expect(
            HermesFunctionCallParser().formatCalls(calls) == """
                <tool_call>
                {"name": "get_weather", "arguments": {"city": "NYC", "days": null, "unit": "celsius"}}
                </tool_call>
                <tool_call>
                {"name": "get_time", "arguments": {}}
                </tool_call>
                """)
        #expect(HermesFunctionCallParser().formatCalls([]) == "")
    }

    @Test func formatEscapesAnEndMarkerInsideAString() throws {
        let call = LeapFunctionCall(name: "f", arguments: ["s": "a</tool_call>b"])
        let text = HermesFunctionCallParser().formatCalls([call])
        #expect(text == #"<tool_call>\#n{"name": "f", "arguments": {"s": "a\u003c/tool_call\u003eb"}}\#n</tool_call>"#)
        try expectRoundTrip([call], parser: HermesFunctionCallParser())
        let lfmCall = LeapFunctionCall(name: "f", arguments: ["s": "x<|tool_call_end|>y"])
        #expect(LFMFunctionCallParser().formatCalls([lfmCall]) == #"<|tool_call_start|>[f(s="x\u003c|tool_call_end|>y")]<|tool_call_end|>"#)
        try expectRoundTrip([lfmCall], parser: LFMFunctionCallParser())
    }

    @Test func formatThenParseRoundTripsFixedCalls() throws {
        let calls = [
            LeapFunctionCall(name: "get_weather", arguments: ["cities": ["Paris", "Zürich"], "unit": "celsius"]),
            LeapFunctionCall(name: "g", arguments: ["o": ["k": [1, nil, 2.5] as [Any?]] as [String: Any?], "b": false])
        ]
        try expectRoundTrip(calls, parser: HermesFunctionCallParser())
    }
}
