import Foundation

/// Turns the model's streamed text into reply events (`ServingEvent`): in a chat reply,
/// reasoning between `<think>` and `</think>` becomes `.reasoning` (a raw-text
/// continuation keeps the markers as text); with a function-call parser, call blocks
/// become `.toolCalls` (malformed ones are passed through as text, with a warning);
/// everything else is `.text` (without log-probabilities: the generation step attaches
/// those). It keeps no copy of the reply: whoever wants the whole reply adds the events
/// up (`ServingReply`).
struct OutputAssembler {
    /// Splits reasoning from the reply (nil: the output is not a chat reply).
    private var reasoning: ReasoningSplitter?
    private var calls: FunctionCallStreamSplitter?
    /// Warnings about malformed call text (also written to stderr).
    private(set) var warnings: [String] = []

    /// An assembler for a chat reply (`splitsReasoning`) or raw text, whose call blocks
    /// `parser` parses (nil: call text stays text).
    init(parser: LeapFunctionCallParserProtocol?, splitsReasoning: Bool = true) {
        calls = parser.map { FunctionCallStreamSplitter(parser: $0) }
        reasoning = splitsReasoning ? ReasoningSplitter() : nil
    }

    /// The events of the next piece of output text.
    mutating func feed(_ delta: String) -> [ServingEvent] {
        guard !delta.isEmpty else { return [] }
        guard var splitter = reasoning else { return route([.reply(delta)], finishing: false) }
        defer { reasoning = splitter }
        return route(splitter.feed(delta), finishing: false)
    }

    /// The events of the text held back until the end (an unclosed marker or call block).
    mutating func finish() -> [ServingEvent] {
        guard var splitter = reasoning else { return route([], finishing: true) }
        defer { reasoning = splitter }
        return route(splitter.finish(), finishing: true)
    }

    private mutating func route(_ pieces: [ReasoningSplitter.Piece], finishing: Bool) -> [ServingEvent] {
        var out: [ServingEvent] = []
        for piece in pieces {
            switch piece {
            case .reasoning(let r): out.append(.reasoning(r))
            case .reply(let t): out += replyText(t)
            }
        }
        if finishing, var splitter = calls {
            out += handle(splitter.finish())
            calls = splitter
        }
        return out
    }

    private mutating func replyText(_ t: String) -> [ServingEvent] {
        guard var splitter = calls else { return [.text(t, logprobs: [])] }
        let events = splitter.feed(t)
        calls = splitter
        return handle(events)
    }

    private mutating func handle(_ events: [FunctionCallStreamSplitter.Event]) -> [ServingEvent] {
        var out: [ServingEvent] = []
        for event in events {
            switch event {
            case .text(let t):
                guard !t.isEmpty else { continue }
                out.append(.text(t, logprobs: []))
            case .calls(let parsed, _):
                out.append(.toolCalls(parsed))
            case .malformed(let raw, let error):
                let warning =
                    "leap-ref: warning: the model's function-call text could not be parsed (\(error)); it is passed through as text"
                warnings.append(warning)
                FileHandle.standardError.write(Data((warning + "\n").utf8))
                out.append(.text(raw, logprobs: []))
            }
        }
        return out
    }
}
