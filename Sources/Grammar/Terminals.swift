// Terminals: the byte automata at the leaves of a grammar. This file holds their state,
// the kinds of terminal and the dispatch to each kind's lexer (literals and whitespace
// are stepped here), and the UTF-8 steps that strings and scalars share. The lexers:
// StringTerminal.swift (JSON strings), NumberTerminal.swift and DecimalBounds.swift
// (JSON numbers), ScalarTerminal.swift (one scalar from a set).

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
    /// A check on the keys of an object in any order, consuming no byte: the matcher applies
    /// it while expanding (see `ObjectGuard`); no thread ever rests inside it.
    case objectGuard(ObjectGuard)

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
        case .objectGuard: return nil
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
        case .objectGuard: return false
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
        case .objectGuard: return false
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

/// A lead byte of a multi-byte UTF-8 sequence: its payload bits, how many continuation bytes
/// follow, the range code of the first (see `utf8ContinuationOK`), and the scalars the
/// sequence can encode; nil for an ASCII or continuation byte and for bytes that never lead
/// (C0, C1, F5-FF).
@inline(__always) func utf8Lead(_ byte: UInt8) -> (acc: UInt64, remaining: UInt64, range: UInt64, lo: UInt32, hi: UInt32)? {
    switch byte {
    case 0xC2...0xDF:
        let acc = UInt32(byte & 0x1F)
        return (UInt64(acc), 1, 0, acc << 6, acc << 6 | 0x3F)
    case 0xE0: return (0, 2, 1, 0x800, 0xFFF)
    case 0xED: return (0xD, 2, 2, 0xD000, 0xD7FF)
    case 0xE1...0xEF:
        let acc = UInt32(byte & 0x0F)
        return (UInt64(acc), 2, 0, acc << 12, acc << 12 | 0xFFF)
    case 0xF0: return (0, 3, 3, 0x10000, 0x3FFFF)
    case 0xF1...0xF3:
        let acc = UInt32(byte & 0x07)
        return (UInt64(acc), 3, 0, acc << 18, acc << 18 | 0x3FFFF)
    case 0xF4: return (4, 3, 4, 0x100000, 0x10FFFF)
    default: return nil
    }
}

/// The scalars a UTF-8 sequence can still encode after the bits `acc`, with `remaining`
/// continuation bytes (80-BF) to come.
@inline(__always) func utf8Scalars(acc: UInt64, remaining: UInt64) -> (lo: UInt32, hi: UInt32) {
    let shift = 6 * remaining
    let lo = UInt32(acc << shift)
    return (lo, lo | UInt32((1 << shift) - 1))
}
