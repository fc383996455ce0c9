// The JSON number terminal: its value constraints (`NumberSpec`) and the lexer that
// keeps every accepted prefix completable. Bounds with a fractional part are in
// DecimalBounds.swift.

/// A bound on a number, always an integer (non-integer bounds on integers are rounded at
/// compile time; on numbers they are a compile error).
struct NumberBound: Hashable, Sendable {
    var value: Int64
    var exclusive: Bool
}

/// What a JSON number terminal accepts.
struct NumberSpec: Hashable, Sendable {
    /// Only integer values: a fraction, if any, is all zeros (`1.0` is an integer in JSON
    /// Schema); no exponent.
    var integerOnly: Bool
    var minimum: NumberBound?
    var maximum: NumberBound?
    /// A positive integer divisor (integers only).
    var multipleOf: Int64?
    /// `multipleOf` 10^-k on numbers with no bounds: the value has at most k fraction digits,
    /// i.e. in `I.Fe±E` form the last nonzero digit of F is at most k + E places after the point
    /// (trailing zeros allowed). Negative exponents are refused (see `SchemaCompiler.numberSpec`).
    var maxFractionDigits: UInt64?
    /// Bounds with a fractional part (numbers only); then `minimum`/`maximum` are nil.
    var decimal: DecimalBounds?
    /// Only numbers that are not integers (`not: {type: integer}` among numbers): a nonzero
    /// fraction digit is required, no exponent.
    var fractionalOnly = false
    /// With `integerOnly`: no fraction at all, and magnitudes that fit in 64 bits.
    var plainIntegers = false
    /// With `integerOnly`: no fraction at all (drafts 3 and 4, where `1.0` is not an integer).
    var integersHaveNoFraction = false
    /// A number with a nonzero fraction digit that is compared with bounds, or that must not
    /// be an integer, has at most `maxSignificantDigits` significant digits: a reader that
    /// parses it as a binary double (Python's json, which labels MaskBench) then sees the same
    /// comparison (`0.99999999999999999999 < 1` holds, but not for its double, 1.0).
    var limitsSignificantDigits: Bool { !integerOnly && (fractionalOnly || minimum != nil || maximum != nil || decimal != nil) }
    static let maxSignificantDigits: UInt64 = 15
    var allowsExponent: Bool { !integerOnly && !fractionalOnly && minimum == nil && maximum == nil && multipleOf == nil && decimal == nil }
}

/// JSON number token automaton with integer-valued bounds, integer-only mode and an integer
/// `multipleOf`. Every accepted prefix can still be completed to an allowed value (the
/// bounds are checked for feasibility after each digit).
///
/// State: `a` = magnitude of the integer part (exact up to 19 digits);
/// `b` = phase (0-7) | negative (8) | digit count (9-15) | fraction nonzero (16) | huge (17)
///       | integer part mod multipleOf (32-63).
/// With `maxFractionDigits`: in the fraction, bits 48-55 count its digits and 56-63 hold the
/// place of the last nonzero one; in the exponent, `a` holds that place and bits 48-55 the
/// exponent (saturating at 255).
enum NumberLexer {
    // Phases.
    static let start: UInt64 = 0, minus: UInt64 = 1, intDigits: UInt64 = 2, zero: UInt64 = 3
    static let dot: UInt64 = 4, frac: UInt64 = 5, expMark: UInt64 = 6, expSign: UInt64 = 7, expDigits: UInt64 = 8

    @inline(__always) static func parts(_ s: LexState) -> (phase: UInt64, neg: Bool, digits: Int, fnz: Bool, huge: Bool, mod: UInt64) {
        (s.b & 0xFF, (s.b >> 8) & 1 == 1, Int((s.b >> 9) & 0x7F), (s.b >> 16) & 1 == 1, (s.b >> 17) & 1 == 1, s.b >> 32)
    }

    @inline(__always) static func make(_ mag: UInt64, phase: UInt64, neg: Bool, digits: Int, fnz: Bool, huge: Bool, mod: UInt64) -> LexState
    {
        LexState(
            mag, phase | (neg ? 1 << 8 : 0) | (UInt64(min(digits, 127)) << 9) | (fnz ? 1 << 16 : 0) | (huge ? 1 << 17 : 0) | (mod << 32))
    }

