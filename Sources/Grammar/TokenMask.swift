/// A set of token ids as a bitset.
public struct TokenMask: Equatable, Sendable {
    public var words: [UInt64]
    public let count: Int
    /// The computation stopped at `TokenMaskComputer.maxWorkPerMask`: every allowed token is
    /// still valid, but some valid tokens may be missing (never all of them, when the
    /// vocabulary has single-byte tokens).
    public internal(set) var isTruncated = false

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

    /// Allows the tokens a lexical walk accepted inside its terminal.
    @inline(__always) mutating func insert(_ info: TokenMaskComputer.LexInfo) {
        if let bits = info.acceptedBits { formUnion(bits) } else { insert(info.acceptedList) }
    }

    /// Allows the given token ids.
    @inline(__always) mutating func insert(_ ids: [Int32]) {
        words.withUnsafeMutableBufferPointer { w in
            for id in ids { w[Int(id) >> 6] |= 1 << UInt64(id & 63) }
        }
    }

    /// Number of allowed tokens.
    public var allowedCount: Int { words.reduce(0) { $0 + $1.nonzeroBitCount } }

    /// The only allowed token, when exactly one is allowed (it may be appended without sampling).
    public var single: Int? {
        var found: Int?
        for (wi, w) in words.enumerated() where w != 0 {
            if found != nil || w.nonzeroBitCount > 1 { return nil }
            found = wi * 64 + w.trailingZeroBitCount
        }
        return found
    }

    /// Sets the logits of disallowed tokens to -infinity. Apply before temperature, top-k and
    /// top-p, so that those see only the allowed tokens.
    public func apply(to logits: inout [Float]) {
        precondition(logits.count >= count, "fewer logits than tokens in the mask")
        logits.withUnsafeMutableBufferPointer { l in
            for i in 0..<count where words[i >> 6] & (1 << UInt64(i & 63)) == 0 { l[i] = -.infinity }
        }
    }

    /// The allowed token ids, ascending.
    public var allowed: [Int] {
        var out: [Int] = []
        for (wi, w) in words.enumerated() where w != 0 {
            var x = w
            while x != 0 {
                out.append(wi * 64 + x.trailingZeroBitCount)
                x &= x - 1
            }
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
    /// The token made of exactly one byte, per byte value (-1 when none).
    let singleByteTokens: [Int32]

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
                let node = path.removeLast()
                pathBytes.removeLast()
                ends[node] = Int32(bytes.count)
            }
            for k in common..<t.count {
                bytes.append(t[k])
                ends.append(0)
                path.append(bytes.count - 1)
                pathBytes.append(t[k])
            }
            attach.append((path.last!, Int32(id)))
        }
        while path.count > 1 {
            let node = path.removeLast()
            ends[node] = Int32(bytes.count)
        }
        ends[0] = Int32(bytes.count)
        // Group token ids per node (attach is in node order since tokens are sorted).
        var per = [[Int32]](repeating: [], count: bytes.count)
        for (n, id) in attach { per[n].append(id) }
        starts = [0]
        for n in 0..<bytes.count {
            ids += per[n]
            starts.append(Int32(ids.count))
        }
        var single = [Int32](repeating: -1, count: 256)
        for id in order.reversed() where tokens[id].count == 1 { single[Int(tokens[id][0])] = Int32(id) }
        singleByteTokens = single
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

    /// A class, so that a cache hit hands out one reference rather than four arrays.
    final class LexInfo {
        /// Tokens accepted inside the terminal: a bitset, or a short list when few.
        let acceptedBits: [UInt64]?
        let acceptedList: [Int32]
        let exits: [Int32]
        /// For unconstrained-content strings: scalar counts, so that one walk serves every
        /// length bound (see `boundedStringInfo`).
        let lengths: StringLengths?

        init(acceptedBits: [UInt64]?, acceptedList: [Int32], exits: [Int32], lengths: StringLengths?) {
            self.acceptedBits = acceptedBits
            self.acceptedList = acceptedList
            self.exits = exits
            self.lengths = lengths
        }

        /// The tokens that run past the terminal's end, merged by the bytes after the end
        /// (built on first use; see `ExitTrie`).
        var exitTrie: ExitTrie?

        var approximateBytes: Int {
            64 + (acceptedBits?.count ?? 0) * 8 + acceptedList.count * 4 + exits.count * 4
                + (lengths.map { ($0.inside.count + $0.closers.count) * 8 + $0.exitScalars.count * 8 } ?? 0)
        }
    }

    struct StringLengths {
        /// Tokens that stay inside the string, with their scalar counts, longest first.
        var inside: [(id: Int32, scalars: Int32)] = []
        /// Tokens that end exactly with the closing quote: scalars before it.
        var closers: [(id: Int32, scalars: Int32)] = []
        /// Scalars before the closing quote, per exit node.
        var exitScalars: [Int32] = []
        /// Bytes from the walk's start to each exit node.
        var exitDepths: [Int32] = []
    }

