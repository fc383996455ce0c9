import Foundation

/// A function call the model requested: the function's name and its arguments.
///
/// `arguments` maps parameter names to values decoded from the model's call syntax, in
/// the shapes `JSONSerialization` produces: `String`, `Int`, `Double`, `Bool`, `NSNull`
/// (JSON `null` / Python `None`), `[Any]` and `[String: Any]`, nested. Its type is the
/// Kotlin-bridged SDK's `[String: Any]`; code written for the native spelling's
/// `[String: Any?]` compiles too (`let a: [String: Any?] = call.arguments` converts, and
/// `call.arguments["city"] as? String` reads the same). The app should validate the
/// arguments before dispatching: the model may omit a parameter or name a function that
/// does not exist (unless generation was constrained to the registered functions, which
/// leap-ref does by default).
///
/// `@unchecked Sendable`: the arguments hold only the immutable value types listed above.
public struct LeapFunctionCall: @unchecked Sendable, CustomStringConvertible {
    public let name: String
    public let arguments: [String: Any]

    /// A call with these arguments; a `nil` value is stored as `NSNull()`.
    public init(name: String, arguments: [String: Any?]) {
        self.name = name
        self.arguments = arguments.mapValues { $0 ?? NSNull() }
    }

    public var description: String { "LeapFunctionCall(name: \(name), arguments: \(arguments))" }
}

/// Turns a model's tool-call text into `LeapFunctionCall`s, and calls back into the
/// model's syntax (to render an assistant message that carries `functionCalls`).
///
/// A call block in the output starts with `callStartMarker` and ends with `callEndMarker`;
/// the text between them is handed to `parseCalls`.
public protocol LeapFunctionCallParserProtocol: Sendable {
    /// The text that opens a call block, e.g. `<|tool_call_start|>`.
    var callStartMarker: String { get }
    /// The text that closes a call block, e.g. `<|tool_call_end|>`.
    var callEndMarker: String { get }
    /// Parses the text between the markers (markers excluded).
    func parseCalls(_ body: String) throws -> [LeapFunctionCall]
    /// Renders calls in the model's syntax, markers included.
    func formatCalls(_ calls: [LeapFunctionCall]) -> String
}
