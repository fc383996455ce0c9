/// A regular-expression subset (ECMA-262 syntax, as JSON Schema's `pattern` uses), compiled to
/// a `CodePointDFA` with search semantics: the pattern may match anywhere unless anchored.
///
/// Supported: literals, `.`, classes `[...]` with ranges and negation, `\d \D \w \W \s \S`,
/// escapes (`\n \t \r \f \v \0 \xHH \uHHHH \u{H..}` and escaped punctuation), groups `(...)`,
/// `(?:...)`, `(?<name>...)`, alternation, quantifiers `* + ? {n} {n,} {n,m}` (greedy or lazy:
/// the same language), anchors `^` and `$`. Not supported (an error): lookaround,
/// backreferences, word boundaries, Unicode property escapes.
indirect enum RegexNode: Sendable {
    case empty
    case set(ScalarSet)
    case concat([RegexNode])
    case alt([RegexNode])
    case `repeat`(RegexNode, min: Int, max: Int?)
    case bol
    case eol
}

/// Why a pattern could not be compiled: a syntax error or an unsupported construct
/// (`message`), or an automaton that outgrew its limits (`limit`).
struct RegexError: Error {
    let message: String
    var limit: AutomatonLimitError? = nil

    init(message: String) { self.message = message }
    init(_ limit: AutomatonLimitError) {
        message = "pattern too complex"
        self.limit = limit
    }
}

struct RegexParser {
    let chars: [UInt32]
    var pos = 0
    /// Read classes as the union of the ECMA-262 and Python `re` meanings (a superset) instead
    /// of their intersection (a subset, the default): see `RegexCompiler.compilePattern`.
    var lenient = false
    /// The largest `{n,m}` count accepted.
    var maxRepetition = Int.max
    /// Groups being parsed (bounded, so that `((((...` cannot exhaust the stack).
    var depth = 0
    static let maxDepth = 256

    init(_ pattern: String, lenient: Bool = false, maxRepetition: Int = .max) {
        chars = pattern.unicodeScalars.map(\.value)
        self.lenient = lenient
        self.maxRepetition = maxRepetition
    }

    // Class escapes under both readings. ECMA-262 classes are ASCII (`\s`: its own list);
    // Python's are Unicode-aware (`\d`: any decimal digit, `\w`: letters and digits, `\s`:
    // Unicode whitespace incl. U+001C-U+001F and U+0085). Non-ASCII stands in for "maybe".
    static let nonASCII = ScalarSet(ranges: [0x80...ScalarSet.maxScalar])
    static let spaceIntersection = ScalarSet(ranges: [
        9...13, 32...32, 0xA0...0xA0, 0x1680...0x1680, 0x2000...0x200A,
        0x2028...0x2029, 0x202F...0x202F, 0x205F...0x205F, 0x3000...0x3000
    ])
    static let spaceUnion = spaceIntersection.union(ScalarSet(ranges: [0x1C...0x1F, 0x85...0x85, 0xFEFF...0xFEFF]))
    func classSet(_ c: UInt32) -> ScalarSet? {
        switch c {
        case 0x64: return lenient ? RegexParser.digit.union(RegexParser.nonASCII) : RegexParser.digit
        case 0x44: return lenient ? RegexParser.digit.complement : ScalarSet(ranges: [0...0x2F, 0x3A...0x7F])
        case 0x77: return lenient ? RegexParser.word.union(RegexParser.nonASCII) : RegexParser.word
        case 0x57: return lenient ? RegexParser.word.complement : RegexParser.word.union(RegexParser.nonASCII).complement
        case 0x73: return lenient ? RegexParser.spaceUnion : RegexParser.spaceIntersection
        case 0x53: return lenient ? RegexParser.spaceIntersection.complement : RegexParser.spaceUnion.complement
        default: return nil
        }
    }

    static let digit = ScalarSet(ranges: [48...57])
    static let word = ScalarSet(ranges: [48...57, 65...90, 95...95, 97...122])
    static let dot = ScalarSet(ranges: [10...10, 13...13, 0x2028...0x2029]).complement

    static func parse(_ pattern: String, lenient: Bool = false, maxRepetition: Int = .max) throws(RegexError) -> RegexNode {
        var p = RegexParser(pattern, lenient: lenient, maxRepetition: maxRepetition)
        let node = try p.parseAlt()
        if p.pos != p.chars.count { throw RegexError(message: "unbalanced ')' at \(p.pos)") }
        return node
    }

