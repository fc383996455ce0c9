extension Tokenizer {
    /// What each token contributes to text when special tokens are rendered (llama.cpp's
    /// `cache_token_to_piece`): control, unknown and user-defined tokens their stored
    /// text; normal tokens their text mapped back to bytes (GPT-2 alphabet) or with `▁`
    /// turned into spaces (SentencePiece); byte tokens `<0xXX>` their byte; unused and
    /// undefined tokens nothing.
    static func buildPieces(vocabulary: Vocabulary, attributes: [TokenAttributes], model: Model) -> ([UInt8], [Int32]) {
        var arena: [UInt8] = []
        arena.reserveCapacity(vocabulary.arena.count)
        var starts: [Int32] = [0]
        starts.reserveCapacity(vocabulary.count + 1)
        for id in 0..<vocabulary.count {
            let text = vocabulary.text(id)
            let attr = attributes[id]
            if !attr.isDisjoint(with: [.control, .unknown, .userDefined]) {
                arena += text
            } else if attr.contains(.normal) {
                switch model {
                case .bytePairEncoding:
                    arena += ByteLevel.decode(text)
                case .sentencePiece:
                    var i = 0
                    while i < text.count {
                        if i + 2 < text.count && text[i] == 0xE2 && text[i + 1] == 0x96 && text[i + 2] == 0x81 {
                            arena.append(0x20)
                            i += 3
                        } else {
                            arena.append(text[i])
                            i += 1
                        }
                    }
                }
            } else if attr.contains(.byte), model == .sentencePiece {
                // `<0xXX>`: llama.cpp reads the two hex digits at offset 3.
                let hex = text.count >= 5 ? String(decoding: text[3..<5], as: UTF8.self) : ""
                arena.append(UInt8(hex, radix: 16) ?? 0)
            }
            starts.append(Int32(arena.count))
        }
        return (arena, starts)
    }

    /// Whether a token is hidden unless special tokens are rendered (control and unknown).
    @inline(__always)
    func isHidden(_ id: Int) -> Bool {
        !attributes[id].isDisjoint(with: [.control, .unknown])
    }

    /// The exact bytes token `id` contributes to decoded text (llama.cpp's
    /// `token_to_piece`). Control and unknown tokens contribute nothing unless
    /// `renderSpecial`; an invalid id contributes nothing. The bytes of one token need not
    /// be valid UTF-8 on their own (a character may span several tokens).
    public func tokenBytes(_ id: TokenID, renderSpecial: Bool = false) -> [UInt8] {
        guard contains(id), renderSpecial || !isHidden(Int(id)) else { return [] }
        return Array(pieceArena[Int(pieceStarts[Int(id)])..<Int(pieceStarts[Int(id) + 1])])
    }

    /// Appends `tokenBytes(id, renderSpecial:)` to `out` without an intermediate array.
    @inline(__always)
    func appendTokenBytes(_ id: TokenID, renderSpecial: Bool, into out: inout [UInt8]) {
        guard contains(id), renderSpecial || !isHidden(Int(id)) else { return }
        pieceArena.withUnsafeBufferPointer { arena in
            out.append(contentsOf: UnsafeBufferPointer(rebasing: arena[Int(pieceStarts[Int(id)])..<Int(pieceStarts[Int(id) + 1])]))
        }
    }

    /// `tokenBytes` of every token, indexed by id (what a grammar engine needs to test
    /// each candidate token against the bytes it accepts).
    public func allTokenBytes(renderSpecial: Bool = false) -> [[UInt8]] {
        (0..<vocabulary.count).map { tokenBytes(TokenID($0), renderSpecial: renderSpecial) }
    }

    /// The text of one token as it appears in output (`tokenBytes` with special tokens
    /// rendered by default), with any incomplete UTF-8 shown as U+FFFD.
    public func piece(for id: TokenID, renderSpecial: Bool = true) -> String {
        String(decoding: tokenBytes(id, renderSpecial: renderSpecial), as: UTF8.self)
    }

    /// Decodes token ids into bytes, as llama.cpp's `llama_detokenize`.
    ///
    /// - Parameters:
    ///   - renderSpecial: Include the text of control and unknown tokens.
    ///   - removeSpecial: Drop a leading BOS and a trailing EOS where the model adds them.
    ///   - cleanSpaces: Tidy spaces before `? ! . ,`, around a lone `'` and before `'s 'm
    ///     're 've`; nil uses the model's setting (`cleanSpaces`).
    ///
    /// With `addSpacePrefix` (SentencePiece) the first token's leading space is dropped,
    /// unless `removeSpecial` removed a BOS.
    public func decodeBytes(
        _ ids: [TokenID], renderSpecial: Bool = false, removeSpecial: Bool = false,
        cleanSpaces: Bool? = nil
    ) -> [UInt8] {
        var ids = ids[...]
        var removeSpace = addSpacePrefix
        if removeSpecial && addBOS, let first = ids.first, first == bosID {
            removeSpace = false
            ids = ids.dropFirst()
        }
        if removeSpecial && addEOS, let last = ids.last, last == eosID {
            ids = ids.dropLast()
        }
        var out: [UInt8] = []
        out.reserveCapacity(ids.count * 4)
        pieceArena.withUnsafeBufferPointer { arena in
            for id in ids {
                defer { removeSpace = false }
                guard contains(id), renderSpecial || !isHidden(Int(id)) else { continue }
                var start = Int(pieceStarts[Int(id)])
                let end = Int(pieceStarts[Int(id) + 1])
                if removeSpace && start < end && arena[start] == 0x20 { start += 1 }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: arena[start..<end]))
            }
        }
        if cleanSpaces ?? self.cleanSpaces {
            Tokenizer.cleanUpSpaces(&out)
        }
        return out
    }

    /// Decodes token ids into text (see `decodeBytes`); invalid UTF-8 (a character cut
    /// off at the end) becomes U+FFFD.
    public func decode(
        _ ids: [TokenID], renderSpecial: Bool = false, removeSpecial: Bool = false,
        cleanSpaces: Bool? = nil
    ) -> String {
        String(
            decoding: decodeBytes(ids, renderSpecial: renderSpecial, removeSpecial: removeSpecial, cleanSpaces: cleanSpaces),
            as: UTF8.self)
    }

    /// llama.cpp's three clean-up passes over detokenized text, done in place exactly as
    /// it does them (including its quirks: the second pass overwrites the space after a
    /// lone apostrophe with a NUL that later passes then see).
    static func cleanUpSpaces(_ text: inout [UInt8]) {
        let space = UInt8(ascii: " "), quote = UInt8(ascii: "'")
        // 1. " ?", " !", " .", " ," lose the space.
        var total1 = text.count
        var total = total1 > 0 ? 1 : 0
        var i = 1
        while i < total1 {
            let x = text[i]
            if text[i - 1] == space
                && (x == UInt8(ascii: "?") || x == UInt8(ascii: "!") || x == UInt8(ascii: ".") || x == UInt8(ascii: ","))
            {
                total -= 1
            }
            text[total] = x
            total += 1
            i += 1
        }
        // 2. " ' " becomes "'".
        let total2 = total
        total = total2 > 0 ? 1 : 0
        i = 1
        while i < total2 {
            let x = text[i]
            if x == quote && i + 1 < total2 && text[i - 1] == space && text[i + 1] == space {
                total -= 1
                i += 1
                text[i] = 0
            }
            text[total] = x
            total += 1
            i += 1
        }
        // 3. " 's", " 'm", " 're", " 've" lose the space.
        let total3 = total
        total = total3 > 0 ? 1 : 0
        i = 1
        while i < total3 {
            let x = text[i]
            if text[i - 1] == space && x == quote && i + 1 < total3 {
                let x1 = text[i + 1]
                if x1 == UInt8(ascii: "t") || x1 == UInt8(ascii: "d") {
                    // kept
                } else if x1 == UInt8(ascii: "s") || x1 == UInt8(ascii: "m") {
                    total -= 1
                } else if i + 2 < total3 {
                    let x2 = text[i + 2]
                    if (x1 == UInt8(ascii: "r") && x2 == UInt8(ascii: "e")) || (x1 == UInt8(ascii: "v") && x2 == UInt8(ascii: "e")) {
                        total -= 1
                    }
                }
            }
            text[total] = x
            total += 1
            i += 1
        }
        total1 = total
        text.removeLast(text.count - total1)
    }
}

