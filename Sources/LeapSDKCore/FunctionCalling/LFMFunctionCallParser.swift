import LeapJSON

/// Parses LFM2's Pythonic tool calls between `<|tool_call_start|>` and `<|tool_call_end|>`.
///
/// The block body is a Python list of calls with keyword arguments:
///
///     [get_weather(city="NYC", unit='celsius'), get_time()]
///
/// Accepted, with whitespace anywhere between tokens:
/// - function names that are identifiers, possibly dotted (`a.b.c(...)`) or with hyphens;
/// - keyword arguments only (`name=value`); a positional argument is an error, and so is
///   the same keyword given twice;
/// - values: strings in single or double quotes with Python's escapes (`\n \t \\ \' \"
///   \uXXXX \UXXXXXXXX \xXX`, JSON's `\/`, unknown escapes kept as written), integers,
///   floats (`1.5`, `.5`, `2e-3`), signs, `True`/`False`/`None` (also JSON's
///   `true`/`false`/`null`), lists, tuples (read as lists) and dicts with string keys, nested
///   up to `maxNestingDepth` levels;
/// - trailing commas (after the last call, argument, list item or dict entry), as Python
///   allows them;
/// - calls without the surrounding brackets (`f(a=1)`, `f(a=1), g()`);
/// - the JSON call shape small models drift to: `[{"name": "f", "arguments": {...}}]` or a
///   single such object, with `arguments` an object or a JSON-encoded string (also
///   `parameters` for `arguments`, and OpenAI's `{"function": {...}}` wrapper).
///
/// Argument values are `String`, `Int`, `Double`, `Bool`, `nil`, `[Any?]` and
/// `[String: Any?]`. An integer too large for `Int` becomes a `Double`.
///
/// `formatCalls` writes `<|tool_call_start|>[name(a="x", b=1, c=True, d=None, e=[1, 2])]<|tool_call_end|>`
/// with arguments (and dict keys) in sorted order, since `[String: Any?]` has no order;
/// `parseCalls` reads that text back to the same calls.
public struct LFMFunctionCallParser: LeapFunctionCallParserProtocol {
    /// How deeply argument values may nest (a list in a list counts two levels).
    public let maxNestingDepth: Int

    public init() { self.init(maxNestingDepth: 64) }

    public init(maxNestingDepth: Int) { self.maxNestingDepth = max(1, maxNestingDepth) }

    public var callStartMarker: String { "<|tool_call_start|>" }
    public var callEndMarker: String { "<|tool_call_end|>" }

    /// Parses the text between the markers. Throws `LeapFunctionCallParseError`.
    public func parseCalls(_ body: String) throws -> [LeapFunctionCall] {
        try parse(body)
    }

    /// `parseCalls` with its typed error.
    public func parse(_ body: String) throws(LeapFunctionCallParseError) -> [LeapFunctionCall] {
        var reader = CallTextReader(body, maxDepth: maxNestingDepth)
        reader.skipWhitespace()
        guard !reader.atEnd else { throw reader.fail("empty call block (expected a list of calls like [name(arg=value)])") }
        var calls: [LeapFunctionCall] = []
        if reader.current == UInt8(ascii: "[") {
            let open = reader.pos
            reader.pos += 1
            reader.skipWhitespace()
            if reader.current == UInt8(ascii: "]") {
                reader.pos += 1
            } else {
                while true {
                    reader.skipWhitespace()
                    guard !reader.atEnd else { throw reader.fail("unterminated call list: missing ']' for the '[' at byte \(open)") }
                    calls += try reader.readCallElement()
                    reader.skipWhitespace()
                    guard let c = reader.current else {
                        throw reader.fail("unterminated call list: missing ']' for the '[' at byte \(open)")
                    }
                    if c == UInt8(ascii: ",") {
                        reader.pos += 1
                        reader.skipWhitespace()
                        if reader.current == UInt8(ascii: "]") {
                            reader.pos += 1
                            break
                        }
                        continue
                    }
                    if c == UInt8(ascii: "]") {
                        reader.pos += 1
                        break
                    }
                    throw reader.fail("expected ',' or ']' between calls, found \(reader.describeCurrent())")
                }
            }
        } else {
            // Calls without the surrounding brackets: `f(a=1)` or `f(a=1), g()`.
            while true {
                calls += try reader.readCallElement()
                reader.skipWhitespace()
                guard reader.current == UInt8(ascii: ","), !reader.atEnd else { break }
                reader.pos += 1
                reader.skipWhitespace()
                if reader.atEnd { break }
            }
        }
        reader.skipWhitespace()
        guard reader.atEnd else { throw reader.fail("unexpected \(reader.describeCurrent()) after the call list") }
        return calls
    }