    var atEnd: Bool { pos >= chars.count }
    func peek() -> UInt32? { pos < chars.count ? chars[pos] : nil }

    mutating func parseAlt() throws(RegexError) -> RegexNode {
        var branches = [try parseConcat()]
        while peek() == 0x7C {
            pos += 1
            branches.append(try parseConcat())
        }
        return branches.count == 1 ? branches[0] : .alt(branches)
    }

    mutating func parseConcat() throws(RegexError) -> RegexNode {
        var items: [RegexNode] = []
        while let c = peek(), c != 0x7C, c != 0x29 {
            var atom = try parseAtom()
            // A quantifier (one: `a**` is a syntax error in ECMA-262 and Python alike).
            var quantified = false
            while let q = peek() {
                var minC = 0, maxC: Int? = nil
                if q == 0x2A {
                    pos += 1
                } else if q == 0x2B {
                    pos += 1
                    minC = 1
                } else if q == 0x3F {
                    pos += 1
                    maxC = 1
                } else if q == 0x7B, let (a, b) = tryBraces() {
                    minC = a
                    maxC = b
                } else {
                    break
                }
                if quantified { throw RegexError(message: "multiple repeat") }
                quantified = true
                if peek() == 0x3F { pos += 1 }  // lazy: same language
                if case .bol = atom { throw RegexError(message: "quantified anchor") }
                if case .eol = atom { throw RegexError(message: "quantified anchor") }
                if let m = maxC, m < minC { throw RegexError(message: "bad quantifier range") }
                if minC > maxRepetition || (maxC ?? 0) > maxRepetition {
                    throw RegexError(AutomatonLimitError(limit: .repetition(maxRepetition)))
                }
                atom = .repeat(atom, min: minC, max: maxC)
            }
            items.append(atom)
        }
        return items.count == 1 ? items[0] : .concat(items)
    }

    /// Parses `{n}`, `{n,}`, `{n,m}`; leaves pos unchanged (a literal brace) otherwise.
    mutating func tryBraces() -> (Int, Int?)? {
        var i = pos + 1
        func num(_ i: inout Int) -> Int? {
            var v = 0, any = false
            while i < chars.count, chars[i] >= 48, chars[i] <= 57 {
                v = min(v * 10 + Int(chars[i] - 48), 100_000)
                i += 1
                any = true
            }
            return any ? v : nil
        }
        guard let a = num(&i) else { return nil }
        var b: Int? = a
        if i < chars.count, chars[i] == 0x2C {
            i += 1
            b = num(&i)
        }
        guard i < chars.count, chars[i] == 0x7D else { return nil }
        pos = i + 1
        return (a, b)
    }

    mutating func parseAtom() throws(RegexError) -> RegexNode {
        let c = chars[pos]
        pos += 1
        switch c {
        case 0x5E: return .bol
        case 0x24: return .eol
        case 0x2E: return .set(lenient ? ScalarSet(10).complement : RegexParser.dot)
        case 0x28:
            if peek() == 0x3F {
                pos += 1
                guard let k = peek() else { throw RegexError(message: "bad group") }
                if k == 0x3A {
                    pos += 1
                } else if k == 0x3C, pos + 1 < chars.count, chars[pos + 1] != 0x3D, chars[pos + 1] != 0x21 {
                    while let x = peek(), x != 0x3E { pos += 1 }
                    pos += 1
                } else {
                    throw RegexError(message: "lookaround is not supported")
                }
            }
            depth += 1
            defer { depth -= 1 }
            if depth > RegexParser.maxDepth { throw RegexError(message: "groups nested more than \(RegexParser.maxDepth) deep") }
            let inner = try parseAlt()
            guard peek() == 0x29 else { throw RegexError(message: "missing ')'") }
            pos += 1
            return inner
        case 0x5B: return .set(try parseClass())
        case 0x5C: return try parseEscape(inClass: false)
        case 0x2A, 0x2B, 0x3F: throw RegexError(message: "nothing to repeat")
        default: return .set(ScalarSet(c))
        }
    }

    mutating func hex(_ n: Int) throws(RegexError) -> UInt32 {
        var v: UInt32 = 0
        for _ in 0..<n {
            guard let c = peek(), let d = RegexParser.hexValue(c) else { throw RegexError(message: "bad hex escape") }
            v = v * 16 + d
            pos += 1
        }
        return v
    }

