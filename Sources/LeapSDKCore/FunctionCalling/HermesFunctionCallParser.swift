import LeapJSON

/// Parses Hermes-style tool calls (Qwen3, Hermes, and other models using that format):
///
///     <tool_call>
///     {"name": "get_weather", "arguments": {"city": "NYC"}}
///     </tool_call>
///
/// `parseCalls` reads one block body: a JSON call object, a JSON array of them, or several
/// objects one after another (separated by whitespace or commas). `arguments` may be an
/// object or a string holding a JSON object (as OpenAI writes it); `parameters` is accepted
/// for `arguments`, a missing or null `arguments` means no arguments, and OpenAI's
/// `{"type": "function", "function": {...}}` wrapper is unwrapped. Several blocks in one
/// reply are separated by the stream splitter (`FunctionCallStreamSplitter`), each parsed
/// on its own.
///
/// The reader takes JSON and tolerates what small models add to it: single-quoted strings,
/// Python's `True`/`False`/`None`, trailing commas. Nesting deeper than
/// `maxNestingDepth` is an error.
///
/// `formatCalls` writes each call as its own block, as Qwen3's chat template does:
/// `<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>`, blocks joined by a
/// newline, argument keys sorted.
public struct HermesFunctionCallParser: LeapFunctionCallParserProtocol {
    /// How deeply values may nest.
    public let maxNestingDepth: Int

    public init() { self.init(maxNestingDepth: 64) }

    public init(maxNestingDepth: Int) { self.maxNestingDepth = max(2, maxNestingDepth) }

    public var callStartMarker: String { "<tool_call>" }
    public var callEndMarker: String { "</tool_call>" }

    /// Parses the text between the markers. Throws `LeapFunctionCallParseError`.
    public func parseCalls(_ body: String) throws -> [LeapFunctionCall] {
        try parse(body)
    }

    /// `parseCalls` with its typed error.
    public func parse(_ body: String) throws(LeapFunctionCallParseError) -> [LeapFunctionCall] {
        var reader = CallTextReader(body, maxDepth: maxNestingDepth)
        reader.skipWhitespace()
        guard !reader.atEnd else { throw reader.fail("empty call block (expected {\"name\": ..., \"arguments\": {...}})") }
        var calls: [LeapFunctionCall] = []
        while !reader.atEnd {
            let start = reader.pos
            guard let c = reader.current, c == UInt8(ascii: "{") || c == UInt8(ascii: "[") else {
                throw reader.fail("expected a call object {\"name\": ..., \"arguments\": {...}}, found \(reader.describeCurrent())")
            }
            switch try reader.readValue(depth: 0) {
            case .object(let object):
                calls.append(try reader.callFromJSONObject(object, at: start))
            case .array(let items):
                for item in items {
                    guard case .object(let object) = item else {
                        throw reader.fail("the call list must hold call objects {\"name\": ..., \"arguments\": {...}}", at: start)
                    }
                    calls.append(try reader.callFromJSONObject(object, at: start))
                }
            default:
                throw reader.fail("expected a call object", at: start)
            }
            reader.skipWhitespace()
            if reader.current == UInt8(ascii: ",") {
                reader.pos += 1
                reader.skipWhitespace()
            }
        }
        return calls
    }

    /// Renders each call as a `<tool_call>` block, blocks joined by a newline.
    /// When a string in a call contains the end marker, that call's JSON is written with
    /// `<`, `>`, `&` and `'` as `\u003c` etc., so that the block cannot end early.
    public func formatCalls(_ calls: [LeapFunctionCall]) -> String {
        calls.map { call in
            let object = JSONValue.object(JSONObject([("name", .string(call.name)), ("arguments", .object(call.argumentsJSON))]))
            var json = object.serialized(.python)
            if json.contains(callEndMarker) {
                var safe = JSONFormat.python
                safe.htmlSafe = true
                json = object.serialized(safe)
            }
            return callStartMarker + "\n" + json + "\n" + callEndMarker
        }.joined(separator: "\n")
    }
}