    /// Renders calls as LFM2 writes them, markers included; arguments in sorted key order.
    ///
    /// When a string argument contains the end marker, every `<` in strings is written as
    /// `\u003c`, so that the block cannot end early.
    public func formatCalls(_ calls: [LeapFunctionCall]) -> String {
        let text = format(calls, escapingAngleBrackets: false)
        guard text.dropFirst(callStartMarker.count).dropLast(callEndMarker.count).contains(callEndMarker) else { return text }
        return format(calls, escapingAngleBrackets: true)
    }

    private func format(_ calls: [LeapFunctionCall], escapingAngleBrackets: Bool) -> String {
        var out = callStartMarker + "["
        for (i, call) in calls.enumerated() {
            if i > 0 { out += ", " }
            out += call.name + "("
            for (j, pair) in call.argumentsJSON.pairs.enumerated() {
                if j > 0 { out += ", " }
                out += pair.key + "="
                PythonLiteral.write(pair.value, into: &out, escapingAngleBrackets: escapingAngleBrackets)
            }
            out += ")"
        }
        return out + "]" + callEndMarker
    }
}

extension CallTextReader {
    /// One element of a call list: a Pythonic call, or a JSON call object (or a list of
    /// them, when a model nests its JSON list).
    mutating func readCallElement() throws(LeapFunctionCallParseError) -> [LeapFunctionCall] {
        guard let c = current else { throw fail("unexpected end of the text where a call was expected") }
        if c == UInt8(ascii: "{") {
            let start = pos
            let object = try readDict(depth: 0)
            return [try callFromJSONObject(object, at: start)]
        }
        if Self.isIdentifierStart(c) { return [try readPythonicCall()] }
        if c == UInt8(ascii: "[") {
            let start = pos
            guard case .array(let items) = try readValue(depth: 0) else { return [] }
            var calls: [LeapFunctionCall] = []
            for item in items {
                guard case .object(let object) = item else {
                    throw fail("a nested list in the call list must hold call objects {\"name\": ..., \"arguments\": ...}", at: start)
                }
                calls.append(try callFromJSONObject(object, at: start))
            }
            return calls
        }
        throw fail("expected a function call like name(arg=value), found \(describeCurrent())")
    }

    /// `name(key=value, ...)`; `pos` is at the first letter of the name.
    mutating func readPythonicCall() throws(LeapFunctionCallParseError) -> LeapFunctionCall {
        var name = ""
        while true {
            guard let part = readHyphenatedIdentifier() else {
                throw fail("expected a name after '.' in the function name '\(name)'")
            }
            name += part
            if current == UInt8(ascii: ".") {
                name += "."
                pos += 1
                continue
            }
            break
        }
        skipWhitespace()
        guard current == UInt8(ascii: "(") else {
            if atEnd { throw fail("expected '(' after the function name '\(name)', found the end of the text") }
            throw fail("expected '(' after the function name '\(name)', found \(describeCurrent())")
        }
        let open = pos
        pos += 1
        var arguments = JSONObject()
        skipWhitespace()
        if current == UInt8(ascii: ")") {
            pos += 1
            return LeapFunctionCall(name: name, argumentsJSON: arguments)
        }
        while true {
            skipWhitespace()
            guard !atEnd else { throw fail("unterminated call to '\(name)': missing ')' for the '(' at byte \(open)") }
            let argumentStart = pos
            let keyword = readIdentifier()
            skipWhitespace()
            guard let keyword, current == UInt8(ascii: "=") else {
                pos = argumentStart
                throw fail("positional argument in the call to '\(name)'; arguments must be written as name=value")
            }
            guard arguments[keyword] == nil else {
                throw fail("argument '\(keyword)' given more than once in the call to '\(name)'", at: argumentStart)
            }
            pos += 1
            skipWhitespace()
            guard !atEnd else { throw fail("unterminated call to '\(name)': missing a value for '\(keyword)'") }
            arguments[keyword] = try readValue(depth: 1)
            skipWhitespace()
            guard let c = current else {
                throw fail("unterminated call to '\(name)': missing ')' for the '(' at byte \(open)")
            }
            if c == UInt8(ascii: ",") {
                pos += 1
                skipWhitespace()
                if current == UInt8(ascii: ")") {
                    pos += 1
                    break
                }
                continue
            }
            if c == UInt8(ascii: ")") {
                pos += 1
                break
            }
            throw fail("expected ',' or ')' after the argument '\(keyword)' in the call to '\(name)', found \(describeCurrent())")
        }
        return LeapFunctionCall(name: name, argumentsJSON: arguments)
    }

