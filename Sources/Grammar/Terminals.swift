/// The state of a terminal's byte automaton. Its meaning depends on the terminal kind; two
/// words keep matcher threads small and hashable.
struct LexState: Hashable, Sendable {
    var a: UInt64
    var b: UInt64
    init(_ a: UInt64 = 0, _ b: UInt64 = 0) {
        self.a = a
        self.b = b
    }
}

/// What a JSON string terminal accepts: its decoded content must be accepted by `dfa` (when
/// present) and hold between `minLength` and `maxLength` Unicode scalars.
struct StringSpec: Hashable, Sendable {
    var dfa: CodePointDFA?
    var minLength: Int = 0
    var maxLength: Int? = nil

    /// Whether a decoded string satisfies the spec.
    static func accepts(_ spec: StringSpec, _ s: String) -> Bool {
        let n = s.unicodeScalars.count
        if n < spec.minLength || (spec.maxLength.map { n > $0 } ?? false) { return false }
        return spec.dfa?.accepts(s) ?? true
    }
}

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

/// A terminal: a byte-level automaton that consumes at least one byte. Terminals are the
/// leaves of the grammar; a matcher thread sits inside one terminal at a time.
enum Terminal: Hashable, Sendable {
    /// Exact bytes.
    case literal([UInt8])
    /// One to `max` JSON whitespace bytes (space, tab, LF, CR).
    case whitespace(max: Int)
    /// A complete JSON string token, quotes included, with content constraints.
    case string(StringSpec)
    /// A complete JSON number token with value constraints.
    case number(NumberSpec)
    /// One Unicode scalar (UTF-8 encoded) from a set: GBNF character classes and `.`.
    case scalar(ScalarSet)

    var initial: LexState { LexState() }

    /// The state after `byte`, or nil when the byte is not allowed.
    @inline(__always)
    func step(_ s: LexState, _ byte: UInt8) -> LexState? {
        switch self {
        case .literal(let bytes):
            let i = Int(s.a)
            return i < bytes.count && bytes[i] == byte ? LexState(s.a + 1, 0) : nil
        case .whitespace(let max):
            return WhitespaceLexer(max: max).step(s, byte)
        case .string(let spec):
            return StringLexer.step(spec, s, byte)
        case .number(let spec):
            return NumberLexer.step(spec, s, byte)
        case .scalar(let set):
            return ScalarLexer.step(set, s, byte)
        }
    }

    /// Whether the terminal may end in this state.
    @inline(__always)
    func isFinal(_ s: LexState) -> Bool {
        switch self {
        case .literal(let bytes): return Int(s.a) == bytes.count
        case .whitespace: return s.a >= 1
        case .string: return (s.b & 0xFF) == StringLexer.done
        case .number(let spec): return NumberLexer.isFinal(spec, s)
        case .scalar: return s.b == ScalarLexer.done
        }
    }

    /// Whether more bytes may follow within this terminal.
    @inline(__always)
    func canContinue(_ s: LexState) -> Bool {
        switch self {
        case .literal(let bytes): return Int(s.a) < bytes.count
        case .whitespace(let max): return s.a < UInt64(max)
        case .string: return (s.b & 0xFF) != StringLexer.done
        case .number: return true
        case .scalar: return s.b != ScalarLexer.done
        }
    }

    /// A key under which the set of byte strings accepted from `s` (as far as `horizon` scalars
    /// ahead) is the same: used to share token-mask work between states.
    func cacheKey(_ s: LexState, horizon: Int) -> LexState {
        guard case .string(let spec) = self else { return s }
        let count = Int(s.a >> 32)
        let need = max(0, spec.minLength - count)
        let left = spec.maxLength.map { $0 - count } ?? Int.max
        let normNeed = UInt64(min(need, horizon + 1))
        let normLeft = UInt64(min(left, horizon + 1))
        return LexState((s.a & 0xFFFF_FFFF) | (normNeed << 32) | (normLeft << 48), s.b)
    }
}

