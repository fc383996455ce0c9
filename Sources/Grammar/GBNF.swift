import LeapJSON

/// GBNF, the grammar text format of llama.cpp, parsed into a `Grammar`.
///
/// ```
/// root   ::= "<|tool_call_start|>[" call ("," call)* "]<|tool_call_end|>"
/// call   ::= name "(" (arg ("," arg)*)? ")"
/// name   ::= "get_weather" | "get_time"
/// arg    ::= [a-z_]+ "=" value
/// value  ::= "\"" [^"\\]* "\"" | [0-9]+   # comments run to the end of the line
/// ```
///
/// Supported: rules `name ::= ...` (a rule ends where the next `name ::=` begins), the
/// start rule `root`, string literals with escapes (`\n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH`),
/// character classes `[...]` with ranges and `^` negation, `.` (any scalar), rule references,
/// groups `( ... )`, alternation `|`, and the postfix operators `* + ? {m} {m,} {m,n}`.
/// Rules may be recursive but not left-recursive. Rules named in `schemas` are bound to JSON
/// Schemas: `args ::= ...` can be replaced by schema-constrained JSON.
public enum GBNF {
    /// Parses GBNF text. `schemas` maps rule names (not defined in the text) to JSON Schemas
    /// whose JSON values the rule matches.
    public static func parse(
        _ text: String, root: String = "root", schemas: [String: JSONValue] = [:],
        options: JSONSchemaCompiler.Options = .init()
    ) throws(GrammarError) -> Grammar {
        try LargeStack.run(needing: LargeStack.bytesNeeded(maxDepth: options.limits.maxDepth)) { () throws(GrammarError) in
            try parseHere(text, root: root, schemas: schemas, options: options)
        }
    }

    static func parseHere(_ text: String, root: String, schemas: [String: JSONValue], options: JSONSchemaCompiler.Options)
        throws(GrammarError)
        -> Grammar
    {
        var p = GBNFParser(text: text)
        try p.parseRules()
        var b = GrammarBuilder()
        var symbols: [String: GrammarBuilder.Symbol] = [:]
        for name in p.ruleOrder { symbols[name] = b.declareRule(name) }
        for (name, schema) in schemas where symbols[name] == nil {
            do {
                symbols[name] = try JSONSchemaCompiler.addSchema(schema, to: &b, options: options, budget: CompileBudget(options.limits))
            } catch {
                throw GrammarError(message: "rule \(name): \(error)")
            }
        }
        for name in p.ruleOrder {
            let alts = try p.rules[name]!.map { alt throws(GrammarError) in
                try alt.map { el throws(GrammarError) in try lower(el, &b, symbols) }
            }
            b.define(symbols[name]!, alts)
        }
        guard let start = symbols[root] else { throw GrammarError(message: "GBNF: no rule named '\(root)'") }
        return try b.build(root: start, limits: options.limits)
    }

    static func lower(_ e: GBNFParser.Element, _ b: inout GrammarBuilder, _ symbols: [String: GrammarBuilder.Symbol]) throws(GrammarError)
        -> GrammarBuilder.Symbol
    {
        switch e {
        case .literal(let bytes): return b.literal(bytes)
        case .scalars(let set): return b.terminal(.scalar(set))
        case .ref(let name):
            guard let s = symbols[name] else { throw GrammarError(message: "GBNF: undefined rule '\(name)'") }
            return s
        case .group(let alts):
            let lowered = try alts.map { alt throws(GrammarError) in try alt.map { el throws(GrammarError) in try lower(el, &b, symbols) } }
            return b.rule("group", lowered)
        case .repeated(let inner, let minCount, let maxCount):
            let x = try lower(inner, &b, symbols)
            var seq = [GrammarBuilder.Symbol](repeating: x, count: minCount)
            if let maxCount {
                // x{0,k} as nested optionals: (x (x (...)?)?)?
                var tail: GrammarBuilder.Symbol?
                for _ in 0..<(maxCount - minCount) {
                    tail = b.rule("opt", [[], tail.map { [x, $0] } ?? [x]])
                }
                if let tail { seq.append(tail) }
            } else {
                let star = b.declareRule("star")
                b.define(star, [[], [x, star]])
                seq.append(star)
            }
            return b.rule("repeat", [seq])
        }
    }
}

