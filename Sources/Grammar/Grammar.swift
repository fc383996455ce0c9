/// Why a grammar could not be built.
public struct GrammarError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
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

    struct Template: Sendable {
        var entries: [(terminalPosition: Int32, pushes: [Int32])] = []
        var reachesEnd = false
    }

    /// Number of terminals (distinct byte automata).
    public var terminalCount: Int { terminals.count }

    init(terminals: [Terminal], symbols: [Int32], templates: [Template], ruleCount: Int) {
        self.terminals = terminals
        self.symbols = symbols
        self.templates = templates
        self.ruleCount = ruleCount
    }
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

    public init() {}

    /// Declares a rule with no alternatives yet (fill it with `define`).
    public mutating func declareRule(_ name: String = "") -> Symbol {
        rules.append([])
        ruleNames.append(name)
        return .rule(Int32(rules.count - 1))
    }

    /// Sets the alternatives of a declared rule.
    public mutating func define(_ rule: Symbol, _ alternatives: [[Symbol]]) {
        precondition(!rule.isTerminal)
        rules[Int(rule.ruleID)] = alternatives
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

    /// Builds the grammar whose language is `root`.
    public func build(root: Symbol) throws(GrammarError) -> Grammar {
        // Productivity: a rule is productive if one alternative has only productive symbols.
        var productive = [Bool](repeating: false, count: rules.count)
        var changed = true
        while changed {
            changed = false
            for (r, alts) in rules.enumerated() where !productive[r] {
                if alts.contains(where: { $0.allSatisfy { $0.isTerminal || productive[Int($0.ruleID)] } }) {
                    productive[r] = true
                    changed = true
                }
            }
        }
        if !root.isTerminal && !productive[Int(root.ruleID)] {
            throw GrammarError(message: "the grammar accepts no text (the schema is unsatisfiable)")
        }
        // Flat layout: position 0 = [root, END], then each rule's productive alternatives.
        var symbols: [Int32] = []
        var altStarts = [[Int32]](repeating: [], count: rules.count)
        func encode(_ s: Symbol) -> Int32 { s.isTerminal ? s.raw : -(s.ruleID + 2) }
        symbols.append(encode(root))
        symbols.append(-1)
        for (r, alts) in rules.enumerated() where productive[r] {
            for alt in alts where alt.allSatisfy({ $0.isTerminal || productive[Int($0.ruleID)] }) {
                altStarts[r].append(Int32(symbols.count))
                for s in alt { symbols.append(encode(s)) }
                symbols.append(-1)
            }
        }
        // Closure templates, memoized, with left-recursion detection.
        var templates = [Grammar.Template?](repeating: nil, count: symbols.count)
        var inProgress = [Bool](repeating: false, count: symbols.count)
        var error: GrammarError?
        func template(_ pos: Int) -> Grammar.Template {
            if let t = templates[pos] { return t }
            if inProgress[pos] {
                error = GrammarError(message: "left recursion in the grammar (rule reachable from itself without consuming text)")
                return Grammar.Template()
            }
            inProgress[pos] = true
            defer { inProgress[pos] = false }
            var t = Grammar.Template()
            let sym = symbols[pos]
            if sym == -1 {
                t.reachesEnd = true
            } else if sym >= 0 {
                t.entries = [(Int32(pos), [])]
            } else {
                let r = Int(-sym - 2)
                let tail = symbols[pos + 1] == -1
                var seen = Set<[Int32]>()
                var nullable = false
                for a in altStarts[r] {
                    let sub = template(Int(a))
                    for e in sub.entries {
                        let pushes = tail ? e.pushes : [Int32(pos + 1)] + e.pushes
                        let key = [e.terminalPosition] + pushes
                        if seen.insert(key).inserted { t.entries.append((e.terminalPosition, pushes)) }
                    }
                    if sub.reachesEnd { nullable = true }
                }
                if nullable {
                    let next = template(pos + 1)
                    for e in next.entries {
                        let key = [e.terminalPosition] + e.pushes
                        if seen.insert(key).inserted { t.entries.append(e) }
                    }
                    if next.reachesEnd { t.reachesEnd = true }
                }
            }
            templates[pos] = t
            return t
        }
        for p in 0..<symbols.count { _ = template(p) }
        if let error { throw error }
        return Grammar(terminals: terminals, symbols: symbols, templates: templates.map { $0! }, ruleCount: rules.count)
    }
}
