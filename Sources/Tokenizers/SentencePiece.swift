/// SentencePiece-style BPE (`tokenizer.ggml.model` = `llama`), as llama.cpp's
/// `llm_tokenizer_spm` does it: start from single UTF-8 characters, repeatedly join the
/// adjacent pair whose concatenation is the vocabulary token of highest score (the
/// leftmost on ties), and emit every final piece that is not a token as byte tokens
/// `<0xXX>`.
struct SentencePieceModel: Sendable {
    /// `tokenizer.ggml.scores`.
    let scores: [Float]
    /// The token for each byte: `<0xXX>`, else the one-byte text, else the unknown token.
    let byteTokens: [Int32?]

    /// The characters (UTF-8) that some token holds right before a `▁` other than its
    /// leading run of `▁`: none for Llama 2 and Phi-3, `>` for Gemma 3 (its token `>▁</`).
    ///
    /// A merge can only join two adjacent pieces into a token, so it can join a character
    /// `c` to a following `▁` only if some token contains `c▁` with that `▁` after its
    /// leading run. The text can therefore be cut before every `▁` that follows a
    /// character other than `▁` and not in this list, and the parts tokenized separately
    /// (and cached) with exactly the result of tokenizing the whole text, which llama.cpp
    /// does: no merge ever crosses such a cut, and merges within a part happen in the
    /// same order (by score, then position) as they would in the whole.
    let charactersBeforeInnerSpace: [[UInt8]]
    /// Whether a byte ends one of `charactersBeforeInnerSpace` (a quick filter).
    private let endsCharacterBeforeInnerSpace: [Bool]

    /// Whether the text is cut at words: false when too many characters can join a
    /// following `▁` for the cut to pay.
    var splitsAtWords: Bool { charactersBeforeInnerSpace.count <= Self.maximumJoiningCharacters }
    static let maximumJoiningCharacters = 64

    init(vocabulary: Vocabulary, scores: [Float], unknownID: Int32?) {
        self.scores = scores
        var joining = Set<[UInt8]>()
        vocabulary.arena.withUnsafeBufferPointer { arena in
            for id in 0..<vocabulary.count where joining.count <= Self.maximumJoiningCharacters {
                var i = Int(vocabulary.starts[id])
                let start = i
                let end = Int(vocabulary.starts[id + 1])
                // Skip the leading run of ▁, then look for others.
                while i + 2 < end && arena[i] == 0xE2 && arena[i + 1] == 0x96 && arena[i + 2] == 0x81 { i += 3 }
                while i + 2 < end {
                    if i > start && arena[i] == 0xE2 && arena[i + 1] == 0x96 && arena[i + 2] == 0x81 {
                        // The character before: back over continuation bytes.
                        var c = i - 1
                        while c > start && arena[c] & 0xC0 == 0x80 { c -= 1 }
                        let character = Array(arena[c..<i])
                        if character != [0xE2, 0x96, 0x81] { joining.insert(character) }
                    }
                    i += 1
                }
            }
        }
        charactersBeforeInnerSpace = joining.sorted { $0.lexicographicallyPrecedes($1) }
        var ends = [Bool](repeating: false, count: 256)
        for c in joining { ends[Int(c.last!)] = true }
        endsCharacterBeforeInnerSpace = ends
        var byteTokens = [Int32?](repeating: nil, count: 256)
        let hex = Array("0123456789ABCDEF".utf8)
        for b in 0..<256 {
            let name: [UInt8] = [0x3C, 0x30, 0x78, hex[b >> 4], hex[b & 15], 0x3E]  // <0xXX>
            byteTokens[b] = vocabulary.id(of: name) ?? vocabulary.id(of: [UInt8(b)]) ?? unknownID
        }
        self.byteTokens = byteTokens
    }

    private struct Bigram: HeapElement {
        var score: Float
        var left: Int32
        var right: Int32
        var size: Int32

        @inline(__always)
        static func comesBefore(_ a: Bigram, _ b: Bigram) -> Bool {
            a.score > b.score || (a.score == b.score && a.left < b.left)
        }
    }

