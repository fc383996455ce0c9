/// Per-code-point classes the pre-tokenizer regexes test: `\p{L}`, `\p{N}`, `\s` and
/// `\p{P}`.
///
/// llama.cpp builds its table with Python's `regex` module (`\p{L}` = Lu Ll Lt Lm Lo,
/// `\p{N}` = Nd Nl No, `\p{P}` = Pc Pd Ps Pe Pi Pf Po, `\s` = the Unicode White_Space
/// property). We derive the same classes from `Unicode.Scalar.Properties`; the two can
/// only differ for code points assigned in a newer Unicode version than the other knows.
enum UnicodeFlags {
    static let letter: UInt8 = 1
    static let number: UInt8 = 2
    static let whitespace: UInt8 = 4
    static let punctuation: UInt8 = 8

    /// Classes of one scalar value, computed from the Unicode properties.
    static func compute(_ value: UInt32) -> UInt8 {
        guard let scalar = Unicode.Scalar(value) else { return 0 }
        let props = scalar.properties
        var flags: UInt8 = props.isWhitespace ? whitespace : 0
        switch props.generalCategory {
        case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter:
            flags |= letter
        case .decimalNumber, .letterNumber, .otherNumber:
            flags |= number
        case .connectorPunctuation, .dashPunctuation, .openPunctuation, .closePunctuation,
            .initialPunctuation, .finalPunctuation, .otherPunctuation:
            flags |= punctuation
        default:
            break
        }
        return flags
    }

    /// Classes of every code point of the Basic Multilingual Plane, built once on first use
    /// (64 KiB; a few milliseconds).
    static let bmp: [UInt8] = (0..<0x10000).map { compute(UInt32($0)) }

    /// Classes of `value` (table lookup for the BMP).
    @inline(__always)
    static func of(_ value: UInt32) -> UInt8 {
        value < 0x10000 ? bmp[Int(value)] : compute(value)
    }
}

/// Text decoded into code points, with each code point's classes and byte offset.
///
/// Invalid UTF-8 cannot occur (the input is a Swift `String`), so decoding is simple.
struct CodePoints {
    /// Scalar values.
    var values: [UInt32] = []
    /// `UnicodeFlags` of each value.
    var flags: [UInt8] = []
    /// Byte offset of each code point in the UTF-8 text, plus the total length at the end.
    var offsets: [Int32] = []

    init() {}

    /// Decodes `bytes` (valid UTF-8). The three arrays are filled in one pass through
    /// uninitialized storage (appending element by element costs a uniqueness and
    /// capacity check per element, which dominated encoding time).
    init(_ bytes: UnsafeBufferPointer<UInt8>) {
        let n = bytes.count
        var values: [UInt32] = []
        var flags: [UInt8] = []
        var offsets: [Int32] = []
        let bmp = UnicodeFlags.bmp
        bmp.withUnsafeBufferPointer { table in
            values = [UInt32](unsafeUninitializedCapacity: n) { vbuf, vcount in
                flags = [UInt8](unsafeUninitializedCapacity: n) { fbuf, fcount in
                    offsets = [Int32](unsafeUninitializedCapacity: n + 1) { obuf, ocount in
                        var i = 0
                        var k = 0
                        while i < n {
                            let b0 = UInt32(bytes[i])
                            var value: UInt32
                            var length: Int
                            if b0 < 0x80 {
                                value = b0
                                length = 1
                            } else if b0 < 0xE0 {
                                value = (b0 & 0x1F) << 6 | UInt32(bytes[i + 1] & 0x3F)
                                length = 2
                            } else if b0 < 0xF0 {
                                value = (b0 & 0x0F) << 12 | UInt32(bytes[i + 1] & 0x3F) << 6 | UInt32(bytes[i + 2] & 0x3F)
                                length = 3
                            } else {
                                value =
                                    (b0 & 0x07) << 18 | UInt32(bytes[i + 1] & 0x3F) << 12
                                    | UInt32(bytes[i + 2] & 0x3F) << 6 | UInt32(bytes[i + 3] & 0x3F)
                                length = 4
                            }
                            vbuf[k] = value
                            fbuf[k] = value < 0x10000 ? table[Int(value)] : UnicodeFlags.compute(value)
                            obuf[k] = Int32(i)
                            k += 1
                            i += length
                        }
                        obuf[k] = Int32(n)
                        ocount = k + 1
                        fcount = k
                        vcount = k
                    }
                }
            }
        }
        self.values = values
        self.flags = flags
        self.offsets = offsets
    }

    var count: Int { values.count }
}
