/// Parses LFM2's Pythonic tool calls between `<|tool_call_start|>` and `<|tool_call_end|>`.
/// (Skeleton: the parser itself is being written; see issue #7.)
public struct LFMFunctionCallParser: LeapFunctionCallParserProtocol {
    public init() {}
    public var callStartMarker: String { "<|tool_call_start|>" }
    public var callEndMarker: String { "<|tool_call_end|>" }
    public func parseCalls(_ body: String) throws -> [LeapFunctionCall] { throw LeapError.generationFailure("LFM call parsing is not written yet") }
    public func formatCalls(_ calls: [LeapFunctionCall]) -> String { "" }
}
