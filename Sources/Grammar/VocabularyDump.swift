extension TokenVocabulary {
    /// Parses the text format written by `scripts/dump_vocab.py`: one token per line,
    /// `<id> <n|s> <hex bytes>` (`s` marks a special token).
    public static func parseDump(_ text: String) -> TokenVocabulary? {
        var tokens: [[UInt8]] = []
        var special = Set<Int>()
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ", omittingEmptySubsequences: false)
            guard parts.count == 3, let id = Int(parts[0]), id == tokens.count else { return nil }
            var bytes: [UInt8] = []
            let hex = Array(parts[2].utf8)
            guard hex.count % 2 == 0 else { return nil }
            var k = 0
            while k < hex.count {
                guard let hi = StringLexer.hexValue(hex[k]), let lo = StringLexer.hexValue(hex[k + 1]) else { return nil }
                bytes.append(UInt8(hi * 16 + lo))
                k += 2
            }
            if parts[1] == "s" { special.insert(id) }
            tokens.append(bytes)
        }
        return TokenVocabulary(tokens: tokens, specialTokens: special)
    }
}

/// Greedy longest-match tokenization over a vocabulary (a stand-in for the model's BPE in
/// development benchmarks: it yields valid token boundaries, not the model's own).
public struct GreedyTokenizer: Sendable {
    let vocabulary: TokenVocabulary
    public init(vocabulary: TokenVocabulary) { self.vocabulary = vocabulary }

    public func tokenize(_ text: String) -> [Int] {
        let bytes = Array(text.utf8)
        let v = vocabulary
        var out: [Int] = []
        var i = 0
        while i < bytes.count {
            var node = 0, best = -1, bestLen = 0, j = i
            while j < bytes.count {
                let end = Int(v.subtreeEnd[node])
                var child = node + 1
                var found = -1
                while child < end {
                    if v.nodeByte[child] == bytes[j] {
                        found = child
                        break
                    }
                    child = Int(v.subtreeEnd[child])
                }
                if found < 0 { break }
                node = found
                j += 1
                if v.tokenStart[node + 1] > v.tokenStart[node] {
                    best = Int(v.tokenIDs[Int(v.tokenStart[node])])
                    bestLen = j - i
                }
            }
            if best < 0 { return out }  // a byte with no token: cannot happen with byte-level vocabularies
            out.append(best)
            i += bestLen
        }
        return out
    }
}
