/// Byte-level BPE (`tokenizer.ggml.model` = `gpt2`): the merge table and the merge loop
/// that turns one pre-token piece into token ids.
///
/// Symbols are integers: a symbol below `vocabularySize` is the token of that id; texts
/// that occur in merges but are not tokens get ids from `vocabularySize` up. A merge is
/// then a lookup of the pair `(left, right)` in a hash table giving its rank (its line in
/// `tokenizer.ggml.merges`) and the merged symbol, with no string work at encode time.
struct BPEModel: Sendable {
    /// `(left << 32 | right)` -> `(rank << 32 | merged)`.
    let merges: PairTable
    /// The symbol of each byte: the token whose text is the byte's GPT-2 code point, or -1.
    let byteSymbol: [Int32]
    /// Texts (in the GPT-2 alphabet) of the symbols that are not tokens, by `id - vocabularySize`.
    let extraTexts: [[UInt8]]
    let vocabularySize: Int

    /// Parses `tokenizer.ggml.merges` ("left right" per line, rank = line number).
    init(vocabulary: Vocabulary, merges lines: [String]) {
        let n = vocabulary.count
        var extras = ByteStringTable(capacity: 64)
        var extraTexts: [[UInt8]] = []
        var table = PairTable(capacity: lines.count)

        func symbol(_ bytes: UnsafeBufferPointer<UInt8>) -> Int32 {
            if let id = vocabulary.id(of: bytes) { return id }
            let candidate = Int32(n + extraTexts.count)
            let stored = extras.insertIfAbsent(bytes, candidate)
            if stored == candidate { extraTexts.append(Array(bytes)) }
            return stored
        }

        var joined: [UInt8] = []
        for (rank, line) in lines.enumerated() {
            var line = line
            line.withUTF8 { bytes in
                // llama.cpp splits at the first space after the first byte; a line without
                // one gives an empty pair, which can never match.
                guard bytes.count > 1, let space = bytes[1...].firstIndex(of: 0x20) else { return }
                let left = UnsafeBufferPointer(rebasing: bytes[0..<space])
                let right = UnsafeBufferPointer(rebasing: bytes[(space + 1)...])
                let l = symbol(left), r = symbol(right)
                joined.removeAll(keepingCapacity: true)
                joined.append(contentsOf: left)
                joined.append(contentsOf: right)
                let m = joined.withUnsafeBufferPointer { symbol($0) }
                let key = UInt64(UInt32(bitPattern: l)) << 32 | UInt64(UInt32(bitPattern: r))
                table.insertIfAbsent(key, UInt64(rank) << 32 | UInt64(UInt32(bitPattern: m)))
            }
        }

        var byteSymbol = [Int32](repeating: -1, count: 256)
        for b in 0..<256 {
            byteSymbol[b] = vocabulary.id(of: ByteLevel.byteToUTF8[b]) ?? -1
        }
        self.merges = table
        self.byteSymbol = byteSymbol
        self.extraTexts = extraTexts
        self.vocabularySize = n
    }

    /// How many bytes of `word` have a token (the others are dropped when it is encoded).
    func tokenBytes(in word: UnsafeBufferPointer<UInt8>) -> Int {
        var n = 0
        for b in word where byteSymbol[Int(b)] >= 0 { n += 1 }
        return n
    }

    /// Rank and merged symbol of a pair, or nil when the pair never merges.
    @inline(__always)
    func merge(_ left: Int32, _ right: Int32) -> (rank: Int32, merged: Int32)? {
        guard left >= 0, right >= 0 else { return nil }
        let key = UInt64(UInt32(bitPattern: left)) << 32 | UInt64(UInt32(bitPattern: right))
        guard let v = merges.find(key) else { return nil }
        return (Int32(truncatingIfNeeded: v >> 32), Int32(truncatingIfNeeded: v & 0xFFFF_FFFF))
    }

    /// Words with at most this many symbols use the quadratic scan, longer ones the heap.
    static let heapThreshold = 48

    /// How `applyMerges` finds the next pair (both give the same result; tests check it).
    enum MergeStrategy: Sendable {
        /// The scan for short pieces, the heap for long ones.
        case automatic
        /// Always the quadratic scan.
        case scan
        /// Always the heap.
        case heap
    }

    /// Applies merges to `symbols` in place: repeatedly merge the adjacent pair of lowest
    /// rank, the leftmost one on ties (exactly llama.cpp's priority-queue order).
    func applyMerges(_ symbols: inout [Int32], strategy: MergeStrategy = .automatic) {
        if symbols.count < 2 { return }
        if strategy == .heap || (strategy == .automatic && symbols.count > BPEModel.heapThreshold) {
            applyMergesHeap(&symbols)
            return
        }
        // ranks[i]: rank of the pair (symbols[i], symbols[i+1]), Int32.max when none.
        var ranks = [Int32](repeating: .max, count: symbols.count - 1)
        var results = [Int32](repeating: -1, count: symbols.count - 1)
        for i in 0..<(symbols.count - 1) {
            if let m = merge(symbols[i], symbols[i + 1]) {
                ranks[i] = m.rank
                results[i] = m.merged
            }
        }
        while true {
            var best = -1
            var bestRank = Int32.max
            for i in 0..<ranks.count where ranks[i] < bestRank {
                bestRank = ranks[i]
                best = i
            }
            if best < 0 { break }
            symbols[best] = results[best]
            symbols.remove(at: best + 1)
            ranks.remove(at: best)
            results.remove(at: best)
            if best > 0 {
                if let m = merge(symbols[best - 1], symbols[best]) {
                    ranks[best - 1] = m.rank
                    results[best - 1] = m.merged
                } else {
                    ranks[best - 1] = .max
                }
            }
            if best < ranks.count {
                if let m = merge(symbols[best], symbols[best + 1]) {
                    ranks[best] = m.rank
                    results[best] = m.merged
                } else {
                    ranks[best] = .max
                }
            }
        }
    }