    static func hexValue(_ c: UInt32) -> UInt32? {
        switch c {
        case 48...57: return c - 48
        case 65...70: return c - 55
        case 97...102: return c - 87
        default: return nil
        }
    }

    /// After a backslash.
    mutating func parseEscape(inClass: Bool) throws(RegexError) -> RegexNode {
        guard let c = peek() else { throw RegexError(message: "trailing backslash") }
        pos += 1
        if let set = classSet(c) { return .set(set) }
        switch c {
        case 0x6E: return .set(ScalarSet(10))
        case 0x74: return .set(ScalarSet(9))
        case 0x72: return .set(ScalarSet(13))
        case 0x66: return .set(ScalarSet(12))
        case 0x76: return .set(ScalarSet(11))
        case 0x30: return .set(ScalarSet(0))
        case 0x62 where inClass: return .set(ScalarSet(8))
        case 0x78: return .set(ScalarSet(try hex(2)))
        case 0x75:
            if peek() == 0x7B {
                pos += 1
                var v: UInt32 = 0
                while let x = peek(), x != 0x7D {
                    guard let d = RegexParser.hexValue(x), v < 0x10FFFF else { throw RegexError(message: "bad \\u{} escape") }
                    v = v * 16 + d
                    pos += 1
                }
                pos += 1
                return .set(ScalarSet(v))
            }
            var v = try hex(4)
            // A surrogate pair written as two escapes.
            if v >= 0xD800, v <= 0xDBFF, pos + 5 < chars.count, chars[pos] == 0x5C, chars[pos + 1] == 0x75 {
                let save = pos
                pos += 2
                if let lo = try? hex(4), lo >= 0xDC00, lo <= 0xDFFF {
                    v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00)
                } else {
                    pos = save
                }
            }
            return .set(ScalarSet(v))
        case 0x63:
            guard let l = peek(), (65...90).contains(l) || (97...122).contains(l) else { throw RegexError(message: "bad \\c escape") }
            pos += 1
            return .set(ScalarSet(l % 32))
        case 0x31...0x39: throw RegexError(message: "backreferences are not supported")
        case 0x62, 0x42: throw RegexError(message: "word boundaries are not supported")
        case 0x70, 0x50: throw RegexError(message: "Unicode property escapes are not supported")
        case 0x6B: throw RegexError(message: "named backreferences are not supported")
        default:
            // Identity escape of punctuation (and, leniently, other characters).
            if (65...90).contains(c) || (97...122).contains(c) {
                throw RegexError(message: "unknown escape \\\(Character(Unicode.Scalar(c)!))")
            }
            return .set(ScalarSet(c))
        }
    }

    mutating func parseClass() throws(RegexError) -> ScalarSet {
        var negate = false
        if peek() == 0x5E {
            negate = true
            pos += 1
        }
        // The complement of a subset is a superset: read the members the other way.
        let saved = lenient
        if negate { lenient.toggle() }
        defer { lenient = saved }
        var ranges: [ClosedRange<UInt32>] = []
        var first = true
        while true {
            guard let c = peek() else { throw RegexError(message: "missing ']'") }
            if c == 0x5D && !first {
                pos += 1
                break
            }
            if c == 0x5D && first {
                pos += 1
                ranges.append(0x5D...0x5D)
                first = false
                continue
            }
            first = false
            let lo = try classAtom()
            if peek() == 0x2D, pos + 1 < chars.count, chars[pos + 1] != 0x5D {
                pos += 1
                let hi = try classAtom()
                guard let a = lo.single, let b = hi.single else {
                    // [\d-x]: the dash is literal.
                    ranges += lo.set.ranges + hi.set.ranges + [0x2D...0x2D]
                    continue
                }
                guard a <= b else { throw RegexError(message: "bad class range") }
                ranges.append(a...b)
            } else {
                ranges += lo.set.ranges
            }
        }
        let s = ScalarSet(ranges: ranges)
        return negate ? s.complement : s
    }

    mutating func classAtom() throws(RegexError) -> (set: ScalarSet, single: UInt32?) {
        let c = chars[pos]
        pos += 1
        if c == 0x5C {
            if peek() == 0x2D {
                pos += 1
                return (ScalarSet(0x2D), 0x2D)
            }
            guard case .set(let s) = try parseEscape(inClass: true) else { throw RegexError(message: "bad class escape") }
            let single: UInt32? = (s.ranges.count == 1 && s.ranges[0].lowerBound == s.ranges[0].upperBound) ? s.ranges[0].lowerBound : nil
            return (s, single)
        }
        return (ScalarSet(c), c)
    }
}

