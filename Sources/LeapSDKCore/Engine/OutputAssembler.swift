import Foundation

/// Turns the model's streamed text into `MessageResponse`s and the final assistant
/// message: reasoning between `<think>` and `</think>` becomes `.reasoningChunk`s; with a
/// function-call parser, call blocks become `.functionCall`s (malformed ones are passed
/// through as text, with a warning); everything else is `.chunk`s.
struct OutputAssembler {
    private var reasoning = ReasoningSplitter()
    private var calls: FunctionCallStreamSplitter?
    private(set) var text = ""
    private(set) var reasoningText = ""
    private(set) var functionCalls: [LeapFunctionCall] = []
    private var sawReasoning = false
    /// Warnings about malformed call text (also written to stderr).
    private(set) var warnings: [String] = []

    init(parser: LeapFunctionCallParserProtocol?) {
        calls = parser.map { FunctionCallStreamSplitter(parser: $0) }
    }

    mutating func feed(_ delta: String) -> [MessageResponse] {
        guard !delta.isEmpty else { return [] }
        return route(reasoning.feed(delta), finishing: false)
    }

    mutating func finish() -> [MessageResponse] {
        route(reasoning.finish(), finishing: true)
    }

    private mutating func route(_ pieces: [ReasoningSplitter.Piece], finishing: Bool) -> [MessageResponse] {
        var out: [MessageResponse] = []
        for piece in pieces {
            switch piece {
            case .reasoning(let r):
                sawReasoning = true
                reasoningText += r
                out.append(.reasoningChunk(r))
            case .reply(let t):
                out += replyText(t)
            }
        }
        if finishing, var splitter = calls {
            out += handle(splitter.finish())
            calls = splitter
        }
        return out
    }

    private mutating func replyText(_ t: String) -> [MessageResponse] {
        guard var splitter = calls else {
            text += t
            return [.chunk(t)]
        }
        let events = splitter.feed(t)
        calls = splitter
        return handle(events)
    }

    private mutating func handle(_ events: [FunctionCallStreamSplitter.Event]) -> [MessageResponse] {
        var out: [MessageResponse] = []
        for event in events {
            switch event {
            case .text(let t):
                guard !t.isEmpty else { continue }
                text += t
                out.append(.chunk(t))
            case .calls(let parsed, _):
                functionCalls += parsed
                out.append(.functionCall(parsed))
            case .malformed(let raw, let error):
                let warning =
                    "leap-ref: warning: the model's function-call text could not be parsed (\(error)); it is passed through as text"
                warnings.append(warning)
                FileHandle.standardError.write(Data((warning + "\n").utf8))
                text += raw
                out.append(.chunk(raw))
            }
        }
        return out
    }

    /// The assembled assistant message.
    var message: ChatMessage {
        ChatMessage(
            role: .assistant, content: [.text(text)],
            reasoningContent: sawReasoning ? reasoningText : nil,
            functionCalls: functionCalls.isEmpty ? nil : functionCalls)
    }
}