    /// Scratch state of a mask computation (a local value while computing, so that no
    /// exclusivity checks are paid on class properties in the inner loops).
    struct WalkContext {
        var buffers: [[MatchThread]] = []
        /// Per byte (256 entries once a mask has been computed; empty in a placeholder).
        var stepGen: [UInt32] = []
        var stepVal: [([MatchThread], Bool)] = []
        var gen: UInt32 = 1
        /// Work units spent on the current mask (thread steps and trie nodes walked).
        var work = 0
        var workLimit = Int.max
        var truncated = false
        /// The tokens an exit walk reached (duplicates possible, where exits nest), for the exit cache.
        var reached: [Int32] = []
    }

    /// Terminals seen so far (shared ids across grammars: equal terminals share cache entries).
    var terminalIDs: [Terminal: Int32] = [:]
    var nextTerminalID: Int32 = 0
    /// Per grammar: its terminal index -> shared terminal id.
    var grammarTerminals: [ObjectIdentifier: (grammar: Grammar, ids: [Int32])] = [:]
    /// Lexical results per shared terminal id, then per (normalized) terminal state.
    var lexCache: [Int32: [LexState: LexInfo]] = [:]
    var lexCacheCount = 0
    var lexCacheBytes = 0
    /// Shared ids of terminals that hold a grammar's own automaton (patterns, formats, enums):
    /// their cache entries are dropped when the grammars they came from are evicted.
    var grammarSpecific = Set<Int32>()
    var context = WalkContext()
    /// Cache statistics.
    public private(set) var lexCacheMisses = 0
    public private(set) var stateCacheHits = 0
    /// Trie nodes visited by lexical walks so far.
    public private(set) var walkedNodes = 0
    /// What the last `mask(for:)` did, for benchmarks that explain their slow masks.
    public private(set) var lastMask = MaskStatistics()

    /// The work behind one mask.
    public struct MaskStatistics: Sendable {
        /// The matcher's live parses.
        public var threads = 0
        /// Distinct (terminal position, lexical state) groups among them.
        public var groups = 0
        /// Lexical trie walks that were not cached yet (a terminal state seen for the first time).
        public var lexicalWalks = 0
        /// Matcher threads stepped plus trie nodes walked (the unit of `maxWorkPerMask`).
        public var work = 0
        /// The whole mask came from the per-state cache.
        public var cached = false
    }
    /// The most work one mask may take: matcher threads stepped plus trie nodes walked. A
    /// mask normally costs thousands of units, a first walk of the whole vocabulary a few
    /// hundred thousand; an ambiguous grammar with thousands of live parses could cost
    /// billions. Past the bound the mask is returned as computed so far (`isTruncated`):
    /// its tokens are all valid, it may miss some, and it always has the valid single-byte
    /// tokens, so generation can go on.
    public var maxWorkPerMask = 50_000_000

    /// Prepares mask computation over a vocabulary, for any number of grammars.
    public init(vocabulary: TokenVocabulary) {
        self.vocabulary = vocabulary
    }

    /// Precomputes the schema-independent work that every JSON grammar needs (the trie walks
    /// of a plain string from its opening quote and from inside, of a number and of
    /// whitespace). Optional: call once after loading a model so that the first masks of the
    /// first generation are as fast as the later ones.
    public func prewarm() {
        for (term, states) in [
            (Terminal.string(StringSpec()), [LexState(0, StringLexer.start), LexState(0, StringLexer.normal)]),
            (Terminal.number(NumberSpec(integerOnly: false)), [LexState()]),
            (Terminal.number(NumberSpec(integerOnly: true)), [LexState()]),
            (Terminal.whitespace(max: Int.max), [LexState()])
        ] {
            let id: Int32
            if let existing = terminalIDs[term] {
                id = existing
            } else {
                nextTerminalID += 1
                id = nextTerminalID
                terminalIDs[term] = id
            }
            for st in states { _ = lexInfo(term, sharedID: id, state: st) }
        }
    }

    func sharedIDs(_ grammar: Grammar) -> [Int32] {
        if let e = grammarTerminals[ObjectIdentifier(grammar)], e.grammar === grammar { return e.ids }
        if grammarTerminals.count >= 32 {
            // Forget the grammars seen so far. Their own automata (patterns, formats) stay,
            // with their walks, so that a later schema with the same pattern finds them
            // (automata compare by their tables), until there are more than
            // `retainedAutomata` of them: then they go too.
            grammarTerminals.removeAll()
        }
        if grammarSpecific.count > Self.retainedAutomata {
            for id in grammarSpecific {
                guard let removed = lexCache.removeValue(forKey: id) else { continue }
                for info in removed.values {
                    lexCacheCount -= 1
                    lexCacheBytes -= info.approximateBytes
                }
            }
            terminalIDs = terminalIDs.filter { !grammarSpecific.contains($0.value) }
            grammarSpecific.removeAll()
        }
        var ids: [Int32] = []
        for t in grammar.terminals {
            if let id = terminalIDs[t] {
                ids.append(id)
            } else {
                nextTerminalID += 1
                let id = nextTerminalID
                terminalIDs[t] = id
                if case .string(let spec) = t, spec.dfa != nil { grammarSpecific.insert(id) }
                ids.append(id)
            }
        }
        grammarTerminals[ObjectIdentifier(grammar)] = (grammar, ids)
        return ids
    }

