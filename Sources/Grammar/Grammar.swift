/// Why a grammar could not be built.
public struct GrammarError: Error, Sendable, CustomStringConvertible {
    public let message: String
    /// The `JSONSchemaCompiler.Limits` property that the grammar exceeds, if that is the reason.
    public var limit: String? = nil
    public var description: String { message }

    public init(message: String, limit: String? = nil) {
        self.message = message
        self.limit = limit
    }
}

/// A context-free grammar over bytes whose leaves are terminals (literal bytes, JSON
/// strings and numbers with constraints, whitespace runs), ready for matching.
///
/// Internally every alternative of every rule is laid out in one flat array of positions;
/// a matcher thread is a position inside a terminal plus a return stack. For each position
/// the grammar precomputes its *closure template*: the terminals reachable from it without
/// consuming input and the return positions to push on the way, so that advancing a thread
/// never searches the grammar.
///
/// Grammars are built with `GrammarBuilder` (directly, for literal-text compositions such as
/// tool-call formats) or by `JSONSchemaCompiler`.
public final class Grammar: Sendable {
    let terminals: [Terminal]
    /// symbols[pos]: a terminal id (>= 0), a rule (-(rule + 2)), or -1 for the end of an alternative.
    let symbols: [Int32]
    let templates: [Template]
    /// The position where matching starts (a call of the root rule followed by the end).
    let startPosition: Int32 = 0
    public let ruleCount: Int
    /// The most parses a matcher follows at once (`JSONSchemaCompiler.Limits.maxParseThreads`).
    let maxThreads: Int
    /// Per terminal: whether it is an `ObjectGuard` (applied while expanding, never stepped).
    let isGuard: [Bool]
    /// Whether any terminal is a guard (objects whose properties may come in any order).
    let hasGuards: Bool
    /// Per terminal: where its bytes start in `literalBytes` and how many there are, when it
    /// is a literal (count -1 otherwise). Matching and mask walks step literal threads from
    /// these flat tables, without touching the `Terminal` enum, and group them by next byte.
    let literalRanges: [(start: Int32, count: Int32)]
    let literalBytes: [UInt8]
    /// The stack pool (with its cached masks) of the last matcher that finished.
    let poolShelf = StackPoolShelf()

    /// What finished matchers may keep for the next matchers of their grammars, in bytes for
    /// the whole process: interned parse stacks and the token masks cached per matcher state
    /// (default 32 MiB; 0 keeps nothing, and every matcher starts cold).
    public static var retainedMatcherCacheBytes: Int {
        get { StackPoolShelf.retainedBytesLimit }
        set { StackPoolShelf.retainedBytesLimit = newValue }
    }

    struct Template: Sendable {
        var entries: [(terminalPosition: Int32, pushes: [Int32])] = []
        var reachesEnd = false
    }

    /// Number of terminals (distinct byte automata).
    public var terminalCount: Int { terminals.count }

    init(terminals: [Terminal], symbols: [Int32], templates: [Template], ruleCount: Int, maxThreads: Int) {
        self.terminals = terminals
        self.symbols = symbols
        self.templates = templates
        self.ruleCount = ruleCount
        self.maxThreads = maxThreads
        isGuard = terminals.map {
            if case .objectGuard = $0 { return true }
            return false
        }
        hasGuards = isGuard.contains(true)
        var ranges: [(start: Int32, count: Int32)] = []
        var bytes: [UInt8] = []
        for t in terminals {
            if case .literal(let b) = t {
                ranges.append((Int32(bytes.count), Int32(b.count)))
                bytes += b
            } else {
                ranges.append((0, -1))
            }
        }
        literalRanges = ranges
        literalBytes = bytes
    }

    /// The byte a literal thread needs next; nil for a thread in another kind of terminal
    /// (or at a literal's end, which no live thread is).
    @inline(__always) func literalNextByte(_ th: MatchThread) -> UInt8? {
        let r = literalRanges[Int(symbols[Int(th.position)])]
        let i = Int(th.lex.a)
        guard r.count >= 0, i < Int(r.count) else { return nil }
        return literalBytes[Int(r.start) + i]
    }

    /// Number of grammar positions (symbols of the flat layout).
    var positionCount: Int { symbols.count }
}

