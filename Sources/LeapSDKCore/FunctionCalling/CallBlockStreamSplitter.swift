/// Separates a model's streamed output into ordinary text and function-call blocks.
///
/// Feed it the text deltas in the order the model produces them; a marker may be split
/// across deltas. It returns events:
/// - `.text` for ordinary text, as early as is safe: only a trailing piece that could be
///   the beginning of the call-start marker is held back until the next delta decides;
/// - `.calls` when a block (start marker ... end marker) closes and its body parses;
/// - `.malformed` when a block closes but its body does not parse (the caller should
///   surface `raw` as text and log `error`).
///
/// Call `finish()` when the output ends: it releases held-back text, and reports a block
/// that was opened but never closed as `.malformed`. Several blocks in one reply are fine;
/// text between them is reported as `.text`. A start marker inside an open block is part
/// of the block's body. `raw` is the block exactly as produced, markers included.
///
/// Text is handled as Unicode scalars, so a delta may end in the middle of a grapheme
/// cluster (a combining mark or emoji sequence completed by the next delta).
public struct FunctionCallStreamSplitter: Sendable {
    /// What the splitter found in the output.
    public enum Event: Sendable, CustomStringConvertible {
        /// Ordinary text, to be shown as it is.
        case text(String)
        /// A call block that parsed; `raw` is the block with its markers. May be empty
        /// (`[]` in the block).
        case calls([LeapFunctionCall], raw: String)
        /// A call block that did not parse (or was not closed); `raw` is the block text
        /// with its markers, `error` says why.
        case malformed(raw: String, error: String)

        public var description: String {
            switch self {
            case .text(let t): return "text(\(t.debugDescription))"
            case .calls(let calls, let raw): return "calls(\(calls), raw: \(raw.debugDescription))"
            case .malformed(let raw, let error): return "malformed(raw: \(raw.debugDescription), error: \(error))"
            }
        }
    }

    /// The parser that reads block bodies and provides the markers.
    public let parser: any LeapFunctionCallParserProtocol
    private let startMarker: [Unicode.Scalar]
    private let endMarker: [Unicode.Scalar]
    /// Outside a block: held-back text. Inside: the block so far, start marker included.
    private var pending: [Unicode.Scalar] = []
    private var inBlock = false
    /// Where to resume looking for the end marker in `pending`.
    private var endSearchStart = 0

    /// A splitter for the markers of `parser`. With an empty start marker nothing is
    /// treated as a call: all output is text.
    public init(parser: any LeapFunctionCallParserProtocol) {
        self.parser = parser
        self.startMarker = Array(parser.callStartMarker.unicodeScalars)
        self.endMarker = Array(parser.callEndMarker.unicodeScalars)
    }

    /// True while a call block has been opened and not yet closed.
    public var isInsideCallBlock: Bool { inBlock }

    /// Takes the next piece of output and returns what it completes.
    public mutating func feed(_ delta: String) -> [Event] {
        pending.append(contentsOf: delta.unicodeScalars)
        var events: [Event] = []
        guard !startMarker.isEmpty else {
            if !pending.isEmpty { events.append(.text(MarkerText.string(pending[...]))) }
            pending.removeAll()
            return events
        }
        while true {
            if !inBlock {
                if let start = MarkerText.find(startMarker, in: pending, from: 0) {
                    if start > 0 { events.append(.text(MarkerText.string(pending[..<start]))) }
                    pending.removeFirst(start)
                    inBlock = true
                    endSearchStart = startMarker.count
                    continue
                }
                let keep = MarkerText.longestSuffixThatStarts(startMarker, in: pending)
                if pending.count > keep {
                    events.append(.text(MarkerText.string(pending[..<(pending.count - keep)])))
                    pending.removeFirst(pending.count - keep)
                }
                return events
            }
            if !endMarker.isEmpty, let end = MarkerText.find(endMarker, in: pending, from: endSearchStart) {
                let blockEnd = end + endMarker.count
                let raw = MarkerText.string(pending[..<blockEnd])
                let body = MarkerText.string(pending[startMarker.count..<end])
                do {
                    events.append(.calls(try parser.parseCalls(body), raw: raw))
                } catch {
                    events.append(.malformed(raw: raw, error: String(describing: error)))
                }
                pending.removeFirst(blockEnd)
                inBlock = false
                continue
            }
            endSearchStart = max(startMarker.count, pending.count - endMarker.count + 1)
            return events
        }
    }

    /// Ends the output: releases held-back text and reports an unclosed block.
    public mutating func finish() -> [Event] {
        defer {
            pending.removeAll()
            inBlock = false
        }
        guard !pending.isEmpty else { return [] }
        let raw = MarkerText.string(pending[...])
        if inBlock {
            return [.malformed(raw: raw, error: "the call block was not closed with \(parser.callEndMarker)")]
        }
        return [.text(raw)]
    }
}