    /// Tokenizes `text` (already escaped: spaces are `▁`) and appends the ids to `out`,
    /// word by word when `splitsAtWords`, with a cache of the words seen; stops before a
    /// word (or the whole text) that `bound` does not admit.
    func tokenize(
        _ text: [UInt8], vocabulary: Vocabulary, cache: inout WordCache, bound: inout TokenCountBound,
        into out: inout [Int32]
    ) {
        text.withUnsafeBufferPointer { bytes in
            guard splitsAtWords else {
                guard bound.admits(bytes: bytes.count, after: out.count) else { return }
                tokenizeWhole(bytes, vocabulary: vocabulary, into: &out)
                return
            }
            var start = 0
            var i = 1
            let n = bytes.count
            while i <= n {
                // Cut before a ▁ whose previous character is neither ▁ nor one that a token
                // joins to a following ▁, and at the end.
                let cut =
                    i == n
                    || (bytes[i] == 0xE2 && i + 2 < n && bytes[i + 1] == 0x96 && bytes[i + 2] == 0x81
                        && !(i >= 3 && bytes[i - 3] == 0xE2 && bytes[i - 2] == 0x96 && bytes[i - 1] == 0x81)
                        && !joinsFollowingSpace(bytes, before: i))
                if cut {
                    let word = UnsafeBufferPointer(rebasing: bytes[start..<i])
                    guard bound.admits(bytes: word.count, after: out.count) else { return }
                    if !cache.lookup(word, into: &out) {
                        let before = out.count
                        tokenizeWhole(word, vocabulary: vocabulary, into: &out)
                        cache.store(word, out[before...])
                    }
                    start = i
                }
                i += 1
            }
        }
    }

    /// Whether the character that ends just before `position` is one of
    /// `charactersBeforeInnerSpace`.
    @inline(__always)
    private func joinsFollowingSpace(_ bytes: UnsafeBufferPointer<UInt8>, before position: Int) -> Bool {
        guard endsCharacterBeforeInnerSpace[Int(bytes[position - 1])] else { return false }
        var c = position - 1
        while c > 0 && bytes[c] & 0xC0 == 0x80 { c -= 1 }
        return charactersBeforeInnerSpace.contains { $0.elementsEqual(bytes[c..<position]) }
    }

    /// The SentencePiece merge loop over all of `bytes`.
    func tokenizeWhole(_ bytes: UnsafeBufferPointer<UInt8>, vocabulary: Vocabulary, into out: inout [Int32]) {
        if bytes.isEmpty { return }
        do {
            var start: [Int32] = []
            var length: [Int32] = []
            start.reserveCapacity(bytes.count)
            length.reserveCapacity(bytes.count)
            var offset = 0
            while offset < bytes.count {
                let b = bytes[offset]
                // llama.cpp's unicode_len_utf8: the length a lead byte announces (1 for a
                // stray continuation byte), clamped to the end of the text.
                let announced = b < 0xC0 ? 1 : (b < 0xE0 ? 2 : (b < 0xF0 ? 3 : 4))
                let n = min(announced, bytes.count - offset)
                start.append(Int32(offset))
                length.append(Int32(n))
                offset += n
            }
            let count = start.count
            var next = (0..<count).map { Int32($0 + 1 < count ? $0 + 1 : -1) }
            var prev = (0..<count).map { Int32($0 - 1) }
            var heap = BinaryHeap<Bigram>()

            func tryAdd(_ l: Int32, _ r: Int32) {
                guard l >= 0, r >= 0 else { return }
                let s = Int(start[Int(l)])
                let size = Int(length[Int(l)] + length[Int(r)])
                guard let id = vocabulary.id(of: UnsafeBufferPointer(rebasing: bytes[s..<s + size])) else { return }
                heap.push(Bigram(score: scores[Int(id)], left: l, right: r, size: Int32(size)))
            }

            for i in 1..<max(count, 1) { tryAdd(Int32(i - 1), Int32(i)) }

            while let bigram = heap.pop() {
                let l = Int(bigram.left), r = Int(bigram.right)
                // Skip pairs that are stale: one side was merged away or has grown.
                if length[l] == 0 || length[r] == 0 || length[l] + length[r] != bigram.size { continue }
                length[l] += length[r]
                length[r] = 0
                next[l] = next[r]
                if next[r] >= 0 { prev[Int(next[r])] = bigram.left }
                tryAdd(prev[l], bigram.left)
                tryAdd(bigram.left, next[l])
            }

            var i: Int32 = 0
            while i != -1 {
                let s = Int(start[Int(i)]), n = Int(length[Int(i)])
                let piece = UnsafeBufferPointer(rebasing: bytes[s..<s + n])
                if let id = vocabulary.id(of: piece) {
                    out.append(id)
                } else {
                    // Not a token (only unmerged characters can be): byte fallback.
                    for b in piece {
                        if let id = byteTokens[Int(b)] { out.append(id) }
                    }
                }
                i = next[Int(i)]
            }
        }
    }
}
