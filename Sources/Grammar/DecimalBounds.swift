// Number bounds with a fractional part (`exclusiveMinimum: 0.5`): exact decimals, the
// bounds on the magnitude for each sign, and the number lexer's steps that compare the
// fraction digits with them.

/// A nonnegative decimal: integer part and fraction digits (no trailing zeros).
struct Dec: Hashable, Sendable {
    var int: UInt64
    var frac: [UInt8]

    /// Parses the decimal text of a JSON number's magnitude (`12.5`, `1e-05`, `2.5E+3`).
    init?(text: String) {
        var mantissa: [UInt8] = []
        var pointAt: Int?
        var exp = 0
        var chars = Array(text.utf8)
        if chars.first == 0x2D || chars.first == 0x2B { chars.removeFirst() }
        var i = 0
        while i < chars.count, chars[i] != 0x65, chars[i] != 0x45 {
            if chars[i] == 0x2E {
                pointAt = mantissa.count
            } else {
                guard chars[i] >= 0x30, chars[i] <= 0x39 else { return nil }
                mantissa.append(chars[i] - 0x30)
            }
            i += 1
        }
        if i < chars.count {
            guard let e = Int(String(decoding: chars[(i + 1)...], as: UTF8.self)) else { return nil }
            exp = e
        }
        let point = (pointAt ?? mantissa.count) + exp
        guard point <= 19, point >= -400 else { return nil }
        var intDigits: [UInt8] = [], fracDigits: [UInt8] = []
        for (k, d) in mantissa.enumerated() { if k < point { intDigits.append(d) } else { fracDigits.append(d) } }
        if point < 0 { fracDigits = [UInt8](repeating: 0, count: -point) + mantissa }
        var v: UInt64 = 0
        for d in intDigits {
            let (m, o1) = v.multipliedReportingOverflow(by: 10)
            let (a, o2) = m.addingReportingOverflow(UInt64(d))
            guard !o1, !o2 else { return nil }
            v = a
        }
        while fracDigits.last == 0 { fracDigits.removeLast() }
        int = v
        frac = fracDigits
    }

    init(int: UInt64, frac: [UInt8] = []) {
        self.int = int
        self.frac = frac
    }

    static func < (a: Dec, b: Dec) -> Bool {
        if a.int != b.int { return a.int < b.int }
        return a.frac.lexicographicallyPrecedes(b.frac)
    }
}

/// Number bounds with fractional parts, as constraints on the magnitude for each sign.
struct DecimalBounds: Hashable, Sendable {
    struct Mag: Hashable, Sendable {
        var lower: Dec?
        var lowerStrict = false
        var upper: Dec?
        var upperStrict = false
        var impossible = false
    }
    var positive = Mag()
    var negative = Mag()

    /// `lo`/`hi`: (negative, magnitude); strict = exclusive.
    init(lo: (Bool, Dec)?, loStrict: Bool, hi: (Bool, Dec)?, hiStrict: Bool) {
        let zero = Dec(int: 0)
        if let (neg, m) = lo {
            if !neg || m == zero {
                // x >= m (m >= 0): positives need mag >= m; negatives: only when m == 0 (value 0 via "-0").
                positive.lower = m
                positive.lowerStrict = loStrict
                if m == zero {
                    negative.upper = zero
                    negative.upperStrict = loStrict
                } else {
                    negative.impossible = true
                }
            } else {
                // x >= -m: negatives need mag <= m.
                negative.upper = m
                negative.upperStrict = loStrict
            }
        }
        if let (neg, m) = hi {
            if neg && m != zero {
                // x <= -m: no positive; negatives need mag >= m.
                positive.impossible = true
                negative.lower = m
                negative.lowerStrict = hiStrict
            } else {
                positive.upper = m
                positive.upperStrict = hiStrict
                if m == zero {
                    negative.lower = zero
                    negative.lowerStrict = hiStrict
                }
            }
        }
        for k in [\DecimalBounds.positive, \DecimalBounds.negative] {
            let c = self[keyPath: k]
            if let l = c.lower, let u = c.upper, u < l || (l == u && (c.lowerStrict || c.upperStrict)) {
                self[keyPath: k].impossible = true
            }
        }
    }
}

extension NumberLexer {
    // Extra state (decimal mode): bits 18-19 relation of the fraction digits so far to the
    // lower bound's fraction digits (0 equal, 1 less, 2 greater), 20-21 the same for the upper
    // bound, 22-27 the number of fraction digits (capped).

