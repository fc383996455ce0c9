import LeapJSON

/// `string`: `minLength`/`maxLength`, `pattern` (regex to automaton), `format`, and the
/// exclusions of `not` (patterns, string constants), as a `StringSpec` for the string terminal.
extension SchemaCompiler {
    /// `lenient`: patterns read with Python's `$` too (a superset: for disjointness proofs).
    func stringSpec(_ f: JSONObject, notPatterns: [String], notStrings: [String], lenient: Bool = false) throws(SchemaError) -> StringSpec?
    {
        var spec = StringSpec()
        if let v = f["minLength"] { spec.minLength = try count("minLength", v) }
        if let v = f["maxLength"] { spec.maxLength = try count("maxLength", v) }
        if let m = spec.maxLength, m < spec.minLength { return nil }
        var parts: [CodePointDFA] = []
        for p in f[NormalKey.patterns]?.arrayValue ?? [] {
            guard let text = p.stringValue else { continue }
            guard let d = try patternDFA(text, lenient: lenient) else { return nil }
            parts.append(d)
        }
        // (Formats are left out of the lenient reading: validators' format checkers may be laxer.)
        for fm in lenient ? [] : f[NormalKey.formats]?.arrayValue ?? [] {
            guard let name = fm.stringValue, let d = Formats.dfa(name) else { throw .unsupported("format", "format '\(fm)'") }
            parts.append(d)
            if let m = Formats.maxLength[name] { spec.maxLength = min(spec.maxLength ?? m, m) }
        }
        if let m = spec.maxLength, m < spec.minLength { return nil }
        for p in notPatterns {
            guard let d = try patternDFA(p, lenient: true) else { continue }
            guard let c = d.complement() else { return nil }
            parts.append(c)
        }
        if !notStrings.isEmpty, let lit = CodePointDFA.literals(notStrings) {
            guard let c = lit.complement() else { return nil }
            parts.append(c)
        }
        var dfa: CodePointDFA?
        for d in parts {
            if let cur = dfa {
                guard let both = try intersect(cur, d) else { return nil }
                dfa = both
            } else {
                dfa = d
            }
        }
        spec.dfa = dfa
        if let d = dfa, let m = spec.maxLength, Int(d.minToAccept[Int(d.start)]) > m { return nil }
        if let d = dfa, d.maxToAccept[Int(d.start)] != Int32.max, Int(d.maxToAccept[Int(d.start)]) < spec.minLength { return nil }
        return spec
    }

    /// The strings of both automata (nil if none), within the automaton limits.
    func intersect(_ a: CodePointDFA, _ b: CodePointDFA) throws(SchemaError) -> CodePointDFA? {
        do { return try a.intersection(b, limits: budget.automaton) } catch { throw SchemaError(error) }
    }

    /// A pattern's DFA (nil: no string matches): `lenient` for negated uses (see
    /// `RegexCompiler.compilePattern`).
    func patternDFA(_ p: String, lenient: Bool = false) throws(SchemaError) -> CodePointDFA? {
        let key = lenient ? "\u{0}lenient:" + p : p
        if let d = patternCache[key] { return d }
        let d: CodePointDFA?
        do {
            if let (looks, rest) = SchemaCompiler.leadingLookaheads(p) {
                d = try lookaheadDFA(looks, rest, lenient: lenient)
            } else {
                d = try RegexCompiler.compilePattern(p, lenientDollar: lenient, limits: budget.automaton)
            }
        } catch {
            if let limit = error.limit { throw SchemaError(limit) }
            throw .unsupported("pattern", "\(error.message) in /\(p)/")
        }
        patternCache[key] = d
        return d
    }

    /// ^(?=Z)(?!X)Y: Y, and Z, and not X, all from the start of the string.
    func lookaheadDFA(_ looks: [(Bool, String)], _ rest: String, lenient: Bool) throws(RegexError) -> CodePointDFA? {
        let limits = budget.automaton
        guard var acc = try RegexCompiler.compilePattern("^" + rest, lenientDollar: lenient, limits: limits) else { return nil }
        for (negative, body) in looks {
            let part = try RegexCompiler.compilePattern("^(?:" + body + ")", lenientDollar: negative ? !lenient : lenient, limits: limits)
            let side: CodePointDFA
            if negative {
                guard let part else { continue }  // nothing matches X: not X is everything
                guard let c = part.complement() else { return nil }
                side = c
            } else {
                guard let part else { return nil }
                side = part
            }
            do {
                guard let both = try acc.intersection(side, limits: limits) else { return nil }
                acc = both
            } catch {
                throw RegexError(error)
            }
        }
        return acc
    }

    /// `^(?=...)(?!...)rest`: lookaheads at the very start of an anchored pattern whose rest has
    /// no top-level alternation. Returns nil for any other shape.
    static func leadingLookaheads(_ p: String) -> ([(Bool, String)], String)? {
        let c = Array(p.unicodeScalars)
        guard c.count > 4, c[0] == "^", c[1] == "(", c[2] == "?", c[3] == "!" || c[3] == "=" else { return nil }
        var looks: [(Bool, String)] = []
        var i = 1
        while i + 2 < c.count, c[i] == "(", c[i + 1] == "?", c[i + 2] == "!" || c[i + 2] == "=" {
            guard let close = closingParenthesis(c, from: i + 3) else { return nil }
            looks.append((c[i + 2] == "!", String(String.UnicodeScalarView(c[(i + 3)..<close]))))
            i = close + 1
        }
        let rest = String(String.UnicodeScalarView(c[i...]))
        if ["(?=", "(?!", "(?<=", "(?<!"].contains(where: { rest.contains($0) }) { return nil }
        guard let node = try? RegexParser.parse("^" + rest) else { return nil }
        if case .alt = node { return nil }
        return (looks, rest)
    }

    /// The index of the `)` closing a group whose body starts at `start` (escapes and classes skipped).
    static func closingParenthesis(_ c: [Unicode.Scalar], from start: Int) -> Int? {
        var depth = 1, j = start, inClass = false
        while j < c.count {
            if c[j] == "\\" {
                j += 2
                continue
            }
            if inClass {
                if c[j] == "]" { inClass = false }
            } else if c[j] == "[" {
                inClass = true
            } else if c[j] == "(" {
                depth += 1
            } else if c[j] == ")" {
                depth -= 1
                if depth == 0 { return j }
            }
            j += 1
        }
        return nil
    }
}
