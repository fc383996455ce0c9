/// Finds stop strings in streamed text. Text that could be the start of a stop string is
/// held back until the next piece shows whether it is; text before a stop string is
/// released and the stop string and everything after it are dropped (OpenAI's `stop`).
/// Works on Unicode scalars, so a stop string is found whatever the token boundaries.
public struct StopStringMatcher: Sendable {
    private let stops: [[Unicode.Scalar]]
    private var held: [Unicode.Scalar] = []
    /// True once a stop string was found; later input is ignored.
    public private(set) var stopped = false

    /// Empty stop strings are ignored.
    public init(stops: [String]) {
        self.stops = stops.map { Array($0.unicodeScalars) }.filter { !$0.isEmpty }
    }

    /// Adds `text`; returns the text that is now known not to belong to a stop string.
    public mutating func feed(_ text: String) -> String {
        guard !stopped else { return "" }
        guard !stops.isEmpty else { return text }
        held.append(contentsOf: text.unicodeScalars)
        if let at = firstStop() {
            stopped = true
            let out = String(String.UnicodeScalarView(held[..<at]))
            held = []
            return out
        }
        let keep = longestStopPrefixSuffix()
        let out = String(String.UnicodeScalarView(held[..<(held.count - keep)]))
        held.removeFirst(held.count - keep)
        return out
    }

    /// The text still held back (at the end of generation it is output).
    public mutating func finish() -> String {
        defer { held = [] }
        return stopped ? "" : String(String.UnicodeScalarView(held))
    }

    /// The start of the earliest stop string in `held`.
    private func firstStop() -> Int? {
        var best: Int?
        for stop in stops where stop.count <= held.count {
            var i = 0
            while i + stop.count <= held.count, best.map({ i < $0 }) ?? true {
                if held[i] == stop[0], held[i..<(i + stop.count)].elementsEqual(stop) {
                    best = i
                    break
                }
                i += 1
            }
        }
        return best
    }

    /// The length of the longest suffix of `held` that is a proper prefix of a stop string.
    private func longestStopPrefixSuffix() -> Int {
        var longest = 0
        for stop in stops {
            var n = min(stop.count - 1, held.count)
            while n > longest {
                if held[(held.count - n)...].elementsEqual(stop[..<n]) {
                    longest = n
                    break
                }
                n -= 1
            }
        }
        return longest
    }
}
