/// Bounds on the construction of an automaton (regex, product): states, the repetition
/// counts of patterns, and a deadline.
struct AutomatonLimits: Sendable {
    var maxStates = Int.max
    var maxRepetition = Int.max
    var deadline: ContinuousClock.Instant? = nil

    /// No bounds (for the automata of the built-in formats, which are constants).
    static let unlimited = AutomatonLimits()

    /// Throws when `states` is above the bound, or (every 64 states) when time is up.
    @inline(__always) func check(states: Int) throws(AutomatonLimitError) {
        if states > maxStates { throw AutomatonLimitError(limit: .states(maxStates)) }
        if states & 63 == 0 { try checkTime() }
    }

    func checkTime() throws(AutomatonLimitError) {
        if let deadline, ContinuousClock.now > deadline { throw AutomatonLimitError(limit: .time) }
    }
}

/// An automaton construction that outgrew its `AutomatonLimits`.
struct AutomatonLimitError: Error {
    enum Limit {
        case states(Int)
        case repetition(Int)
        case time
    }
    let limit: Limit
}

/// A set of Unicode scalar values as sorted, disjoint, non-adjacent closed ranges.
struct ScalarSet: Hashable, Sendable {
    var ranges: [ClosedRange<UInt32>]

    static let maxScalar: UInt32 = 0x10FFFF
    static let empty = ScalarSet(ranges: [])
    static let all = ScalarSet(ranges: [0...maxScalar])

    init(ranges: [ClosedRange<UInt32>]) { self.ranges = ScalarSet.normalize(ranges) }
    init(_ c: UInt32) { ranges = [c...c] }

    static func normalize(_ input: [ClosedRange<UInt32>]) -> [ClosedRange<UInt32>] {
        let sorted = input.sorted { $0.lowerBound < $1.lowerBound }
        var out: [ClosedRange<UInt32>] = []
        for r in sorted {
            if let last = out.last, r.lowerBound <= last.upperBound &+ 1 {
                out[out.count - 1] = last.lowerBound...max(last.upperBound, r.upperBound)
            } else {
                out.append(r)
            }
        }
        return out
    }

    func union(_ other: ScalarSet) -> ScalarSet { ScalarSet(ranges: ranges + other.ranges) }

    var complement: ScalarSet {
        var out: [ClosedRange<UInt32>] = []
        var next: UInt32 = 0
        for r in ranges {
            if r.lowerBound > next { out.append(next...(r.lowerBound - 1)) }
            next = r.upperBound &+ 1
        }
        if next <= ScalarSet.maxScalar, !(ranges.last?.upperBound == ScalarSet.maxScalar) { out.append(next...ScalarSet.maxScalar) }
        return ScalarSet(ranges: out)
    }

    func contains(_ c: UInt32) -> Bool {
        var lo = 0, hi = ranges.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if ranges[mid].upperBound < c { lo = mid + 1 } else { hi = mid }
        }
        return lo < ranges.count && ranges[lo].contains(c)
    }

    var isEmpty: Bool { ranges.isEmpty }

    /// Adds the other case of every ASCII letter (for case-insensitive formats).
    var asciiCaseInsensitive: ScalarSet {
        var extra: [ClosedRange<UInt32>] = []
        for c in UInt32(65)...90 where contains(c) { extra.append((c + 32)...(c + 32)) }
        for c in UInt32(97)...122 where contains(c) { extra.append((c - 32)...(c - 32)) }
        return ScalarSet(ranges: ranges + extra)
    }
}

/// A deterministic automaton over Unicode scalar values, used for the decoded content of a
/// JSON string (patterns, formats, enumerations of strings, property-name exclusions).
///
/// Every state can reach an accepting state (dead states are pruned at construction), so a
/// transition to `-1` is the only way to fail. Transitions are sorted disjoint ranges per
/// state, with an ASCII table for speed.
final class CodePointDFA: Sendable, Hashable {
    /// transitions[s]: sorted (lo, hi, target) triples.
    let transitions: [[(lo: UInt32, hi: UInt32, target: Int32)]]
    let accepting: [Bool]
    /// ascii[s * 128 + c]: target for ASCII c, or -1 (empty for automata with more than
    /// `maxTabledStates` states, which use the transition lists).
    let ascii: [Int32]
    static let maxTabledStates = 4_096
    /// Shortest number of scalars from each state to acceptance.
    let minToAccept: [Int32]
    /// Longest number of scalars from each state to acceptance (Int32.max when unbounded).
    let maxToAccept: [Int32]
    let start: Int32
    /// Every state has a transition for every scalar (so every prefix of content is viable and
    /// only the end of the string is constrained): true for "not one of these names" and for
    /// unanchored patterns. Token masks use this to derive the string's mask cheaply.
    let isComplete: Bool
    /// A hash of the tables (`==` compares them).
    let fingerprint: Int

    var stateCount: Int { accepting.count }

