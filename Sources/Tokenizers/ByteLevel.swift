/// GPT-2's reversible byte <-> Unicode mapping, used by byte-level BPE vocabularies.
///
/// Every byte gets a printable code point: the bytes `!`...`~`, `¡`...`¬` and `®`...`ÿ`
/// map to themselves; the 68 others (controls, space, DEL, NBSP, soft hyphen...) map, in
/// byte order, to U+0100, U+0101, ... A vocabulary stores its tokens in this alphabet (a
/// space is `Ġ`, U+0120; a newline `Ċ`, U+010A), so a token's text must be mapped back to
/// get the bytes it stands for.
enum ByteLevel {
    /// The code point that stands for each byte.
    static let byteToScalar: [UInt32] = {
        var table = [UInt32](repeating: 0, count: 256)
        var next: UInt32 = 256
        for b in 0..<256 {
            if (0x21...0x7E).contains(b) || (0xA1...0xAC).contains(b) || (0xAE...0xFF).contains(b) {
                table[b] = UInt32(b)
            } else {
                table[b] = next
                next += 1
            }
        }
        return table
    }()

    /// The UTF-8 encoding of `byteToScalar[b]`, for building mapped text quickly.
    static let byteToUTF8: [[UInt8]] = byteToScalar.map { Array(String(Unicode.Scalar($0)!).utf8) }

    /// The byte a code point stands for, or nil when it is not in the alphabet.
    static func byte(for scalar: UInt32) -> UInt8? {
        if scalar < 0x100 {
            let b = Int(scalar)
            return byteToScalar[b] == scalar ? UInt8(b) : nil
        }
        if scalar < 0x100 + 68 {
            return reverseHigh[Int(scalar - 0x100)]
        }
        return nil
    }

    private static let reverseHigh: [UInt8] = {
        var table = [UInt8](repeating: 0, count: 68)
        for b in 0..<256 where byteToScalar[b] >= 0x100 { table[Int(byteToScalar[b] - 0x100)] = UInt8(b) }
        return table
    }()

    /// Decodes a byte-level token text into the bytes it stands for. A code point outside
    /// the alphabet is rendered as llama.cpp does: `[UNK_BYTE_0x<hex of its UTF-8>` followed
    /// by the whole token text and `]`.
    static func decode(_ text: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(text.count)
        let string = String(decoding: text, as: UTF8.self)
        for scalar in string.unicodeScalars {
            if let b = byte(for: scalar.value) {
                out.append(b)
            } else {
                out += Array("[UNK_BYTE_0x".utf8)
                for u in String(scalar).utf8 {
                    let hex = String(u, radix: 16)
                    out += Array((hex.count == 1 ? "0" + hex : hex).utf8)
                }
                out += text
                out += Array("]".utf8)
            }
        }
        return out
    }
}
