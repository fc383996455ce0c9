#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Splitting text at special tokens before the tokenizer model runs, as llama.cpp's
/// `tokenizer_st_partition` does.
///
/// The candidates are the control, unknown and user-defined tokens, longest text first.
/// Each candidate in turn replaces all of its occurrences in the text fragments that are
/// left. Control and unknown tokens take part only when special tokens are parsed;
/// user-defined tokens always do (as in Hugging Face `tokenizers`, where added tokens are
/// split out before the pre-tokenizer).
struct SpecialTokenMatcher: Sendable {
    /// Candidate ids, longest text first (ties: lower id first).
    let candidates: [Int32]
    /// The candidates' texts as a trie: `(node << 8 | byte)` -> child node; node 0 is the
    /// root. Finding every candidate that starts at a position costs one lookup per byte
    /// matched, however many candidates share a prefix (Gemma's 6,242 `<unusedN>` tokens).
    let trie: PairTable
    /// For each trie node, the first candidate whose text ends there, or -1.
    let candidateEndingAt: [Int32]
    /// For each candidate, the next one with the same text (a malformed vocabulary can
    /// repeat a text), or -1.
    let nextWithSameText: [Int32]
    /// Whether some candidate starts with this byte (a cheap filter for the scan).
    let isFirstByte: [Bool]
    let texts: [[UInt8]]
    let attributes: [TokenAttributes]

    init(vocabulary: Vocabulary, attributes: [TokenAttributes]) {
        var ids: [Int32] = []
        for id in 0..<vocabulary.count where !attributes[id].isDisjoint(with: [.control, .userDefined, .unknown]) {
            ids.append(Int32(id))
        }
        let lengths = ids.map { Int(vocabulary.starts[Int($0) + 1] - vocabulary.starts[Int($0)]) }
        let order = ids.indices.sorted { lengths[$0] != lengths[$1] ? lengths[$0] > lengths[$1] : ids[$0] < ids[$1] }
        candidates = order.map { ids[$0] }
        var texts: [[UInt8]] = []
        var attrs: [TokenAttributes] = []
        var trie = PairTable(capacity: 256)
        var ending: [Int32] = [-1]
        var next = [Int32](repeating: -1, count: candidates.count)
        var isFirst = [Bool](repeating: false, count: 256)
        for (k, id) in candidates.enumerated() {
            let text = vocabulary.text(Int(id))
            texts.append(text)
            attrs.append(attributes[Int(id)])
            guard let first = text.first else { continue }
            isFirst[Int(first)] = true
            var node: UInt64 = 0
            for b in text {
                let key = node << 8 | UInt64(b)
                if let child = trie.find(key) {
                    node = child
                } else {
                    trie.insertIfAbsent(key, UInt64(ending.count))
                    node = UInt64(ending.count)
                    ending.append(-1)
                }
            }
            if ending[Int(node)] < 0 {
                ending[Int(node)] = Int32(k)
            } else {
                var last = Int(ending[Int(node)])
                while next[last] >= 0 { last = Int(next[last]) }
                next[last] = Int32(k)
            }
        }
        self.texts = texts
        self.attributes = attrs
        self.trie = trie
        self.candidateEndingAt = ending
        self.nextWithSameText = next
        self.isFirstByte = isFirst
    }

    enum Fragment: Equatable {
        case token(Int32)
        /// A byte range of the input.
        case text(Int, Int)
    }

    /// Cuts `bytes` into text fragments and special tokens.
    func partition(_ bytes: UnsafeBufferPointer<UInt8>, parseSpecial: Bool) -> [Fragment] {
        if bytes.isEmpty { return [] }
        // Which candidates occur at all? One pass over the text; usually none do, and then
        // the whole text is one fragment.
        var present = [Bool](repeating: false, count: candidates.count)
        var any = false
        for i in 0..<bytes.count where isFirstByte[Int(bytes[i])] {
            var node: UInt64 = 0
            var j = i
            while j < bytes.count, let child = trie.find(node << 8 | UInt64(bytes[j])) {
                node = child
                j += 1
                var k = Int(candidateEndingAt[Int(node)])
                while k >= 0 {
                    if !present[k] && (parseSpecial || attributes[k].isDisjoint(with: [.control, .unknown])) {
                        present[k] = true
                        any = true
                    }
                    k = Int(nextWithSameText[k])
                }
            }
        }
        var fragments: [Fragment] = [.text(0, bytes.count)]
        if !any { return fragments }

        for k in 0..<candidates.count where present[k] {
            let text = texts[k]
            let attr = attributes[k]
            var result: [Fragment] = []
            for fragment in fragments {
                guard case .text(var offset, var length) = fragment else {
                    result.append(fragment)
                    continue
                }
                while true {
                    guard let match = find(text, bytes, from: offset, to: offset + length) else {
                        result.append(.text(offset, length))
                        break
                    }
                    if match > offset {
                        var leftLength = match - offset
                        if attr.contains(.lstrip) {
                            while leftLength > 0 && isCSpace(bytes[offset + leftLength - 1]) { leftLength -= 1 }
                        }
                        if leftLength > 0 { result.append(.text(offset, leftLength)) }
                    }
                    result.append(.token(candidates[k]))
                    let end = match + text.count
                    if end < offset + length {
                        var rightOffset = end
                        var rightLength = offset + length - end
                        if attr.contains(.rstrip) {
                            while rightLength > 0 && isCSpace(bytes[rightOffset]) {
                                rightOffset += 1
                                rightLength -= 1
                            }
                        }
                        if rightLength == 0 { break }
                        offset = rightOffset
                        length = rightLength
                    } else {
                        break
                    }
                }
            }
            fragments = result
        }
        return fragments
    }

    @inline(__always)
    private func matches(_ text: [UInt8], _ bytes: UnsafeBufferPointer<UInt8>, at i: Int) -> Bool {
        if i + text.count > bytes.count { return false }
        var j = 0
        while j < text.count {
            if bytes[i + j] != text[j] { return false }
            j += 1
        }
        return true
    }

    private func find(_ text: [UInt8], _ bytes: UnsafeBufferPointer<UInt8>, from: Int, to: Int) -> Int? {
        guard let first = text.first, to - from >= text.count, let base = bytes.baseAddress else { return nil }
        var i = from
        let last = to - text.count  // the last start that fits
        while i <= last {
            // memchr finds the next candidate start much faster than a byte loop.
            guard let hit = memchr(base + i, Int32(first), last - i + 1) else { return nil }
            i = base.distance(to: hit.assumingMemoryBound(to: UInt8.self))
            if matches(text, bytes, at: i) { return i }
            i += 1
        }
        return nil
    }

    /// C's `isspace` in the "C" locale.
    @inline(__always)
    private func isCSpace(_ b: UInt8) -> Bool {
        b == 0x20 || (b >= 0x09 && b <= 0x0D)
    }
}
