/// `format: regex` as a regular language: a subset of the patterns that ECMA-262 accepts (with
/// and without the `u` flag) and that Python's `re.compile` accepts too, so that no string it
/// admits is refused by either kind of validator.
///
/// Accepted, exactly:
/// - a pattern is any sequence of terms and `|` (empty alternatives included);
/// - a term is an atom with at most one quantifier, or an assertion;
/// - atoms: a literal (any character from U+0020 up except `^ $ \ . * + ? ( ) [ ] { } |`), `.`,
///   an escape (`\d \D \w \W \s \S \n \r \t \f \v`, `\xHH`, `\uHHHH`, or `\` before one of
///   `^ $ \ . * + ? ( ) [ ] { } | /`), a class, or a group `(...)` / `(?:...)`, groups nested
///   at most `maxGroupDepth` deep;
/// - quantifiers: `*`, `+`, `?`, `{n}`, `{n,}`, `{n,m}` with `n <= m`, each optionally followed by
///   `?` (lazy); counts are `0` or up to 3 digits without a leading zero, and in `{n,m}` either
///   `m` has more digits than `n`, or both are single digits;
/// - assertions (never quantified): `^`, `$`, `\b`, `\B`, and lookaheads `(?=...)`, `(?!...)`
///   whose body holds no group or lookahead;
/// - a class is `[`, an optional `^`, then either a lone `-` or one or more items with an
///   optional `-` first and last, then `]`. An item is a character from U+0020 up except
///   `\ ] [ - ^ & ~ |`, a class escape (the atom escapes, `\b` and `\-`), or a range `x-y` of two
///   digits, two lower-case or two upper-case ASCII letters with `x <= y`, where `y` is any
///   from `0`/`a`/`A`, `1-9` from `1`, `f-z`/`F-Z` from `b-f`/`B-F`, and else `9`/`z`/`Z`.
///
/// Left out although valid in both: backreferences, named groups (their syntaxes differ),
/// lookbehind, `\0`, `\c`, control characters, lone `]` `{` `}`, ranges with other endpoints.
enum RegexFormat {
    /// How deep groups may nest.
    static let maxGroupDepth = 4

    /// The whole language, as a node matching the whole string.
    static var node: RegexNode { sequence(groupDepth: maxGroupDepth) }

    static func chars(_ s: String) -> ScalarSet { ScalarSet(ranges: s.unicodeScalars.map { $0.value...$0.value }) }
    static func lit(_ s: String) -> RegexNode {
        let parts = s.unicodeScalars.map { RegexNode.set(ScalarSet($0.value)) }
        return parts.count == 1 ? parts[0] : .concat(parts)
    }
    static func opt(_ n: RegexNode) -> RegexNode { .repeat(n, min: 0, max: 1) }
    static func star(_ n: RegexNode) -> RegexNode { .repeat(n, min: 0, max: nil) }

    static let controls = ScalarSet(ranges: [0...0x1F])
    static let syntax = chars("^$\\.*+?()[]{}|")
    static let literal = syntax.union(controls).complement
    static let classLiteral = chars("\\][-^&~|").union(controls).complement
    static let hexDigit = ScalarSet(ranges: [48...57, 65...70, 97...102])
    static let digit = ScalarSet(ranges: [48...57])
    static let nonZero = ScalarSet(ranges: [49...57])

    /// `\` and what may follow it; `extra` adds the escapes only valid in classes (`b`, `-`).
    static func escape(_ extra: String) -> RegexNode {
        let simple = chars("dDwWsSnrtfv/" + extra).union(syntax)
        let hex2 = RegexNode.concat([lit("x"), .set(hexDigit), .set(hexDigit)])
        let hex4 = RegexNode.concat([lit("u")] + Array(repeating: .set(hexDigit), count: 4))
        return .concat([lit("\\"), .alt([.set(simple), hex2, hex4])])
    }

    /// `x-y` with `x <= y`, of two digits or two letters of one case, in buckets that keep the
    /// automaton small: from `0` (or `a`, `A`) to any, from `1` to `1-9` (from `b-f` to `f-z`),
    /// from any other to `9` (to `z`).
    static let range: RegexNode = {
        func r(_ a: Unicode.Scalar, _ b: Unicode.Scalar) -> ScalarSet { ScalarSet(ranges: [a.value...b.value]) }
        let buckets: [(ScalarSet, ScalarSet)] = [
            (r("0", "0"), r("0", "9")), (r("1", "1"), r("1", "9")), (r("2", "9"), r("9", "9")),
            (r("a", "a"), r("a", "z")), (r("b", "f"), r("f", "z")), (r("g", "z"), r("z", "z")),
            (r("A", "A"), r("A", "Z")), (r("B", "F"), r("F", "Z")), (r("G", "Z"), r("Z", "Z"))
        ]
        return .alt(buckets.map { .concat([.set($0.0), lit("-"), .set($0.1)]) })
    }()

    static let characterClass: RegexNode = {
        let item = RegexNode.alt([.set(classLiteral), escape("b-"), range])
        let items = RegexNode.concat([opt(lit("-")), item, star(item), opt(lit("-"))])
        return .concat([lit("["), opt(lit("^")), .alt([lit("-"), items]), lit("]")])
    }()

    /// `0`, or 1 to `digits` digits without a leading zero.
    static func count(digits: Int) -> RegexNode {
        .alt([lit("0"), .concat([.set(nonZero), .repeat(.set(digit), min: 0, max: digits - 1)])])
    }

    /// `n,m` with `n <= m`: both of one digit, or `m` with more digits than `n` (up to 3).
    static let orderedPair: RegexNode = {
        let d = RegexNode.set(digit)
        var alts: [RegexNode] = []
        for a: UInt32 in 0...9 { alts.append(.concat([.set(ScalarSet(48 + a)), lit(","), .set(ScalarSet(ranges: [(48 + a)...57]))])) }
        let one = count(digits: 1), two = RegexNode.concat([.set(nonZero), d]), three = RegexNode.concat([.set(nonZero), d, d])
        alts.append(.concat([one, lit(","), .alt([two, three])]))
        alts.append(.concat([two, lit(","), three]))
        return .alt(alts)
    }()

    static let quantifier: RegexNode = {
        let braces = RegexNode.concat([
            lit("{"), .alt([count(digits: 3), .concat([count(digits: 3), lit(",")]), orderedPair]), lit("}")
        ])
        return .concat([.alt([.set(chars("*+?")), braces]), opt(lit("?"))])
    }()

    /// Terms and `|` in any order, groups nested at most `groupDepth` deep; no lookahead when
    /// `lookahead` is false (inside one).
    static func sequence(groupDepth: Int, lookahead: Bool = true) -> RegexNode {
        var atoms: [RegexNode] = [.set(literal), lit("."), escape("")]
        atoms.append(characterClass)
        if groupDepth > 0 {
            let inner = sequence(groupDepth: groupDepth - 1, lookahead: lookahead)
            atoms.append(.concat([lit("("), opt(lit("?:")), inner, lit(")")]))
        }
        var assertions: [RegexNode] = [.set(chars("^$")), .concat([lit("\\"), .set(chars("bB"))])]
        if lookahead {
            let body = sequence(groupDepth: 0, lookahead: false)
            assertions.append(.concat([lit("(?"), .set(chars("=!")), body, lit(")")]))
        }
        let term = RegexNode.alt([.concat([.alt(atoms), opt(quantifier)])] + assertions + [lit("|")])
        return star(term)
    }
}
