// The JSON string terminal: what its content must satisfy (`StringSpec`) and the
// lexer that decodes and checks it byte by byte.

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
            if !lengthAllows(spec, dfa, t, count: Int(count)) { return nil }
        } else if let m = spec.maxLength, Int(count) > m {
            return nil
        }
        return d | (count << 32)
    }

    /// Whether a string whose content DFA reached state `t` after `count` scalars can still
    /// be completed within the spec's length bounds: its shortest accepting continuation
    /// must fit under maxLength, and its longest must reach minLength (lengths between the
    /// two are assumed reachable).
    @inline(__always) static func lengthAllows(_ spec: StringSpec, _ dfa: CodePointDFA, _ t: Int32, count: Int) -> Bool {
        if let m = spec.maxLength, count + Int(dfa.minToAccept[Int(t)]) > m { return false }
        if spec.minLength > 0, dfa.maxToAccept[Int(t)] != Int32.max, count + Int(dfa.maxToAccept[Int(t)]) < spec.minLength {
            return false
        }
        return true
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

    /// Whether some scalar in `r` could be appended while a UTF-8 sequence is partly read
    /// (room for one more scalar was checked at its lead byte).
    @inline(__always) static func canEmitUTF8(_ spec: StringSpec, _ a: UInt64, _ r: (lo: UInt32, hi: UInt32)) -> Bool {
        spec.dfa == nil || canEmit(spec, a, r.lo, r.hi)
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
            if byte == 0x5C {
                // Any scalar can be written as an escape: some scalar must be allowed here.
                guard spec.dfa == nil || canEmit(spec, s.a, 0, 0x10FFFF) else { return nil }
                return LexState(s.a, pack(escape))
            }
            guard let lead = utf8Lead(byte) else { return nil }
            guard canEmitUTF8(spec, s.a, (lead.lo, lead.hi)) else { return nil }
            return LexState(s.a, pack(utf8, acc: lead.acc, counter: lead.remaining, extra: lead.range))
        case utf8:
            guard utf8ContinuationOK(byte, range: extra) else { return nil }
            let v = (acc << 6) | UInt64(byte & 0x3F)
            if counter == 1 {
                guard let a = emit(spec, s.a, UInt32(v)) else { return nil }
                return LexState(a, pack(normal))
            }
            guard canEmitUTF8(spec, s.a, utf8Scalars(acc: v, remaining: counter - 1)) else { return nil }
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
