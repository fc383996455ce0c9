// The scalar-class terminal (GBNF `[...]` and `.`): one UTF-8 encoded scalar from a set.

/// One UTF-8 encoded scalar from a set. State: `a` = accumulated bits, `b` = phase: 0 start,
/// 1...3 continuation bytes still expected (with the allowed range of the next byte in bits
/// 8-15 as for strings), `done`.
enum ScalarLexer {
    static let done: UInt64 = 0xFF

    static func step(_ set: ScalarSet, _ s: LexState, _ byte: UInt8) -> LexState? {
        if s.b == 0 {
            if byte < 0x80 { return set.contains(UInt32(byte)) ? LexState(0, done) : nil }
            // Refuse a lead byte if no scalar of the set starts with it.
            guard let lead = utf8Lead(byte), set.overlaps(lead.lo, lead.hi) else { return nil }
            return LexState(lead.acc, lead.remaining | (lead.range << 8))
        }
        let need = s.b & 0xF
        guard utf8ContinuationOK(byte, range: (s.b >> 8) & 0xF) else { return nil }
        let acc = (s.a << 6) | UInt64(byte & 0x3F)
        if need == 1 { return set.contains(UInt32(acc)) ? LexState(0, done) : nil }
        let (lo, hi) = utf8Scalars(acc: acc, remaining: need - 1)
        guard set.overlaps(lo, hi) else { return nil }
        return LexState(acc, need - 1)
    }
}

extension ScalarSet {
    /// Whether some scalar in `lo...hi` is in the set.
    @inline(__always) func overlaps(_ lo: UInt32, _ hi: UInt32) -> Bool {
        ranges.contains(where: { $0.lowerBound <= hi && $0.upperBound >= lo })
    }
}
