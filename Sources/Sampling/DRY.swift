#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// DRY ("don't repeat yourself", p-e-w's sampler, as llama.cpp implements it): a token
/// that would extend a sequence already seen in the history is penalized, exponentially
/// in the length of the repeat. If the last tokens are `a b c` and `a b c d` occurs
/// earlier, `d` would make the repeat 4 long; with `allowedLength` 2 its logit drops by
/// `multiplier × base^(3 - 2)` (the length counts the tokens already repeated, not `d`).
///
/// Sequence breakers cut repeats: a repeat never reaches back past the latest occurrence
/// of a breaker, and a token that is a breaker by itself is never penalized. They are
/// token sequences (`sequenceBreakers`); `DRYSequenceBreakers.restartSequences` turns
/// breaker strings into them with a vocabulary, as llama.cpp does.
public struct DRYParameters: Sendable, Equatable {
    /// Scale of the penalty (0 = off). llama.cpp's suggested value is 0.8.
    public var multiplier: Float
    /// Growth of the penalty per repeated token beyond `allowedLength` (at least 1; below, off).
    public var base: Float
    /// Repeats up to this many tokens go unpenalized.
    public var allowedLength: Int
    /// How many of the latest tokens are searched for repeats: -1 all of them (the
    /// context: callers feed the prompt and the output), 0 off.
    public var penaltyLastN: Int
    /// The restart sequences, as token ids (head first). A sequence of one token is a
    /// breaker by itself.
    public var sequenceBreakers: [[Int]]

    /// DRY's settings; the defaults are llama.cpp's, with the stage off (multiplier 0) and
    /// the window at the whole history.
    public init(
        multiplier: Float = 0, base: Float = 1.75, allowedLength: Int = 2, penaltyLastN: Int = -1,
        sequenceBreakers: [[Int]] = []
    ) {
        self.multiplier = multiplier
        self.base = base
        self.allowedLength = allowedLength
        self.penaltyLastN = penaltyLastN
        self.sequenceBreakers = sequenceBreakers
    }

    /// DRY switched off.
    public static let off = DRYParameters()

    /// llama.cpp's default breaker strings: newline, colon, double quote, asterisk.
    public static let defaultSequenceBreakerStrings = ["\n", ":", "\"", "*"]

    /// Whether the stage changes anything (as llama.cpp: a non-zero multiplier, a base of
    /// at least 1 and a window that is not 0).
    public var isEnabled: Bool { multiplier != 0 && base >= 1 && penaltyLastN != 0 }

    /// How many of the latest tokens the stage needs to see: `Int.max` for the whole
    /// history, 0 when off.
    public var historyLength: Int {
        guard isEnabled else { return 0 }
        return penaltyLastN < 0 ? Int.max : penaltyLastN
    }

    /// The penalty of a token that would extend a repeat of `length` tokens (at least
    /// `allowedLength`): `multiplier × base^(length - allowedLength)`, the exponent capped
    /// so that the power stays finite (as llama.cpp), the product capped at the largest Float.
    public func penalty(repeatLength length: Int) -> Float {
        var exponent = length - allowedLength
        if base > 1.000001 {
            let maxExponent = Int(88.7228391 / logf(base))
            if maxExponent > 0 && exponent > maxExponent { exponent = maxExponent }
        }
        let p = multiplier * powf(base, Float(exponent))
        return p.isFinite ? p : (p > 0 ? .greatestFiniteMagnitude : -.greatestFiniteMagnitude)
    }
}

/// Turning breaker strings into the token sequences DRY matches, as llama.cpp's
/// `get_overlapping_token_sequences` does: for each breaker string `s` and each token of
/// the vocabulary,
///
/// - a token whose text contains `s` is a breaker by itself;
/// - a token whose text ends with a proper prefix of `s` (at any position where `s`
///   starts) heads a sequence whose tail is the tokenization of the rest of `s` (at most
///   `maxTailTokens` tokens).
///
/// Strings longer than `maxBreakerBytes` bytes are cut to that length; empty strings are
/// skipped. Texts are compared as bytes; a split inside a multi-byte UTF-8 character is
/// skipped (its rest cannot be tokenized as text).
public enum DRYSequenceBreakers {
    /// llama.cpp's limit on a breaker string, in bytes.
    public static let maxBreakerBytes = 40
    /// llama.cpp's limit on the tail of a restart sequence, in tokens.
    public static let maxTailTokens = 20