/// Thompson NFA with anchor edges, determinized by subset construction.
struct RegexCompiler {
    struct State {
        var eps: [Int] = []
        var bol: [Int] = []
        var eol: [Int] = []
        var sets: [(ScalarSet, Int)] = []
    }
    var states: [State] = []
    var lenientDollar = false
    var limits: AutomatonLimits
    /// NFA states allowed per DFA state allowed (the NFA of a pattern is a few times larger
    /// than its DFA in the common cases).
    static let nfaStatesPerDFAState = 4

    init(limits: AutomatonLimits) { self.limits = limits }

    mutating func new() throws(RegexError) -> Int {
        let (bound, overflow) = limits.maxStates.multipliedReportingOverflow(by: RegexCompiler.nfaStatesPerDFAState)
        if !overflow && states.count >= bound {
            throw RegexError(AutomatonLimitError(limit: .states(limits.maxStates)))
        }
        states.append(State())
        return states.count - 1
    }

    /// Builds `node` between fresh states; returns (start, end).
    mutating func build(_ node: RegexNode) throws(RegexError) -> (Int, Int) {
        let s = try new(), e = try new()
        switch node {
        case .empty: states[s].eps.append(e)
        case .set(let set): states[s].sets.append((set, e))
        case .bol: states[s].bol.append(e)
        case .eol:
            states[s].eol.append(e)
            if lenientDollar {
                // Python's `$` also matches before a final newline.
                let t = try new()
                states[s].sets.append((ScalarSet(10), t))
                states[t].eol.append(e)
            }
        case .concat(let items):
            var cur = s
            for it in items {
                let (a, b) = try build(it)
                states[cur].eps.append(a)
                cur = b
            }
            states[cur].eps.append(e)
        case .alt(let items):
            for it in items {
                let (a, b) = try build(it)
                states[s].eps.append(a)
                states[b].eps.append(e)
            }
        case .repeat(let inner, let minC, let maxC):
            var cur = s
            for _ in 0..<minC {
                let (a, b) = try build(inner)
                states[cur].eps.append(a)
                cur = b
            }
            if let maxC {
                for _ in minC..<maxC {
                    let (a, b) = try build(inner)
                    states[cur].eps.append(a)
                    states[cur].eps.append(e)
                    cur = b
                }
                states[cur].eps.append(e)
            } else {
                let (a, b) = try build(inner)
                states[cur].eps.append(a)
                states[cur].eps.append(e)
                states[b].eps.append(cur)
            }
        }
        return (s, e)
    }

    /// Epsilon closure (following `^` edges only at the start), sorted. `mark` is scratch
    /// space of one stamp per NFA state.
    func closure(_ seeds: [Int], atStart: Bool, mark: inout [UInt32], stamp: inout UInt32) -> [Int] {
        stamp &+= 1
        var out: [Int] = []
        var stack: [Int] = []
        for x in seeds where mark[x] != stamp {
            mark[x] = stamp
            stack.append(x)
        }
        while let x = stack.popLast() {
            out.append(x)
            for y in states[x].eps where mark[y] != stamp {
                mark[y] = stamp
                stack.append(y)
            }
            if atStart {
                for y in states[x].bol where mark[y] != stamp {
                    mark[y] = stamp
                    stack.append(y)
                }
            }
        }
        return out
    }

    /// A canonical key for a set of NFA states (sorted state numbers).
    func key(_ set: [Int]) -> [Int32] { set.map { Int32($0) }.sorted() }

    /// Whether acceptance is reachable by passing an end-of-input assertion (no more input).
    func acceptsAtEnd(_ set: [Int], accept: Int, atStart: Bool, mark: inout [UInt32], stamp: inout UInt32) -> Bool {
        stamp &+= 1
        var stack = set
        for x in set { mark[x] = stamp }
        while let x = stack.popLast() {
            if x == accept { return true }
            let st = states[x]
            for y in st.eps where mark[y] != stamp {
                mark[y] = stamp
                stack.append(y)
            }
            for y in st.eol where mark[y] != stamp {
                mark[y] = stamp
                stack.append(y)
            }
            if atStart {
                for y in st.bol where mark[y] != stamp {
                    mark[y] = stamp
                    stack.append(y)
                }
            }
        }
        return false
    }