    /// The same merge order with a binary heap and a linked list: O(n log n) for long
    /// pieces (a megabyte without spaces must not take quadratic time).
    private func applyMergesHeap(_ symbols: inout [Int32]) {
        let n = symbols.count
        var sym = symbols
        var next = (0..<n).map { Int32($0 + 1 < n ? $0 + 1 : -1) }
        var prev = (0..<n).map { Int32($0 - 1) }
        var alive = [Bool](repeating: true, count: n)
        var heap = BinaryHeap<MergeCandidate>()
        func push(_ l: Int32, _ r: Int32) {
            guard l >= 0, r >= 0, let m = merge(sym[Int(l)], sym[Int(r)]) else { return }
            heap.push(MergeCandidate(rank: m.rank, left: l, right: r, leftSymbol: sym[Int(l)], rightSymbol: sym[Int(r)], merged: m.merged))
        }
        for i in 0..<(n - 1) { push(Int32(i), Int32(i + 1)) }
        while let c = heap.pop() {
            let l = Int(c.left), r = Int(c.right)
            guard alive[l], alive[r], next[l] == c.right, sym[l] == c.leftSymbol, sym[r] == c.rightSymbol else { continue }
            sym[l] = c.merged
            alive[r] = false
            next[l] = next[r]
            if next[r] >= 0 { prev[Int(next[r])] = c.left }
            push(prev[l], c.left)
            push(c.left, next[l])
        }
        symbols.removeAll(keepingCapacity: true)
        for i in 0..<n where alive[i] { symbols.append(sym[i]) }
    }
}

/// A pending merge in the heap: lowest rank first, then leftmost.
struct MergeCandidate: HeapElement {
    var rank: Int32
    var left: Int32
    var right: Int32
    var leftSymbol: Int32
    var rightSymbol: Int32
    var merged: Int32

    @inline(__always)
    static func comesBefore(_ a: MergeCandidate, _ b: MergeCandidate) -> Bool {
        a.rank < b.rank || (a.rank == b.rank && a.left < b.left)
    }
}

/// Elements of `BinaryHeap`: `comesBefore` is the priority order (the top comes first).
protocol HeapElement {
    static func comesBefore(_ a: Self, _ b: Self) -> Bool
}

/// A minimal binary heap (sift with a hole, on unsafe buffers: the merge loops of long
/// pieces spend most of their time here).
struct BinaryHeap<Element: HeapElement> {
    private(set) var items: [Element] = []

    var isEmpty: Bool { items.isEmpty }

    mutating func push(_ e: Element) {
        items.append(e)
        items.withUnsafeMutableBufferPointer { h in
            var i = h.count - 1
            while i > 0 {
                let parent = (i - 1) / 2
                guard Element.comesBefore(e, h[parent]) else { break }
                h[i] = h[parent]
                i = parent
            }
            h[i] = e
        }
    }

    mutating func pop() -> Element? {
        guard let top = items.first else { return nil }
        let last = items.removeLast()
        if items.isEmpty { return top }
        items.withUnsafeMutableBufferPointer { h in
            let n = h.count
            var i = 0
            while true {
                let l = 2 * i + 1
                if l >= n { break }
                let r = l + 1
                let child = r < n && Element.comesBefore(h[r], h[l]) ? r : l
                guard Element.comesBefore(h[child], last) else { break }
                h[i] = h[child]
                i = child
            }
            h[i] = last
        }
        return top
    }
}

/// Token ids of pieces already encoded during one `encode` call (text repeats words a
/// lot, so most pieces are found here and skip the merge loop).
struct WordCache {
    private var keys = ByteStringTable(capacity: 1024)
    private var ranges: [(start: Int32, count: Int32)] = []
    private var ids: [Int32] = []

    /// Appends the cached ids of `word` to `out` and returns true, or returns false.
    @inline(__always)
    func lookup(_ word: UnsafeBufferPointer<UInt8>, into out: inout [Int32]) -> Bool {
        guard let index = keys.find(word) else { return false }
        let range = ranges[Int(index)]
        ids.withUnsafeBufferPointer { all in
            out.append(contentsOf: UnsafeBufferPointer(rebasing: all[Int(range.start)..<Int(range.start + range.count)]))
        }
        return true
    }

    mutating func store(_ word: UnsafeBufferPointer<UInt8>, _ tokens: ArraySlice<Int32>) {
        let index = Int32(ranges.count)
        keys.insertIfAbsent(word, index)
        ranges.append((Int32(ids.count), Int32(tokens.count)))
        ids.append(contentsOf: tokens)
    }
}
