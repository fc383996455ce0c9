/// One parse of the input so far: inside the terminal at `position` (in `lex` state), with
/// the return stack `stack` (an id in the matcher's stack pool).
struct MatchThread: Hashable {
    var position: Int32
    var stack: Int32
    var lex: LexState
}

/// A set of threads plus whether the input so far is a complete sentence.
///
/// `overflowed`: the input needed more parses at once than the grammar's `maxThreads`; the
/// matcher then accepts any further byte but never a complete sentence, and masks allow no
/// token (generation stops with an error rather than doing unbounded work).
struct MatchState: Hashable {
    var threads: [MatchThread]
    var canEnd: Bool
    var overflowed = false

    static let overflow = MatchState(threads: [], canEnd: false, overflowed: true)
}

/// Hash-consed return stacks: a stack is an id; id 0 is the empty stack.
final class StackPool {
    var parent: [Int32] = [0]
    var top: [Int32] = [-1]
    var index: [UInt64: Int32] = [:]
    /// Masks computed for states of this pool (stack ids are only meaningful within a pool).
    var maskCache: [MatchState: TokenMask] = [:]
    /// The tokens that leave a terminal mid-token and go on into what follows it: per
    /// (terminal, lexical state as `Terminal.cacheKey` gives it, continuation threads). Every
    /// state inside one string value shares its entry (see `TokenMaskComputer.mask(for:)`).
    var exitCache: [ExitKey: [Int32]] = [:]

    struct ExitKey: Hashable {
        var terminal: Int32
        var lex: LexState
        var continuation: [MatchThread]
    }

    /// Stores an exit walk's tokens, emptying the cache first when it holds 4,096 entries.
    func cacheExit(_ key: ExitKey, _ tokens: [Int32]) {
        if exitCache.count >= 4096 { exitCache.removeAll() }
        exitCache[key] = tokens
    }

    /// A stack that stands for "whatever stack lies below" in exit walks that try to do
    /// without the thread's own stack (`TokenMaskComputer.exitTokensAboveStack`): -1 until
    /// made. Its return value, `Int32.min`, is never read: popping it or applying an object
    /// guard to it sets `standInReached` instead. No matcher thread's stack holds it.
    private(set) var standIn: Int32 = -1
    /// Set when an expansion popped the stand-in or a guard was applied to it.
    var standInReached = false
    /// Stand-in continuations whose exit walks reached the stand-in (at most 4,096 kept).
    var exitsBelowStandIn = Set<ExitKey>()

    /// What a lone parse at a (position, lexical state) allows, once known: the lexical walk,
    /// and the exits' tokens when they were found above the stand-in (nil when they depend on
    /// the parse's stack). At most 4,096 entries; emptied when full.
    var groupCache: [TokenMaskComputer.GroupKey: GroupTokens] = [:]

    final class GroupTokens {
        let info: TokenMaskComputer.LexInfo
        let exitTokens: [Int32]?
        init(info: TokenMaskComputer.LexInfo, exitTokens: [Int32]?) {
            self.info = info
            self.exitTokens = exitTokens
        }
    }

    func cacheGroup(_ key: TokenMaskComputer.GroupKey, _ tokens: GroupTokens) {
        if groupCache.count >= 4096 { groupCache.removeAll() }
        groupCache[key] = tokens
    }

    /// The stand-in stack, made on first use.
    func makeStandIn() -> Int32 {
        if standIn < 0 { standIn = push(0, Int32.min) }
        return standIn
    }
    weak var maskOwner: TokenMaskComputer?
    /// The key sets of any-order objects (`ObjectGuard`), hash-consed: a frame whose `top` is
    /// `-(id + 2)` holds `seenSets[id]`.
    var seenSets: [[UInt64]] = []
    var seenSetIndex: [[UInt64]: Int32] = [:]
    /// `ObjectGuard.claim` transitions: (frame, member) to the new frame, 0 when refused.
    var claimed: [UInt64: Int32] = [:]

    /// A rough size: the stacks, their index and the cached masks.
    var approximateBytes: Int {
        let masks =
            maskCache.reduce(0) { $0 + $1.key.threads.count * 24 + $1.value.words.count * 8 + 96 }
            + exitCache.reduce(0) { $0 + $1.key.continuation.count * 24 + $1.value.count * 4 + 96 }
            + exitsBelowStandIn.reduce(0) { $0 + $1.continuation.count * 24 + 64 }
            + groupCache.reduce(0) { $0 + $1.value.info.approximateBytes + ($1.value.exitTokens?.count ?? 0) * 4 + 96 }
        return parent.count * 32 + masks + seenSets.reduce(0) { $0 + $1.count * 16 + 64 } + claimed.count * 16
    }