    struct GroupKey: Hashable {
        let position: Int32
        let lex: LexState
    }

    /// The tokens allowed after the matcher's current input. Special tokens are allowed exactly
    /// when the matcher can end.
    public func mask(for matcher: GrammarMatcher) -> TokenMask {
        let state = matcher.state
        if state.overflowed { return TokenMask(count: vocabulary.count) }
        let pool = matcher.pool
        if pool.maskOwner === self, let m = pool.maskCache[state] {
            stateCacheHits += 1
            lastMask = MaskStatistics(threads: state.threads.count, cached: true)
            return m
        }
        let missesBefore = lexCacheMisses
        if pool.maskOwner !== self {
            pool.maskOwner = self
            pool.maskCache.removeAll()
            pool.exitCache.removeAll()
            pool.exitsBelowStandIn.removeAll()
            pool.groupCache.removeAll()
        }
        let grammar = matcher.grammar
        let ids = sharedIDs(grammar)
        let engine = matcher.engine
        var mask = TokenMask(count: vocabulary.count)
        var ctx = WalkContext()  // an empty placeholder while the computer's own is in use
        swap(&ctx, &context)
        if ctx.stepGen.isEmpty {
            ctx.stepGen = [UInt32](repeating: 0, count: 256)
            ctx.stepVal = [([MatchThread], Bool)](repeating: ([], false), count: 256)
        }
        ctx.work = 0
        ctx.workLimit = maxWorkPerMask
        ctx.truncated = false
        // Threads in the same terminal state share their lexical work; their continuations
        // are merged for the exit walks. Sorted, a group is a run of threads.
        let threads =
            state.threads.count < 2
            ? state.threads
            : state.threads.sorted { x, y in
                x.position != y.position ? x.position < y.position : (x.lex.a != y.lex.a ? x.lex.a < y.lex.a : x.lex.b < y.lex.b)
            }
        var groupStart = 0
        var groupCount = 0
        while groupStart < threads.count {
            var groupEnd = groupStart + 1
            while groupEnd < threads.count && threads[groupEnd].position == threads[groupStart].position
                && threads[groupEnd].lex == threads[groupStart].lex
            {
                groupEnd += 1
            }
            let k = GroupKey(position: threads[groupStart].position, lex: threads[groupStart].lex)
            let members = threads[groupStart..<groupEnd]
            groupStart = groupEnd
            groupCount += 1
            if ctx.work > ctx.workLimit {
                ctx.truncated = true
                break
            }
            let walkedBefore = walkedNodes
            defer { ctx.work += walkedNodes - walkedBefore }
            let tid = Int(grammar.symbols[Int(k.position)])
            let term = grammar.terminals[tid]
            let lexKey = term.cacheKey(k.lex, horizon: vocabulary.maxTokenScalars)
            let single = members.count == 1
            // A lone parse whose exits were walked above the stand-in before: its tokens
            // depend on its position and lexical state only.
            let groupKey = GroupKey(position: k.position, lex: lexKey)
            let known = single ? pool.groupCache[groupKey] : nil
            if let known, let tokens = known.exitTokens {
                mask.insert(known.info)
                mask.insert(tokens)
                continue
            }
            let info: LexInfo
            if let known {
                info = known.info
            } else if case .string(let spec) = term, spec.dfa == nil, spec.minLength > 0 || spec.maxLength != nil {
                // Cached per length bounds left (as `cacheKey` normalizes them): near a
                // short string's bound, filtering the plain string's walk costs a pass over
                // most of the vocabulary.
                if let hit = lexCache[ids[tid]]?[lexKey] {
                    info = hit
                } else {
                    info = boundedStringInfo(spec, state: k.lex)
                    storeLexInfo(info, sharedID: ids[tid], key: lexKey)
                }
            } else {
                info = lexInfo(term, sharedID: ids[tid], state: k.lex)
            }
            mask.insert(info)
            if info.exits.isEmpty {
                if single { pool.cacheGroup(groupKey, StackPool.GroupTokens(info: info, exitTokens: [])) }
                continue
            }
            if single && known == nil {
                let tokens = exitTokensAboveStack(terminal: Int32(tid), lex: lexKey, at: k.position, info: info, engine: engine, ctx: &ctx)
                if let tokens { mask.insert(tokens) }
                if !ctx.truncated { pool.cacheGroup(groupKey, StackPool.GroupTokens(info: info, exitTokens: tokens)) }
                if tokens != nil { continue }
            }
            var cont: [MatchThread] = []
            var canEnd = false
            for th in members { engine.expand(k.position + 1, th.stack, into: &cont, canEnd: &canEnd) }
            engine.canonicalize(&cont)
            if cont.isEmpty { continue }
            // What the exits lead to depends on the terminal, its lexical state up to what
            // `cacheKey` tells apart, and the continuation: not on where inside a string the
            // parse is, so a string value's masks walk its exits once.
            let key = StackPool.ExitKey(terminal: Int32(tid), lex: lexKey, continuation: cont)
            if let tokens = pool.exitCache[key] {
                mask.insert(tokens)
                continue
            }
            walkExits(info, from: cont, engine: engine, ctx: &ctx)
            mask.insert(ctx.reached)
            if !ctx.truncated { pool.cacheExit(key, ctx.reached) }
        }
        let truncated = ctx.truncated
        lastMask = MaskStatistics(
            threads: state.threads.count, groups: groupCount, lexicalWalks: lexCacheMisses - missesBefore, work: ctx.work)
        swap(&ctx, &context)
        if truncated { addSingleBytes(matcher, to: &mask) }
        if state.canEnd { for s in vocabulary.specialTokens { mask[s] = true } }
        if pool.maskCache.count > 1024 { pool.maskCache.removeAll() }
        pool.maskCache[state] = mask
        return mask
    }