struct GBNFParser {
    indirect enum Element {
        case literal([UInt8])
        case scalars(ScalarSet)
        case ref(String)
        case group([[Element]])
        case repeated(Element, min: Int, max: Int?)
    }

    let chars: [UInt32]
    var pos = 0
    var rules: [String: [[Element]]] = [:]
    var ruleOrder: [String] = []
    /// Nesting of groups being parsed (bounded, so that `((((...` cannot exhaust the stack).
    var depth = 0
    static let maxDepth = 256

    init(text: String) { chars = text.unicodeScalars.map(\.value) }

    func error(_ message: String) -> GrammarError {
        var line = 1
        for c in chars[..<min(pos, chars.count)] where c == 10 { line += 1 }
        return GrammarError(message: "GBNF line \(line): \(message)")
    }

    static func isNameChar(_ c: UInt32) -> Bool {
        (48...57).contains(c) || (65...90).contains(c) || (97...122).contains(c) || c == 45 || c == 95
    }

    mutating func skipSpace() {
        while pos < chars.count {
            let c = chars[pos]
            if c == 35 {
                while pos < chars.count && chars[pos] != 10 { pos += 1 }
            } else if c == 32 || c == 9 || c == 10 || c == 13 {
                pos += 1
            } else {
                break
            }
        }
    }

    mutating func name() -> String? {
        let start = pos
        while pos < chars.count && GBNFParser.isNameChar(chars[pos]) { pos += 1 }
        if pos == start { return nil }
        return String(String.UnicodeScalarView(chars[start..<pos].compactMap(Unicode.Scalar.init)))
    }

    /// Whether a rule definition (`name ::=`) starts here.
    func atRuleStart() -> Bool {
        var i = pos
        while i < chars.count && GBNFParser.isNameChar(chars[i]) { i += 1 }
        if i == pos { return false }
        while i < chars.count && (chars[i] == 32 || chars[i] == 9) { i += 1 }
        return i + 2 < chars.count && chars[i] == 58 && chars[i + 1] == 58 && chars[i + 2] == 61
    }

    mutating func parseRules() throws(GrammarError) {
        skipSpace()
        while pos < chars.count {
            guard let n = name() else { throw error("expected a rule name") }
            skipSpace()
            guard pos + 2 < chars.count, chars[pos] == 58, chars[pos + 1] == 58, chars[pos + 2] == 61 else {
                throw error("expected '::=' after \(n)")
            }
            pos += 3
            if rules[n] != nil { throw error("rule '\(n)' defined twice") }
            let alts = try parseAlternatives(nested: false)
            rules[n] = alts
            ruleOrder.append(n)
            skipSpace()
        }
    }

    mutating func parseAlternatives(nested: Bool) throws(GrammarError) -> [[Element]] {
        var alts: [[Element]] = [try parseSequence(nested: nested)]
        while true {
            skipSpace()
            guard pos < chars.count, chars[pos] == 124 else { break }
            pos += 1
            alts.append(try parseSequence(nested: nested))
        }
        return alts
    }

