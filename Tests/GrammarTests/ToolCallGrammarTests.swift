import Foundation
import LeapJSON
import Sampling
import Testing

@testable import Grammar

// MARK: Fixtures

/// Registered functions covering the argument kinds: a string with an enum, integers with
/// bounds, numbers (and null), booleans, arrays of strings, nested objects, optional
/// parameters, no parameters, an enum of true/null/string, a `$ref` into `$defs`.
let toolFunctions: [(name: String, parameters: JSONValue)] = [
    (
        "get_weather",
        toolSchema(
            #"{"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}"#
        )
    ),
    (
        "set_alarm",
        toolSchema(
            #"{"type": "object", "properties": {"hour": {"type": "integer", "minimum": 0, "maximum": 23}, "minute": {"type": "integer", "minimum": 0, "maximum": 59}, "loud": {"type": "boolean"}}, "required": ["hour"]}"#
        )
    ),
    (
        "convert",
        toolSchema(
            #"{"properties": {"amount": {"type": "number"}, "ratio": {"type": ["number", "null"]}}, "required": ["amount", "ratio"]}"#)
    ),
    (
        "tag_items",
        toolSchema(
            #"{"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "minItems": 1, "maxItems": 3}}, "required": ["tags"]}"#
        )
    ),
    (
        "create_event",
        toolSchema(
            #"{"type": "object", "properties": {"event": {"type": "object", "properties": {"title": {"type": "string"}, "attendees": {"type": "array", "items": {"type": "string"}}, "private": {"type": "boolean"}}, "required": ["title"]}}, "required": ["event"]}"#
        )
    ),
    ("get_time", toolSchema(#"{"type": "object", "properties": {}}"#)),
    ("toggle", toolSchema(#"{"type": "object", "properties": {"mode": {"enum": [true, null, "auto"]}}, "required": ["mode"]}"#)),
    (
        "units.pick",
        toolSchema(
            ##"{"type": "object", "$defs": {"unit": {"enum": ["c", "f"]}}, "properties": {"u": {"$ref": "#/$defs/unit"}}, "required": ["u"]}"##
        )
    )
]

func toolSchema(_ text: String) -> JSONValue { try! JSONValue.parse(text) }

func toolGrammar(
    _ syntax: ToolCallSyntax, start: Bool = true, end: Bool = true,
    _ functions: [(name: String, parameters: JSONValue)] = toolFunctions
) throws -> Grammar {
    try ToolCallGrammar.build(functions: functions, syntax: syntax, includeStartMarker: start, includeEndMarker: end)
}

/// Feeds the text byte by byte; true when every byte is accepted and the text is complete.
func acceptsByteByByte(_ g: Grammar, _ text: String) -> Bool {
    let m = GrammarMatcher(grammar: g)
    for b in text.utf8 where !m.accept(byte: b) { return false }
    return m.isComplete
}

// MARK: A test-only reader of Python call lists and a small schema validator

struct CallReadError: Error, CustomStringConvertible { let description: String }

/// Reads `[name(key=value, ...), ...]` with Python literal values (JSON strings and numbers,
/// `True`/`False`/`None`, lists, dicts with string keys), independently of the grammar.
struct PythonCallReader {
    let bytes: [UInt8]
    var pos = 0

    init(_ text: String) { bytes = Array(text.utf8) }

    mutating func readCalls() throws -> [(name: String, arguments: JSONObject)] {
        try expect("[")
        var calls: [(String, JSONObject)] = []
        while true {
            let name = identifier(dotted: true)
            guard !name.isEmpty else { throw fail("function name expected") }
            try expect("(")
            var args = JSONObject()
            if peek() != UInt8(ascii: ")") {
                while true {
                    let key = identifier(dotted: false)
                    guard !key.isEmpty else { throw fail("argument name expected") }
                    try expect("=")
                    guard args[key] == nil else { throw fail("argument \(key) repeated") }
                    args[key] = try value()
                    if lookingAt(", ") { pos += 2 } else { break }
                }
            }
            try expect(")")
            calls.append((name, args))
            if lookingAt(", ") {
                pos += 2
                continue
            }
            try expect("]")
            break
        }
        guard pos == bytes.count else { throw fail("text after the call list") }
        return calls
    }

    func peek() -> UInt8? { pos < bytes.count ? bytes[pos] : nil }
    func lookingAt(_ s: String) -> Bool { bytes[pos...].starts(with: s.utf8) }
    func fail(_ m: String) -> CallReadError {
        CallReadError(description: "\(m) at byte \(pos) of \(String(decoding: bytes, as: UTF8.self))")
    }
    mutating func expect(_ s: String) throws {
        guard lookingAt(s) else { throw fail("'\(s)' expected") }
        pos += s.utf8.count
    }
    mutating func skipSpace() { while let c = peek(), c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 { pos += 1 } }

    mutating func identifier(dotted: Bool) -> String {
        let start = pos
        while let c = peek(),
            (c >= 0x61 && c <= 0x7A) || (c >= 0x41 && c <= 0x5A) || (c >= 0x30 && c <= 0x39) || c == 0x5F || (dotted && c == 0x2E)
        { pos += 1 }
        return String(decoding: bytes[start..<pos], as: UTF8.self)
    }

    mutating func value() throws -> JSONValue {
        guard let c = peek() else { throw fail("value expected") }
        for (word, v) in [("True", JSONValue.bool(true)), ("False", .bool(false)), ("None", .null)] where lookingAt(word) {
            pos += word.utf8.count
            return v
        }
        switch c {
        case UInt8(ascii: "\""):
            let start = pos
            pos += 1
            while let d = peek(), d != UInt8(ascii: "\"") { pos += d == UInt8(ascii: "\\") ? 2 : 1 }
            try expect("\"")
            return try JSONValue.parse(bytes: Array(bytes[start..<pos]))
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            let start = pos
            while let d = peek(), "-+.eE0123456789".utf8.contains(d) { pos += 1 }
            return try JSONValue.parse(bytes: Array(bytes[start..<pos]))
        case UInt8(ascii: "["):
            pos += 1
            skipSpace()
            var items: [JSONValue] = []
            if peek() == UInt8(ascii: "]") {
                pos += 1
                return .array(items)
            }
            while true {
                items.append(try value())
                skipSpace()
                if peek() == UInt8(ascii: ",") {
                    pos += 1
                    skipSpace()
                    continue
                }
                try expect("]")
                return .array(items)
            }
        case UInt8(ascii: "{"):
            pos += 1
            skipSpace()
            var object = JSONObject()
            if peek() == UInt8(ascii: "}") {
                pos += 1
                return .object(object)
            }
            while true {
                guard case .string(let key) = try value() else { throw fail("dict keys here are strings") }
                skipSpace()
                try expect(":")
                skipSpace()
                guard object[key] == nil else { throw fail("key \(key) repeated") }
                object[key] = try value()
                skipSpace()
                if peek() == UInt8(ascii: ",") {
                    pos += 1
                    skipSpace()
                    continue
                }
                try expect("}")
                return .object(object)
            }
        default: throw fail("unexpected byte \(c)")
        }
    }
}

/// Validates a value against the schema subset used by `toolFunctions` (objects closed, as
/// with `ToolCallGrammar.defaultOptions`). Returns the first violation.
func violation(_ value: JSONValue, _ schema: JSONValue, root: JSONValue) -> String? {
    guard case .object(let s) = schema else { return schema == .bool(false) ? "false schema" : nil }
    if case .string(let ref)? = s["$ref"] {
        var target = root
        for part in ref.dropFirst(2).split(separator: "/") { target = target[String(part)] ?? .bool(false) }
        return violation(value, target, root: root)
    }
    if let e = s["enum"]?.arrayValue, !e.contains(value) { return "\(value.serialized(.compact)) not in enum" }
    let types = s["type"].map { $0.stringValue.map { [$0] } ?? $0.arrayValue!.compactMap(\.stringValue) }
    let kind: String
    switch value {
    case .null: kind = "null"
    case .bool: kind = "boolean"
    case .integer: kind = "integer"
    case .double(let d): kind = d.rounded() == d ? "integer" : "number"
    case .string: kind = "string"
    case .array: kind = "array"
    case .object: kind = "object"
    }
    if let types, !types.contains(kind), !(kind == "integer" && types.contains("number")) { return "\(kind) is not \(types)" }
    if let n = value.doubleValue, value.boolValue == nil {
        if let lo = s["minimum"]?.doubleValue, n < lo { return "\(n) < \(lo)" }
        if let hi = s["maximum"]?.doubleValue, n > hi { return "\(n) > \(hi)" }
    }
    if case .string(let str) = value, let m = s["maxLength"]?.intValue, str.unicodeScalars.count > m { return "string too long" }
    if case .array(let a) = value {
        if let m = s["minItems"]?.intValue, a.count < m { return "too few items" }
        if let m = s["maxItems"]?.intValue, a.count > m { return "too many items" }
        if let items = s["items"] { for x in a { if let v = violation(x, items, root: root) { return v } } }
    }
    if case .object(let o) = value {
        let props = s["properties"]?.objectValue ?? JSONObject()
        for r in (s["required"]?.arrayValue ?? []).compactMap(\.stringValue) where o[r] == nil { return "missing required \(r)" }
        for (k, v) in o {
            guard let ps = props[k] else { return "unknown property \(k)" }
            if let bad = violation(v, ps, root: root) { return "\(k): \(bad)" }
        }
    }
    return nil
}

/// Checks generated call text against the registered functions: the syntax parses, the names
/// are registered and the arguments are valid. Returns the calls' names.
func checkGeneratedCalls(_ text: String, syntax: ToolCallSyntax, functions: [(name: String, parameters: JSONValue)]) throws -> [String] {
    guard text.hasPrefix(syntax.startMarker), text.hasSuffix(syntax.endMarker) else {
        throw CallReadError(description: "markers missing: \(text)")
    }
    let inner = String(text.dropFirst(syntax.startMarker.count).dropLast(syntax.endMarker.count))
    var calls: [(name: String, arguments: JSONObject)] = []
    switch syntax {
    case .pythonic:
        var reader = PythonCallReader(inner)
        calls = try reader.readCalls()
    case .json:
        let v = try JSONValue.parse(inner)  // the parser allows the surrounding whitespace
        guard case .object(let o) = v, o.keys == ["name", "arguments"], case .string(let name)? = o["name"],
            case .object(let args)? = o["arguments"]
        else { throw CallReadError(description: "not a call object: \(inner)") }
        calls = [(name, args)]
    }
    for call in calls {
        guard let f = functions.first(where: { $0.name == call.name }) else {
            throw CallReadError(description: "unknown function \(call.name)")
        }
        if let bad = violation(.object(call.arguments), f.parameters, root: f.parameters) {
            throw CallReadError(description: "\(call.name): \(bad) in \(text)")
        }
        // Arguments appear in schema order.
        let order = f.parameters["properties"]?.objectValue?.keys ?? []
        let positions = call.arguments.keys.map { order.firstIndex(of: $0) ?? -1 }
        if positions != positions.sorted() { throw CallReadError(description: "arguments out of schema order in \(text)") }
    }
    return calls.map(\.name)
}

/// A byte that starts a scalar (UTF-8 lead or continuation byte, `\`, a `\u` hex digit) is
/// accepted only if some scalar it can start is allowed, so constrained strings have no
/// byte-level dead ends (found by the random walks on enum strings).
@Suite struct PartialScalarTests {
    func bytesOK(_ g: Grammar, _ bytes: [UInt8]) -> Bool { GrammarMatcher(grammar: g).accept(bytes: bytes) }

    @Test func partialScalarsNeedACompletion() throws {
        let cf = try compile(#"{"enum": ["c", "f"]}"#)
        #expect(!bytesOK(cf, [0x22, 0xF1]) && !bytesOK(cf, [0x22, 0xC3]))  // no non-ASCII scalar allowed
        #expect(bytesOK(cf, Array(#""\u00"#.utf8)) && valid(cf, #""\u0063""#))
        #expect(!bytesOK(cf, Array(#""\u000"#.utf8)) && !bytesOK(cf, Array(#""\u01"#.utf8)))
        #expect(!bytesOK(cf, Array(#""c\"#.utf8)))  // nothing may follow "c"
        let e = try compile(#"{"enum": ["é", "😀"]}"#)
        #expect(bytesOK(e, [0x22, 0xC3]) && !bytesOK(e, [0x22, 0xC4]) && !bytesOK(e, [0x22, 0xC3, 0xA8]))
        #expect(bytesOK(e, [0x22, 0xF0, 0x9F, 0x98]) && !bytesOK(e, [0x22, 0xF0, 0x9F, 0x99]) && !bytesOK(e, [0x22, 0xF1]))
        #expect(valid(e, #""\uD83D\uDE00""#) && bytesOK(e, Array(#""\uD83D\uDE"#.utf8)))
        #expect(!bytesOK(e, Array(#""\uD83C"#.utf8)) && !bytesOK(e, Array(#""\uD83D\uDF"#.utf8)))
        #expect(bytesOK(e, Array(#""\u00E"#.utf8)) && !bytesOK(e, Array(#""\u00F"#.utf8)))
        // Length limits count the scalar being started.
        let short = try compile(#"{"type": "string", "maxLength": 1, "pattern": "^[a-zé]*$"}"#)
        #expect(bytesOK(short, [0x22, 0xC3]) && !bytesOK(short, [0x22, 0x61, 0xC3]) && !bytesOK(short, [0x22, 0xC4]))
        // Unconstrained strings are unchanged.
        let any = try compile(#"{"type": "string"}"#)
        #expect(bytesOK(any, [0x22, 0xF1, 0x80, 0x80]) && bytesOK(any, Array(#""\u000"#.utf8)))
    }
}

// MARK: Tests

@Suite struct ToolCallGrammarTests {
    @Test func pythonicAcceptsValidCalls() throws {
        let g = try toolGrammar(.lfm2)
        let valid = [
            #"[get_weather(city="NYC")]"#,
            #"[get_weather(city="NYC", unit="celsius"), get_time()]"#,
            #"[get_weather(city="Z\u00fcrich \"old town\"", unit="fahrenheit")]"#,
            #"[get_weather(city="Zürich")]"#,
            #"[set_alarm(hour=7, loud=True)]"#,
            #"[set_alarm(hour=23, minute=0, loud=False)]"#,
            #"[set_alarm(hour=0, minute=59)]"#,
            #"[convert(amount=-1.5e3, ratio=None)]"#,
            #"[convert(amount=2, ratio=0.25)]"#,
            #"[tag_items(tags=["a", "b\"c"])]"#,
            #"[tag_items(tags=[ "x" ,"y"])]"#,
            #"[create_event(event={"title": "Lunch", "attendees": ["Ann", "Bob"], "private": False})]"#,
            #"[create_event(event={"title": "Standup"})]"#,
            #"[toggle(mode=True)]"#, #"[toggle(mode=None)]"#, #"[toggle(mode="auto")]"#,
            #"[units.pick(u="f")]"#,
            #"[get_time(), get_time(), set_alarm(hour=5)]"#
        ]
        for call in valid {
            #expect(acceptsByteByByte(g, "<|tool_call_start|>" + call + "<|tool_call_end|>"), "\(call)")
            // Each valid text also passes the independent checker.
            #expect(throws: Never.self) {
                try checkGeneratedCalls("<|tool_call_start|>" + call + "<|tool_call_end|>", syntax: .lfm2, functions: toolFunctions)
            }
        }
    }

    @Test func pythonicRejectsInvalidCalls() throws {
        let g = try toolGrammar(.lfm2)
        let invalid: [(String, String)] = [
            (#"[get_wether(city="NYC")]"#, "unknown function"),
            (#"[get_weather()]"#, "missing required"),
            (#"[get_weather(unit="celsius")]"#, "missing required"),
            (#"[set_alarm(hour="7")]"#, "string for integer"),
            (#"[set_alarm(hour=7.5)]"#, "fraction for integer"),
            (#"[set_alarm(hour=24)]"#, "above maximum"),
            (#"[set_alarm(hour=-1)]"#, "below minimum"),
            (#"[get_weather(city="NYC", unit="kelvin")]"#, "enum violation"),
            (#"[get_weather(city="NYC", country="US")]"#, "unknown argument"),
            (#"[get_weather(unit="celsius", city="NYC")]"#, "out of schema order"),
            (#"[get_weather(city="NYC", city="LA")]"#, "repeated argument"),
            (#"[set_alarm(hour=7, loud=true)]"#, "JSON true in Python"),
            (#"[toggle(mode=true)]"#, "JSON true in an enum"),
            (#"[toggle(mode=null)]"#, "JSON null in an enum"),
            (#"[toggle(mode=False)]"#, "False not in the enum"),
            (#"[convert(amount=1, ratio=null)]"#, "JSON null"),
            (#"[convert(amount=1)]"#, "missing required ratio"),
            (#"[tag_items(tags=[])]"#, "minItems"),
            (#"[tag_items(tags=["a", "b", "c", "d"])]"#, "maxItems"),
            (#"[tag_items(tags=["much too long"])]"#, "maxLength"),
            (#"[create_event(event={"attendees": []})]"#, "nested required"),
            (#"[create_event(event={"title": "x", "room": 4})]"#, "nested unknown key"),
            (#"[create_event(event={"title": "x", "private": false})]"#, "nested JSON false"),
            (#"[get_weather(city='NYC')]"#, "single quotes are not produced"),
            (#"[get_weather(city = "NYC")]"#, "spaces around ="),
            (#"[get_time(),get_time()]"#, "separator is \", \""),
            (#"[get_time(), ]"#, "trailing separator"),
            (#"[]"#, "empty list"),
            (#"get_time()"#, "no brackets"),
            (#"[units.pick(u="k")]"#, "$ref enum")
        ]
        for (call, why) in invalid {
            #expect(!acceptsByteByByte(g, "<|tool_call_start|>" + call + "<|tool_call_end|>"), "\(why): \(call)")
        }
        // Missing end marker: every byte accepted, but not complete.
        let m = GrammarMatcher(grammar: g)
        #expect(m.accept(#"<|tool_call_start|>[get_weather(city="NYC")]"#))
        #expect(!m.canAcceptEnd && !m.isComplete)
        #expect(m.accept("<|tool_call_end|>") && m.isComplete)
        // Missing start marker.
        #expect(!acceptsByteByByte(g, "[get_time()]<|tool_call_end|>"))
    }

    @Test func markersCanBeLeftOut() throws {
        let afterStart = try toolGrammar(.lfm2, start: false)
        #expect(acceptsByteByByte(afterStart, "[get_time()]<|tool_call_end|>"))
        #expect(!acceptsByteByByte(afterStart, "<|tool_call_start|>[get_time()]<|tool_call_end|>"))
        let untilEnd = try toolGrammar(.lfm2, end: false)
        #expect(acceptsByteByByte(untilEnd, "<|tool_call_start|>[get_time()]"))
        let custom = try toolGrammar(.pythonic(start: "<call>", end: "</call>"))
        #expect(acceptsByteByByte(custom, "<call>[get_time()]</call>"))
        #expect(!acceptsByteByByte(custom, "<|tool_call_start|>[get_time()]<|tool_call_end|>"))
        let hermes = try toolGrammar(.hermes, start: false)
        #expect(acceptsByteByByte(hermes, "\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"))
        // The forced-bytes view: after the start marker the list opens.
        let m = GrammarMatcher(grammar: try toolGrammar(.lfm2))
        #expect(m.forcedBytes() == Array("<|tool_call_start|>[".utf8))
    }

    @Test func hermesAcceptsValidAndRejectsInvalidCalls() throws {
        let g = try toolGrammar(.hermes)
        let valid = [
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"NYC\"}}\n</tool_call>",
            #"<tool_call>{"name":"set_alarm","arguments":{"hour":7,"loud":true}}</tool_call>"#,
            #"<tool_call>{"name": "convert", "arguments": {"amount": 3.5, "ratio": null}}</tool_call>"#,
            #"<tool_call>{"name": "toggle", "arguments": {"mode": true}}</tool_call>"#,
            #"<tool_call>{"name": "get_time", "arguments": {}}</tool_call>"#,
            #"<tool_call> {"name": "create_event", "arguments": {"event": {"title": "x", "attendees": ["a"]}}} </tool_call>"#,
            #"<tool_call>{"name": "units.pick", "arguments": {"u": "c"}}</tool_call>"#
        ]
        for call in valid {
            #expect(acceptsByteByByte(g, call), "\(call)")
            #expect(throws: Never.self) { try checkGeneratedCalls(call, syntax: .hermes, functions: toolFunctions) }
        }
        let invalid: [(String, String)] = [
            (#"<tool_call>{"name": "get_wether", "arguments": {"city": "NYC"}}</tool_call>"#, "unknown function"),
            (#"<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>"#, "missing required"),
            (#"<tool_call>{"name": "get_weather", "arguments": {"city": "NYC", "unit": "kelvin"}}</tool_call>"#, "enum"),
            (#"<tool_call>{"name": "get_weather", "arguments": {"city": "NYC", "country": "US"}}</tool_call>"#, "unknown argument"),
            (#"<tool_call>{"name": "set_alarm", "arguments": {"hour": "7"}}</tool_call>"#, "wrong type"),
            (#"<tool_call>{"name": "set_alarm", "arguments": {"hour": 7, "loud": True}}</tool_call>"#, "Python True in JSON"),
            (#"<tool_call>{"name": "toggle", "arguments": {"mode": None}}</tool_call>"#, "Python None in JSON"),
            (#"<tool_call>{"name": "get_time", "arguments": "{}"}</tool_call>"#, "arguments as a string"),
            (#"<tool_call>{"arguments": {}, "name": "get_time"}</tool_call>"#, "name comes first"),
            (#"<tool_call>{"name": "get_time", "arguments": {}}"#, "missing end marker"),
            ("<tool_call>\n\n\n\n\n{\"name\": \"get_time\", \"arguments\": {}}</tool_call>", "whitespace run above 4")
        ]
        for (call, why) in invalid { #expect(!acceptsByteByByte(g, call), "\(why): \(call)") }
    }

    @Test func errorsNameTheFunction() throws {
        func error(_ functions: [(name: String, parameters: JSONValue)], _ syntax: ToolCallSyntax = .lfm2) -> SchemaError? {
            do {
                _ = try ToolCallGrammar.build(functions: functions, syntax: syntax)
                return nil
            } catch { return error }
        }
        let ok: (name: String, parameters: JSONValue) = ("get_time", toolSchema("{}"))
        let host = error([ok, ("lookup", toolSchema(#"{"type": "object", "properties": {"h": {"type": "string", "format": "iri"}}}"#))]
        )
        #expect(host?.kind == .unsupported(keyword: "format"))
        #expect(host?.message.contains("function 'lookup'") == true)
        let notObject = error([("count", toolSchema(#"{"type": "string"}"#))], .hermes)
        #expect(notObject?.kind == .invalid && notObject?.message.contains("function 'count'") == true)
        let badRef = error([("f", toolSchema(##"{"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}"##))])
        #expect(badRef?.kind == .invalid && badRef?.message.contains("function 'f'") == true)
        let impossible = error([
            ok,
            (
                "never",
                toolSchema(#"{"type": "object", "properties": {"a": {"type": "integer", "minimum": 5, "maximum": 1}}, "required": ["a"]}"#)
            )
        ])
        #expect(impossible?.kind == .unsatisfiable && impossible?.message.contains("function 'never'") == true)
        let impossibleJSON = error(
            [ok, ("never", toolSchema(#"{"type": "object", "properties": {"a": false}, "required": ["a"]}"#))], .hermes)
        #expect(impossibleJSON?.kind == .unsatisfiable && impossibleJSON?.message.contains("function 'never'") == true)
        let badKey = error([("f", toolSchema(#"{"type": "object", "properties": {"a-b": {"type": "string"}}}"#))])
        #expect(badKey?.kind == .invalid && badKey?.message.contains("'a-b'") == true)
        // The same key is fine in JSON calls.
        #expect(error([("f", toolSchema(#"{"type": "object", "properties": {"a-b": {"type": "string"}}}"#))], .hermes) == nil)
        let anyOf = error([("f", toolSchema(#"{"type": "object", "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}"#))])
        #expect(anyOf?.kind == .unsupported(keyword: "anyOf"))
        #expect(
            error(
                [
                    (
                        "f",
                        toolSchema(
                            #"{"type": "object", "properties": {"a": {}, "b": {}}, "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}"#)
                    )
                ], .hermes) == nil)
        #expect(error([("bad name", toolSchema("{}"))])?.kind == .invalid)
        #expect(error([ok, ok])?.message.contains("two functions") == true)
        #expect(error([])?.kind == .invalid)
        #expect(error([("f", .string("object"))])?.kind == .invalid)
    }

    /// `LiteralStyle.python` spells null/true/false the Python way everywhere, including inside
    /// enum and const values and where the enum is filtered by sibling keywords.
    @Test func pythonLiteralStyleInTheSchemaCompiler() throws {
        let python: (inout JSONSchemaCompiler.Options) -> Void = { $0.literalStyle = .python }
        let e = try compile(#"{"enum": [true, false, null, 1, "x"]}"#, python)
        for t in ["True", "False", "None", "1", "\"x\""] { #expect(valid(e, t), "\(t)") }
        for t in ["true", "false", "null"] { #expect(!valid(e, t), "\(t)") }
        let c = try compile(#"{"const": [true, {"a": null}]}"#, python)
        #expect(valid(c, #"[True, {"a": None}]"#))
        #expect(!valid(c, #"[true, {"a": null}]"#))
        let filtered = try compile(#"{"enum": [true, null, 3, 1], "type": ["boolean", "integer"], "minimum": 2}"#, python)
        #expect(valid(filtered, "True") && valid(filtered, "3"))
        #expect(!valid(filtered, "None") && !valid(filtered, "1") && !valid(filtered, "true"))
        let any = try compile("{}", python)
        #expect(valid(any, #"{"k": [None, True, 1.5, "s"]}"#) && !valid(any, "null"))
        // The default stays JSON.
        let json = try compile(#"{"type": ["boolean", "null"]}"#)
        #expect(valid(json, "true") && valid(json, "null") && !valid(json, "True"))
    }

    /// Masks over a small vocabulary allow exactly the valid continuations (checked against
    /// the expected token sets and against brute force).
    @Test func tokenMasksAllowOnlyValidContinuations() throws {
        let words = [
            "<|tool_call_start|>", "<|tool_call_end|>", "[", "]", "(", ")", ", ", ",", " ", "=", "\"",
            "get_weather", "get_", "weather", "get_time", "set_alarm", "time()", "city=", "city", "unit=\"", "celsius",
            "\"celsius\"", "fahrenheit", "kelvin", "\"NYC\"", "NYC", "hour=", "minute=", "loud=", "True", "true", "False",
            "None", "null", "7", "2", "3", "0", "24", ")]", "\")", "\"])", "<", "<eos>"
        ]
        let vocab = TokenVocabulary(tokens: words.map { Array($0.utf8) }, specialTokens: [words.count - 1])
        let computer = TokenMaskComputer(vocabulary: vocab)
        let m = GrammarMatcher(grammar: try toolGrammar(.lfm2))
        func allowed() -> Set<String> { Set(computer.mask(for: m).allowed.map { words[$0] }) }
        #expect(allowed() == ["<|tool_call_start|>", "<"])
        #expect(m.accept("<|tool_call_start|>["))
        #expect(allowed() == ["get_weather", "get_", "get_time", "set_alarm"])
        #expect(m.accept("get_weather("))
        #expect(allowed() == ["city=", "city"])  // city is required: unit cannot come first
        #expect(m.accept("city="))
        // Every token opening a string: `")` and `"])` too, as string content.
        #expect(allowed() == ["\"", "\"celsius\"", "\"NYC\"", "\")", "\"])"])
        #expect(m.accept("\"NYC\""))
        #expect(allowed() == [")", ")]", ", ", ","])
        #expect(m.accept(", unit=\""))
        #expect(allowed() == ["celsius", "fahrenheit"])
        #expect(m.accept("celsius\")"))
        #expect(allowed() == ["]", ", ", ","])
        #expect(m.accept(", set_alarm(hour="))
        #expect(allowed() == ["7", "2", "3", "0"])  // 24 is above the maximum
        #expect(m.accept("2"))
        #expect(allowed() == [")", ")]", ", ", ",", "3", "0", "2"])  // 23, 20, 22; not 27 or 224
        #expect(m.accept(", loud="))
        #expect(allowed() == ["True", "False"])
        #expect(m.accept("True)]"))
        #expect(allowed() == ["<|tool_call_end|>", "<"])
        #expect(m.accept("<|tool_call_end|>"))
        #expect(allowed() == ["<eos>"])  // only the special token, now that the grammar is complete
        // And the masks agree with brute force along that path.
        m.reset()
        let text = Array(
            #"<|tool_call_start|>[get_weather(city="NYC", unit="celsius"), set_alarm(hour=23, loud=True)]<|tool_call_end|>"#.utf8)
        for (i, b) in text.enumerated() {
            #expect(computer.mask(for: m).allowed == bruteForceMask(m, vocab), "after \(i) bytes")
            #expect(m.accept(byte: b))
        }
        #expect(computer.mask(for: m).allowed == bruteForceMask(m, vocab))
    }

    /// Random walks over bytes: from the start, pick a random allowed byte (biased toward
    /// closing bytes so that strings and lists end) until the grammar is complete; every
    /// result must parse in the syntax and validate against the registered functions.
    @Test(arguments: [ToolCallSyntax.lfm2, .hermes])
    func randomByteWalksProduceValidCalls(syntax: ToolCallSyntax) throws {
        let g = try toolGrammar(syntax)
        var rng = SplitMix64(seed: syntax == .lfm2 ? 7 : 11)
        let closers = Set("\")]}<".utf8)
        var seenNames = Set<String>()
        var optionalSkipped = false, optionalPresent = false
        for walk in 0..<60 {
            let m = GrammarMatcher(grammar: g)
            var out: [UInt8] = []
            while !m.isComplete && out.count < 4_000 {
                let choices = (0...255).map(UInt8.init).filter { m.wouldAccept([$0]) }
                guard !choices.isEmpty else {
                    Issue.record("dead end after \(String(decoding: out, as: UTF8.self))")
                    break
                }
                let preferred = choices.filter { closers.contains($0) }
                let b =
                    !preferred.isEmpty && Double.random(in: 0..<1, using: &rng) < 0.3
                    ? preferred.randomElement(using: &rng)! : choices.randomElement(using: &rng)!
                #expect(m.accept(byte: b))
                out.append(b)
            }
            #expect(m.isComplete, "walk \(walk) did not finish")
            let text = String(decoding: out, as: UTF8.self)
            #expect(text.utf8.elementsEqual(out), "walk \(walk) produced invalid UTF-8")
            do {
                let names = try checkGeneratedCalls(text, syntax: syntax, functions: toolFunctions)
                seenNames.formUnion(names)
                // Optional arguments: minute and loud (set_alarm), unit (get_weather), attendees and private (create_event).
                if ["minute", "loud", "unit", "attendees", "private"].contains(where: text.contains) { optionalPresent = true }
                if names.contains("set_alarm") && !text.contains("minute") { optionalSkipped = true }
            } catch {
                Issue.record("walk \(walk): \(error)")
            }
        }
        // The walks explore the grammar: most functions appear, optional arguments both ways.
        #expect(seenNames.count >= 5, "\(seenNames)")
        #expect(optionalSkipped && optionalPresent)
    }

    /// Random walks over tokens with the mask computer, as a sampler would do.
    @Test func randomTokenWalksProduceValidCalls() throws {
        // Single bytes (so every text is reachable) plus multi-byte pieces.
        var words = (0...127).map { String(UnicodeScalar(UInt8($0))) }
        words += [
            "<|tool_call_start|>", "<|tool_call_end|>", "get_weather(", "city=\"", "unit=\"", "celsius", "fahrenheit",
            "set_alarm(hour=", ", minute=", ", loud=", "True", "False", "None", "true", "null", "convert(",
            "amount=", "ratio=", "tag_items(tags=[", "create_event(event={", "\"title\": ", "toggle(mode=", "\")", ")]", ", "
        ]
        let vocab = TokenVocabulary(tokens: words.map { Array($0.utf8) })
        let computer = TokenMaskComputer(vocabulary: vocab)
        let g = try toolGrammar(.lfm2)
        var rng = SplitMix64(seed: 2024)
        var multiByteTokens = 0
        for walk in 0..<40 {
            let m = GrammarMatcher(grammar: g)
            var text = ""
            var steps = 0
            while !m.isComplete && steps < 3_000 {
                let allowed = computer.mask(for: m).allowed
                guard !allowed.isEmpty else {
                    Issue.record("empty mask after \(text)")
                    break
                }
                // Prefer longer tokens and closing quotes half of the time, to keep walks short.
                let long = allowed.filter { vocab.tokens[$0].count > 1 || vocab.tokens[$0] == [0x22] || vocab.tokens[$0] == [0x29] }
                let id = !long.isEmpty && Bool.random(using: &rng) ? long.randomElement(using: &rng)! : allowed.randomElement(using: &rng)!
                #expect(m.accept(bytes: vocab.tokens[id]), "token \(words[id]) after \(text)")
                if vocab.tokens[id].count > 1 { multiByteTokens += 1 }
                text += words[id]
                steps += 1
            }
            #expect(m.isComplete, "walk \(walk): \(text)")
            #expect(throws: Never.self) { _ = try checkGeneratedCalls(text, syntax: .lfm2, functions: toolFunctions) }
        }
        #expect(multiByteTokens > 100)
    }
}