    static func step(_ spec: NumberSpec, _ s: LexState, _ byte: UInt8) -> LexState? {
        let p = parts(s)
        let isDigit = byte >= 0x30 && byte <= 0x39
        let d = UInt64(byte &- 0x30)
        var next: LexState
        switch p.phase {
        case start, minus:
            if byte == 0x2D && p.phase == start {
                next = make(0, phase: minus, neg: true, digits: 0, fnz: false, huge: false, mod: 0)
            } else if byte == 0x30 {
                next = make(0, phase: zero, neg: p.neg, digits: 1, fnz: false, huge: false, mod: 0)
            } else if isDigit {
                next = make(
                    d, phase: intDigits, neg: p.neg, digits: 1, fnz: false, huge: false, mod: spec.multipleOf.map { d % UInt64($0) } ?? 0)
            } else {
                return nil
            }
        case intDigits, zero:
            if isDigit && p.phase == intDigits {
                var mag = s.a, huge = p.huge
                if !huge {
                    let (m1, o1) = mag.multipliedReportingOverflow(by: 10)
                    let (m2, o2) = m1.addingReportingOverflow(d)
                    if o1 || o2 {
                        huge = true
                        mag = UInt64.max
                    } else {
                        mag = m2
                    }
                }
                if spec.plainIntegers && spec.integerOnly && (huge || mag > UInt64(Int64.max)) { return nil }
                let mod = spec.multipleOf.map { (p.mod * 10 + d) % UInt64($0) } ?? 0
                next = make(mag, phase: intDigits, neg: p.neg, digits: p.digits + 1, fnz: false, huge: huge, mod: mod)
            } else if byte == 0x2E {
                if spec.integerOnly && (spec.plainIntegers || spec.integersHaveNoFraction) { return nil }
                next = make(s.a, phase: dot, neg: p.neg, digits: p.digits, fnz: false, huge: p.huge, mod: p.mod)
                if spec.limitsSignificantDigits { next.b = withSignificantDigits(next.b, integerPart: s.a, digits: p.digits, huge: p.huge) }
            } else if (byte == 0x65 || byte == 0x45) && spec.allowsExponent {
                let a = spec.maxFractionDigits == nil ? s.a : 0
                return make(a, phase: expMark, neg: p.neg, digits: p.digits, fnz: false, huge: p.huge, mod: 0)
            } else {
                return nil
            }
        case dot, frac:
            guard isDigit else {
                if p.phase == frac && (byte == 0x65 || byte == 0x45) && spec.allowsExponent {
                    let a = spec.maxFractionDigits == nil ? s.a : s.b >> 56
                    return make(a, phase: expMark, neg: p.neg, digits: p.digits, fnz: p.fnz, huge: p.huge, mod: 0)
                }
                return nil
            }
            if spec.integerOnly && d != 0 { return nil }
            next = make(s.a, phase: frac, neg: p.neg, digits: p.digits, fnz: p.fnz || d != 0, huge: p.huge, mod: p.mod)
            if spec.limitsSignificantDigits {
                // Bits 32-39: significant digits so far; 40-47: the position of the last nonzero one.
                var sig = (s.b >> 32) & 0xFF, last = (s.b >> 40) & 0xFF
                if sig > 0 || d != 0 { sig = min(sig + 1, 255) }
                if d != 0 {
                    last = sig
                    if last > NumberSpec.maxSignificantDigits { return nil }
                }
                next.b = (next.b & 0xFFFF_0000_FFFF_FFFF) | (sig << 32) | (last << 40)
            }
            if let db = spec.decimal { next.b = (next.b & ~(0xFFF << 18)) | (decimalFracBits(db, neg: p.neg, s.b, digit: UInt8(d)) << 18) }
            if spec.maxFractionDigits != nil {
                let place = ((s.b >> 48) & 0xFF) + 1
                if place > maxFractionPlaces { return nil }
                let last = d != 0 ? place : s.b >> 56
                next.b = (next.b & 0xFFFF_FFFF_FFFF) | (place << 48) | (last << 56)
            }
        case expMark:
            if byte == 0x2D && spec.maxFractionDigits != nil { return nil }
            if byte == 0x2B || byte == 0x2D { return LexState(s.a, (s.b & ~0xFF) | expSign) }
            return isDigit ? exponentDigit(spec, s, d) : nil
        case expSign, expDigits:
            return isDigit ? exponentDigit(spec, s, d) : nil
        default:
            return nil
        }
        return feasible(spec, next) ? next : nil
    }

