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
    /// For each first byte, the candidates whose text starts with it (in candidate order).
    let byFirstByte: [[Int32]]
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
        var byFirst = [[Int32]](repeating: [], count: 256)
        for (k, id) in candidates.enumerated() {
            let text = vocabulary.text(Int(id))
            texts.append(text)
            attrs.append(attributes[Int(id)])
            if let first = text.first { byFirst[Int(first)].append(Int32(k)) }
        }
        self.texts = texts
        self.attributes = attrs
        self.byFirstByte = byFirst
        self.isFirstByte = byFirst.map { !$0.isEmpty }
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
            for k in byFirstByte[Int(bytes[i])] where !present[Int(k)] {
                if !parseSpecial && !attributes[Int(k)].isDisjoint(with: [.control, .unknown]) { continue }
                if matches(texts[Int(k)], bytes, at: i) {
                    present[Int(k)] = true
                    any = true
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
        guard let first = text.first, to - from >= text.count else { return nil }
        var i = from
        while i + text.count <= to {
            if bytes[i] == first && matches(text, bytes, at: i) { return i }
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