/// Turns a stream of token ids into text without ever emitting a broken UTF-8 sequence:
/// bytes of a character that spans several tokens (an emoji, a CJK character in a
/// byte-fallback vocabulary) are held back until the character is complete.
///
/// ```swift
/// var detokenizer = StreamingDetokenizer(tokenizer: tokenizer)
/// for id in generated { print(detokenizer.append(id), terminator: "") }
/// print(detokenizer.finish())
/// ```
///
/// Pieces are concatenated as they are (no space clean-up, no leading-space removal
/// unless `stripLeadingSpace`), as llama.cpp prints tokens while generating.
public struct StreamingDetokenizer: Sendable {
    /// The tokenizer whose pieces are used.
    public let tokenizer: Tokenizer
    /// Include the text of control tokens.
    public var renderSpecial: Bool
    /// Drop one leading space from the first token's piece (as `decode` does for
    /// SentencePiece vocabularies).
    public var stripLeadingSpace: Bool
    private var pending: [UInt8] = []
    private var isFirst = true

    /// A detokenizer; `renderSpecial` includes control tokens' text.
    public init(tokenizer: Tokenizer, renderSpecial: Bool = false, stripLeadingSpace: Bool = false) {
        self.tokenizer = tokenizer
        self.renderSpecial = renderSpecial
        self.stripLeadingSpace = stripLeadingSpace
    }

