/// Splits streamed text into reasoning (between `<think>` and `</think>`) and reply
/// text, as deltas arrive. A marker may be split across deltas: a suffix that could be
/// the start of a marker is held back until the next delta decides it.
struct ReasoningSplitter {
    enum Piece: Equatable {
        case reply(String)
        case reasoning(String)
    }

    static let open = "<think>"
    static let close = "</think>"

    private(set) var inReasoning = false
    private var held = ""

    /// Feeds a delta; returns the pieces that are now certain, in order.
    mutating func feed(_ delta: String) -> [Piece] {
        held += delta
        var out: [Piece] = []
        while true {
            let marker = inReasoning ? Self.close : Self.open
            if let range = held.range(of: marker) {
                let before = String(held[..<range.lowerBound])
                if !before.isEmpty { out.append(inReasoning ? .reasoning(before) : .reply(before)) }
                held = String(held[range.upperBound...])
                inReasoning.toggle()
                continue
            }
            let keep = Self.partialMarkerSuffixLength(held, marker)
            let emit = String(held.dropLast(keep))
            if !emit.isEmpty { out.append(inReasoning ? .reasoning(emit) : .reply(emit)) }
            held = String(held.suffix(keep))
            return out
        }
    }

    /// Emits whatever is held back.
    mutating func finish() -> [Piece] {
        defer { held = "" }
        return held.isEmpty ? [] : [inReasoning ? .reasoning(held) : .reply(held)]
    }

    /// The length of the longest suffix of `text` that is a proper prefix of `marker`.
    static func partialMarkerSuffixLength(_ text: String, _ marker: String) -> Int {
        let m = Array(marker)
        let t = Array(text.suffix(m.count - 1))
        var n = min(t.count, m.count - 1)
        while n > 0 {
            if Array(t.suffix(n)) == Array(m.prefix(n)) { return n }
            n -= 1
        }
        return 0
    }
}
