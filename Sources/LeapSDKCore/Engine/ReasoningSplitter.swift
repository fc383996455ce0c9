/// Splits streamed text into reasoning (between `<think>` and `</think>`) and reply
/// text, as deltas arrive. A marker may be split across deltas: a suffix that could be
/// the start of a marker is held back until the next delta decides it.
struct ReasoningSplitter {
    enum Piece: Equatable {
        case reply(String)
        case reasoning(String)
    }

    static let open = Array("<think>".unicodeScalars)
    static let close = Array("</think>".unicodeScalars)

    private(set) var inReasoning = false
    /// Text not yet emitted: at most a partial marker between calls.
    private var held: [Unicode.Scalar] = []

    /// Feeds a delta; returns the pieces that are now certain, in order.
    mutating func feed(_ delta: String) -> [Piece] {
        held.append(contentsOf: delta.unicodeScalars)
        var out: [Piece] = []
        while true {
            let marker = inReasoning ? Self.close : Self.open
            if let at = MarkerText.find(marker, in: held, from: 0) {
                if at > 0 { out.append(piece(MarkerText.string(held[..<at]))) }
                held.removeFirst(at + marker.count)
                inReasoning.toggle()
                continue
            }
            let keep = MarkerText.longestSuffixThatStarts(marker, in: held)
            if held.count > keep {
                out.append(piece(MarkerText.string(held[..<(held.count - keep)])))
                held.removeFirst(held.count - keep)
            }
            return out
        }
    }

    /// Emits whatever is held back.
    mutating func finish() -> [Piece] {
        defer { held.removeAll() }
        return held.isEmpty ? [] : [piece(MarkerText.string(held[...]))]
    }

    private func piece(_ text: String) -> Piece { inReasoning ? .reasoning(text) : .reply(text) }
}
