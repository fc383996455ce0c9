import LeapJSON

/// `not` beside an `enum` or `const`: when the negated schema is not expressible as a union of
/// positive schemas (`not: {oneOf}`, `not: {patternProperties}`...), the listed values are
/// finitely many, so each is checked against the negated schema's own grammar and the values
/// that satisfy it are dropped. Exact: a value is kept only when no spelling of it (every
/// order of every object's keys) is accepted by that grammar, which accepts exactly the valid
/// values in the compiler's canonical shape.
extension SchemaCompiler {
    /// At most this many values are checked, and at most this many spellings of one value.
    static let negatedEnumMaxValues = 256
    static let negatedEnumMaxSpellings = 120

    /// The values of `values` that do not satisfy `negated`, or nil when that cannot be decided
    /// exactly (the negated schema does not compile, sits in a recursive definition, or a value
    /// has too many key orders).
    func valuesViolating(_ negated: JSONValue, _ values: [JSONValue], base: String) throws(SchemaError) -> [JSONValue]? {
        guard values.count <= SchemaCompiler.negatedEnumMaxValues else { return nil }
        var spellings: [[String]] = []
        for v in values {
            guard SchemaCompiler.isFinite(v), let s = SchemaCompiler.spellings(v, cap: SchemaCompiler.negatedEnumMaxSpellings) else {
                return nil
            }
            spellings.append(s)
        }
        let checker = enumCheckingCompiler()
        let root: GrammarBuilder.Symbol
        do {
            root = checker.b.rule("not-check", try checker.nodeAlternatives(negated, base: base))
        } catch {
            if case .limitExceeded = error.kind { throw error }
            return nil
        }
        if checker.b.reachesUndefinedRule(from: root) { return nil }
        let grammar: Grammar?
        do { grammar = try SchemaCompiler.build(checker.b, root: root, budget: budget) } catch {
            if case .limitExceeded = error.kind { throw error }
            guard error.kind == .unsatisfiable else { return nil }
            grammar = nil  // the negated schema holds for nothing: every value violates it
        }
        var out: [JSONValue] = []
        for (v, texts) in zip(values, spellings) {
            try budget.checkTime()
            let holds =
                grammar.map { g in
                    texts.contains { t in
                        let m = GrammarMatcher(grammar: g)
                        return m.accept(t) && m.canAcceptEnd
                    }
                } ?? false
            if !holds { out.append(v) }
        }
        return out
    }

    /// The compact JSON texts of a value with its objects' keys in every order (nil when there
    /// are more than `cap`).
    static func spellings(_ v: JSONValue, cap: Int) -> [String]? {
        switch v {
        case .array(let items):
            var out = [""]
            for (i, item) in items.enumerated() {
                guard let s = spellings(item, cap: cap), out.count * s.count <= cap else { return nil }
                out = out.flatMap { prefix in s.map { prefix + (i == 0 ? "" : ",") + $0 } }
            }
            return out.map { "[" + $0 + "]" }
        case .object(let o):
            var members: [[String]] = []
            for (k, value) in o {
                guard let s = spellings(value, cap: cap) else { return nil }
                let key = JSONValue.string(k).serialized(.compact)
                members.append(s.map { key + ":" + $0 })
            }
            var orders: [[Int]] = [[]]
            for i in 0..<members.count {
                orders = orders.flatMap { o in
                    (0...o.count).map { p in
                        var n = o
                        n.insert(i, at: p)
                        return n
                    }
                }
                if orders.count > cap { return nil }
            }
            var out: [String] = []
            for order in orders {
                var texts = [""]
                for (n, i) in order.enumerated() {
                    guard texts.count * members[i].count <= cap else { return nil }
                    texts = texts.flatMap { prefix in members[i].map { prefix + (n == 0 ? "" : ",") + $0 } }
                }
                out += texts.map { "{" + $0 + "}" }
                if out.count > cap { return nil }
            }
            return out
        default:
            return [v.serialized(.compact)]
        }
    }
}