    /// An identifier in which `-` may join parts (`get-weather`).
    mutating func readHyphenatedIdentifier() -> String? {
        guard var name = readIdentifier() else { return nil }
        while current == UInt8(ascii: "-"), pos + 1 < bytes.count, Self.isIdentifierStart(bytes[pos + 1]) {
            pos += 1
            name += "-" + readIdentifier()!
        }
        return name
    }

    /// A call written as JSON: `{"name": ..., "arguments": {...} or "<JSON text>"}`; also
    /// `parameters` for `arguments`, and OpenAI's `{"type": "function", "function": {...}}`.
    func callFromJSONObject(_ object: JSONObject, at offset: Int) throws(LeapFunctionCallParseError) -> LeapFunctionCall {
        var object = object
        if object["name"] == nil, case .object(let inner)? = object["function"] { object = inner }
        guard let nameValue = object["name"] else {
            throw fail("the call object has no \"name\"", at: offset)
        }
        guard case .string(let name) = nameValue, !name.isEmpty else {
            throw fail("the call object's \"name\" must be a non-empty string", at: offset)
        }
        let argumentsValue = object["arguments"] ?? object["parameters"] ?? .null
        switch argumentsValue {
        case .null:
            return LeapFunctionCall(name: name, argumentsJSON: JSONObject())
        case .object(let arguments):
            return LeapFunctionCall(name: name, argumentsJSON: arguments)
        case .string(let text):
            let trimmed = text.trimmingWhitespace
            if trimmed.isEmpty { return LeapFunctionCall(name: name, argumentsJSON: JSONObject()) }
            var inner = CallTextReader(trimmed, maxDepth: maxDepth)
            let parsed: JSONValue
            do throws(LeapFunctionCallParseError) {
                parsed = try inner.readValue(depth: 0)
                inner.skipWhitespace()
                if !inner.atEnd { throw inner.fail("unexpected \(inner.describeCurrent()) after the arguments object") }
            } catch {
                throw fail(
                    "the \"arguments\" string of '\(name)' is not a JSON object: \(error.message) (at byte \(error.offset) of the string)",
                    at: offset)
            }
            guard case .object(let arguments) = parsed else {
                throw fail("the \"arguments\" string of '\(name)' must hold a JSON object", at: offset)
            }
            return LeapFunctionCall(name: name, argumentsJSON: arguments)
        default:
            throw fail("the \"arguments\" of '\(name)' must be an object or a JSON string holding one", at: offset)
        }
    }
}

extension String {
    var trimmingWhitespace: String {
        var scalars = Substring(self).unicodeScalars
        while let f = scalars.first, f == " " || f == "\n" || f == "\t" || f == "\r" { scalars.removeFirst() }
        while let l = scalars.last, l == " " || l == "\n" || l == "\t" || l == "\r" { scalars.removeLast() }
        return String(scalars)
    }
}

/// Writes values as Python literals that `CallTextReader` reads back.
enum PythonLiteral {
    static func write(_ value: JSONValue, into out: inout String, escapingAngleBrackets: Bool = false) {
        switch value {
        case .null: out += "None"
        case .bool(let b): out += b ? "True" : "False"
        case .integer(let i): out += String(i)
        case .double(let d):
            if d.isNaN {
                out += "NaN"
            } else if d.isInfinite {
                out += d < 0 ? "-Infinity" : "Infinity"
            } else {
                out += JSONValue.pythonFloatRepr(d)
            }
        case .string(let s): writeString(s, into: &out, escapingAngleBrackets: escapingAngleBrackets)
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += ", " }
                write(item, into: &out, escapingAngleBrackets: escapingAngleBrackets)
            }
            out += "]"
        case .object(let object):
            out += "{"
            for (i, key) in object.keys.sorted().enumerated() {
                if i > 0 { out += ", " }
                writeString(key, into: &out, escapingAngleBrackets: escapingAngleBrackets)
                out += ": "
                write(object[key]!, into: &out, escapingAngleBrackets: escapingAngleBrackets)
            }
            out += "}"
        }
    }

    /// A double-quoted string, written as JSON writes it (the call grammar produces JSON
    /// strings, which Python reads the same); with `escapingAngleBrackets`, `<` becomes
    /// `\u003c` so that a string holding the end marker cannot end the block early.
    static func writeString(_ s: String, into out: inout String, escapingAngleBrackets: Bool = false) {
        guard escapingAngleBrackets else { return JSONValue.writeString(s, into: &out) }
        var literal = ""
        JSONValue.writeString(s, into: &literal)
        out += literal.replacingOccurrences(of: "<", with: "\\u003c")
    }
}