    /// A truncated mask gets every valid single-byte token, so that it allows some token
    /// whenever some byte is valid (byte-level vocabularies have all 256).
    func addSingleBytes(_ matcher: GrammarMatcher, to mask: inout TokenMask) {
        mask.isTruncated = true
        var scratch: [MatchThread] = []
        for byte in 0...255 {
            let id = vocabulary.singleByteTokens[byte]
            guard id >= 0, let next = matcher.engine.next(matcher.state, UInt8(byte), scratch: &scratch) else { continue }
            if !next.overflowed { mask[Int(id)] = true }
        }
    }

    /// The tokens that run past a terminal's end from a thread in it, found without the
    /// thread's own return stack when they do not depend on it; nil when they do.
    ///
    /// The continuation is expanded on top of the pool's stand-in stack (`StackPool.standIn`)
    /// instead of the thread's stack, and the exits are walked from there. If neither the
    /// expansion nor the walk popped the stand-in or applied an object guard to it, no step
    /// read below it, so the same tokens follow whatever stack lies there: the result is
    /// cached under the stand-in continuation and serves every thread at this position. An
    /// object key in any order is the case in point: its thread's stack holds the set of keys
    /// seen so far, new after each member, but what follows the key (`:`, the value's start)
    /// does not read it. The two walks step the same threads one for one (stacks above the
    /// base map to each other), so they also overflow alike.
    func exitTokensAboveStack(
        terminal: Int32, lex: LexState, at position: Int32, info: LexInfo, engine: MatchEngine, ctx: inout WalkContext
    ) -> [Int32]? {
        let pool = engine.pool
        let base = pool.makeStandIn()
        pool.standInReached = false
        var cont: [MatchThread] = []
        var canEnd = false
        engine.expand(position + 1, base, into: &cont, canEnd: &canEnd)
        if pool.standInReached { return nil }
        engine.canonicalize(&cont)
        if cont.isEmpty { return [] }
        let key = StackPool.ExitKey(terminal: terminal, lex: lex, continuation: cont)
        if let tokens = pool.exitCache[key] { return tokens }
        if pool.exitsBelowStandIn.contains(key) { return nil }
        walkExits(info, from: cont, engine: engine, ctx: &ctx)
        if pool.standInReached {
            if pool.exitsBelowStandIn.count > 4096 { pool.exitsBelowStandIn.removeAll() }
            pool.exitsBelowStandIn.insert(key)
            return nil
        }
        if !ctx.truncated { pool.cacheExit(key, ctx.reached) }
        return ctx.reached
    }

    /// Walks the subtrees below a lexical state's exits from the continuation threads, listing
    /// the tokens that keep the input valid in `ctx.reached` (duplicates possible, where exits
    /// nest).
    func walkExits(_ info: LexInfo, from cont: [MatchThread], engine: MatchEngine, ctx: inout WalkContext) {
        ctx.gen &+= 1
        ctx.reached.removeAll(keepingCapacity: true)
        let partition = cont.count >= 8 ? ThreadPartition(cont, grammar: engine.grammar) : nil
        if let trie = info.exitTrie ?? buildExitTrie(info) {
            walkChildren(of: 0, in: trie, from: cont, partition: partition, depth: 0, engine: engine, ctx: &ctx)
        } else {
            for node in info.exits {
                walkChildren(of: Int(node), in: vocabularyTrie, from: cont, partition: partition, depth: 0, engine: engine, ctx: &ctx)
            }
        }
    }

    /// The vocabulary's own trie, for exits too few to be worth merging.
    lazy var vocabularyTrie = ExitTrie(vocabulary: vocabulary)

    /// Merges a lexical state's exits into one trie when their subtrees hold enough nodes to
    /// repay it (a few hundred: building costs about what one walk of them does); nil when the
    /// exits are walked where they are.
    func buildExitTrie(_ info: LexInfo) -> ExitTrie? {
        var nodes = 0
        for x in info.exits { nodes += Int(vocabulary.subtreeEnd[Int(x)]) - Int(x) - 1 }
        guard nodes >= 256 else { return nil }
        let trie = ExitTrie(exits: info.exits, vocabulary: vocabulary)
        info.exitTrie = trie
        return trie
    }

