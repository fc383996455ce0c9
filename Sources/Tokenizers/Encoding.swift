extension Tokenizer {
    /// Encodes text into token ids, exactly as llama.cpp's `llama_tokenize`.
    ///
    /// - Parameters:
    ///   - text: The text.
    ///   - addSpecial: Prepend BOS and append EOS where the model asks for them
    ///     (`addBOS`, `addEOS`).
    ///   - parseSpecial: Turn the text of control tokens (`<|im_start|>`, `<s>`...) into
    ///     those tokens. Without it they are tokenized as plain text. User-defined tokens
    ///     are matched either way, as llama.cpp does.
    public func encode(_ text: String, addSpecial: Bool, parseSpecial: Bool = false) -> [TokenID] {
        var text = text
        return text.withUTF8 { encode(utf8: $0, addSpecial: addSpecial, parseSpecial: parseSpecial) }
    }

    /// Encodes text as `encode(_:addSpecial:parseSpecial:)` does, but stops as soon as the
    /// text is known to have more than `limit` tokens, so that the work is bounded by the
    /// limit, not by the text: a megabyte-long word is not merged to learn that it does not
    /// fit. A word with `n` bytes that have tokens gives at least `n / longestTokenBytes`
    /// tokens, rounded up, when the vocabulary makes only tokens (`tokenCountBoundIsValid`);
    /// the encoding stops before a word that would take that bound over the limit, and
    /// before the first word after the tokens have gone over it.
    ///
    /// The result is the whole encoding when it is complete; otherwise its first tokens and
    /// a lower bound of the count, more than `limit`.
    public func encode(_ text: String, addSpecial: Bool, parseSpecial: Bool = false, stoppingAbove limit: Int)
        -> LimitedEncoding
    {
        var text = text
        var bound = TokenCountBound(limit: limit, bytesPerToken: tokenCountBoundIsValid ? longestTokenBytes : nil)
        let tokens = text.withUTF8 {
            encode(utf8: $0, addSpecial: addSpecial, parseSpecial: parseSpecial, bound: &bound)
        }
        return LimitedEncoding(tokens: tokens, count: bound.exceeded ?? tokens.count, isComplete: bound.exceeded == nil)
    }

    /// Encodes valid UTF-8 bytes (see `encode(_:addSpecial:parseSpecial:)`).
    func encode(
        utf8 bytes: UnsafeBufferPointer<UInt8>, addSpecial: Bool, parseSpecial: Bool,
        mergeStrategy: BPEModel.MergeStrategy = .automatic
    ) -> [TokenID] {
        var unbounded = TokenCountBound(limit: .max, bytesPerToken: nil)
        return encode(utf8: bytes, addSpecial: addSpecial, parseSpecial: parseSpecial, mergeStrategy: mergeStrategy, bound: &unbounded)
    }

    /// Encodes valid UTF-8 bytes until `bound` says the text has more tokens than its limit.
    func encode(
        utf8 bytes: UnsafeBufferPointer<UInt8>, addSpecial: Bool, parseSpecial: Bool,
        mergeStrategy: BPEModel.MergeStrategy = .automatic, bound: inout TokenCountBound
    ) -> [TokenID] {
        var out: [TokenID] = []
        out.reserveCapacity(min(bytes.count, bound.limit) / 3 + 2)
        let fragments = specials.partition(bytes, parseSpecial: parseSpecial)
        if addSpecial && addBOS, let bosID { out.append(bosID) }
        switch model {
        case .bytePairEncoding:
            var cache = WordCache()
            for fragment in fragments {
                guard bound.admits(bytes: 0, after: out.count) else { return out }
                switch fragment {
                case .token(let id):
                    out.append(id)
                case .text(let offset, let length):
                    let slice = UnsafeBufferPointer(rebasing: bytes[offset..<offset + length])
                    encodeBPE(slice, cache: &cache, strategy: mergeStrategy, bound: &bound, into: &out)
                }
            }
        case .sentencePiece:
            // A leading space goes before the first text and before text that follows a
            // special token (llama.cpp's `is_prev_special`).
            var previousWasSpecial = true
            var cache = WordCache()
            for fragment in fragments {
                guard bound.admits(bytes: 0, after: out.count) else { return out }
                switch fragment {
                case .token(let id):
                    out.append(id)
                    previousWasSpecial = true
                case .text(let offset, let length):
                    var escaped: [UInt8] = []
                    escaped.reserveCapacity(length + 3)
                    if addSpacePrefix && previousWasSpecial { escaped += [0xE2, 0x96, 0x81] }
                    for b in UnsafeBufferPointer(rebasing: bytes[offset..<offset + length]) {
                        if b == 0x20 { escaped += [0xE2, 0x96, 0x81] } else { escaped.append(b) }
                    }
                    spm!.tokenize(escaped, vocabulary: vocabulary, cache: &cache, bound: &bound, into: &out)
                    previousWasSpecial = false
                }
            }
        }
        guard bound.admits(bytes: 0, after: out.count) else { return out }
        if addSpecial && addEOS, let eosID { out.append(eosID) }
        return out
    }

    /// Pre-tokenizes one text fragment and encodes each piece.
    private func encodeBPE(
        _ bytes: UnsafeBufferPointer<UInt8>, cache: inout WordCache, strategy: BPEModel.MergeStrategy,
        bound: inout TokenCountBound, into out: inout [TokenID]
    ) {
        let text = CodePoints(bytes)
        var ends: [Int32] = []
        ends.reserveCapacity(text.count / 3 + 1)
        preTokenizer!.split(text, 0, text.count, into: &ends)
        var symbols: [Int32] = []
        var mapped: [UInt8] = []
        var start = 0
        text.offsets.withUnsafeBufferPointer { offsets in
            for end in ends {
                let word = UnsafeBufferPointer(rebasing: bytes[Int(offsets[start])..<Int(offsets[Int(end)])])
                start = Int(end)
                // Bytes without a token are dropped (llama.cpp does too): only the others
                // count towards the word's least number of tokens.
                if bound.exceeds(bytes: word.count, after: out.count) {
                    guard bound.admits(bytes: bpe!.tokenBytes(in: word), after: out.count) else { return }
                }
                if cache.lookup(word, into: &out) { continue }
                let before = out.count
                encodeWord(word, symbols: &symbols, mapped: &mapped, strategy: strategy, into: &out)
                cache.store(word, out[before...])
            }
        }
    }

    /// Encodes one pre-token piece (raw bytes) with the merges.
    private func encodeWord(
        _ word: UnsafeBufferPointer<UInt8>, symbols: inout [Int32], mapped: inout [UInt8],
        strategy: BPEModel.MergeStrategy, into out: inout [TokenID]
    ) {
        let bpe = self.bpe!
        if ignoreMerges {
            // A piece that is a whole token is that token (llama.cpp's ignore_merges).
            mapped.removeAll(keepingCapacity: true)
            for b in word { mapped += ByteLevel.byteToUTF8[Int(b)] }
            if let id = vocabulary.id(of: mapped) {
                out.append(id)
                return
            }
        }
        symbols.removeAll(keepingCapacity: true)
        for b in word { symbols.append(bpe.byteSymbol[Int(b)]) }
        bpe.applyMerges(&symbols, strategy: strategy)
        for s in symbols {
            if s >= 0 && Int(s) < bpe.vocabularySize {
                out.append(s)
            } else if s >= 0 {
                // A merged text that is not a token: llama.cpp emits the one-byte tokens of
                // its characters that have one.
                for b in bpe.extraTexts[Int(s) - bpe.vocabularySize] where b < 0x80 {
                    if let id = vocabulary.id(of: [b]) { out.append(id) }
                }
            }
            // s < 0: a byte without a token; llama.cpp drops it too.
        }
    }

    /// Splits text into the pre-token pieces a BPE vocabulary encodes one by one (after
    /// special-token partitioning). Empty for SentencePiece vocabularies, which do not
    /// pre-tokenize. For tests and tools.
    public func preTokenize(_ text: String, parseSpecial: Bool = false) -> [String] {
        guard let preTokenizer else { return [] }
        var text = text
        return text.withUTF8 { bytes in
            var pieces: [String] = []
            for fragment in specials.partition(bytes, parseSpecial: parseSpecial) {
                guard case .text(let offset, let length) = fragment else { continue }
                let slice = UnsafeBufferPointer(rebasing: bytes[offset..<offset + length])
                let cps = CodePoints(slice)
                var ends: [Int32] = []
                preTokenizer.split(cps, 0, cps.count, into: &ends)
                var start = 0
                for end in ends {
                    let piece = UnsafeBufferPointer(rebasing: slice[Int(cps.offsets[start])..<Int(cps.offsets[Int(end)])])
                    pieces.append(String(decoding: piece, as: UTF8.self))
                    start = Int(end)
                }
            }
            return pieces
        }
    }
}