/// Builds a `Grammar` from rules whose alternatives are sequences of symbols. Rules may be
/// recursive (not left-recursive). Alternatives that cannot derive any complete text (because
/// they use a rule with no productive alternative) are removed when the grammar is built.
public struct GrammarBuilder {
    /// A grammar symbol: a terminal or a rule reference.
    public struct Symbol: Hashable, Sendable {
        let raw: Int32  // >= 0 terminal, < 0: rule -(id + 1)
        static func terminal(_ id: Int32) -> Symbol { Symbol(raw: id) }
        static func rule(_ id: Int32) -> Symbol { Symbol(raw: -(id + 1)) }
        var isTerminal: Bool { raw >= 0 }
        var ruleID: Int32 { -raw - 1 }
    }

    var terminals: [Terminal] = []
    var terminalIndex: [Terminal: Int32] = [:]
    var rules: [[[Symbol]]] = []
    var ruleNames: [String] = []
    /// Whether `define` has been called for each rule (a rule being compiled is declared
    /// first, so that recursive references can name it, and defined last).
    var isDefined: [Bool] = []
    /// Rules that derive text only if these rules do too (an any-order object and its
    /// required members, which its alternatives do not name: see `ObjectGuard`).
    var productiveOnlyWith: [Int32: [Int32]] = [:]

    public init() {}

    /// Declares a rule with no alternatives yet (fill it with `define`).
    public mutating func declareRule(_ name: String = "") -> Symbol {
        rules.append([])
        ruleNames.append(name)
        isDefined.append(false)
        size += 1
        return .rule(Int32(rules.count - 1))
    }

    /// Sets the alternatives of a declared rule.
    public mutating func define(_ rule: Symbol, _ alternatives: [[Symbol]]) {
        precondition(!rule.isTerminal)
        size -= rules[Int(rule.ruleID)].reduce(0) { $0 + $1.count + 1 }
        size += alternatives.reduce(0) { $0 + $1.count + 1 }
        rules[Int(rule.ruleID)] = alternatives
        isDefined[Int(rule.ruleID)] = true
    }

    /// Whether a rule reachable from `root` is declared but not defined yet (its language is
    /// still unknown).
    func reachesUndefinedRule(from root: Symbol) -> Bool {
        guard !root.isTerminal else { return false }
        var seen = Set<Int32>([root.ruleID])
        var stack = [root.ruleID]
        while let r = stack.popLast() {
            if !isDefined[Int(r)] { return true }
            for alt in rules[Int(r)] {
                for s in alt where !s.isTerminal && seen.insert(s.ruleID).inserted { stack.append(s.ruleID) }
            }
        }
        return false
    }

    /// A new rule with these alternatives.
    public mutating func rule(_ name: String = "", _ alternatives: [[Symbol]]) -> Symbol {
        let r = declareRule(name)
        define(r, alternatives)
        return r
    }

    mutating func terminal(_ t: Terminal) -> Symbol {
        if let id = terminalIndex[t] { return .terminal(id) }
        terminals.append(t)
        let id = Int32(terminals.count - 1)
        terminalIndex[t] = id
        return .terminal(id)
    }

    /// Exact text (empty text is the empty sequence, represented by an empty rule alternative).
    public mutating func literal(_ text: String) -> Symbol { literal(Array(text.utf8)) }

    /// Exact bytes.
    public mutating func literal(_ bytes: [UInt8]) -> Symbol {
        if bytes.isEmpty { return rule("empty", [[]]) }
        return terminal(.literal(bytes))
    }

    /// Optional JSON whitespace: zero or more of space, tab, LF, CR, at most `maxRun` in a row
    /// (nil: unlimited; 0: none).
    public mutating func whitespace(maxRun: Int? = nil) -> Symbol {
        if maxRun == 0 { return rule("ws", [[]]) }
        let ws = terminal(.whitespace(max: maxRun ?? Int.max))
        return rule("ws", [[], [ws]])
    }

    /// The size of the rules so far: rules plus the symbols of their alternatives.
    public private(set) var size = 0

    /// Builds the grammar whose language is `root`: the rules reachable from it that can derive
    /// some text, laid out flat, with their closure templates.
    ///
    /// - Parameter limits: `maxGrammarSize` bounds the layout and its templates (a
    ///   `GrammarError` naming the limit otherwise), `maxParseThreads` is kept for matchers.
    public func build(root: Symbol, limits: JSONSchemaCompiler.Limits = .init()) throws(GrammarError) -> Grammar {
        try build(root: root, limits: limits, deadline: nil)
    }