    /// A string with only length bounds: the walk of the unbounded string from the same
    /// decoder state (count zeroed) is shared, then filtered by scalar counts.
    func boundedStringInfo(_ spec: StringSpec, state: LexState) -> LexInfo {
        let plain = Terminal.string(StringSpec())
        let pid: Int32
        if let id = terminalIDs[plain] {
            pid = id
        } else {
            nextTerminalID += 1
            pid = nextTerminalID
            terminalIDs[plain] = pid
        }
        let base = LexState(state.a & 0xFFFF_FFFF, state.b)
        let info = lexInfo(plain, sharedID: pid, state: base)
        guard let lengths = info.lengths, var bits = info.acceptedBits else {
            return LexInfo(acceptedBits: nil, acceptedList: [], exits: [], lengths: nil)
        }
        let count = Int(state.a >> 32)
        let left = spec.maxLength.map { $0 - count } ?? Int.max
        let need = spec.minLength - count
        for (id, sc) in lengths.inside {
            if Int(sc) <= left { break }
            bits[Int(id) >> 6] &= ~(1 << UInt64(id & 63))
        }
        for (id, sc) in lengths.closers where Int(sc) > left || Int(sc) < need {
            bits[Int(id) >> 6] &= ~(1 << UInt64(id & 63))
        }
        var exits: [Int32] = []
        for (i, node) in info.exits.enumerated() {
            let sc = Int(lengths.exitScalars[i])
            if sc <= left && sc >= need { exits.append(node) }
        }
        return LexInfo(acceptedBits: bits, acceptedList: [], exits: exits, lengths: nil)
    }

    /// Walks the trie below `node` from matcher threads, listing in `ctx.reached` every token
    /// whose bytes keep the input valid. At depth 0 the step results are memoized per byte (many exit nodes
    /// share the same continuation). When many threads sit in literals (the keys a wide object
    /// may take next, an enum's values), they are sorted by the byte each needs next, so that
    /// a trie node steps only those that can take its byte, not all of them.
    func walkChildren(
        of node: Int, in v: ExitTrie, from threads: [MatchThread], partition given: ThreadPartition? = nil, depth: Int,
        engine: MatchEngine, ctx: inout WalkContext
    ) {
        let end = Int(v.subtreeEnd[node])
        var child = node + 1
        if ctx.buffers.count <= depth { ctx.buffers.append([]) }
        let partition = given ?? (threads.count >= 16 ? ThreadPartition(threads, grammar: engine.grammar) : nil)
        let others: ArraySlice<MatchThread> = partition?.others[...] ?? threads[...]
        let literals = partition?.literals ?? []
        let literalBytes = partition?.literalBytes ?? []
        let partitioned = !literalBytes.isEmpty
        while child < end {
            let byte = v.nodeByte[child]
            var takers = literals[0..<0]
            if partitioned {
                var lo = 0, hi = literalBytes.count
                while lo < hi {
                    let mid = (lo + hi) / 2
                    if literalBytes[mid] < byte { lo = mid + 1 } else { hi = mid }
                }
                var upper = lo
                while upper < literalBytes.count && literalBytes[upper] == byte { upper += 1 }
                takers = literals[lo..<upper]
            }
            ctx.work += (partitioned ? others.count + takers.count : threads.count) + 1
            if ctx.work > ctx.workLimit {
                ctx.truncated = true
                return
            }
            var next: [MatchThread]
            var canEnd: Bool
            if depth == 0 && ctx.stepGen[Int(byte)] == ctx.gen {
                (next, canEnd) = ctx.stepVal[Int(byte)]
            } else {
                next = []
                swap(&next, &ctx.buffers[depth])
                canEnd =
                    partitioned
                    ? engine.step(others: others, literals: takers, byte, into: &next) : engine.step(threads, byte, into: &next)
                if depth == 0 {
                    ctx.stepGen[Int(byte)] = ctx.gen
                    ctx.stepVal[Int(byte)] = (next, canEnd)
                }
            }
            if !next.isEmpty || canEnd {
                for k in Int(v.tokenStart[child])..<Int(v.tokenStart[child + 1]) { ctx.reached.append(v.tokenIDs[k]) }
                if !next.isEmpty && Int(v.subtreeEnd[child]) > child + 1 {
                    walkChildren(of: child, in: v, from: next, depth: depth + 1, engine: engine, ctx: &ctx)
                }
            }
            if depth != 0 { swap(&next, &ctx.buffers[depth]) }
            child = Int(v.subtreeEnd[child])
        }
    }

    /// Threads split for trie walks: the literal ones sorted by the byte each needs next, the
    /// others as they were. Nil-equivalent (not built) when fewer than 4 are literal.
    struct ThreadPartition {
        var others: [MatchThread] = []
        var literals: [MatchThread] = []
        var literalBytes: [UInt8] = []

        init?(_ threads: [MatchThread], grammar: Grammar) {
            var keyed: [(byte: UInt8, thread: MatchThread)] = []
            for th in threads {
                if let b = grammar.literalNextByte(th) { keyed.append((b, th)) } else { others.append(th) }
            }
            guard keyed.count >= 4 else { return nil }
            keyed.sort { $0.byte < $1.byte }
            literals = keyed.map(\.thread)
            literalBytes = keyed.map(\.byte)
        }
    }