    @inline(__always) func push(_ stack: Int32, _ ret: Int32) -> Int32 {
        let key = UInt64(UInt32(bitPattern: stack)) << 32 | UInt64(UInt32(bitPattern: ret))
        if let id = index[key] { return id }
        parent.append(stack)
        top.append(ret)
        let id = Int32(parent.count - 1)
        index[key] = id
        return id
    }
}

/// The stepping engine shared by the matcher and the mask computer.
struct MatchEngine {
    let grammar: Grammar
    let pool: StackPool

    /// Adds the threads reachable from `position` with `stack` without consuming input.
    func expand(_ position: Int32, _ stack: Int32, into out: inout [MatchThread], canEnd: inout Bool) {
        var pos = position, stk = stack
        while true {
            let t = grammar.templates[Int(pos)]
            for e in t.entries {
                var s = stk
                for r in e.pushes { s = pool.push(s, r) }
                if grammar.hasGuards, grammar.isGuard[Int(grammar.symbols[Int(e.terminalPosition)])] {
                    // A key check of an any-order object: applied now, consuming nothing.
                    guard case .objectGuard(let g) = grammar.terminals[Int(grammar.symbols[Int(e.terminalPosition)])],
                        let after = pool.apply(g, to: s)
                    else { continue }
                    expand(e.terminalPosition + 1, after, into: &out, canEnd: &canEnd)
                    continue
                }
                out.append(MatchThread(position: e.terminalPosition, stack: s, lex: LexState()))
            }
            guard t.reachesEnd else { return }
            if stk == 0 {
                canEnd = true
                return
            }
            if stk == pool.standIn {
                pool.standInReached = true
                return
            }
            pos = pool.top[Int(stk)]
            stk = pool.parent[Int(stk)]
        }
    }

    func initialState() -> MatchState {
        var threads: [MatchThread] = []
        var canEnd = false
        expand(grammar.startPosition, 0, into: &threads, canEnd: &canEnd)
        dedupe(&threads)
        return MatchState(threads: threads, canEnd: canEnd)
    }

    /// Removes duplicates and sorts: equal sets of threads give equal arrays (cache keys).
    func canonicalize(_ threads: inout [MatchThread]) {
        if threads.count < 2 { return }
        Self.sortAndUnique(&threads)
    }

    static func sortAndUnique(_ threads: inout [MatchThread]) {
        threads.sort { x, y in
            if x.position != y.position { return x.position < y.position }
            if x.stack != y.stack { return x.stack < y.stack }
            return x.lex.a != y.lex.a ? x.lex.a < y.lex.a : x.lex.b < y.lex.b
        }
        var kept = 1
        for i in 1..<threads.count where threads[i] != threads[kept - 1] {
            threads[kept] = threads[i]
            kept += 1
        }
        threads.removeLast(threads.count - kept)
    }

    @inline(__always) func dedupe(_ threads: inout [MatchThread]) {
        if threads.count < 2 { return }
        if threads.count <= 12 {
            var i = 1
            while i < threads.count {
                var dup = false
                for j in 0..<i where threads[j] == threads[i] {
                    dup = true
                    break
                }
                if dup { threads.remove(at: i) } else { i += 1 }
            }
        } else {
            // Sorted, duplicates are neighbours (and the order is canonical: equal sets of
            // threads make equal states, which the mask cache keys on).
            Self.sortAndUnique(&threads)
        }
    }

    /// Advances every thread by one byte into `out` (cleared first). Returns whether the result
    /// is a complete sentence.
    ///
    /// A byte after which more than `grammar.maxThreads` distinct parses would be alive
    /// leaves `out` empty and returns false (as a refused byte would) with `overflowed` set:
    /// an ambiguous grammar cannot make the work per byte grow without bound.
    @inline(__always)
    func step(_ threads: [MatchThread], _ byte: UInt8, into out: inout [MatchThread]) -> Bool {
        var overflowed = false
        return step(threads, byte, into: &out, overflowed: &overflowed)
    }