/// Whether `byte` is a valid UTF-8 continuation byte, given the range code that the lead
/// byte imposes on the first continuation (0: 80-BF, 1: A0-BF after E0, 2: 80-9F after ED,
/// 3: 90-BF after F0, 4: 80-8F after F4): this refuses overlongs, surrogates and > U+10FFFF.
@inline(__always) func utf8ContinuationOK(_ byte: UInt8, range: UInt64) -> Bool {
    switch range {
    case 1: return byte >= 0xA0 && byte <= 0xBF
    case 2: return byte >= 0x80 && byte <= 0x9F
    case 3: return byte >= 0x90 && byte <= 0xBF
    case 4: return byte >= 0x80 && byte <= 0x8F
    default: return byte >= 0x80 && byte <= 0xBF
    }
}

/// JSON string token automaton: opening quote, content (escapes decoded, UTF-8 validated,
/// raw control characters refused, lone surrogates refused), closing quote. Decoded scalars
/// are counted and fed to the content DFA.
///
/// State: `a` = DFA state (low 32 bits) | scalar count (high 32 bits);
/// `b` = phase (bits 0-7) | accumulator (bits 8-31) | counter (bits 32-39) | extra (40-55).
enum StringLexer {
    static let start: UInt64 = 0, normal: UInt64 = 1, escape: UInt64 = 2, hex: UInt64 = 3
    static let wantBackslash: UInt64 = 4, wantU: UInt64 = 5, lowHex: UInt64 = 6, utf8: UInt64 = 7, done: UInt64 = 8

    @inline(__always) static func pack(_ phase: UInt64, acc: UInt64 = 0, counter: UInt64 = 0, extra: UInt64 = 0) -> UInt64 {
        phase | (acc << 8) | (counter << 32) | (extra << 40)
    }

    /// Appends one decoded scalar; nil if the content constraints forbid it.
    @inline(__always) static func emit(_ spec: StringSpec, _ a: UInt64, _ c: UInt32) -> UInt64? {
        let count = (a >> 32) + 1
        var d = a & 0xFFFF_FFFF
        if let dfa = spec.dfa {
            let t = dfa.step(Int32(truncatingIfNeeded: d), c)
            if t < 0 { return nil }
            d = UInt64(t)
            if let m = spec.maxLength, Int(count) + Int(dfa.minToAccept[Int(t)]) > m { return nil }
            // Some completion must also reach minLength (lengths between the shortest and the
            // longest accepting continuation are assumed reachable).
            if spec.minLength > 0, dfa.maxToAccept[Int(t)] != Int32.max, Int(count) + Int(dfa.maxToAccept[Int(t)]) < spec.minLength {
                return nil
            }
        } else if let m = spec.maxLength, Int(count) > m {
            return nil
        }
        return d | (count << 32)
    }

    /// Whether some scalar in `lo...hi` could be appended now (the checks of `emit`): used
    /// while a scalar is only partly read (UTF-8 lead and continuation bytes, `\` and `\u`
    /// hex digits), so that no byte is accepted that leaves the string without a completion.
    static func canEmit(_ spec: StringSpec, _ a: UInt64, _ lo: UInt32, _ hi: UInt32) -> Bool {
        guard lo <= hi else { return false }
        let count = Int(a >> 32) + 1
        if let m = spec.maxLength, count > m { return false }
        guard let dfa = spec.dfa else { return true }
        for t in dfa.transitions[Int(a & 0xFFFF_FFFF)] where t.hi >= lo && t.lo <= hi {
            let target = Int(t.target)
            if let m = spec.maxLength, count + Int(dfa.minToAccept[target]) > m { continue }
            if spec.minLength > 0, dfa.maxToAccept[target] != Int32.max, count + Int(dfa.maxToAccept[target]) < spec.minLength { continue }
            return true
        }
        return false
    }