    /// Fraction digits accepted with `maxFractionDigits` (an exponent must then cover them).
    static let maxFractionPlaces: UInt64 = 200

    /// One more exponent digit (its value kept, saturating, with `maxFractionDigits`).
    static func exponentDigit(_ spec: NumberSpec, _ s: LexState, _ d: UInt64) -> LexState {
        guard spec.maxFractionDigits != nil else { return LexState(s.a, (s.b & ~0xFF) | expDigits) }
        let e = (s.b & 0xFF) == expDigits ? min(((s.b >> 48) & 0xFF) * 10 + d, 255) : d
        return LexState(s.a, (s.b & ~0xFF & ~(0xFF << 48)) | expDigits | (e << 48))
    }

    /// The significant-digit fields at the decimal point: the integer part's significant
    /// digits and the position of its last nonzero digit (`1000.` has 4 and 1).
    static func withSignificantDigits(_ b: UInt64, integerPart mag: UInt64, digits: Int, huge: Bool) -> UInt64 {
        var sig: UInt64 = 0, last: UInt64 = 0
        if huge {
            sig = UInt64(digits)
            last = sig
        } else if mag > 0 {
            sig = UInt64(digits)
            var m = mag, zeros: UInt64 = 0
            while m % 10 == 0 {
                m /= 10
                zeros += 1
            }
            last = sig - zeros
        }
        return (b & 0xFFFF_0000_FFFF_FFFF) | (min(sig, 255) << 32) | (min(last, 255) << 40)
    }

    static func isFinal(_ spec: NumberSpec, _ s: LexState) -> Bool {
        let p = parts(s)
        if spec.fractionalOnly && !p.fnz { return false }
        if let db = spec.decimal {
            switch p.phase {
            case intDigits, zero, frac: return decimalFinal(db, neg: p.neg, s)
            default: return false
            }
        }
        switch p.phase {
        case intDigits, zero, frac:
            if let k = spec.multipleOf, p.fnz || (p.huge ? p.mod : s.a % UInt64(k)) != 0 { return false }
            if let k = spec.maxFractionDigits, p.phase == frac, s.b >> 56 > k { return false }
            return within(spec, neg: p.neg, mag: s.a, huge: p.huge, fPos: p.fnz)
        case expDigits:
            if let k = spec.maxFractionDigits { return s.a <= k + ((s.b >> 48) & 0xFF) }
            return true
        default: return false
        }
    }

    /// Compares a nonnegative magnitude with `-v` where v is a signed bound (i.e. with |v| for v <= 0).
    @inline(__always) static func negated(_ v: Int64) -> (mag: UInt64, negative: Bool) {
        v <= 0 ? (UInt64(bitPattern: 0 &- v), false) : (UInt64(v), true)
    }

