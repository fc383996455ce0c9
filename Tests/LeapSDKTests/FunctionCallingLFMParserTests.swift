import Foundation
import LeapJSON
import LeapSDK
import Testing

private let deepList = String(repeating: "[", count: 70) + String(repeating: "]", count: 70)
private let listAtLimit = String(repeating: "[", count: 63) + "1" + String(repeating: "]", count: 63)
private let listAtLimitJSON = String(repeating: "[", count: 63) + "1" + String(repeating: "]", count: 63)

/// The LFM parser table: input body, expected calls (arguments as JSON) or error.
private let lfmCases: [ParseCase] = [
    // Valid calls.
    ParseCase(
        #"[get_weather(city="NYC", unit='celsius'), get_time()]"#,
        .calls([ExpectedCall("get_weather", #"{"city":"NYC","unit":"celsius"}"#), ExpectedCall("get_time")])),
    ParseCase("[get_time()]", .calls([ExpectedCall("get_time")])),
    ParseCase("[]", .calls([])),
    ParseCase(" [ ] ", .calls([])),
    ParseCase("  [ f ( a = 1 , b = \"x\" ) ]  ", .calls([ExpectedCall("f", #"{"a":1,"b":"x"}"#)])),
    ParseCase("\n[\n  f(\n    a=1,\n    b=2\n  )\n]\n", .calls([ExpectedCall("f", #"{"a":1,"b":2}"#)])),
    ParseCase("[f(a=-5, b=+3, c=0, d=-0)]", .calls([ExpectedCall("f", #"{"a":-5,"b":3,"c":0,"d":0}"#)])),
    ParseCase("[f(x=1.5, y=-0.25, z=.5, w=5.)]", .calls([ExpectedCall("f", #"{"x":1.5,"y":-0.25,"z":0.5,"w":5.0}"#)])),
    ParseCase("[f(x=1e3, y=2.5E-3, z=-1e+2)]", .calls([ExpectedCall("f", #"{"x":1000.0,"y":0.0025,"z":-100.0}"#)])),
    ParseCase("[f(a=True, b=False, c=None)]", .calls([ExpectedCall("f", #"{"a":true,"b":false,"c":null}"#)])),
    ParseCase("[f(a=true, b=false, c=null)]", .calls([ExpectedCall("f", #"{"a":true,"b":false,"c":null}"#)])),
    ParseCase(
        #"[f(l=[1, 2, [3, "x"]], d={"k": [True, None], "z": {"y": 1.0}})]"#,
        .calls([ExpectedCall("f", #"{"l":[1,2,[3,"x"]],"d":{"k":[true,null],"z":{"y":1.0}}}"#)])),
    ParseCase("[f(t=(1, 'a'), e=())]", .calls([ExpectedCall("f", #"{"t":[1,"a"],"e":[]}"#)])),
    ParseCase("[f(d={}, l=[])]", .calls([ExpectedCall("f", #"{"d":{},"l":[]}"#)])),
    ParseCase("[a.b.c(x=1)]", .calls([ExpectedCall("a.b.c", #"{"x":1}"#)])),
    ParseCase(#"[get-weather(city="Paris")]"#, .calls([ExpectedCall("get-weather", #"{"city":"Paris"}"#)])),
    ParseCase(
        #"[f(s="line\nnext\ttab \\ back \" quote")]"#,
        .calls([ExpectedCall("f", #"{"s":"line\nnext\ttab \\ back \" quote"}"#)])),
    ParseCase(#"[f(s='it\'s "fine"')]"#, .calls([ExpectedCall("f", #"{"s":"it's \"fine\""}"#)])),
    ParseCase(#"[f(s="\u00e9\u4e2d", r="\r")]"#, .calls([ExpectedCall("f", #"{"s":"é中","r":"\r"}"#)])),
    ParseCase(#"[f(s="\ud83d\ude00")]"#, .calls([ExpectedCall("f", #"{"s":"😀"}"#)])),
    ParseCase(#"[f(s="\U0001F600\x41")]"#, .calls([ExpectedCall("f", #"{"s":"😀A"}"#)])),
    ParseCase(
        #"[f(city="Zürich", note="東京 🌸", emoji="👩‍👩‍👧")]"#,
        .calls([ExpectedCall("f", #"{"city":"Zürich","note":"東京 🌸","emoji":"👩‍👩‍👧"}"#)])),
    ParseCase(
        #"[f(path="C:\dir\sub", url="a\/b", ff="\f")]"#, .calls([ExpectedCall("f", #"{"path":"C:\\dir\\sub","url":"a/b","ff":"\f"}"#)])),
    ParseCase("[f(a=1,)]", .calls([ExpectedCall("f", #"{"a":1}"#)])),
    ParseCase("[f(a=1), g(),]", .calls([ExpectedCall("f", #"{"a":1}"#), ExpectedCall("g")])),
    ParseCase("[f(l=[1,2,], d={'a':1,},)]", .calls([ExpectedCall("f", #"{"l":[1,2],"d":{"a":1}}"#)])),
    ParseCase("get_time()", .calls([ExpectedCall("get_time")])),
    ParseCase("\n  f(a=\"x\"), g(b=2)\n", .calls([ExpectedCall("f", #"{"a":"x"}"#), ExpectedCall("g", #"{"b":2}"#)])),
    ParseCase(#"[f(s="", t='')]"#, .calls([ExpectedCall("f", #"{"s":"","t":""}"#)])),
    ParseCase(#"[f(q="a), g(b=[", r='=]')]"#, .calls([ExpectedCall("f", #"{"q":"a), g(b=[","r":"=]"}"#)])),
    ParseCase("[f(d={'a': 'b', \"c\": 'd'})]", .calls([ExpectedCall("f", #"{"d":{"a":"b","c":"d"}}"#)])),
    ParseCase("[f(d={'a': 1, 'a': 2})]", .calls([ExpectedCall("f", #"{"d":{"a":2}}"#)])),
    ParseCase("[f(n=123456789012345678901234567890)]", .calls([ExpectedCall("f", #"{"n":1.2345678901234568e+29}"#)])),
    ParseCase(
        "[f(n=9223372036854775807, m=-9223372036854775808)]",
        .calls([ExpectedCall("f", #"{"n":9223372036854775807,"m":-9223372036854775808}"#)])),
    ParseCase("[f(a=\(listAtLimit))]", .calls([ExpectedCall("f", #"{"a":\#(listAtLimitJSON)}"#)])),
    ParseCase("[f(ü=1, _x2=2)]", .calls([ExpectedCall("f", #"{"ü":1,"_x2":2}"#)])),
    // JSON calls inside the LFM markers.
    ParseCase(
        #"[{"name": "get_weather", "arguments": {"city": "NYC"}}]"#,
        .calls([ExpectedCall("get_weather", #"{"city":"NYC"}"#)])),
    ParseCase(#"{"name": "f", "arguments": "{\"a\": 1, \"b\": [true]}"}"#, .calls([ExpectedCall("f", #"{"a":1,"b":[true]}"#)])),
    ParseCase(
        #"[{"name": "f", "parameters": {"a": null}}, {"name": "g"}]"#,
        .calls([ExpectedCall("f", #"{"a":null}"#), ExpectedCall("g")])),
    ParseCase(#"[{"type": "function", "function": {"name": "f", "arguments": "{}"}}]"#, .calls([ExpectedCall("f")])),
    ParseCase(#"[f(a=1), {"name": "g", "arguments": {}}]"#, .calls([ExpectedCall("f", #"{"a":1}"#), ExpectedCall("g")])),
    ParseCase(#"[[{"name": "f", "arguments": {"x": 1}}]]"#, .calls([ExpectedCall("f", #"{"x":1}"#)])),
    // Malformed.
    ParseCase("", .error(offset: 0, message: "empty call block")),
    ParseCase("   \n", .error(offset: 4, message: "empty call block")),
    ParseCase(#"[f(city="NYC)]"#, .error(offset: 8, message: "unterminated string starting at byte 8")),
    ParseCase(#"[f(city='NYC")]"#, .error(offset: 8, message: "unterminated string")),
    ParseCase(#"[f(city="NYC"]"#, .error(offset: 13, message: "expected ',' or ')' after the argument 'city'")),
    ParseCase(#"[f(city="NYC")"#, .error(offset: 14, message: "missing ']'")),
    ParseCase("[f(a=1", .error(offset: 6, message: "unterminated call to 'f'")),
    ParseCase(#"[f("NYC")]"#, .error(offset: 3, message: "positional argument in the call to 'f'")),
    ParseCase("[f(city)]", .error(offset: 3, message: "positional argument")),
    ParseCase("[f(a=1, 2)]", .error(offset: 8, message: "positional argument")),
    ParseCase("[f(a=1, a=2)]", .error(offset: 8, message: "argument 'a' given more than once")),
    ParseCase("[f(a=)]", .error(offset: 5, message: "where a value was expected")),
    ParseCase("[f(a=foo)]", .error(offset: 5, message: "unexpected name 'foo'")),
    ParseCase("[f(a=1 b=2)]", .error(offset: 7, message: "expected ',' or ')'")),
    ParseCase("[f]", .error(offset: 2, message: "expected '(' after the function name 'f'")),
    ParseCase("[f", .error(offset: 2, message: "expected '(' after the function name 'f'")),
    ParseCase("[1, 2]", .error(offset: 1, message: "expected a function call")),
    ParseCase("[,]", .error(offset: 1, message: "expected a function call")),
    ParseCase("[f(a=1)] trailing", .error(offset: 9, message: "after the call list")),
    ParseCase("[f(a=1)][g()]", .error(offset: 8, message: "after the call list")),
    ParseCase("[f(a=[1, 2)]", .error(offset: 10, message: "expected ',' or ']' in list")),
    ParseCase("[f(a=[1, 2", .error(offset: 5, message: "unterminated list starting at byte 5")),
    ParseCase("[f(d={1: 2})]", .error(offset: 6, message: "dict keys must be quoted strings")),
    ParseCase("[f(d={'a' 2})]", .error(offset: 10, message: "expected ':'")),
    ParseCase("[f(a=0x1F)]", .error(offset: 5, message: "invalid number")),
    ParseCase("[f(a=1.2.3)]", .error(offset: 5, message: "invalid number")),
    ParseCase("[f(a=1e)]", .error(offset: 5, message: "exponent")),
    ParseCase("[f(a=-)]", .error(offset: 5, message: "invalid number")),
    ParseCase(#"[f(a="\u12")]"#, .error(offset: 6, message: "hex digit")),
    // A lone surrogate, which a Swift String cannot hold, becomes U+FFFD (as in JSON documents).
    ParseCase(#"[f(a="\ud800")]"#, .calls([ExpectedCall("f", "{\"a\":\"\u{FFFD}\"}")])),
    ParseCase(#"[f(a="\U00110000")]"#, .error(offset: 6, message: "Unicode scalar")),
    ParseCase("[f(a=\(deepList))]", .error(offset: 69, message: "nested deeper than 64 levels")),
    ParseCase("[a.(x=1)]", .error(offset: 3, message: "expected a name after '.'")),
    ParseCase("[f(a=1)", .error(offset: 7, message: "missing ']'")),
    ParseCase("[f(a=1]", .error(offset: 6, message: "expected ',' or ')'")),
    ParseCase("(f(a=1))", .error(offset: 0, message: "expected a function call")),
    ParseCase(#"[{"arguments": {}}]"#, .error(offset: 1, message: "no \"name\"")),
    ParseCase(#"[{"name": 3}]"#, .error(offset: 1, message: "must be a non-empty string")),
    ParseCase(#"[{"name": "f", "arguments": 5}]"#, .error(offset: 1, message: "must be an object or a JSON string")),
    ParseCase(#"{"name": "f", "arguments": "{oops"}"#, .error(offset: 0, message: "is not a JSON object")),
    ParseCase(#"{"name": "f", "arguments": "[1]"}"#, .error(offset: 0, message: "must hold a JSON object")),
    ParseCase(#"[[1]]"#, .error(offset: 1, message: "must hold call objects"))
]

@Suite struct FunctionCallingLFMParserTests {
    @Test func tableHasEnoughRows() {
        #expect(lfmCases.count >= 40)
        #expect(lfmCases.filter { if case .error = $0.expected { return true } else { return false } }.count >= 20)
    }

    @Test(arguments: lfmCases)
    func parsesTableRow(_ row: ParseCase) {
        let failure = checkParse(LFMFunctionCallParser().parse, row)
        #expect(failure == nil, "\(row.input.debugDescription): \(failure ?? "")")
    }

    @Test func parseCallsThrowsTheTypedError() {
        #expect(
            throws: LeapFunctionCallParseError(message: "empty call block (expected a list of calls like [name(arg=value)])", offset: 0)
        ) {
            try LFMFunctionCallParser().parseCalls("")
        }
    }

    /// `None` is kept as `NSNull()`, as `JSONSerialization` and the ObjC bridge give JSON null.
    @Test func noneIsKeptAsNSNull() throws {
        let call = try #require(try LFMFunctionCallParser().parse("[f(x=None, l=[None, 1])]").first)
        #expect(call.arguments.count == 2)
        #expect(call.arguments["x"] is NSNull)
        let list = try #require(call.arguments["l"] as? [Any])
        #expect(list.count == 2)
        #expect(list[0] is NSNull)
        #expect(list[1] as? Int == 1)
    }

    @Test func valuesHaveTheDocumentedSwiftTypes() throws {
        let call = try #require(try LFMFunctionCallParser().parse(#"[f(s="a", i=2, d=2.0, b=True, l=[1], o={"k": "v"})]"#).first)
        #expect(call.arguments["s"] as? String == "a")
        #expect(call.arguments["i"] as? Int == 2)
        #expect(call.arguments["d"] as? Double == 2.0)
        #expect(call.arguments["b"] as? Bool == true)
        #expect((call.arguments["l"] as? [Any])?.count == 1)
        let object = try #require(call.arguments["o"] as? [String: Any])
        #expect(object["k"] as? String == "v")
    }

    @Test func nanAndInfinity() throws {
        let call = try #require(try LFMFunctionCallParser().parse("[f(a=NaN, b=-Infinity, c=inf)]").first)
        #expect((call.arguments["a"] as? Double)?.isNaN == true)
        #expect(call.arguments["b"] as? Double == -.infinity)
        #expect(call.arguments["c"] as? Double == .infinity)
    }

    @Test func nestingLimitIsConfigurable() {
        let parser = LFMFunctionCallParser(maxNestingDepth: 3)
        #expect((try? parser.parse("[f(a=[[1]])]")) != nil)
        #expect(throws: LeapFunctionCallParseError.self) { try parser.parse("[f(a=[[[1]]])]") }
    }

    @Test func veryDeepNestingIsAnErrorNotACrash() {
        let deep = "[f(a=" + String(repeating: "[", count: 100_000) + ")]"
        #expect(throws: LeapFunctionCallParseError.self) { try LFMFunctionCallParser().parse(deep) }
        let deepDict = "[f(a=" + String(repeating: "{\"k\": ", count: 100_000) + ")]"
        #expect(throws: LeapFunctionCallParseError.self) { try LFMFunctionCallParser().parse(deepDict) }
    }

    @Test func errorDescriptionNamesThePosition() {
        do {
            _ = try LFMFunctionCallParser().parse(#"[f(city="NYC)]"#)
            Issue.record("expected an error")
        } catch {
            #expect(error.description == "invalid function call at byte 8: unterminated string starting at byte 8")
        }
    }

    @Test func formatsInLFMSyntaxWithSortedArguments() {
        let call = LeapFunctionCall(name: "f", arguments: ["k": "v", "n": 1, "b": true, "x": nil, "l": [1, 2], "d": 0.5])
        #expect(
            LFMFunctionCallParser().formatCalls([call, LeapFunctionCall(name: "g", arguments: [:])])
                == #"<|tool_call_start|>[f(b=True, d=0.5, k="v", l=[1, 2], n=1, x=None), g()]<|tool_call_end|>"#)
        #expect(LFMFunctionCallParser().formatCalls([]) == "<|tool_call_start|>[]<|tool_call_end|>")
    }

    @Test func formatEscapesStrings() {
        let call = LeapFunctionCall(name: "f", arguments: ["s": "a\"b\\c\nd\u{01}é"])
        #expect(LFMFunctionCallParser().formatCalls([call]) == #"<|tool_call_start|>[f(s="a\"b\\c\nd\u0001é")]<|tool_call_end|>"#)
    }

    @Test func formatThenParseRoundTripsFixedCalls() throws {
        let parser = LFMFunctionCallParser()
        let calls = [
            LeapFunctionCall(name: "get_weather", arguments: ["city": "New \"York\"", "unit": "celsius", "days": 3]),
            LeapFunctionCall(
                name: "a.b",
                arguments: ["nested": ["x": [1, 2.5, nil, ["deep": true]] as [Any?], "e": [:] as [String: Any?]] as [String: Any?]]),
            LeapFunctionCall(name: "g", arguments: ["big": 1e300, "tiny": -1e-300, "neg": -42, "none": nil])
        ]
        try expectRoundTrip(calls, parser: parser)
    }

    @Test func formatThenParseRoundTripsRandomCalls() throws {
        var rng = SplitMix64(seed: 7)
        for _ in 0..<300 {
            let calls = (0..<Int.random(in: 0...3, using: &rng)).map { _ in randomCall(&rng) }
            try expectRoundTrip(calls, parser: LFMFunctionCallParser())
            try expectRoundTrip(calls, parser: HermesFunctionCallParser())
        }
    }
}

/// Checks that parse(format(calls)) gives the same calls.
func expectRoundTrip(
    _ calls: [LeapFunctionCall], parser: some LeapFunctionCallParserProtocol,
    sourceLocation: SourceLocation = #_sourceLocation
) throws {
    let text = parser.formatCalls(calls)
    var splitter = FunctionCallStreamSplitter(parser: parser)
    var parsed: [LeapFunctionCall] = []
    for event in splitter.feed(text) + splitter.finish() {
        switch event {
        case .calls(let c, _): parsed += c
        case .text(let t):
            let blank = t.allSatisfy { $0.isWhitespace }
            #expect(blank, "stray text \(t.debugDescription) in \(text)", sourceLocation: sourceLocation)
        case .malformed(_, let error): Issue.record("\(error) in \(text)", sourceLocation: sourceLocation)
        }
    }
    #expect(parsed.map(\.name) == calls.map(\.name), "\(text)", sourceLocation: sourceLocation)
    #expect(
        parsed.map { JSONValue.object($0.argumentsJSON) } == calls.map { JSONValue.object($0.argumentsJSON) },
        "\(text)", sourceLocation: sourceLocation)
}

private let trickyPieces = [
    "a", "Z", " ", "\"", "'", "\\", "\n", "\t", "\r", "\u{01}", "é", "中", "😀", "👩‍👩‍👧", "(", ")", "[", "]",
    "{", "}", ",", "=", ":", "<|tool_call_end|>", "</tool_call>", "\\u0041", "None", "True"
]

func randomString(_ rng: inout SplitMix64) -> String {
    (0..<Int.random(in: 0...6, using: &rng)).map { _ in trickyPieces.randomElement(using: &rng)! }.joined()
}

func randomValue(_ rng: inout SplitMix64, depth: Int) -> Any? {
    switch Int.random(in: 0..<(depth > 3 ? 6 : 8), using: &rng) {
    case 0: return nil
    case 1: return Bool.random(using: &rng)
    case 2: return Int.random(in: Int.min...Int.max, using: &rng) >> Int.random(in: 0...63, using: &rng)
    case 3:
        let d = Double(bitPattern: UInt64.random(in: 0...UInt64.max, using: &rng))
        return d.isFinite ? d : 1.25
    case 4: return Double(Int.random(in: -1000...1000, using: &rng)) / 8
    case 5: return randomString(&rng)
    case 6: return (0..<Int.random(in: 0...3, using: &rng)).map { _ in randomValue(&rng, depth: depth + 1) }
    default:
        var object: [String: Any?] = [:]
        for _ in 0..<Int.random(in: 0...3, using: &rng) {
            object.updateValue(randomValue(&rng, depth: depth + 1), forKey: randomString(&rng))
        }
        return object
    }
}

func randomCall(_ rng: inout SplitMix64) -> LeapFunctionCall {
    let names = ["f", "get_weather", "a.b.c", "tool_2", "x"]
    var arguments: [String: Any?] = [:]
    let keys = ["city", "unit", "n", "_x", "list", "obj", "value2"]
    for _ in 0..<Int.random(in: 0...4, using: &rng) {
        arguments.updateValue(randomValue(&rng, depth: 1), forKey: keys.randomElement(using: &rng)!)
    }
    return LeapFunctionCall(name: names.randomElement(using: &rng)!, arguments: arguments)
}