    /// Whether some scalar whose UTF-8 encoding continues with `remaining` more bytes after the
    /// bits `acc` (with the lead byte's restriction `extra`) could be appended.
    static func canEmitUTF8(_ spec: StringSpec, _ a: UInt64, acc: UInt64, remaining: UInt64, extra: UInt64) -> Bool {
        if spec.dfa == nil { return true }  // room was checked before the lead byte
        let shift = 6 * remaining
        var lo = UInt32(acc << shift), hi = UInt32((acc << shift) | ((1 << shift) - 1))
        switch extra {
        case 1: lo = max(lo, 0x800)
        case 2: hi = min(hi, 0xD7FF)
        case 3: lo = max(lo, 0x10000)
        case 4: hi = min(hi, 0x10FFFF)
        default: break
        }
        return canEmit(spec, a, lo, hi)
    }

    /// Whether some scalar can still be written by a `\u` escape whose first `digits` hex
    /// digits have the value `v` (surrogate pairs included).
    static func canEmitHex(_ spec: StringSpec, _ a: UInt64, v: UInt64, digits: UInt64) -> Bool {
        if spec.dfa == nil { return true }
        let shift = 4 * (4 - digits)
        let lo = UInt32(v << shift), hi = UInt32((v << shift) | ((1 << shift) - 1))
        // Plain BMP scalars, around the surrogates.
        if lo < 0xD800 && canEmit(spec, a, lo, min(hi, 0xD7FF)) { return true }
        if hi > 0xDFFF && canEmit(spec, a, max(lo, 0xE000), hi) { return true }
        // A high surrogate: the pair encodes a supplementary scalar.
        let hlo = max(lo, 0xD800), hhi = min(hi, 0xDBFF)
        if hlo <= hhi && canEmit(spec, a, 0x10000 + ((hlo - 0xD800) << 10), 0x10000 + ((hhi - 0xD800) << 10) + 0x3FF) { return true }
        return false
    }

    static func hexValue(_ b: UInt8) -> UInt64? {
        switch b {
        case 0x30...0x39: return UInt64(b - 0x30)
        case 0x41...0x46: return UInt64(b - 0x37)
        case 0x61...0x66: return UInt64(b - 0x57)
        default: return nil
        }
    }