    /// `deadline`: the compile-time budget's end (a `GrammarError` naming `compileTimeBudget` after it).
    func build(root: Symbol, limits: JSONSchemaCompiler.Limits, deadline: ContinuousClock.Instant?) throws(GrammarError) -> Grammar {
        let rootRule: Int32? = root.isTerminal ? nil : root.ruleID
        let live = productiveRules(reachableFrom: rootRule)
        if let r = rootRule, !live[Int(r)] {
            throw GrammarError(message: "the grammar accepts no text (the schema is unsatisfiable)")
        }
        // Flat layout: position 0 = [root, END], then each live rule's productive alternatives.
        var symbols: [Int32] = [encode(root), -1]
        var altStarts = [[Int32]](repeating: [], count: rules.count)
        for (r, alts) in rules.enumerated() where live[r] {
            for alt in alts where alt.allSatisfy({ $0.isTerminal || live[Int($0.ruleID)] }) {
                altStarts[r].append(Int32(symbols.count))
                for s in alt { symbols.append(encode(s)) }
                symbols.append(-1)
            }
        }
        if symbols.count > limits.maxGrammarSize { throw GrammarBuilder.sizeError(limits) }
        // Any-order objects: `more` guards know only the members that can derive text.
        let terminals = self.terminals.map { t -> Terminal in
            guard case .objectGuard(.more(let available, let rules)) = t, !rules.isEmpty else { return t }
            var a = [UInt64](repeating: 0, count: available.count)
            for (i, r) in rules.enumerated() where r >= 0 && live[Int(r)] { a[i >> 6] |= 1 << UInt64(i & 63) }
            return .objectGuard(.more(available: a, rules: []))
        }
        // The closures share the size limit with the symbols.
        var templates = TemplateBuilder(symbols: symbols, altStarts: altStarts, maxSize: limits.maxGrammarSize - symbols.count)
        templates.totalLimit = limits.maxGrammarSize
        templates.deadline = deadline
        templates.budget = limits.compileTimeBudget
        for p in 0..<symbols.count { try templates.compute(p) }
        return Grammar(
            terminals: terminals, symbols: symbols, templates: templates.finished, ruleCount: rules.count,
            maxThreads: limits.maxParseThreads)
    }

    static func sizeError(_ limits: JSONSchemaCompiler.Limits) -> GrammarError {
        GrammarError(message: "the grammar would need more than \(limits.maxGrammarSize) rules and symbols", limit: "maxGrammarSize")
    }

    func encode(_ s: Symbol) -> Int32 { s.isTerminal ? s.raw : -(s.ruleID + 2) }

    /// Which rules are reachable from `root` and productive (some alternative has only
    /// terminals and productive rules), by a worklist over the alternatives' counts of rule
    /// symbols not yet known productive: linear in the size of the reachable rules.
    func productiveRules(reachableFrom root: Int32?) -> [Bool] {
        var reachable = [Bool](repeating: false, count: rules.count)
        var stack: [Int32] = root.map { [$0] } ?? []
        if let root { reachable[Int(root)] = true }
        while let r = stack.popLast() {
            for alt in rules[Int(r)] {
                for s in alt where !s.isTerminal && !reachable[Int(s.ruleID)] {
                    reachable[Int(s.ruleID)] = true
                    stack.append(s.ruleID)
                }
            }
            for d in productiveOnlyWith[r] ?? [] where !reachable[Int(d)] {
                reachable[Int(d)] = true
                stack.append(d)
            }
        }
        // For each rule, the (rule, alternative) pairs that mention it, once per mention.
        var dependents = [[(rule: Int32, alt: Int32)]](repeating: [], count: rules.count)
        var pending = [[Int32]](repeating: [], count: rules.count)
        var productive = [Bool](repeating: false, count: rules.count)
        var queue: [Int32] = []
        for r in 0..<rules.count where reachable[r] {
            pending[r] = [Int32](repeating: 0, count: rules[r].count)
            let extra = productiveOnlyWith[Int32(r)] ?? []
            for (i, alt) in rules[r].enumerated() {
                for s in alt where !s.isTerminal {
                    dependents[Int(s.ruleID)].append((Int32(r), Int32(i)))
                    pending[r][i] += 1
                }
                for d in extra {
                    dependents[Int(d)].append((Int32(r), Int32(i)))
                    pending[r][i] += 1
                }
                if pending[r][i] == 0 && !productive[r] {
                    productive[r] = true
                    queue.append(Int32(r))
                }
            }
        }
        while let q = queue.popLast() {
            for (r, i) in dependents[Int(q)] {
                pending[Int(r)][Int(i)] -= 1
                if pending[Int(r)][Int(i)] == 0 && !productive[Int(r)] {
                    productive[Int(r)] = true
                    queue.append(r)
                }
            }
        }
        return productive
    }
}