    @inline(__always)
    func step(_ threads: [MatchThread], _ byte: UInt8, into out: inout [MatchThread], overflowed: inout Bool) -> Bool {
        out.removeAll(keepingCapacity: true)
        var canEnd = false
        let limit = grammar.maxThreads
        for th in threads {
            stepThread(th, byte, into: &out, canEnd: &canEnd)
            if out.count > limit &* 4 {
                dedupe(&out)
                if out.count > limit { break }
            }
        }
        dedupe(&out)
        if out.count > limit {
            out.removeAll(keepingCapacity: true)
            overflowed = true
            return false
        }
        return canEnd
    }

    /// Advances one thread by one byte, appending what follows (nothing when the byte is refused).
    @inline(__always)
    func stepThread(_ th: MatchThread, _ byte: UInt8, into out: inout [MatchThread], canEnd: inout Bool) {
        let tid = Int(grammar.symbols[Int(th.position)])
        let lit = grammar.literalRanges[tid]
        if lit.count >= 0 {
            // A literal: compared in the grammar's flat byte table.
            let i = Int(th.lex.a)
            guard i < Int(lit.count), grammar.literalBytes[Int(lit.start) + i] == byte else { return }
            if i + 1 < Int(lit.count) {
                out.append(MatchThread(position: th.position, stack: th.stack, lex: LexState(th.lex.a + 1, 0)))
            } else {
                expand(th.position + 1, th.stack, into: &out, canEnd: &canEnd)
            }
            return
        }
        // Switched on in place: binding the whole `Terminal` would copy it (retaining its
        // payload) for every thread and byte.
        let ns: LexState, goesOn: Bool, ends: Bool
        switch grammar.terminals[tid] {
        case .string(let spec):
            guard let s = StringLexer.step(spec, th.lex, byte) else { return }
            ns = s
            ends = (s.b & 0xFF) == StringLexer.done
            goesOn = !ends
        case .whitespace(let max):
            let lexer = WhitespaceLexer(max: max)
            guard let s = lexer.step(th.lex, byte) else { return }
            (ns, goesOn, ends) = (s, lexer.canContinue(s), lexer.isFinal(s))
        case .number(let spec):
            guard let s = NumberLexer.step(spec, th.lex, byte) else { return }
            (ns, goesOn, ends) = (s, true, NumberLexer.isFinal(spec, s))
        case .scalar(let set):
            guard let s = ScalarLexer.step(set, th.lex, byte) else { return }
            (ns, goesOn, ends) = (s, s.b != ScalarLexer.done, s.b == ScalarLexer.done)
        case .literal, .objectGuard:
            let term = grammar.terminals[tid]
            guard let s = term.step(th.lex, byte) else { return }
            (ns, goesOn, ends) = (s, term.canContinue(s), term.isFinal(s))
        }
        if goesOn { out.append(MatchThread(position: th.position, stack: th.stack, lex: ns)) }
        if ends { expand(th.position + 1, th.stack, into: &out, canEnd: &canEnd) }
    }

    /// Advances the threads that can take `byte` (those of `others`, and those of `literals`,
    /// literal threads that all need exactly this byte next) into `out`, cleared first.
    /// Returns whether the result is a complete sentence; as `step`, with the same limit.
    @inline(__always)
    func step(
        others: ArraySlice<MatchThread>, literals: ArraySlice<MatchThread>, _ byte: UInt8, into out: inout [MatchThread]
    ) -> Bool {
        out.removeAll(keepingCapacity: true)
        var canEnd = false
        let limit = grammar.maxThreads
        var index = others.startIndex
        var inLiterals = false
        while true {
            if !inLiterals && index == others.endIndex {
                inLiterals = true
                index = literals.startIndex
            }
            if inLiterals && index == literals.endIndex { break }
            stepThread(inLiterals ? literals[index] : others[index], byte, into: &out, canEnd: &canEnd)
            index += 1
            if out.count > limit &* 4 {
                dedupe(&out)
                if out.count > limit {
                    out.removeAll(keepingCapacity: true)
                    return false
                }
            }
        }
        dedupe(&out)
        if out.count > limit {
            out.removeAll(keepingCapacity: true)
            return false
        }
        return canEnd
    }

    /// The state after one byte: nil when refused, the overflow state when too many parses
    /// would be alive (an overflowed state takes any byte).
    func next(_ state: MatchState, _ byte: UInt8, scratch: inout [MatchThread]) -> MatchState? {
        if state.overflowed { return state }
        var overflowed = false
        let canEnd = step(state.threads, byte, into: &scratch, overflowed: &overflowed)
        if overflowed { return .overflow }
        if scratch.isEmpty && !canEnd { return nil }
        return MatchState(threads: scratch, canEnd: canEnd)
    }
}

