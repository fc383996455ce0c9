// The scalar-class terminal (GBNF `[...]` and `.`): one UTF-8 encoded scalar from a set.

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
