/// Small open-addressing hash tables for the hot paths of encoding. Swift's `Dictionary`
/// hashes with SipHash and needs a `Hashable` key object; these hash raw bytes or a 64-bit
/// key directly, which is several times faster for the millions of lookups a megabyte of
/// text needs.

/// 64-bit FNV-1a over bytes, finished with a multiply-xorshift so that the low bits used
/// for the slot index are well mixed.
@inline(__always)
func hashBytes(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64 {
    var h: UInt64 = 0xcbf2_9ce4_8422_2325
    for b in bytes {
        h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01B3
    }
    return mix64(h)
}

@inline(__always)
func mix64(_ x: UInt64) -> UInt64 {
    var z = x
    z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
    z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
    return z ^ (z >> 31)
}

/// Byte strings (stored once, back to back) mapped to 32-bit values. Used for the
/// vocabulary (token text -> id) and for BPE's extra symbols. Insert-only.
struct ByteStringTable: Sendable {
    private(set) var arena: [UInt8] = []
    /// Per slot: the entry index + 1, or 0 when empty.
    private var slots: [Int32]
    private var entryStart: [Int32] = []
    private var entryLength: [Int32] = []
    private(set) var values: [Int32] = []
    private var mask: Int

    init(capacity: Int) {
        var size = 16
        while size < capacity * 2 { size <<= 1 }
        slots = [Int32](repeating: 0, count: size)
        mask = size - 1
        entryStart.reserveCapacity(capacity)
        entryLength.reserveCapacity(capacity)
        values.reserveCapacity(capacity)
    }

    var count: Int { values.count }

    /// The value stored for `key`, or nil.
    @inline(__always)
    func find(_ key: UnsafeBufferPointer<UInt8>) -> Int32? {
        var slot = Int(truncatingIfNeeded: hashBytes(key)) & mask
        return arena.withUnsafeBufferPointer { arena in
            while true {
                let e = Int(slots[slot])
                if e == 0 { return nil }
                let start = Int(entryStart[e - 1])
                let length = Int(entryLength[e - 1])
                if length == key.count {
                    var equal = true
                    var i = 0
                    while i < length {
                        if arena[start + i] != key[i] { equal = false; break }
                        i += 1
                    }
                    if equal { return values[e - 1] }
                }
                slot = (slot + 1) & mask
            }
        }
    }

    func find(_ key: [UInt8]) -> Int32? {
        key.withUnsafeBufferPointer { find($0) }
    }

    /// Stores `value` for `key` unless the key is already present; returns the value now
    /// stored for the key (the existing one when the key was present).
    @discardableResult
    mutating func insertIfAbsent(_ key: UnsafeBufferPointer<UInt8>, _ value: Int32) -> Int32 {
        if let existing = find(key) { return existing }
        if (values.count + 1) * 2 > slots.count { grow() }
        entryStart.append(Int32(arena.count))
        entryLength.append(Int32(key.count))
        arena.append(contentsOf: key)
        values.append(value)
        place(entry: values.count, hash: hashBytes(key))
        return value
    }

    @discardableResult
    mutating func insertIfAbsent(_ key: [UInt8], _ value: Int32) -> Int32 {
        key.withUnsafeBufferPointer { insertIfAbsent($0, value) }
    }

    private mutating func place(entry: Int, hash: UInt64) {
        var slot = Int(truncatingIfNeeded: hash) & mask
        while slots[slot] != 0 { slot = (slot + 1) & mask }
        slots[slot] = Int32(entry)
    }

    private mutating func grow() {
        let size = slots.count * 2
        slots = [Int32](repeating: 0, count: size)
        mask = size - 1
        for e in 0..<values.count {
            let start = Int(entryStart[e]), length = Int(entryLength[e])
            let h = arena.withUnsafeBufferPointer { hashBytes(UnsafeBufferPointer(rebasing: $0[start..<start + length])) }
            place(entry: e + 1, hash: h)
        }
    }
}

/// 64-bit keys mapped to 64-bit values (BPE merges: a pair of symbol ids -> rank and
/// result). Insert-only; key `UInt64.max` is reserved.
struct PairTable: Sendable {
    private var keys: [UInt64]
    private var vals: [UInt64]
    private var mask: Int
    private(set) var count = 0
    private static let empty = UInt64.max

    init(capacity: Int) {
        var size = 16
        while size < capacity * 2 { size <<= 1 }
        keys = [UInt64](repeating: PairTable.empty, count: size)
        vals = [UInt64](repeating: 0, count: size)
        mask = size - 1
    }

    @inline(__always)
    func find(_ key: UInt64) -> UInt64? {
        var slot = Int(truncatingIfNeeded: mix64(key)) & mask
        while true {
            let k = keys[slot]
            if k == key { return vals[slot] }
            if k == PairTable.empty { return nil }
            slot = (slot + 1) & mask
        }
    }

    /// Stores `value` unless `key` is present (the first insertion wins, as in llama.cpp's
    /// `bpe_ranks.emplace`).
    mutating func insertIfAbsent(_ key: UInt64, _ value: UInt64) {
        if (count + 1) * 2 > keys.count { grow() }
        var slot = Int(truncatingIfNeeded: mix64(key)) & mask
        while true {
            let k = keys[slot]
            if k == key { return }
            if k == PairTable.empty { break }
            slot = (slot + 1) & mask
        }
        keys[slot] = key
        vals[slot] = value
        count += 1
    }

    private mutating func grow() {
        let oldKeys = keys, oldVals = vals
        let size = keys.count * 2
        keys = [UInt64](repeating: PairTable.empty, count: size)
        vals = [UInt64](repeating: 0, count: size)
        mask = size - 1
        for i in 0..<oldKeys.count where oldKeys[i] != PairTable.empty {
            var slot = Int(truncatingIfNeeded: mix64(oldKeys[i])) & mask
            while keys[slot] != PairTable.empty { slot = (slot + 1) & mask }
            keys[slot] = oldKeys[i]
            vals[slot] = oldVals[i]
        }
    }
}