    /// The restart sequences of `breakers` over a vocabulary: `pieces[id]` is the text of
    /// token `id` as bytes (special tokens rendered), `tokenize` tokenizes plain text
    /// (no special tokens, no BOS). Duplicates are removed; the order is deterministic.
    /// `pieces` may be lazy (read once per breaker): a vocabulary of 262,144 tokens held as
    /// arrays is 12 MB of small allocations that the heap keeps after they are freed.
    public static func restartSequences<Pieces: Sequence<[UInt8]>>(
        for breakers: [String], pieces: Pieces, tokenize: (String) -> [Int]
    ) -> [[Int]] {
        var result: [[Int]] = []
        var seen = Set<[Int]>()
        func add(_ sequence: [Int]) {
            if seen.insert(sequence).inserted { result.append(sequence) }
        }
        for breaker in breakers {
            let s = Array(breaker.utf8.prefix(maxBreakerBytes))
            guard let first = s.first else { continue }
            // The tokenized rest of `s` from byte `i` on, computed once per `i`.
            var tails: [Int: [Int]?] = [:]
            func tail(from i: Int) -> [Int]? {
                if let t = tails[i] { return t }
                var t: [Int]?
                let rest = String(decoding: s[i...], as: UTF8.self)
                if s[i] & 0xC0 != 0x80, rest.utf8.elementsEqual(s[i...]) {
                    t = Array(tokenize(rest).prefix(maxTailTokens))
                }
                tails[i] = t
                return t
            }
            for (id, word) in pieces.enumerated() where !word.isEmpty {
                if contains(word, s) {
                    add([id])
                    continue
                }
                // Positions where `s` starts and runs off the end of the token's text.
                for pos in word.indices where word[pos] == first {
                    let overlap = word.count - pos
                    guard overlap < s.count, word[pos...].elementsEqual(s[..<overlap]) else { continue }
                    if let t = tail(from: overlap) { add([id] + t) }
                }
            }
        }
        return result
    }

    /// Whether `haystack` contains `needle` as a contiguous run of bytes.
    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count else { return false }
        let first = needle[0]
        var i = 0
        while i + needle.count <= haystack.count {
            if haystack[i] == first && haystack[i..<(i + needle.count)].elementsEqual(needle) { return true }
            i += 1
        }
        return false
    }
}

/// The DRY stage of a `Sampler`: the token history and scratch buffers.
struct DRYState: Sendable {
    let parameters: DRYParameters
    /// Restart sequences by head token: the tails (empty for a single-token breaker).
    private let tailsByHead: [Int: [[Int]]]
    /// Accepted tokens, oldest first (trimmed now and then to the window).
    private var history: [Int] = []
    /// Scratch: the Z-array of the reversed window.
    private var z: [Int] = []
    /// Scratch: for each token that would extend a repeat, the longest such repeat.
    private(set) var longestRepeat: [Int: Int] = [:]

    init(_ parameters: DRYParameters) {
        self.parameters = parameters
        var heads: [Int: [[Int]]] = [:]
        for sequence in parameters.sequenceBreakers {
            guard let head = sequence.first else { continue }
            heads[head, default: []].append(Array(sequence.dropFirst()))
        }
        tailsByHead = heads
    }

    mutating func accept(_ token: Int) {
        guard parameters.isEnabled else { return }
        history.append(token)
        let window = parameters.penaltyLastN
        if window > 0 && history.count >= 2 * window + 64 { history.removeFirst(history.count - window) }
    }

    /// Whether `token` is a breaker by itself (never penalized).
    func isSingleTokenBreaker(_ token: Int) -> Bool {
        tailsByHead[token]?.contains(where: \.isEmpty) ?? false
    }

    /// Fills `longestRepeat`: every token that would extend a repeat of at least
    /// `allowedLength` tokens, with the longest such repeat (cut at the latest breaker).
    mutating func findRepeats() {
        longestRepeat.removeAll(keepingCapacity: true)
        let p = parameters
        guard p.isEnabled else { return }
        let n = p.penaltyLastN < 0 ? history.count : min(history.count, p.penaltyLastN)
        guard n > p.allowedLength else { return }
        let end = history.count - 1
        // The window read backwards: token(k) is k tokens before the newest.
        func token(_ k: Int) -> Int { history[end - k] }

        // A repeat may not reach back past the latest restart sequence: find the newest
        // breaker head whose tail follows it (the longest tail when several match).
        var limit = n
        for i in 0..<n {
            guard let tails = tailsByHead[token(i)] else { continue }
            var longest = -1
            for tail in tails where tail.count > longest && tail.count <= i {
                if tail.indices.allSatisfy({ tail[$0] == token(i - $0 - 1) }) { longest = tail.count }
            }
            if longest >= 0 {
                limit = i - longest
                break
            }
        }
        guard limit >= p.allowedLength else { return }

        // Z-algorithm over the reversed window: z[k] is how many tokens ending k tokens
        // before the newest match the tokens ending at the newest (the suffix repeated there).
        if z.count < n { z = [Int](repeating: 0, count: n) }
        var boxStart = 0
        var boxEnd = 0  // exclusive
        for k in 1..<n {
            var length = 0
            if k < boxEnd { length = min(boxEnd - k, z[k - boxStart]) }
            while k + length < n && token(length) == token(k + length) { length += 1 }
            z[k] = length
            if k + length > boxEnd {
                boxStart = k
                boxEnd = k + length
            }
        }
        // The token after each repeat would extend it.
        for k in 1..<n {
            let length = min(z[k], limit)
            guard length >= p.allowedLength else { continue }
            let next = token(k - 1)
            if length > longestRepeat[next] ?? -1 { longestRepeat[next] = length }
        }
    }
}
