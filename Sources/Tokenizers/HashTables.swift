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
/// vocabulary (token text -> id), BPE's extra symbols and the word caches. Insert-only.
///
/// A slot holds 32 bits of the key's hash next to the entry index, so that a probe
/// rarely touches an entry (or the key bytes) that does not match: with vocabularies of
/// 100k+ tokens the table is far larger than the caches and each touch is a cache miss.
struct ByteStringTable: Sendable {
    private struct Entry {
        var start: Int32
        var length: Int32
        var value: Int32
    }

    private(set) var arena: [UInt8] = []
    /// Per slot: `hash >> 32 << 32 | (entry index + 1)`, or 0 when empty.
    private var slots: [UInt64]
    private var entries: [Entry] = []
    private var mask: Int

    init(capacity: Int) {
        var size = 16
        while size < capacity * 2 { size <<= 1 }
        slots = [UInt64](repeating: 0, count: size)
        mask = size - 1
        entries.reserveCapacity(capacity)
    }

    var count: Int { entries.count }

    /// The value stored for `key`, or nil.
    @inline(__always)
    func find(_ key: UnsafeBufferPointer<UInt8>) -> Int32? {
        let h = hashBytes(key)
        let tag = h & 0xFFFF_FFFF_0000_0000
        var slot = Int(truncatingIfNeeded: h) & mask
        return slots.withUnsafeBufferPointer { slots in
            entries.withUnsafeBufferPointer { entries in
                arena.withUnsafeBufferPointer { arena in
                    while true {
                        let s = slots[slot]
                        if s == 0 { return nil }
                        if s & 0xFFFF_FFFF_0000_0000 == tag {
                            let e = entries[Int(truncatingIfNeeded: s & 0xFFFF_FFFF) - 1]
                            if Int(e.length) == key.count {
                                let start = Int(e.start)
                                var equal = true
                                var i = 0
                                while i < key.count {
                                    if arena[start + i] != key[i] {
                                        equal = false
                                        break
                                    }
                                    i += 1
                                }
                                if equal { return e.value }
                            }
                        }
                        slot = (slot + 1) & mask
                    }
                }
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
        if (entries.count + 1) * 2 > slots.count { grow() }
        entries.append(Entry(start: Int32(arena.count), length: Int32(key.count), value: value))
        arena.append(contentsOf: key)
        place(entry: entries.count, hash: hashBytes(key))
        return value
    }

    @discardableResult
    mutating func insertIfAbsent(_ key: [UInt8], _ value: Int32) -> Int32 {
        key.withUnsafeBufferPointer { insertIfAbsent($0, value) }
    }

    private mutating func place(entry: Int, hash: UInt64) {
        var slot = Int(truncatingIfNeeded: hash) & mask
        while slots[slot] != 0 { slot = (slot + 1) & mask }
        slots[slot] = hash & 0xFFFF_FFFF_0000_0000 | UInt64(entry)
    }

    private mutating func grow() {
        let size = slots.count * 2
        slots = [UInt64](repeating: 0, count: size)
        mask = size - 1
        for (i, e) in entries.enumerated() {
            let start = Int(e.start), length = Int(e.length)
            let h = arena.withUnsafeBufferPointer { hashBytes(UnsafeBufferPointer(rebasing: $0[start..<start + length])) }
            place(entry: i + 1, hash: h)
        }
    }
}

/// 64-bit keys mapped to 64-bit values (BPE merges: a pair of symbol ids -> rank and
/// result). Insert-only; key `UInt64.max` is reserved. Keys and values are interleaved so
/// that a probe costs one cache miss.
struct PairTable: Sendable {
    /// `storage[2 * slot]` is the key, `storage[2 * slot + 1]` the value.
    private var storage: [UInt64]
    private var mask: Int
    private(set) var count = 0
    private static let empty = UInt64.max

    init(capacity: Int) {
        var size = 16
        while size < capacity * 2 { size <<= 1 }
        storage = PairTable.emptyStorage(size)
        mask = size - 1
    }

    private static func emptyStorage(_ size: Int) -> [UInt64] {
        var s = [UInt64](repeating: 0, count: 2 * size)
        for i in 0..<size { s[2 * i] = empty }
        return s
    }

    @inline(__always)
    func find(_ key: UInt64) -> UInt64? {
        var slot = Int(truncatingIfNeeded: mix64(key)) & mask
        return storage.withUnsafeBufferPointer { s in
            while true {
                let k = s[2 * slot]
                if k == key { return s[2 * slot + 1] }
                if k == PairTable.empty { return nil }
                slot = (slot + 1) & mask
            }
        }
    }

    /// Stores `value` unless `key` is present (the first insertion wins, as in llama.cpp's
    /// `bpe_ranks.emplace`).
    mutating func insertIfAbsent(_ key: UInt64, _ value: UInt64) {
        if (count + 1) * 2 > storage.count / 2 { grow() }
        var slot = Int(truncatingIfNeeded: mix64(key)) & mask
        while true {
            let k = storage[2 * slot]
            if k == key { return }
            if k == PairTable.empty { break }
            slot = (slot + 1) & mask
        }
        storage[2 * slot] = key
        storage[2 * slot + 1] = value
        count += 1
    }

    private mutating func grow() {
        let old = storage
        let size = storage.count  // twice the slot count
        storage = PairTable.emptyStorage(size)
        mask = size - 1
        for i in stride(from: 0, to: old.count, by: 2) where old[i] != PairTable.empty {
            var slot = Int(truncatingIfNeeded: mix64(old[i])) & mask
            while storage[2 * slot] != PairTable.empty { slot = (slot + 1) & mask }
            storage[2 * slot] = old[i]
            storage[2 * slot + 1] = old[i + 1]
        }
    }
}