/// A text's tokens up to a limit (`Tokenizer.encode(_:addSpecial:parseSpecial:stoppingAbove:)`).
public struct LimitedEncoding: Sendable, Equatable {
    /// All of the text's tokens when `isComplete`; otherwise the first of them.
    public var tokens: [TokenID]
    /// The text's token count: `tokens.count` when complete; otherwise a lower bound of
    /// it, more than the limit.
    public var count: Int
    /// Whether the text was encoded to its end.
    public var isComplete: Bool
}

/// Decides where a limited encoding stops: once the tokens so far, plus the fewest a
/// word can give, are more than `limit`.
struct TokenCountBound {
    let limit: Int
    /// The most bytes of text one token stands for, when that bounds a word's count
    /// (`Tokenizer.tokenCountBoundIsValid`; nil: only the tokens produced count).
    let bytesPerToken: Int?
    /// The lower bound that went over `limit`, once one did.
    private(set) var exceeded: Int?

    init(limit: Int, bytesPerToken: Int?) {
        self.limit = limit
        self.bytesPerToken = bytesPerToken.map { max($0, 1) }
    }

    /// Whether encoding goes on with a word of `bytes` bytes (that end up in tokens) after
    /// `count` tokens; if not, records the count's lower bound.
    @inline(__always)
    mutating func admits(bytes: Int, after count: Int) -> Bool {
        if exceeded != nil { return false }
        guard exceeds(bytes: bytes, after: count) else { return true }
        exceeded = leastCount(bytes: bytes, after: count)
        return false
    }

    /// Whether `count` tokens and a word of `bytes` bytes are surely more than the limit.
    @inline(__always)
    func exceeds(bytes: Int, after count: Int) -> Bool {
        leastCount(bytes: bytes, after: count) > limit
    }

    @inline(__always)
    private func leastCount(bytes: Int, after count: Int) -> Int {
        guard let bytesPerToken else { return count }
        return count + (bytes + bytesPerToken - 1) / bytesPerToken
    }
}