    /// Compiles a JSON Schema `pattern` (search semantics) to a DFA over scalars.
    /// `lenientDollar`: `$` also matches before a final newline (Python's `re`). Positive
    /// uses take the ECMA-262 language (a subset); negated uses take the lenient one (a
    /// superset), so that the result is exact under both readings.
    static func compilePattern(
        _ pattern: String, caseInsensitiveASCII: Bool = false, lenientDollar: Bool = false, limits: AutomatonLimits
    ) throws(RegexError) -> CodePointDFA? {
        var node = try RegexParser.parse(pattern, lenient: lenientDollar, maxRepetition: limits.maxRepetition)
        if caseInsensitiveASCII { node = caseFold(node) }
        let anyStar = RegexNode.repeat(.set(.all), min: 0, max: nil)
        return try compile(.concat([anyStar, node, anyStar]), lenientDollar: lenientDollar, limits: limits)
    }

    /// Compiles a node that must match the whole string (anchors still honoured), by subset
    /// construction: each DFA state is a set of NFA states.
    static func compile(_ node: RegexNode, lenientDollar: Bool = false, limits: AutomatonLimits) throws(RegexError) -> CodePointDFA? {
        var c = RegexCompiler(limits: limits)
        c.lenientDollar = lenientDollar
        let (s, accept) = try c.build(node)
        var mark = [UInt32](repeating: 0, count: c.states.count)
        var stamp: UInt32 = 0
        let startSet = c.closure([s], atStart: true, mark: &mark, stamp: &stamp)
        var ids: [[Int32]: Int32] = [c.key(startSet): 0]
        var sets: [[Int]] = [startSet]
        var trans: [[(lo: UInt32, hi: UInt32, target: Int32)]] = []
        var acc: [Bool] = []
        var i = 0
        while i < sets.count {
            do { try limits.check(states: sets.count) } catch { throw RegexError(error) }
            acc.append(c.acceptsAtEnd(sets[i], accept: accept, atStart: i == 0, mark: &mark, stamp: &stamp))
            var list: [(lo: UInt32, hi: UInt32, target: Int32)] = []
            for (lo, hi, targets) in try c.partition(sets[i]) {
                let next = c.closure(targets, atStart: false, mark: &mark, stamp: &stamp)
                let setKey = c.key(next)
                let id: Int32
                if let known = ids[setKey] {
                    id = known
                } else {
                    id = Int32(sets.count)
                    ids[setKey] = id
                    sets.append(next)
                }
                if let last = list.last, last.target == id, last.hi &+ 1 == lo {
                    list[list.count - 1].hi = hi
                } else {
                    list.append((lo, hi, id))
                }
            }
            trans.append(list)
            i += 1
        }
        return CodePointDFA.make(transitions: trans, accepting: acc, start: 0)
    }

    /// The outgoing transitions of a DFA state (a set of NFA states) as an alphabet partition:
    /// scalar intervals, each with the NFA states it leads to.
    func partition(_ stateSet: [Int]) throws(RegexError) -> [(lo: UInt32, hi: UInt32, targets: [Int])] {
        var edges: [(ScalarSet, Int)] = []
        for x in stateSet { edges += states[x].sets }
        var points: [UInt32] = []
        for (set, _) in edges {
            for r in set.ranges {
                points.append(r.lowerBound)
                if r.upperBound < ScalarSet.maxScalar { points.append(r.upperBound + 1) }
            }
        }
        points.sort()
        var out: [(lo: UInt32, hi: UInt32, targets: [Int])] = []
        var k = 0, intervals = 0
        while k < points.count {
            let lo = points[k]
            var nk = k + 1
            while nk < points.count && points[nk] == lo { nk += 1 }
            let hi = nk < points.count ? points[nk] - 1 : ScalarSet.maxScalar
            k = nk
            // Intervals times edges can be large for big alternations of classes: keep the clock.
            intervals += 1
            if intervals & 255 == 0 { do { try limits.checkTime() } catch { throw RegexError(error) } }
            var targets: [Int] = []
            for (set, t) in edges where set.contains(lo) { targets.append(t) }
            if !targets.isEmpty { out.append((lo, hi, targets)) }
        }
        return out
    }

    static func caseFold(_ n: RegexNode) -> RegexNode {
        switch n {
        case .set(let s): return .set(s.asciiCaseInsensitive)
        case .concat(let a): return .concat(a.map(caseFold))
        case .alt(let a): return .alt(a.map(caseFold))
        case .repeat(let x, let a, let b): return .repeat(caseFold(x), min: a, max: b)
        default: return n
        }
    }
}