    static func step(_ spec: StringSpec, _ s: LexState, _ byte: UInt8) -> LexState? {
        let phase = s.b & 0xFF
        let acc = (s.b >> 8) & 0xFF_FFFF
        let counter = (s.b >> 32) & 0xFF
        let extra = (s.b >> 40) & 0xFFFF
        switch phase {
        case start:
            guard byte == 0x22 else { return nil }
            return LexState(spec.dfa.map { UInt64($0.start) } ?? 0, pack(normal))
        case normal:
            switch byte {
            case 0x22:
                let count = Int(s.a >> 32)
                guard count >= spec.minLength else { return nil }
                if let dfa = spec.dfa, !dfa.accepting[Int(s.a & 0xFFFF_FFFF)] { return nil }
                return LexState(s.a, pack(done))
            case 0..<0x20: return nil
            case 0x20..<0x80 where byte != 0x5C:
                guard let a = emit(spec, s.a, UInt32(byte)) else { return nil }
                return LexState(a, s.b)
            default: break
            }
            // An escape or a multi-byte sequence starts a scalar: there must be room for it.
            if let m = spec.maxLength, Int(s.a >> 32) + 1 > m { return nil }
            let lead: (acc: UInt64, counter: UInt64, extra: UInt64)
            switch byte {
            case 0x5C:
                // Any scalar can be written as an escape: some scalar must be allowed here.
                guard spec.dfa == nil || canEmit(spec, s.a, 0, 0x10FFFF) else { return nil }
                return LexState(s.a, pack(escape))
            case 0xC2...0xDF: lead = (UInt64(byte & 0x1F), 1, 0)
            case 0xE0: lead = (UInt64(byte & 0x0F), 2, 1)
            case 0xED: lead = (UInt64(byte & 0x0F), 2, 2)
            case 0xE1...0xEF: lead = (UInt64(byte & 0x0F), 2, 0)
            case 0xF0: lead = (UInt64(byte & 0x07), 3, 3)
            case 0xF1...0xF3: lead = (UInt64(byte & 0x07), 3, 0)
            case 0xF4: lead = (UInt64(byte & 0x07), 3, 4)
            default: return nil
            }
            guard canEmitUTF8(spec, s.a, acc: lead.acc, remaining: lead.counter, extra: lead.extra) else { return nil }
            return LexState(s.a, pack(utf8, acc: lead.acc, counter: lead.counter, extra: lead.extra))
        case utf8:
            guard utf8ContinuationOK(byte, range: extra) else { return nil }
            let v = (acc << 6) | UInt64(byte & 0x3F)
            if counter == 1 {
                guard let a = emit(spec, s.a, UInt32(v)) else { return nil }
                return LexState(a, pack(normal))
            }
            guard canEmitUTF8(spec, s.a, acc: v, remaining: counter - 1, extra: 0) else { return nil }
            return LexState(s.a, pack(utf8, acc: v, counter: counter - 1, extra: 0))
        case escape:
            var c: UInt32
            switch byte {
            case 0x22: c = 0x22
            case 0x5C: c = 0x5C
            case 0x2F: c = 0x2F
            case 0x62: c = 0x08
            case 0x66: c = 0x0C
            case 0x6E: c = 0x0A
            case 0x72: c = 0x0D
            case 0x74: c = 0x09
            case 0x75: return LexState(s.a, pack(hex))
            default: return nil
            }
            guard let a = emit(spec, s.a, c) else { return nil }
            return LexState(a, pack(normal))
        case hex:
            guard let d = hexValue(byte) else { return nil }
            let v = (acc << 4) | d
            let n = counter + 1
            if n == 2 && v >= 0xDC && v <= 0xDF { return nil }  // lone low surrogate
            if n < 4 {
                guard canEmitHex(spec, s.a, v: v, digits: n) else { return nil }
                return LexState(s.a, pack(hex, acc: v, counter: n))
            }
            if v >= 0xD800 && v <= 0xDBFF {
                guard canEmitHex(spec, s.a, v: v, digits: 4) else { return nil }
                return LexState(s.a, pack(wantBackslash, extra: v - 0xD800))
            }
            guard let a = emit(spec, s.a, UInt32(v)) else { return nil }
            return LexState(a, pack(normal))
        case wantBackslash:
            return byte == 0x5C ? LexState(s.a, pack(wantU, extra: extra)) : nil
        case wantU:
            return byte == 0x75 ? LexState(s.a, pack(lowHex, extra: extra)) : nil
        case lowHex:
            guard let d = hexValue(byte) else { return nil }
            let v = (acc << 4) | d
            let n = counter + 1
            if n == 1 && v != 0xD { return nil }
            if n == 2 && (v < 0xDC || v > 0xDF) { return nil }
            if n < 4 {
                if spec.dfa != nil {
                    let shift = 4 * (4 - n)
                    let lo = max(UInt32(v << shift), 0xDC00), hi = min(UInt32((v << shift) | ((1 << shift) - 1)), 0xDFFF)
                    let base = 0x10000 + (UInt32(extra) << 10)
                    guard lo <= hi, canEmit(spec, s.a, base + lo - 0xDC00, base + hi - 0xDC00) else { return nil }
                }
                return LexState(s.a, pack(lowHex, acc: v, counter: n, extra: extra))
            }
            let scalar = 0x10000 + (extra << 10) + (v - 0xDC00)
            guard let a = emit(spec, s.a, UInt32(scalar)) else { return nil }
            return LexState(a, pack(normal))
        default:
            return nil
        }
    }
}