    func lexInfo(_ term: Terminal, sharedID: Int32, state: LexState) -> LexInfo {
        let key = term.cacheKey(state, horizon: vocabulary.maxTokenScalars)
        if let info = lexCache[sharedID]?[key] { return info }
        lexCacheMisses += 1
        let info: LexInfo
        switch term {
        case .literal(let bytes): info = walkLexer(LiteralLexer(bytes: bytes), from: state)
        case .whitespace(let max): info = walkLexer(WhitespaceLexer(max: max), from: state)
        case .string(let spec):
            if let dfa = spec.dfa, dfa.isComplete, spec.minLength == 0, spec.maxLength == nil {
                info = completeDFAString(spec, state: state)
            } else if spec.dfa == nil && spec.minLength == 0 && spec.maxLength == nil {
                // From the scalar count zero: the cache key leaves the count out, and
                // `boundedStringInfo` reads the recorded counts as relative ones.
                info = walkLexer(PlainStringLexer(), from: LexState(state.a & 0xFFFF_FFFF, state.b))
            } else if let dfa = spec.dfa, !dfa.ascii.isEmpty {
                info = walkLexer(DFAStringLexer(spec: spec, dfa: dfa), from: state)
            } else {
                info = walkLexer(StringLexerBox(spec: spec), from: state)
            }
        case .number(let spec): info = walkLexer(NumberLexerBox(spec: spec), from: state)
        case .scalar(let set): info = walkLexer(ScalarLexerBox(set: set), from: state)
        case .objectGuard: info = LexInfo(acceptedBits: nil, acceptedList: [], exits: [], lengths: nil)
        }
        storeLexInfo(info, sharedID: sharedID, key: key)
        return info
    }

    func storeLexInfo(_ info: LexInfo, sharedID: Int32, key: LexState) {
        let bytes = info.approximateBytes
        if lexCacheCount > 100_000 || lexCacheBytes + bytes > Self.lexCacheByteLimit {
            lexCache.removeAll()
            lexCacheCount = 0
            lexCacheBytes = 0
        }
        lexCache[sharedID, default: [:]][key] = info
        lexCacheCount += 1
        lexCacheBytes += bytes
    }

    /// Distinct grammar automata (patterns, formats) whose terminals and walks are kept
    /// across grammars (each holds its DFA: up to 512 bytes a state).
    static let retainedAutomata = 512

    /// The lexical cache is emptied when it would hold more than this (a bitset is 6 KiB for
    /// a 49k vocabulary).
    static let lexCacheByteLimit = 128 << 20

    /// The first token in the subtree of `node` (every leaf carries a token).
    func firstToken(under node: Int) -> Int {
        var n = node
        while vocabulary.tokenStart[n + 1] == vocabulary.tokenStart[n] { n += 1 }
        return Int(vocabulary.tokenIDs[Int(vocabulary.tokenStart[n])])
    }

    /// A string whose content DFA is complete: every token that stays inside the string is
    /// accepted (as for a plain string); only tokens that close it need the DFA's verdict.
    func completeDFAString(_ spec: StringSpec, state: LexState) -> LexInfo {
        let plain = Terminal.string(StringSpec())
        let pid: Int32
        if let id = terminalIDs[plain] {
            pid = id
        } else {
            nextTerminalID += 1
            pid = nextTerminalID
            terminalIDs[plain] = pid
        }
        let base = lexInfo(plain, sharedID: pid, state: LexState(0, state.b))
        guard var bits = base.acceptedBits, let lengths = base.lengths else { return base }
        func accepts(_ bytes: ArraySlice<UInt8>) -> Bool {
            var s = state
            for b in bytes {
                guard let n = StringLexer.step(spec, s, b) else { return false }
                s = n
            }
            return true
        }
        for (id, _) in lengths.closers where !accepts(vocabulary.tokens[Int(id)][...]) {
            bits[Int(id) >> 6] &= ~(1 << UInt64(id & 63))
        }
        var exits: [Int32] = []
        for (i, node) in base.exits.enumerated() {
            let t = vocabulary.tokens[firstToken(under: Int(node))]
            if accepts(t[..<Int(lengths.exitDepths[i])]) { exits.append(node) }
        }
        return LexInfo(acceptedBits: bits, acceptedList: [], exits: exits, lengths: nil)
    }