    /// Builds from raw tables, pruning states that cannot reach acceptance and unreachable ones.
    /// Returns nil when the language is empty.
    static func make(transitions rawT: [[(lo: UInt32, hi: UInt32, target: Int32)]], accepting rawA: [Bool], start: Int32) -> CodePointDFA? {
        let n = rawA.count
        // Co-reachability.
        var reverse = [[Int32]](repeating: [], count: n)
        for s in 0..<n { for t in rawT[s] where t.target >= 0 { reverse[Int(t.target)].append(Int32(s)) } }
        var dist = [Int32](repeating: -1, count: n)
        var queue: [Int32] = []
        for s in 0..<n where rawA[s] {
            dist[s] = 0
            queue.append(Int32(s))
        }
        var qi = 0
        while qi < queue.count {
            let s = queue[qi]
            qi += 1
            for p in reverse[Int(s)] where dist[Int(p)] < 0 {
                dist[Int(p)] = dist[Int(s)] + 1
                queue.append(p)
            }
        }
        guard dist[Int(start)] >= 0 else { return nil }
        // Reachable live states from start, renumbered.
        var newID = [Int32](repeating: -1, count: n)
        var order: [Int32] = [start]
        newID[Int(start)] = 0
        var oi = 0
        while oi < order.count {
            let s = order[oi]
            oi += 1
            for t in rawT[Int(s)] where t.target >= 0 && dist[Int(t.target)] >= 0 && newID[Int(t.target)] < 0 {
                newID[Int(t.target)] = Int32(order.count)
                order.append(t.target)
            }
        }
        var trans: [[(lo: UInt32, hi: UInt32, target: Int32)]] = []
        var acc: [Bool] = [], minD: [Int32] = []
        for s in order {
            var list: [(lo: UInt32, hi: UInt32, target: Int32)] = []
            for t in rawT[Int(s)] where t.target >= 0 && newID[Int(t.target)] >= 0 {
                let nt = newID[Int(t.target)]
                if let last = list.last, last.target == nt, last.hi &+ 1 == t.lo {
                    list[list.count - 1].hi = t.hi
                } else {
                    list.append((t.lo, t.hi, nt))
                }
            }
            trans.append(list)
            acc.append(rawA[Int(s)])
            minD.append(dist[Int(s)])
        }
        return CodePointDFA(transitions: trans, accepting: acc, minToAccept: minD)
    }

    private init(transitions: [[(lo: UInt32, hi: UInt32, target: Int32)]], accepting: [Bool], minToAccept: [Int32]) {
        self.transitions = transitions
        self.accepting = accepting
        self.minToAccept = minToAccept
        maxToAccept = CodePointDFA.longestPaths(transitions: transitions, accepting: accepting)
        self.start = 0
        var hasher = Hasher()
        hasher.combine(accepting)
        for list in transitions {
            hasher.combine(list.count)
            for t in list {
                hasher.combine(t.lo)
                hasher.combine(t.hi)
                hasher.combine(t.target)
            }
        }
        fingerprint = hasher.finalize()
        // The ASCII table costs 512 bytes a state: only small automata get one.
        var table: [Int32] = []
        if accepting.count <= CodePointDFA.maxTabledStates {
            table = [Int32](repeating: -1, count: accepting.count * 128)
            for s in 0..<accepting.count {
                for t in transitions[s] where t.lo < 128 {
                    for c in t.lo...min(t.hi, 127) { table[s * 128 + Int(c)] = t.target }
                }
            }
        }
        ascii = table
        isComplete = transitions.allSatisfy { list in
            var next: UInt32 = 0
            for t in list {
                if t.lo != next { return false }
                next = t.hi &+ 1
            }
            return next == ScalarSet.maxScalar + 1
        }
    }

    /// The longest number of scalars from each state to acceptance (Int32.max when a cycle is
    /// reachable: every state is live, so a cycle means no bound). Iterative depth-first
    /// search, so that long chains (a 10,000-character literal) need no deep stack.
    static func longestPaths(transitions: [[(lo: UInt32, hi: UInt32, target: Int32)]], accepting: [Bool]) -> [Int32] {
        let n = accepting.count
        var longest = [Int32](repeating: -1, count: n)
        var colour = [UInt8](repeating: 0, count: n)  // 0 new, 1 on the stack, 2 done
        var stack: [(state: Int, next: Int)] = []
        for root in 0..<n where colour[root] == 0 {
            colour[root] = 1
            longest[root] = accepting[root] ? 0 : Int32.min
            stack.append((root, 0))
            while let (s, k) = stack.last {
                if k < transitions[s].count {
                    stack[stack.count - 1].next = k + 1
                    let t = Int(transitions[s][k].target)
                    if colour[t] == 0 {
                        colour[t] = 1
                        longest[t] = accepting[t] ? 0 : Int32.min
                        stack.append((t, 0))
                    } else {
                        longest[s] = extend(longest[s], colour[t] == 1 ? Int32.max : longest[t])
                    }
                    continue
                }
                colour[s] = 2
                stack.removeLast()
                if let parent = stack.last { longest[parent.state] = extend(longest[parent.state], longest[s]) }
            }
        }
        return longest
    }

    /// The longest path of a state given one successor's longest path.
    @inline(__always) private static func extend(_ best: Int32, _ successor: Int32) -> Int32 {
        if best == Int32.max || successor == Int32.max { return Int32.max }
        if successor == Int32.min { return best }
        return max(best, successor + 1)
    }