/// Computes the closure templates of a flat grammar, each once, without recursion (a long
/// chain of rules called in first position must not exhaust the stack), detecting left
/// recursion, and bounding the total size of the templates.
struct TemplateBuilder {
    let symbols: [Int32]
    let altStarts: [[Int32]]
    var templates: [Grammar.Template?]
    var inProgress: [Bool]
    /// For a rule call being computed: how many of its alternatives are done.
    var cursor: [Int32]
    var remaining: Int
    let maxSize: Int
    /// The limit as configured (for the message).
    var totalLimit = 0
    /// The end of the compile-time budget, checked every 1,024 templates.
    var deadline: ContinuousClock.Instant?
    var budget: Duration = .zero
    var assembled = 0

    init(symbols: [Int32], altStarts: [[Int32]], maxSize: Int) {
        self.symbols = symbols
        self.altStarts = altStarts
        templates = [Grammar.Template?](repeating: nil, count: symbols.count)
        inProgress = [Bool](repeating: false, count: symbols.count)
        cursor = [Int32](repeating: 0, count: symbols.count)
        remaining = maxSize
        self.maxSize = maxSize
    }

    var finished: [Grammar.Template] { templates.map { $0 ?? Grammar.Template() } }

    /// Computes the template of `position` and of everything it depends on.
    mutating func compute(_ position: Int) throws(GrammarError) {
        if templates[position] != nil { return }
        var stack = [position]
        inProgress[position] = true
        while let pos = stack.last {
            if let dependency = firstMissingDependency(pos) {
                if inProgress[dependency] {
                    throw GrammarError(message: "left recursion in the grammar (rule reachable from itself without consuming text)")
                }
                inProgress[dependency] = true
                stack.append(dependency)
                continue
            }
            assembled += 1
            if assembled & 1023 == 0, let deadline, ContinuousClock.now > deadline {
                throw GrammarError(message: "compiling the schema takes longer than \(budget)", limit: "compileTimeBudget")
            }
            let t = assemble(pos)
            remaining -= t.entries.reduce(0) { $0 + 1 + $1.pushes.count }
            if remaining < 0 {
                throw GrammarError(
                    message: "the grammar's rules, symbols and closures would need more than \(totalLimit) entries", limit: "maxGrammarSize"
                )
            }
            templates[pos] = t
            inProgress[pos] = false
            stack.removeLast()
        }
    }

    /// The next template that `pos` needs and that is not computed yet: its rule's
    /// alternatives in order, then (when one of them can derive the empty text) the position
    /// after the call.
    mutating func firstMissingDependency(_ pos: Int) -> Int? {
        let sym = symbols[pos]
        guard sym < -1 else { return nil }
        let alts = altStarts[Int(-sym - 2)]
        while Int(cursor[pos]) < alts.count {
            let a = Int(alts[Int(cursor[pos])])
            if templates[a] == nil { return a }
            cursor[pos] += 1
        }
        let nullable = alts.contains { templates[Int($0)]?.reachesEnd ?? false }
        if nullable && templates[pos + 1] == nil { return pos + 1 }
        return nil
    }

    /// The template of `pos`, once its dependencies are known.
    func assemble(_ pos: Int) -> Grammar.Template {
        var t = Grammar.Template()
        let sym = symbols[pos]
        if sym == -1 {
            t.reachesEnd = true
            return t
        }
        if sym >= 0 {
            t.entries = [(Int32(pos), [])]
            return t
        }
        let tail = symbols[pos + 1] == -1
        var seen = Set<[Int32]>()
        var nullable = false
        for a in altStarts[Int(-sym - 2)] {
            guard let sub = templates[Int(a)] else { continue }
            for e in sub.entries {
                let pushes = tail ? e.pushes : [Int32(pos + 1)] + e.pushes
                if seen.insert([e.terminalPosition] + pushes).inserted { t.entries.append((e.terminalPosition, pushes)) }
            }
            if sub.reachesEnd { nullable = true }
        }
        if nullable, let next = templates[pos + 1] {
            for e in next.entries where seen.insert([e.terminalPosition] + e.pushes).inserted { t.entries.append(e) }
            if next.reachesEnd { t.reachesEnd = true }
        }
        return t
    }
}
