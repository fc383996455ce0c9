import LeapJSON
import LeapSDK

/// What a parser table row expects.
enum ExpectedParse: Sendable {
    /// The calls, each a name and its arguments as JSON text.
    case calls([ExpectedCall])
    /// An error at `offset` whose message contains `message`.
    case error(offset: Int, message: String)
}

struct ExpectedCall: Sendable {
    let name: String
    let arguments: String
    init(_ name: String, _ arguments: String = "{}") {
        self.name = name
        self.arguments = arguments
    }
}

struct ParseCase: Sendable, CustomStringConvertible {
    let input: String
    let expected: ExpectedParse
    init(_ input: String, _ expected: ExpectedParse) {
        self.input = input
        self.expected = expected
    }
    var description: String { input.debugDescription }
}

/// Recursively sorts object keys (parsed calls come back with sorted keys).
func sortedKeys(_ value: JSONValue) -> JSONValue {
    switch value {
    case .array(let items): return .array(items.map(sortedKeys))
    case .object(let object):
        return .object(JSONObject(object.keys.sorted().map { ($0, sortedKeys(object[$0]!)) }))
    default: return value
    }
}

/// Checks a parse outcome against a table row; returns a failure text or nil.
func checkParse(_ parse: (String) throws(LeapFunctionCallParseError) -> [LeapFunctionCall], _ row: ParseCase) -> String? {
    switch row.expected {
    case .calls(let expected):
        let calls: [LeapFunctionCall]
        do throws(LeapFunctionCallParseError) {
            calls = try parse(row.input)
        } catch {
            return "unexpected error \(error)"
        }
        guard calls.count == expected.count else { return "got \(calls.count) calls, expected \(expected.count): \(calls)" }
        for (call, want) in zip(calls, expected) {
            if call.name != want.name { return "name \(call.name) != \(want.name)" }
            guard let wantArguments = try? JSONValue.parse(want.arguments) else { return "bad expectation \(want.arguments)" }
            let got = JSONValue.object(call.argumentsJSON)
            if got != sortedKeys(wantArguments) {
                return "arguments of \(call.name): \(got.serialized()) != \(sortedKeys(wantArguments).serialized())"
            }
        }
        return nil
    case .error(let offset, let message):
        do throws(LeapFunctionCallParseError) {
            let calls = try parse(row.input)
            return "parsed to \(calls), expected an error"
        } catch {
            if error.offset != offset || !error.message.contains(message) {
                return "error \(error) (offset \(error.offset)); expected offset \(offset) containing \"\(message)\""
            }
            return nil
        }
    }
}