    @inline(__always) func step(_ s: Int32, _ c: UInt32) -> Int32 {
        if c < 128 && !ascii.isEmpty { return ascii[Int(s) &* 128 &+ Int(c)] }
        let list = transitions[Int(s)]
        var lo = 0, hi = list.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if list[mid].hi < c { lo = mid + 1 } else { hi = mid }
        }
        if lo < list.count, list[lo].lo <= c { return list[lo].target }
        return -1
    }

    func accepts(_ s: String) -> Bool {
        var st = start
        for u in s.unicodeScalars {
            st = step(st, u.value)
            if st < 0 { return false }
        }
        return accepting[Int(st)]
    }

    /// Equal tables are equal automata: the same pattern or format in two schemas is then one
    /// terminal for the token masks' caches, walked over the vocabulary once.
    static func == (a: CodePointDFA, b: CodePointDFA) -> Bool {
        if a === b { return true }
        guard a.fingerprint == b.fingerprint, a.accepting == b.accepting, a.transitions.count == b.transitions.count else {
            return false
        }
        for (x, y) in zip(a.transitions, b.transitions) {
            guard x.count == y.count else { return false }
            for (p, q) in zip(x, y) where p.lo != q.lo || p.hi != q.hi || p.target != q.target { return false }
        }
        return true
    }
    func hash(into h: inout Hasher) { h.combine(fingerprint) }

    /// The DFA accepting exactly the given strings.
    static func literals(_ words: [String]) -> CodePointDFA? {
        var trans: [[UInt32: Int32]] = [[:]]
        var acc = [false]
        for w in words {
            var s = 0
            for u in w.unicodeScalars {
                if let t = trans[s][u.value] {
                    s = Int(t)
                } else {
                    trans.append([:])
                    acc.append(false)
                    trans[s][u.value] = Int32(trans.count - 1)
                    s = trans.count - 1
                }
            }
            acc[s] = true
        }
        let raw = trans.map { d in d.sorted { $0.key < $1.key }.map { (lo: $0.key, hi: $0.key, target: $0.value) } }
        return make(transitions: raw, accepting: acc, start: 0)
    }

    /// Complete transition list over all scalars, with `sink` for gaps.
    private func completed(_ s: Int, sink: Int32) -> [(lo: UInt32, hi: UInt32, target: Int32)] {
        var out: [(lo: UInt32, hi: UInt32, target: Int32)] = []
        var next: UInt32 = 0
        for t in transitions[s] {
            if t.lo > next { out.append((next, t.lo - 1, sink)) }
            out.append(t)
            next = t.hi &+ 1
        }
        if next <= ScalarSet.maxScalar && !(transitions[s].last?.hi == ScalarSet.maxScalar) {
            out.append((next, ScalarSet.maxScalar, sink))
        }
        return out
    }

    /// Strings not accepted by this DFA (nil if that language is empty).
    func complement() -> CodePointDFA? {
        let n = stateCount
        let sink = Int32(n)
        var trans: [[(lo: UInt32, hi: UInt32, target: Int32)]] = (0..<n).map { completed($0, sink: sink) }
        trans.append([(0, ScalarSet.maxScalar, sink)])
        var acc = accepting.map { !$0 }
        acc.append(true)
        return CodePointDFA.make(transitions: trans, accepting: acc, start: start)
    }

    /// Strings accepted by both (nil if none), by the product construction (its reachable
    /// states, at most `limits.maxStates` of them).
    func intersection(_ other: CodePointDFA, limits: AutomatonLimits) throws(AutomatonLimitError) -> CodePointDFA? {
        var ids: [Int64: Int32] = [:]
        var pairs: [(Int32, Int32)] = [(start, other.start)]
        ids[Int64(start) << 32 | Int64(other.start)] = 0
        var trans: [[(lo: UInt32, hi: UInt32, target: Int32)]] = []
        var acc: [Bool] = []
        var i = 0
        while i < pairs.count {
            try limits.check(states: pairs.count)
            let (a, b) = pairs[i]
            i += 1
            var list: [(lo: UInt32, hi: UInt32, target: Int32)] = []
            let ta = transitions[Int(a)], tb = other.transitions[Int(b)]
            var x = 0, y = 0
            while x < ta.count && y < tb.count {
                let lo = max(ta[x].lo, tb[y].lo), hi = min(ta[x].hi, tb[y].hi)
                if lo <= hi {
                    let key = Int64(ta[x].target) << 32 | Int64(tb[y].target)
                    var id = ids[key]
                    if id == nil {
                        id = Int32(pairs.count)
                        ids[key] = id
                        pairs.append((ta[x].target, tb[y].target))
                    }
                    list.append((lo, hi, id!))
                }
                if ta[x].hi < tb[y].hi { x += 1 } else { y += 1 }
            }
            trans.append(list)
            acc.append(accepting[Int(a)] && other.accepting[Int(b)])
        }
        return CodePointDFA.make(transitions: trans, accepting: acc, start: 0)
    }
}
