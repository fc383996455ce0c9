/// Searching streamed text, held as Unicode scalars, for markers such as `<think>` or
/// `<|tool_call_start|>`: shared by the splitters that route the model's output.
enum MarkerText {
    /// The text of some scalars.
    static func string(_ scalars: ArraySlice<Unicode.Scalar>) -> String {
        var view = String.UnicodeScalarView()
        view.append(contentsOf: scalars)
        return String(view)
    }

    /// The first index at or after `from` where `needle` occurs in `haystack`.
    static func find(_ needle: [Unicode.Scalar], in haystack: [Unicode.Scalar], from: Int) -> Int? {
        guard needle.count <= haystack.count, from <= haystack.count - needle.count else { return nil }
        var i = max(0, from)
        while i <= haystack.count - needle.count {
            if haystack[i] == needle[0] {
                var j = 1
                while j < needle.count, haystack[i + j] == needle[j] { j += 1 }
                if j == needle.count { return i }
            }
            i += 1
        }
        return nil
    }

    /// The length of the longest proper prefix of `marker` that `text` ends with.
    static func longestSuffixThatStarts(_ marker: [Unicode.Scalar], in text: [Unicode.Scalar]) -> Int {
        var length = min(marker.count - 1, text.count)
        while length > 0 {
            if text[(text.count - length)...].elementsEqual(marker[..<length]) { return length }
            length -= 1
        }
        return 0
    }
}
