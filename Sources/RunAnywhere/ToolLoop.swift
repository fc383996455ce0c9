import LeapSDKCore

/// The automatic tool loop: generate, run the calls, feed the results back as `.tool`
/// messages, and generate again, until the model answers without calls or the call limit
/// is reached (then one last reply with calls forbidden).
struct ToolLoop: Sendable {
    var tools: [RegisteredTool]
    var options: ToolCallingOptions
    /// The base settings of every reply; `functionCallMode` is set per round.
    var generationOptions: GenerationOptions
    /// The call mode of the first reply (`nil`: `.auto`). Tests set `.required` so that a
    /// model with random weights calls a tool.
    var firstRoundCallMode: FunctionCallMode?
    var onEvent: @Sendable (ToolLoopEvent) -> Void

    func run(_ message: ChatMessage, with generator: ToolRoundGenerator) async throws(SDKError) -> ToolCallingResult {
        try options.validate()
        let functions = tools.map(\.definition.leapFunction)
        let byName = Dictionary(tools.map { ($0.definition.name, $0) }, uniquingKeysWith: { _, last in last })
        var toolCalls: [ToolCall] = []
        var toolResults: [ToolResult] = []
        var pending = [message]
        var executed = 0
        var round = 0
        while true {
            let callsAllowed = !functions.isEmpty && executed < options.maxToolCalls
            var roundOptions = generationOptions
            if !callsAllowed {
                roundOptions.functionCallMode = functions.isEmpty ? nil : FunctionCallMode.none
            } else if round == 0, let firstRoundCallMode {
                roundOptions.functionCallMode = firstRoundCallMode
            } else {
                roundOptions.functionCallMode = .auto
            }
            let reply: ToolRound
            do {
                reply = try await generator.generateRound(
                    appending: pending, functions: functions, options: roundOptions,
                    onText: { onEvent(.text($0)) })
            } catch {
                throw SDKError.from(error)
            }
            round += 1
            let calls = reply.calls.map(ToolCall.init)
            toolCalls += calls
            // Calls in a reply that had them forbidden (an engine that does not enforce the
            // mode) are reported but never run.
            guard !calls.isEmpty, options.autoExecute, callsAllowed else {
                if !calls.isEmpty, options.autoExecute {
                    let reason =
                        functions.isEmpty
                        ? "not executed: no tools are registered"
                        : "not executed: the limit of \(options.maxToolCalls) tool calls was reached"
                    toolResults += calls.map { ToolResult.failed($0.toolName, reason) }
                }
                return ToolCallingResult(text: reply.text.trimmingWhitespace, toolCalls: toolCalls, toolResults: toolResults)
            }
            pending = []
            for call in calls {
                onEvent(.toolCall(call))
                let result: ToolResult
                if executed >= options.maxToolCalls {
                    result = .failed(call.toolName, "not executed: the limit of \(options.maxToolCalls) tool calls was reached")
                } else if let tool = byName[call.toolName] {
                    executed += 1
                    result = await ToolExecutor.run(tool, arguments: call.arguments, timeout: options.toolTimeout)
                } else {
                    executed += 1
                    let known = tools.map(\.definition.name).sorted().joined(separator: ", ")
                    result = .failed(call.toolName, "unknown tool '\(call.toolName)'; the available tools are: \(known)")
                }
                if Task.isCancelled { throw SDKError(.cancelled, "the tool loop was cancelled") }
                toolResults.append(result)
                onEvent(.toolResult(call, result))
                pending.append(ChatMessage(role: .tool, content: [.text(result.messageText)]))
            }
        }
    }
}

extension String {
    var trimmingWhitespace: String {
        var scalars = Substring(self)
        while let first = scalars.first, first.isWhitespace { scalars.removeFirst() }
        while let last = scalars.last, last.isWhitespace { scalars.removeLast() }
        return String(scalars)
    }
}
