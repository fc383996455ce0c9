/// Parses Hermes-style `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks.
/// (Skeleton: the parser itself is being written; see issue #7.)
public struct HermesFunctionCallParser: LeapFunctionCallParserProtocol {
    public init() {}
    public var callStartMarker: String { "<tool_call>" }
    public var callEndMarker: String { "</tool_call>" }
    public func parseCalls(_ body: String) throws -> [LeapFunctionCall] { throw LeapError.generationFailure("Hermes call parsing is not written yet") }
    public func formatCalls(_ calls: [LeapFunctionCall]) -> String { "" }
}