    /// Walks the whole trie with one terminal automaton (specialized per kind for speed).
    func walkLexer<L: ByteLexer>(_ lexer: L, from state: LexState) -> LexInfo {
        var bits = [UInt64](repeating: 0, count: (vocabulary.count + 63) / 64)
        var exits: [Int32] = []
        var lengths: StringLengths? = L.tracksScalars ? StringLengths() : nil
        var visited = 0
        let v = vocabulary
        v.nodeByte.withUnsafeBufferPointer { nodeByte in
            v.subtreeEnd.withUnsafeBufferPointer { subtreeEnd in
                v.tokenStart.withUnsafeBufferPointer { tokenStart in
                    v.tokenIDs.withUnsafeBufferPointer { tokenIDs in
                        bits.withUnsafeMutableBufferPointer { acc in
                            var stack: [(node: Int32, state: LexState, depth: Int32)] = [(0, state, 0)]
                            while let (node, s, depth) = stack.popLast() {
                                let end = Int(subtreeEnd[Int(node)])
                                var child = Int(node) + 1
                                while child < end {
                                    let next = Int(subtreeEnd[child])
                                    visited += 1
                                    if let ns = lexer.step(s, nodeByte[child]) {
                                        for k in Int(tokenStart[child])..<Int(tokenStart[child + 1]) {
                                            let id = Int(tokenIDs[k])
                                            acc[id >> 6] |= 1 << UInt64(id & 63)
                                            if L.tracksScalars {
                                                if lexer.isFinal(ns) {
                                                    lengths!.closers.append((Int32(id), lexer.scalars(ns)))
                                                } else {
                                                    lengths!.inside.append((Int32(id), lexer.scalars(ns)))
                                                }
                                            }
                                        }
                                        if next > child + 1 {
                                            if lexer.isFinal(ns) {
                                                exits.append(Int32(child))
                                                if L.tracksScalars {
                                                    lengths!.exitScalars.append(lexer.scalars(ns))
                                                    lengths!.exitDepths.append(depth + 1)
                                                }
                                            }
                                            if lexer.canContinue(ns) { stack.append((Int32(child), ns, depth + 1)) }
                                        }
                                    }
                                    child = next
                                }
                            }
                        }
                    }
                }
            }
        }
        walkedNodes += visited
        lengths?.inside.sort { $0.scalars > $1.scalars }
        let count = bits.reduce(0) { $0 + $1.nonzeroBitCount }
        if count > 128 || lengths != nil { return LexInfo(acceptedBits: bits, acceptedList: [], exits: exits, lengths: lengths) }
        var list: [Int32] = []
        for (wi, w) in bits.enumerated() where w != 0 {
            var x = w
            while x != 0 {
                list.append(Int32(wi * 64 + x.trailingZeroBitCount))
                x &= x - 1
            }
        }
        return LexInfo(acceptedBits: nil, acceptedList: list, exits: exits, lengths: nil)
    }
}

/// The tokens that run past a terminal's end (the vocabulary subtrees below the nodes where
/// the terminal may end, its "exits"), as one trie of what follows the end.
///
/// A string's exits are every node where a token closes the string with bytes still to come
/// (`abc",`, `x"}`, ...): hundreds of nodes whose subtrees repeat the same few continuations.
/// Merged by the bytes after the end, each continuation is stepped once per mask instead of
/// once per exit node. Same layout as `TokenVocabulary`'s trie; token ids are the
/// vocabulary's.
final class ExitTrie {
    let nodeByte: [UInt8]
    let subtreeEnd: [Int32]
    let tokenStart: [Int32]
    let tokenIDs: [Int32]

    init(exits: [Int32], vocabulary v: TokenVocabulary) {
        var suffixes: [[UInt8]] = []
        var owners: [Int32] = []
        for exit in exits {
            // Depth-first below the exit: the open subtrees on a stack give each node's depth.
            var open: [Int32] = []
            var node = Int(exit) + 1
            let end = Int(v.subtreeEnd[Int(exit)])
            while node < end {
                while let last = open.last, Int(last) <= node { open.removeLast() }
                open.append(v.subtreeEnd[node])
                for k in Int(v.tokenStart[node])..<Int(v.tokenStart[node + 1]) {
                    let id = v.tokenIDs[k]
                    suffixes.append(Array(v.tokens[Int(id)].suffix(open.count)))
                    owners.append(id)
                }
                node += 1
            }
        }
        let merged = TokenVocabulary(tokens: suffixes)
        nodeByte = merged.nodeByte
        subtreeEnd = merged.subtreeEnd
        tokenStart = merged.tokenStart
        tokenIDs = merged.tokenIDs.map { owners[Int($0)] }
    }

    /// The vocabulary's trie itself (its arrays shared, not copied).
    init(vocabulary v: TokenVocabulary) {
        nodeByte = v.nodeByte
        subtreeEnd = v.subtreeEnd
        tokenStart = v.tokenStart
        tokenIDs = v.tokenIDs
    }
}

/// A terminal automaton, for specialized trie walks.
protocol ByteLexer {
    /// Whether `scalars` is meaningful (decoded scalars so far, counting one in progress).
    static var tracksScalars: Bool { get }
    func scalars(_ s: LexState) -> Int32
    func step(_ s: LexState, _ byte: UInt8) -> LexState?
    func isFinal(_ s: LexState) -> Bool
    func canContinue(_ s: LexState) -> Bool
}

extension ByteLexer {
    static var tracksScalars: Bool { false }
    func scalars(_ s: LexState) -> Int32 { 0 }
}