    mutating func parseSequence(nested: Bool) throws(GrammarError) -> [Element] {
        var seq: [Element] = []
        while true {
            skipSpace()
            guard pos < chars.count else { break }
            let c = chars[pos]
            if c == 124 || c == 41 { break }
            if !nested && atRuleStart() { break }
            var el: Element
            switch c {
            case 34:
                pos += 1
                var bytes: [UInt8] = []
                while true {
                    guard pos < chars.count else { throw error("unterminated string") }
                    if chars[pos] == 34 {
                        pos += 1
                        break
                    }
                    let v = try scalar()
                    bytes += Array(String(Unicode.Scalar(v)!).utf8)
                }
                el = bytes.isEmpty ? .group([[]]) : .literal(bytes)
            case 91:
                pos += 1
                var negate = false
                if pos < chars.count && chars[pos] == 94 {
                    negate = true
                    pos += 1
                }
                var ranges: [ClosedRange<UInt32>] = []
                while true {
                    guard pos < chars.count else { throw error("unterminated character class") }
                    if chars[pos] == 93 {
                        pos += 1
                        break
                    }
                    let lo = try scalar()
                    var hi = lo
                    if pos + 1 < chars.count && chars[pos] == 45 && chars[pos + 1] != 93 {
                        pos += 1
                        hi = try scalar()
                    }
                    guard lo <= hi else { throw error("bad range in character class") }
                    ranges.append(lo...hi)
                }
                var set = ScalarSet(ranges: ranges)
                if negate {
                    set = ScalarSet(ranges: set.complement.ranges.filter { !($0.lowerBound >= 0xD800 && $0.upperBound <= 0xDFFF) })
                }
                el = .scalars(set.withoutSurrogates)
            case 46:
                pos += 1
                el = .scalars(ScalarSet.all.withoutSurrogates)
            case 40:
                pos += 1
                depth += 1
                defer { depth -= 1 }
                if depth > GBNFParser.maxDepth { throw error("groups nested more than \(GBNFParser.maxDepth) deep") }
                let alts = try parseAlternatives(nested: true)
                skipSpace()
                guard pos < chars.count, chars[pos] == 41 else { throw error("missing ')'") }
                pos += 1
                el = .group(alts)
            default:
                guard let n = name() else { throw error("unexpected character '\(Character(Unicode.Scalar(c)!))'") }
                el = .ref(n)
            }
            // Postfix operators (no space before them), a bounded number of them.
            var postfixes = 0
            while pos < chars.count {
                let q = chars[pos]
                if q == 42 || q == 43 || q == 63 || q == 123 {
                    postfixes += 1
                    if postfixes > 8 { throw error("too many repetition operators in a row") }
                }
                if q == 42 {
                    pos += 1
                    el = .repeated(el, min: 0, max: nil)
                } else if q == 43 {
                    pos += 1
                    el = .repeated(el, min: 1, max: nil)
                } else if q == 63 {
                    pos += 1
                    el = .repeated(el, min: 0, max: 1)
                } else if q == 123 {
                    pos += 1
                    func number(_ p: inout GBNFParser) -> Int? {
                        let s = p.pos
                        var v = 0
                        while p.pos < p.chars.count, (48...57).contains(p.chars[p.pos]) {
                            v = min(v * 10 + Int(p.chars[p.pos] - 48), 100_000)
                            p.pos += 1
                        }
                        return p.pos > s ? v : nil
                    }
                    skipSpace()
                    guard let m = number(&self) else { throw error("bad repetition") }
                    skipSpace()
                    var n: Int? = m
                    if pos < chars.count && chars[pos] == 44 {
                        pos += 1
                        skipSpace()
                        n = number(&self)
                        skipSpace()
                    }
                    guard pos < chars.count, chars[pos] == 125 else { throw error("missing '}'") }
                    pos += 1
                    if let n, n < m { throw error("bad repetition range") }
                    if m > 1000 || (n ?? 0) > 1000 { throw error("repetition count too large") }
                    el = .repeated(el, min: m, max: n)
                } else {
                    break
                }
            }
            seq.append(el)
        }
        return seq
    }

    /// One scalar of a literal or class, with escapes.
    mutating func scalar() throws(GrammarError) -> UInt32 {
        let c = chars[pos]
        pos += 1
        guard c == 92 else { return c }
        guard pos < chars.count else { throw error("trailing backslash") }
        let e = chars[pos]
        pos += 1
        func hex(_ n: Int, _ p: inout GBNFParser) throws(GrammarError) -> UInt32 {
            var v: UInt32 = 0
            for _ in 0..<n {
                guard p.pos < p.chars.count, let d = RegexParser.hexValue(p.chars[p.pos]) else { throw p.error("bad hex escape") }
                v = v * 16 + d
                p.pos += 1
            }
            guard v <= 0x10FFFF, !(0xD800...0xDFFF).contains(v) else { throw p.error("escape is not a Unicode scalar") }
            return v
        }
        switch e {
        case 110: return 10
        case 114: return 13
        case 116: return 9
        case 48: return 0
        case 120: return try hex(2, &self)
        case 117: return try hex(4, &self)
        case 85: return try hex(8, &self)
        default: return e
        }
    }
}

extension ScalarSet {
    /// The set without the surrogate code points (which are not Unicode scalars).
    var withoutSurrogates: ScalarSet {
        var out: [ClosedRange<UInt32>] = []
        for r in ranges {
            if r.upperBound < 0xD800 || r.lowerBound > 0xDFFF {
                out.append(r)
                continue
            }
            if r.lowerBound < 0xD800 { out.append(r.lowerBound...0xD7FF) }
            if r.upperBound > 0xDFFF { out.append(0xE000...r.upperBound) }
        }
        return ScalarSet(ranges: out)
    }
}