/// An incremental matcher: feeds bytes through a `Grammar`, keeps every parse alive at once,
/// and can roll back to any earlier point.
///
/// ```swift
/// let grammar = try JSONSchemaCompiler.compile(#"{"type": "integer"}"#)
/// let m = GrammarMatcher(grammar: grammar)
/// m.accept("12")      // true
/// m.canAcceptEnd      // true
/// m.accept("x")       // false, and the state is unchanged
/// ```
public final class GrammarMatcher {
    public let grammar: Grammar
    /// Taken from the grammar's shelf when a finished matcher left one (`StackPoolShelf`).
    let pool: StackPool
    var engine: MatchEngine { MatchEngine(grammar: grammar, pool: pool) }
    /// history[0] is the initial state; the last element is the current one.
    var history: [MatchState]
    var scratch: [MatchThread] = []

    public init(grammar: Grammar) {
        self.grammar = grammar
        pool = grammar.poolShelf.take() ?? StackPool()
        history = []
        history = [engine.initialState()]
    }

    deinit { grammar.poolShelf.give(pool) }

    var state: MatchState { history[history.count - 1] }

    /// Number of bytes accepted so far.
    public var position: Int { history.count - 1 }

    /// Whether the bytes so far form a complete sentence of the grammar (the end may come now).
    public var canAcceptEnd: Bool { state.canEnd }

    /// Whether the bytes so far are complete and nothing more can follow.
    public var isComplete: Bool { state.canEnd && state.threads.isEmpty }

    /// Whether some byte can still be accepted.
    public var canContinue: Bool { !state.threads.isEmpty || state.overflowed }

    /// Whether the input so far needed more simultaneous parses than the grammar allows
    /// (`JSONSchemaCompiler.Limits.maxParseThreads`, reached only by an ambiguous grammar
    /// nested deeply): from then on no token is allowed and the input can never be complete.
    public var hasOverflowed: Bool { state.overflowed }

    /// Accepts one byte if the grammar allows it; otherwise returns false and changes nothing.
    @discardableResult
    public func accept(byte: UInt8) -> Bool {
        guard let next = engine.next(state, byte, scratch: &scratch) else { return false }
        history.append(next)
        return true
    }

    /// Accepts all the bytes, or none of them (returns false and restores the state).
    @discardableResult
    public func accept<S: Sequence>(bytes: S) -> Bool where S.Element == UInt8 {
        let mark = checkpoint()
        for b in bytes where !accept(byte: b) {
            rollback(to: mark)
            return false
        }
        return true
    }

    /// Accepts the UTF-8 bytes of `text`, all or none.
    @discardableResult
    public func accept(_ text: String) -> Bool { accept(bytes: Array(text.utf8)) }

    /// A mark for `rollback(to:)`: the number of bytes accepted so far.
    public func checkpoint() -> Int { history.count - 1 }

    /// Returns to the state at a checkpoint.
    public func rollback(to checkpoint: Int) {
        precondition(checkpoint >= 0 && checkpoint < history.count, "rollback past the start")
        history.removeSubrange((checkpoint + 1)...)
    }

    /// Removes the last `count` bytes.
    public func rollback(bytes count: Int) { rollback(to: history.count - 1 - count) }

    /// Returns to the initial state.
    public func reset() { rollback(to: 0) }

    /// The bytes that must come next whatever is generated: the longest sequence during which
    /// exactly one byte is possible and the sentence cannot end. Empty when there is a choice.
    public func forcedBytes(limit: Int = 256) -> [UInt8] {
        var out: [UInt8] = []
        var cur = state
        var buf: [MatchThread] = []
        while out.count < limit && !cur.canEnd && !cur.overflowed {
            var only: (UInt8, MatchState)?
            var count = 0
            for b in 0...255 {
                if let next = engine.next(cur, UInt8(b), scratch: &buf) {
                    count += 1
                    if count > 1 { break }
                    only = (UInt8(b), next)
                }
            }
            guard count == 1, let (b, next) = only else { break }
            out.append(b)
            cur = next
        }
        return out
    }

    /// Whether `bytes` would be accepted from the current state (the state is not changed).
    public func wouldAccept(_ bytes: [UInt8]) -> Bool {
        var cur = state
        var buf: [MatchThread] = []
        for b in bytes {
            guard let next = engine.next(cur, b, scratch: &buf) else { return false }
            cur = next
        }
        return true
    }
}