struct LiteralLexer: ByteLexer {
    let bytes: [UInt8]
    @inline(__always) func step(_ s: LexState, _ byte: UInt8) -> LexState? {
        let i = Int(s.a)
        return i < bytes.count && bytes[i] == byte ? LexState(s.a + 1, 0) : nil
    }
    @inline(__always) func isFinal(_ s: LexState) -> Bool { Int(s.a) == bytes.count }
    @inline(__always) func canContinue(_ s: LexState) -> Bool { Int(s.a) < bytes.count }
}

/// State `a`: bytes so far, counted up to `max` (unlimited runs stay at 1, so they share one state).
struct WhitespaceLexer: ByteLexer {
    let max: Int
    @inline(__always) func step(_ s: LexState, _ byte: UInt8) -> LexState? {
        guard byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 else { return nil }
        if max == Int.max { return LexState(1, 0) }
        return s.a < UInt64(max) ? LexState(s.a + 1, 0) : nil
    }
    @inline(__always) func isFinal(_ s: LexState) -> Bool { s.a >= 1 }
    @inline(__always) func canContinue(_ s: LexState) -> Bool { s.a < UInt64(max) }
}

/// Strings with unconstrained content and no length bounds, recording scalar counts.
struct PlainStringLexer: ByteLexer {
    static let spec = StringSpec()
    static var tracksScalars: Bool { true }
    @inline(__always) func scalars(_ s: LexState) -> Int32 {
        let phase = s.b & 0xFF
        let pending: Int32 = phase == StringLexer.normal || phase == StringLexer.done ? 0 : 1
        return Int32(truncatingIfNeeded: s.a >> 32) + pending
    }
    @inline(__always) func step(_ s: LexState, _ byte: UInt8) -> LexState? { StringLexer.step(PlainStringLexer.spec, s, byte) }
    @inline(__always) func isFinal(_ s: LexState) -> Bool { (s.b & 0xFF) == StringLexer.done }
    @inline(__always) func canContinue(_ s: LexState) -> Bool { (s.b & 0xFF) != StringLexer.done }
}

struct StringLexerBox: ByteLexer {
    let spec: StringSpec
    @inline(__always) func step(_ s: LexState, _ byte: UInt8) -> LexState? { StringLexer.step(spec, s, byte) }
    @inline(__always) func isFinal(_ s: LexState) -> Bool { (s.b & 0xFF) == StringLexer.done }
    @inline(__always) func canContinue(_ s: LexState) -> Bool { (s.b & 0xFF) != StringLexer.done }
}

/// Strings whose content DFA has an ASCII table (`CodePointDFA.ascii`), for first walks of
/// patterns and formats: a printable ASCII content byte (all but `"` and `\`) is one table
/// lookup and `StringLexer.lengthAllows` (the checks of `StringLexer.emit`), without the string lexer's phase
/// dispatch; every other byte (quotes, escapes, UTF-8, control bytes) goes to
/// `StringLexer.step`. The verdicts are `StringLexer.step`'s, byte for byte.
struct DFAStringLexer: ByteLexer {
    let spec: StringSpec
    let dfa: CodePointDFA
    /// `dfa.ascii`, held here for the hot loop.
    let ascii: [Int32]

    init(spec: StringSpec, dfa: CodePointDFA) {
        precondition(!dfa.ascii.isEmpty, "DFAStringLexer needs an ASCII table")
        self.spec = spec
        self.dfa = dfa
        ascii = dfa.ascii
    }

    @inline(__always) func step(_ s: LexState, _ byte: UInt8) -> LexState? {
        guard s.b == StringLexer.normal, byte >= 0x20, byte < 0x80, byte != 0x22, byte != 0x5C else {
            return StringLexer.step(spec, s, byte)
        }
        let t = ascii[Int(truncatingIfNeeded: s.a & 0xFFFF_FFFF) &* 128 &+ Int(byte)]
        if t < 0 { return nil }
        let count = Int(truncatingIfNeeded: s.a >> 32) + 1
        if !StringLexer.lengthAllows(spec, dfa, t, count: count) { return nil }
        return LexState(UInt64(UInt32(t)) | UInt64(count) << 32, s.b)
    }
    @inline(__always) func isFinal(_ s: LexState) -> Bool { (s.b & 0xFF) == StringLexer.done }
    @inline(__always) func canContinue(_ s: LexState) -> Bool { (s.b & 0xFF) != StringLexer.done }
}

struct ScalarLexerBox: ByteLexer {
    let set: ScalarSet
    @inline(__always) func step(_ s: LexState, _ byte: UInt8) -> LexState? { ScalarLexer.step(set, s, byte) }
    @inline(__always) func isFinal(_ s: LexState) -> Bool { s.b == ScalarLexer.done }
    @inline(__always) func canContinue(_ s: LexState) -> Bool { s.b != ScalarLexer.done }
}

struct NumberLexerBox: ByteLexer {
    let spec: NumberSpec
    @inline(__always) func step(_ s: LexState, _ byte: UInt8) -> LexState? { NumberLexer.step(spec, s, byte) }
    @inline(__always) func isFinal(_ s: LexState) -> Bool { NumberLexer.isFinal(spec, s) }
    @inline(__always) func canContinue(_ s: LexState) -> Bool { true }
}