    /// Bytes received but not yet emitted (the start of an unfinished character).
    public var pendingBytes: [UInt8] { pending }

    /// Adds one token; returns the text that is now complete (possibly empty).
    public mutating func append(_ id: TokenID) -> String {
        let before = pending.count
        tokenizer.appendTokenBytes(id, renderSpecial: renderSpecial, into: &pending)
        if isFirst {
            isFirst = false
            if stripLeadingSpace, pending.count > before, pending[before] == 0x20 { pending.remove(at: before) }
        }
        return emitComplete()
    }

    /// Adds raw bytes; returns the text that is now complete.
    public mutating func append(bytes: [UInt8]) -> String {
        pending += bytes
        return emitComplete()
    }

    private mutating func emitComplete() -> String {
        let cut = StreamingDetokenizer.completePrefixLength(pending)
        if cut == 0 { return "" }
        if cut == pending.count {
            let text = String(decoding: pending, as: UTF8.self)
            pending.removeAll(keepingCapacity: true)
            return text
        }
        let text = String(decoding: pending[..<cut], as: UTF8.self)
        pending.removeFirst(cut)
        return text
    }

    /// Emits whatever is held back (an unfinished character becomes U+FFFD) and resets.
    public mutating func finish() -> String {
        let text = String(decoding: pending, as: UTF8.self)
        pending.removeAll()
        isFirst = true
        return text
    }

    /// The length of the longest prefix of `bytes` that does not end inside a UTF-8
    /// character that later bytes could still complete.
    static func completePrefixLength(_ bytes: [UInt8]) -> Int {
        let n = bytes.count
        // Look back at most 3 bytes for the lead byte of the last character.
        var i = n - 1
        let lowest = max(0, n - 4)
        while i >= lowest {
            let b = bytes[i]
            if b & 0xC0 != 0x80 {  // not a continuation byte
                let need: Int
                if b < 0x80 {
                    need = 1
                } else if b >= 0xC2 && b < 0xE0 {
                    need = 2
                } else if b >= 0xE0 && b < 0xF0 {
                    need = 3
                } else if b >= 0xF0 && b < 0xF5 {
                    need = 4
                } else {
                    return n
                }
                // Incomplete only if every byte after the lead is a continuation (checked
                // by construction) and there are too few of them.
                return n - i < need ? i : n
            }
            i -= 1
        }
        return n  // only continuation bytes at the end: invalid, emit (as U+FFFD)
    }
}