    /// The allowed interval of integer-part magnitudes for a sign and fraction choice, or nil.
    static func interval(_ spec: NumberSpec, neg: Bool, fPos: Bool) -> (lo: UInt64, hi: UInt64?)? {
        var lo: UInt64 = 0
        var hi: UInt64? = nil
        func lower(_ x: UInt64) { lo = max(lo, x) }
        func upper(_ x: UInt64) { hi = min(hi ?? UInt64.max, x) }
        if !neg {
            if let b = spec.minimum, b.value >= 0 {
                let v = UInt64(b.value)
                lower(b.exclusive && !fPos ? v + 1 : v)
            }
            if let b = spec.maximum {
                if b.value < 0 { return nil }
                let v = UInt64(b.value)
                if b.exclusive || fPos {
                    if v == 0 { return nil }
                    upper(v - 1)
                } else {
                    upper(v)
                }
            }
        } else {
            // value = -(I + f)
            if let b = spec.minimum {
                let (m, isNegOfPositive) = negated(b.value)  // -lo
                if isNegOfPositive { return nil }  // lo > 0: no negative value allowed
                if b.exclusive || fPos {
                    if m == 0 { return nil }
                    upper(m - 1)
                } else {
                    upper(m)
                }
            }
            if let b = spec.maximum {
                let (m, isNegOfPositive) = negated(b.value)  // -hi
                if !isNegOfPositive {
                    lower(b.exclusive && !fPos ? m + 1 : m)
                } else if b.exclusive == false || true {
                    // hi > 0: every negative value is below it.
                }
            }
        }
        if let h = hi, h < lo { return nil }
        return (lo, hi)
    }

    static func within(_ spec: NumberSpec, neg: Bool, mag: UInt64, huge: Bool, fPos: Bool) -> Bool {
        guard let (lo, hi) = interval(spec, neg: neg, fPos: fPos) else { return false }
        if huge { return hi == nil }
        return mag >= lo && (hi.map { mag <= $0 } ?? true)
    }

    /// Whether some completion of this prefix is an allowed number.
    static func feasible(_ spec: NumberSpec, _ s: LexState) -> Bool {
        if let db = spec.decimal { return decimalFeasible(db, s) }
        if spec.minimum == nil && spec.maximum == nil { return true }
        let p = parts(s)
        let fChoices: [Bool]
        switch p.phase {
        case frac: fChoices = spec.integerOnly ? [false] : (p.fnz || spec.fractionalOnly ? [true] : [false, true])
        default: fChoices = spec.integerOnly ? [false] : (spec.fractionalOnly ? [true] : [false, true])
        }
        let signs: [Bool] = p.phase == start ? [false, true] : [p.neg]
        let k = spec.multipleOf.map { UInt64($0) }
        /// Whether [a, b] holds a multiple of the divisor (b nil: unbounded).
        func hasMultiple(_ a: UInt64, _ b: UInt64?) -> Bool {
            guard let k else { return b.map { a <= $0 } ?? true }
            let r = a % k
            let (first, o) = r == 0 ? (a, false) : a.addingReportingOverflow(k - r)
            if o { return false }
            return b.map { first <= $0 } ?? true
        }
        for neg in signs {
            for f in fChoices {
                guard let (lo, hi) = interval(spec, neg: neg, fPos: f) else { continue }
                switch p.phase {
                case start, minus:
                    if hasMultiple(lo, hi) { return true }
                case intDigits:
                    if p.huge {
                        if hi == nil { return true }
                        continue
                    }
                    // I = mag, or mag * 10^j + r for j >= 1.
                    if s.a >= lo && (hi.map { s.a <= $0 } ?? true) && (k.map { s.a % $0 == 0 } ?? true) { return true }
                    if s.a == 0 { continue }
                    var scale: UInt64 = 1
                    for _ in 1...20 {
                        let (sc, o) = scale.multipliedReportingOverflow(by: 10)
                        if o {
                            if hi == nil { return true }
                            break
                        }
                        scale = sc
                        let (base, o2) = s.a.multipliedReportingOverflow(by: scale)
                        if o2 {
                            if hi == nil { return true }
                            break
                        }
                        let top = base &+ (scale - 1)
                        let topClamped = top < base ? UInt64.max : top
                        if let h = hi, base > h { break }
                        if topClamped >= lo && hasMultiple(max(base, lo), hi.map { min($0, topClamped) } ?? topClamped) { return true }
                    }
                default:
                    if p.huge {
                        if hi == nil { return true }
                        continue
                    }
                    if s.a >= lo && (hi.map { s.a <= $0 } ?? true) && (k.map { s.a % $0 == 0 } ?? true) { return true }
                }
            }
        }
        return false
    }
}
