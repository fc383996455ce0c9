/// A set of token ids as a bitset.
public struct TokenMask: Equatable, Sendable {
    public var words: [UInt64]
    public let count: Int

    public init(count: Int) {
        self.count = count
        words = [UInt64](repeating: 0, count: (count + 63) / 64)
    }

    @inline(__always) public subscript(id: Int) -> Bool {
        get { words[id >> 6] & (1 << UInt64(id & 63)) != 0 }
        set { if newValue { words[id >> 6] |= 1 << UInt64(id & 63) } else { words[id >> 6] &= ~(1 << UInt64(id & 63)) } }
    }

    @inline(__always) mutating func formUnion(_ other: [UInt64]) {
        words.withUnsafeMutableBufferPointer { w in
            other.withUnsafeBufferPointer { o in
                for i in 0..<w.count { w[i] |= o[i] }
            }
        }
    }

    /// Number of allowed tokens.
    public var allowedCount: Int { words.reduce(0) { $0 + $1.nonzeroBitCount } }

    /// The allowed token ids, ascending.
    public var allowed: [Int] {
        var out: [Int] = []
        for (wi, w) in words.enumerated() where w != 0 {
            var x = w
            while x != 0 { out.append(wi * 64 + x.trailingZeroBitCount); x &= x - 1 }
        }
        return out
    }
}

/// A vocabulary as a byte trie in depth-first order, built once and shared by all grammars.
///
/// Node 0 is the root (the empty prefix). For node `i`, its children are the nodes from
/// `i + 1` up to `subtreeEnd[i]`, visited by jumping from a child `c` to `subtreeEnd[c]`.
public final class TokenVocabulary: Sendable {
    /// Token bytes, index = token id.
    public let tokens: [[UInt8]]
    /// Special/control token ids: they never match grammar bytes and are allowed only where
    /// the grammar may end.
    public let specialTokens: [Int]
    let nodeByte: [UInt8]
    let subtreeEnd: [Int32]
    /// Tokens ending at each node: tokenIDs[tokenStart[n] ..< tokenStart[n + 1]].
    let tokenStart: [Int32]
    let tokenIDs: [Int32]
    let maxTokenScalars: Int

    public var count: Int { tokens.count }

    public init(tokens: [[UInt8]], specialTokens: Set<Int> = []) {
        self.tokens = tokens
        self.specialTokens = specialTokens.sorted()
        let order = (0..<tokens.count).filter { !specialTokens.contains($0) && !tokens[$0].isEmpty }
            .sorted { tokens[$0].lexicographicallyPrecedes(tokens[$1]) }
        var bytes: [UInt8] = [0]
        var ends: [Int32] = [0]
        var starts: [Int32] = [0]
        var ids: [Int32] = []
        var path: [Int] = [0]  // node index per depth (path[0] = root)
        var pathBytes: [UInt8] = []
        var maxLen = 0
        // Tokens attached to nodes, collected as (node, id).
        var attach: [(Int, Int32)] = []
        for id in order {
            let t = tokens[id]
            maxLen = max(maxLen, t.count)
            // Common prefix with the current path.
            var common = 0
            while common < pathBytes.count && common < t.count && pathBytes[common] == t[common] { common += 1 }
            // Close nodes deeper than `common`.
            while pathBytes.count > common {
                let node = path.removeLast(); pathBytes.removeLast()
                ends[node] = Int32(bytes.count)
            }
            for k in common..<t.count {
                bytes.append(t[k]); ends.append(0)
                path.append(bytes.count - 1); pathBytes.append(t[k])
            }
            attach.append((path.last!, Int32(id)))
        }
        while path.count > 1 { let node = path.removeLast(); ends[node] = Int32(bytes.count) }
        ends[0] = Int32(bytes.count)
        // Group token ids per node (attach is in node order since tokens are sorted).
        var per = [[Int32]](repeating: [], count: bytes.count)
        for (n, id) in attach { per[n].append(id) }
        starts = [0]
        for n in 0..<bytes.count { ids += per[n]; starts.append(Int32(ids.count)) }
        nodeByte = bytes
        subtreeEnd = ends
        tokenStart = starts
        tokenIDs = ids
        maxTokenScalars = maxLen
    }

    /// Number of trie nodes (including the root).
    public var nodeCount: Int { nodeByte.count }
}

/// Computes, for a matcher state, the set of tokens that keep the output valid.
///
/// The work is split by the threads of the matcher state. For a thread inside a terminal
/// in state q, the tokens whose bytes stay inside the terminal depend only on (terminal, q):
/// they are found once by walking the vocabulary trie with the terminal's automaton alone and
/// cached as a bitset, together with the trie nodes where the terminal can end with more bytes
/// below ("exits"). At run time only the exits are walked with the full matcher, from the
/// thread's continuation. Whole masks are also cached per matcher state, since states recur.
public final class TokenMaskComputer {
    public let vocabulary: TokenVocabulary
    let grammar: Grammar

    struct LexInfo {
        var accepted: [UInt64]
        var exits: [Int32]
    }

