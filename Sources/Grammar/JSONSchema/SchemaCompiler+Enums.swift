import LeapJSON

/// `enum` and `const`: the listed values that also satisfy the sibling keywords, each as a
/// literal (strings as one automaton of their decoded texts, in any escape spelling).
extension SchemaCompiler {
    func enumAlternatives(_ values: [JSONValue], rest: JSONObject, negations n: TypedNegations, base: String) throws(SchemaError)
        -> [[GrammarBuilder.Symbol]]
    {
        var candidates: [JSONValue] = []
        var seen = Set<[UInt8]>()
        for v in values where try isAllowed(v, by: n) {
            if seen.insert(SchemaCompiler.equalityKey(v)).inserted { candidates.append(v) }
        }
        if candidates.isEmpty { return [] }
        let kept = try satisfying(rest, candidates, base: base)
        var alts: [[GrammarBuilder.Symbol]] = []
        let strings = kept.compactMap(\.stringValue)
        if !strings.isEmpty, let dfa = CodePointDFA.literals(strings) {
            alts.append([b.terminal(.string(StringSpec(dfa: dfa)))])
        }
        // `1` may also be written `1.0` where a number with a fraction is valid.
        let fractions = !options.plainIntegers && (n.types.contains("number") || !draft.integersHaveNoFraction)
        for v in kept where v.stringValue == nil { alts.append([valueLiteral(v, integerFractions: fractions)]) }
        return alts
    }

    /// Whether a value is of an allowed type and excluded by no typed negation.
    func isAllowed(_ v: JSONValue, by n: TypedNegations) throws(SchemaError) -> Bool {
        guard SchemaCompiler.isFinite(v) else { return false }  // 1e400 parses as infinity: not JSON
        let vt = types(of: v)
        guard vt.contains(where: { n.types.contains($0) || ($0 == "integer" && n.types.contains("number")) }) else { return false }
        if n.fractionalOnly && vt.contains("integer") { return false }
        if n.literals.contains(v) { return false }
        if case .string(let s) = v {
            if n.strings.contains(where: { $0.unicodeScalars.elementsEqual(s.unicodeScalars) }) { return false }
            for p in n.patterns { if let d = try patternDFA(p, lenient: true), d.accepts(s) { return false } }
        }
        return true
    }

    static func isFinite(_ v: JSONValue) -> Bool {
        switch v {
        case .double(let d): return d.isFinite
        case .array(let a): return a.allSatisfy(isFinite)
        case .object(let o): return o.allSatisfy { isFinite($0.1) }
        default: return true
        }
    }

    /// The candidates valid under the sibling keywords `rest`, checked by matching their
    /// compact JSON text with the grammar of `rest`.
    func satisfying(_ rest: JSONObject, _ candidates: [JSONValue], base: String) throws(SchemaError) -> [JSONValue] {
        if rest.keys.allSatisfy({ $0 == "type" }) { return candidates }
        var restNoNot = rest
        restNoNot[NormalKey.not] = nil
        let checker = enumCheckingCompiler()
        let root = checker.b.rule("enum-check", try checker.alternatives(restNoNot, base: base))
        // A rule still being compiled (the enum sits inside a recursive definition) has no
        // alternatives yet: a value refused may have needed it.
        let incomplete = checker.b.reachesUndefinedRule(from: root)
        let grammar: Grammar
        do { grammar = try SchemaCompiler.build(checker.b, root: root, budget: budget) } catch {
            if case .limitExceeded = error.kind { throw error }
            if incomplete { throw .unsupported("enum", "an enum inside a recursive definition, checked against that definition") }
            return []  // nothing satisfies the sibling keywords
        }
        let m = GrammarMatcher(grammar: grammar)
        var kept: [JSONValue] = []
        for (i, v) in candidates.enumerated() {
            if i & 255 == 255 { try budget.checkTime() }
            m.reset()
            if m.accept(v.serialized(.compact)) && m.canAcceptEnd {
                kept.append(v)
            } else if incomplete {
                throw .unsupported("enum", "an enum inside a recursive definition, checked against that definition")
            }
        }
        return kept
    }

    /// The compiler of the grammars that check enum values: JSON spelling, the same
    /// semantics, the same budget (it is this compiler when this one writes JSON already).
    func enumCheckingCompiler() -> SchemaCompiler {
        if isEnumChecker { return self }
        if let c = enumChecker { return c }
        var checkOptions = options
        checkOptions.literalStyle = .json
        checkOptions.plainIntegers = false
        checkOptions.maxWhitespaceRun = nil
        checkOptions.defaultDraft = draft
        let c = SchemaCompiler(root: root, options: checkOptions, builder: GrammarBuilder(), budget: budget)
        c.resources = resources
        c.anchors = anchors
        c.rootBase = rootBase
        c.isEnumChecker = true
        enumChecker = c
        return c
    }

    /// A rule for exactly this JSON value (whitespace allowed between tokens; object keys in
    /// the given order). `integerFractions`: an integral number may also be written `n.0`
    /// (nested integers get the `.0` spelling only where every draft reads it as an integer).
    func valueLiteral(_ v: JSONValue, integerFractions: Bool) -> GrammarBuilder.Symbol {
        let nested = integerFractions && !draft.integersHaveNoFraction
        switch v {
        case .null: return b.literal(options.literalStyle.null)
        case .bool(let x): return b.literal(options.literalStyle.bool(x))
        case .integer(let i): return integerLiteral(String(i), fractions: integerFractions)
        case .double(let d):
            if d.rounded() == d, abs(d) < 1e15 { return integerLiteral(String(Int(d)), fractions: integerFractions) }
            return b.literal(JSONValue.pythonFloatRepr(d))
        case .string(let s):
            guard let dfa = CodePointDFA.literals([s]) else { return b.literal(v.serialized(.compact)) }
            return b.terminal(.string(StringSpec(dfa: dfa)))
        case .array(let a):
            var seq: [GrammarBuilder.Symbol] = [b.literal("["), ws]
            for (i, x) in a.enumerated() {
                if i > 0 { seq += [ws, b.literal(","), ws] }
                seq.append(valueLiteral(x, integerFractions: nested))
            }
            return b.rule("arr", [seq + [ws, b.literal("]")]])
        case .object(let o):
            var seq: [GrammarBuilder.Symbol] = [b.literal("{"), ws]
            for (i, (k, x)) in o.enumerated() {
                if i > 0 { seq += [ws, b.literal(","), ws] }
                seq += [
                    b.literal(JSONValue.string(k).serialized(.compact)), ws, b.literal(":"), ws, valueLiteral(x, integerFractions: nested)
                ]
            }
            return b.rule("obj", [seq + [ws, b.literal("}")]])
        }
    }

    func integerLiteral(_ digits: String, fractions: Bool) -> GrammarBuilder.Symbol {
        fractions ? b.rule("num", [[b.literal(digits)], [b.literal(digits + ".0")]]) : b.literal(digits)
    }
}