    static func decimalFracBits(_ db: DecimalBounds, neg: Bool, _ b: UInt64, digit: UInt8) -> UInt64 {
        let c = neg ? db.negative : db.positive
        var relL = (b >> 18) & 3, relU = (b >> 20) & 3
        let k = Int((b >> 22) & 63)
        func update(_ rel: inout UInt64, _ bound: Dec?) {
            guard rel == 0, let bound else { return }
            let bd: UInt8 = k < bound.frac.count ? bound.frac[k] : 0
            rel = digit < bd ? 1 : (digit > bd ? 2 : 0)
        }
        update(&relL, c.lower)
        update(&relU, c.upper)
        return relL | (relU << 2) | (UInt64(min(k + 1, 63)) << 4)
    }

    /// Compares the exact value I.f (fraction known through `rel` against `bound.frac`) with a bound.
    static func compare(_ i: UInt64, huge: Bool, rel: UInt64, k: Int, _ bound: Dec) -> Int {
        if huge || i > bound.int { return 1 }
        if i < bound.int { return -1 }
        if rel == 1 { return -1 }
        if rel == 2 { return 1 }
        return k >= bound.frac.count ? 0 : -1
    }

    static func decimalFinal(_ db: DecimalBounds, neg: Bool, _ s: LexState) -> Bool {
        let c = neg ? db.negative : db.positive
        if c.impossible { return false }
        let p = parts(s)
        let k = p.phase == frac ? Int((s.b >> 22) & 63) : 0
        let relL = p.phase == frac ? (s.b >> 18) & 3 : 0, relU = p.phase == frac ? (s.b >> 20) & 3 : 0
        if let l = c.lower {
            let r = compare(s.a, huge: p.huge, rel: relL, k: k, l)
            if r < 0 || (r == 0 && c.lowerStrict) { return false }
        }
        if let u = c.upper {
            let r = compare(s.a, huge: p.huge, rel: relU, k: k, u)
            if r > 0 || (r == 0 && c.upperStrict) { return false }
        }
        return true
    }

    /// Whether some completion can satisfy the decimal bounds.
    static func decimalFeasible(_ db: DecimalBounds, _ s: LexState) -> Bool {
        let p = parts(s)
        switch p.phase {
        case start: return !db.positive.impossible || !db.negative.impossible
        case minus: return !db.negative.impossible
        case intDigits, zero:
            let c = p.neg ? db.negative : db.positive
            if c.impossible { return false }
            // Reachable magnitudes: [a, b + 1) for the integer-part intervals [a, b].
            var intervals: [(UInt64, UInt64?)] = [(s.a, s.a)]  // (a, b); b nil = unbounded
            if p.huge {
                intervals = [(UInt64.max, nil)]
            } else if p.phase == intDigits && s.a > 0 {
                var scale: UInt64 = 1
                for _ in 1...20 {
                    let (sc, o) = scale.multipliedReportingOverflow(by: 10)
                    if o {
                        intervals.append((UInt64.max, nil))
                        break
                    }
                    scale = sc
                    let (base, o2) = s.a.multipliedReportingOverflow(by: scale)
                    if o2 {
                        intervals.append((UInt64.max, nil))
                        break
                    }
                    intervals.append((base, base &+ (scale - 1) < base ? nil : base + (scale - 1)))
                }
            }
            for (a, b) in intervals {
                // a <= U (a < U if strict), and L < b + 1.
                if let u = c.upper {
                    let r = compare(a, huge: a == UInt64.max && b == nil, rel: 0, k: 0, u)
                    if r > 0 || (r == 0 && c.upperStrict) { continue }
                }
                if let l = c.lower, let b { if l.int > b { continue } }
                return true
            }
            return false
        case dot, frac:
            let c = p.neg ? db.negative : db.positive
            if c.impossible { return false }
            let k = p.phase == frac ? Int((s.b >> 22) & 63) : 0
            let relL = p.phase == frac ? (s.b >> 18) & 3 : 0, relU = p.phase == frac ? (s.b >> 20) & 3 : 0
            // Reachable: [I.f, I.f + 10^-k). Need I.f <= U (strict: <) and L < I.f + 10^-k.
            if let u = c.upper {
                let r = compare(s.a, huge: p.huge, rel: relU, k: k, u)
                if r > 0 || (r == 0 && c.upperStrict) { return false }
            }
            if let l = c.lower {
                if p.huge || s.a > l.int { return true }
                if s.a < l.int { return false }
                if p.phase == dot { return true }
                return relL != 1
            }
            return true
        default:
            return true
        }
    }
}