/// JSON number token automaton with integer-valued bounds, integer-only mode and an integer
/// `multipleOf`. Every accepted prefix can still be completed to an allowed value (the
/// bounds are checked for feasibility after each digit).
///
/// State: `a` = magnitude of the integer part (exact up to 19 digits);
/// `b` = phase (0-7) | negative (8) | digit count (9-15) | fraction nonzero (16) | huge (17)
///       | integer part mod multipleOf (32-63).
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
                return make(s.a, phase: expMark, neg: p.neg, digits: p.digits, fnz: false, huge: p.huge, mod: 0)
            } else {
                return nil
            }
        case dot, frac:
            guard isDigit else {
                if p.phase == frac && (byte == 0x65 || byte == 0x45) && spec.allowsExponent {
                    return make(s.a, phase: expMark, neg: p.neg, digits: p.digits, fnz: p.fnz, huge: p.huge, mod: 0)
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
        case expMark:
            if byte == 0x2B || byte == 0x2D { return LexState(s.a, (s.b & ~0xFF) | expSign) }
            return isDigit ? LexState(s.a, (s.b & ~0xFF) | expDigits) : nil
        case expSign, expDigits:
            return isDigit ? LexState(s.a, (s.b & ~0xFF) | expDigits) : nil
        default:
            return nil
        }
        return feasible(spec, next) ? next : nil
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
            return within(spec, neg: p.neg, mag: s.a, huge: p.huge, fPos: p.fnz)
        case expDigits: return true
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

    // MARK: Decimal bounds
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

/// One UTF-8 encoded scalar from a set. State: `a` = accumulated bits, `b` = phase: 0 start,
/// 1...3 continuation bytes still expected (with the allowed range of the next byte in bits
/// 8-15 as for strings), `done`.
enum ScalarLexer {
    static let done: UInt64 = 0xFF

    static func step(_ set: ScalarSet, _ s: LexState, _ byte: UInt8) -> LexState? {
        let need = s.b & 0xF
        let range = (s.b >> 8) & 0xF
        if s.b == 0 {
            func lead(_ acc: UInt64, _ n: UInt64, _ r: UInt64) -> LexState? {
                // Refuse a lead byte if no scalar of the set starts with it.
                let lo: UInt32, hi: UInt32
                switch (n, r) {
                case (1, _):
                    lo = UInt32(acc) << 6
                    hi = lo | 0x3F
                case (2, 1):
                    lo = 0x800
                    hi = 0xFFF
                case (2, 2):
                    lo = 0xD000
                    hi = 0xD7FF
                case (2, _):
                    lo = UInt32(acc) << 12
                    hi = lo | 0xFFF
                case (3, 3):
                    lo = 0x10000
                    hi = 0x3FFFF
                case (3, 4):
                    lo = 0x100000
                    hi = 0x10FFFF
                default:
                    lo = UInt32(acc) << 18
                    hi = lo | 0x3FFFF
                }
                guard set.ranges.contains(where: { $0.lowerBound <= hi && $0.upperBound >= lo }) else { return nil }
                return LexState(acc, n | (r << 8))
            }
            switch byte {
            case 0..<0x80: return set.contains(UInt32(byte)) ? LexState(0, done) : nil
            case 0xC2...0xDF: return lead(UInt64(byte & 0x1F), 1, 0)
            case 0xE0: return lead(0, 2, 1)
            case 0xED: return lead(0xD, 2, 2)
            case 0xE1...0xEF: return lead(UInt64(byte & 0x0F), 2, 0)
            case 0xF0: return lead(0, 3, 3)
            case 0xF1...0xF3: return lead(UInt64(byte & 0x07), 3, 0)
            case 0xF4: return lead(4, 3, 4)
            default: return nil
            }
        }
        guard utf8ContinuationOK(byte, range: range) else { return nil }
        let acc = (s.a << 6) | UInt64(byte & 0x3F)
        if need == 1 { return set.contains(UInt32(acc)) ? LexState(0, done) : nil }
        let shift = 6 * (need - 1)
        let lo = UInt32(acc << shift), hi = lo | UInt32((1 << shift) - 1)
        guard set.ranges.contains(where: { $0.lowerBound <= hi && $0.upperBound >= lo }) else { return nil }
        return LexState(acc, need - 1)
    }
}