    struct LexKey: Hashable { let terminal: Int32; let state: LexState }

    var lexCache: [LexKey: LexInfo] = [:]
    var stateCache: [MatchState: TokenMask] = [:]
    var buffers: [[MatchThread]] = []
    var stepCache: [UInt8: ([MatchThread], Bool)] = [:]
    /// Cache statistics.
    public private(set) var lexCacheMisses = 0
    public private(set) var stateCacheHits = 0

    /// Prepares mask computation for one grammar over a vocabulary.
    public init(vocabulary: TokenVocabulary, grammar: Grammar) {
        self.vocabulary = vocabulary
        self.grammar = grammar
    }

    /// The tokens allowed after the matcher's current input. Special tokens are allowed exactly
    /// when the matcher can end.
    public func mask(for matcher: GrammarMatcher) -> TokenMask {
        precondition(matcher.grammar === grammar, "the matcher uses another grammar")
        let state = matcher.state
        if let m = stateCache[state] { stateCacheHits += 1; return m }
        let engine = matcher.engine
        var mask = TokenMask(count: vocabulary.count)
        for th in state.threads {
            let tid = grammar.symbols[Int(th.position)]
            let info = lexInfo(terminal: tid, state: th.lex)
            mask.formUnion(info.accepted)
            if info.exits.isEmpty { continue }
            var cont: [MatchThread] = []
            var canEnd = false
            engine.expand(th.position + 1, th.stack, into: &cont, canEnd: &canEnd)
            engine.dedupe(&cont)
            if cont.isEmpty { continue }
            stepCache.removeAll(keepingCapacity: true)
            for node in info.exits { walkChildren(of: Int(node), from: cont, depth: 0, engine: engine, mask: &mask, useStepCache: true) }
        }
        if state.canEnd { for s in vocabulary.specialTokens { mask[s] = true } }
        if stateCache.count > 4096 { stateCache.removeAll() }
        stateCache[state] = mask
        return mask
    }

    /// Walks the trie below `node` from matcher threads, marking every token whose bytes keep
    /// the input valid.
    func walkChildren(of node: Int, from threads: [MatchThread], depth: Int, engine: MatchEngine, mask: inout TokenMask, useStepCache: Bool) {
        let v = vocabulary
        let end = Int(v.subtreeEnd[node])
        var child = node + 1
        if buffers.count <= depth { buffers.append([]) }
        while child < end {
            let byte = v.nodeByte[child]
            var next: [MatchThread]
            var canEnd: Bool
            if useStepCache, let c = stepCache[byte] {
                (next, canEnd) = c
            } else {
                next = []
                swap(&next, &buffers[depth])
                canEnd = engine.step(threads, byte, into: &next)
                if useStepCache { stepCache[byte] = (next, canEnd) }
            }
            if !next.isEmpty || canEnd {
                for k in Int(v.tokenStart[child])..<Int(v.tokenStart[child + 1]) { mask[Int(v.tokenIDs[k])] = true }
                if !next.isEmpty && Int(v.subtreeEnd[child]) > child + 1 {
                    walkChildren(of: child, from: next, depth: depth + 1, engine: engine, mask: &mask, useStepCache: false)
                }
            }
            if !useStepCache { swap(&next, &buffers[depth]) }
            child = Int(v.subtreeEnd[child])
        }
    }

    func lexInfo(terminal tid: Int32, state: LexState) -> LexInfo {
        let term = grammar.terminals[Int(tid)]
        let key = LexKey(terminal: tid, state: term.cacheKey(state, horizon: vocabulary.maxTokenScalars))
        if let info = lexCache[key] { return info }
        lexCacheMisses += 1
        var info = LexInfo(accepted: [UInt64](repeating: 0, count: (vocabulary.count + 63) / 64), exits: [])
        let v = vocabulary
        // Iterative DFS over the trie with the terminal automaton alone.
        var stack: [(node: Int32, state: LexState)] = [(0, state)]
        while let (node, s) = stack.popLast() {
            let end = Int(v.subtreeEnd[Int(node)])
            var child = Int(node) + 1
            while child < end {
                if let ns = term.step(s, v.nodeByte[child]) {
                    for k in Int(v.tokenStart[child])..<Int(v.tokenStart[child + 1]) {
                        let id = Int(v.tokenIDs[k])
                        info.accepted[id >> 6] |= 1 << UInt64(id & 63)
                    }
                    let hasChildren = Int(v.subtreeEnd[child]) > child + 1
                    if hasChildren {
                        if term.isFinal(ns) { info.exits.append(Int32(child)) }
                        if term.canContinue(ns) { stack.append((Int32(child), ns)) }
                    }
                }
                child = Int(v.subtreeEnd[child])
            }
        }
        if lexCache.count > 100_000 { lexCache.removeAll() }
        lexCache[key] = info
        return info
    }
}

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
                bytes.append(UInt8(hi * 16 + lo)); k += 2
            }
            if parts[1] == "s" { special.insert(id) }
            tokens.append(bytes)
        }
        return TokenVocabulary(tokens: tokens, specialTokens: special)
    }
}
