/// Reads quoted string literals: JSON's (RFC 8259), and the superset of JSON and Python
/// literals that models write in function calls. The one string-escape decoder of the
/// package: `JSONValue.parse` and the function-call readers of `LeapSDKCore` both use it.
public enum StringLiteral {
    /// Which literals are accepted.
    public enum Dialect: Sendable {
        /// JSON: double quotes; escapes `\" \\ \/ \b \f \n \r \t \uXXXX` (surrogate pairs
        /// combined); raw control characters and any other escape are errors.
        case json
        /// JSON plus Python: single or double quotes; also `\' \v \a \0 \xXX \UXXXXXXXX` and
        /// backslash-newline (a line continuation); an unknown escape such as `\d` stays as
        /// written, as in Python; raw control characters are kept.
        case pythonLiteral
    }

    /// Why a literal could not be read, and the byte offset where the problem is.
    public struct Failure: Error, Sendable, Equatable {
        public let message: String
        public let offset: Int

        public init(message: String, offset: Int) {
            self.message = message
            self.offset = offset
        }
    }

    /// Reads the literal whose opening quote is at `bytes[position]`, leaving `position`
    /// just after the closing quote.
    ///
    /// A `\u` escape naming a lone surrogate (which a Swift `String` cannot hold) becomes
    /// U+FFFD; an escape beyond U+10FFFF is an error.
    public static func read(_ bytes: [UInt8], at position: inout Int, dialect: Dialect) throws(Failure) -> String {
        let start = position
        let quote = bytes[position]
        position += 1
        var out: [UInt8] = []
        while true {
            guard position < bytes.count else {
                throw Failure(message: "unterminated string starting at byte \(start)", offset: start)
            }
            let c = bytes[position]
            if c == quote {
                position += 1
                return String(decoding: out, as: UTF8.self)
            }
            if c != UInt8(ascii: "\\") {
                if c < 0x20, dialect == .json { throw Failure(message: "control character in string", offset: position) }
                out.append(c)
                position += 1
                continue
            }
            let escapeStart = position
            position += 1
            guard position < bytes.count else {
                throw Failure(message: "unterminated string starting at byte \(start)", offset: start)
            }
            let e = bytes[position]
            position += 1
            if let simple = jsonEscape(e) {
                out.append(simple)
                continue
            }
            if e == UInt8(ascii: "u") {
                try appendScalar(readUnicodeEscape(bytes, at: &position, escapeStart: escapeStart), to: &out, escapeStart: escapeStart)
                continue
            }
            guard dialect == .pythonLiteral else {
                throw Failure(message: "invalid escape '\\\(Character(Unicode.Scalar(e)))'", offset: escapeStart)
            }
            switch e {
            case UInt8(ascii: "'"): out.append(0x27)
            case UInt8(ascii: "v"): out.append(0x0B)
            case UInt8(ascii: "a"): out.append(0x07)
            case UInt8(ascii: "0"): out.append(0x00)
            case 0x0A: break  // backslash-newline: line continuation
            case UInt8(ascii: "x"), UInt8(ascii: "U"):
                let digits = e == UInt8(ascii: "x") ? 2 : 8
                try appendScalar(
                    readHex(bytes, at: &position, digits: digits, escapeStart: escapeStart), to: &out, escapeStart: escapeStart)
            default:
                // Python keeps an unknown escape as written.
                out.append(UInt8(ascii: "\\"))
                out.append(e)
            }
        }
    }

    /// The byte of a one-character JSON escape (`\n` gives 0x0A), nil for others.
    private static func jsonEscape(_ e: UInt8) -> UInt8? {
        switch e {
        case UInt8(ascii: "\""): return 0x22
        case UInt8(ascii: "\\"): return 0x5C
        case UInt8(ascii: "/"): return 0x2F
        case UInt8(ascii: "b"): return 0x08
        case UInt8(ascii: "f"): return 0x0C
        case UInt8(ascii: "n"): return 0x0A
        case UInt8(ascii: "r"): return 0x0D
        case UInt8(ascii: "t"): return 0x09
        default: return nil
        }
    }

    /// `XXXX` after `\u`, combined with a following `\uXXXX` low surrogate into one scalar.
    private static func readUnicodeEscape(_ bytes: [UInt8], at position: inout Int, escapeStart: Int) throws(Failure) -> UInt32 {
        let high = try readHex(bytes, at: &position, digits: 4, escapeStart: escapeStart)
        guard (0xD800..<0xDC00).contains(high), position + 6 <= bytes.count,
            bytes[position] == UInt8(ascii: "\\"), bytes[position + 1] == UInt8(ascii: "u")
        else { return high }
        var next = position + 2
        let low = try readHex(bytes, at: &next, digits: 4, escapeStart: position)
        guard (0xDC00..<0xE000).contains(low) else { return high }
        position = next
        return 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
    }

    private static func appendScalar(_ value: UInt32, to out: inout [UInt8], escapeStart: Int) throws(Failure) {
        let scalar: Unicode.Scalar
        if let s = Unicode.Scalar(value) {
            scalar = s
        } else if (0xD800..<0xE000).contains(value) {
            scalar = "\u{FFFD}"  // a lone surrogate
        } else {
            throw Failure(message: "escape does not name a Unicode scalar value", offset: escapeStart)
        }
        out.append(contentsOf: Array(String(Character(scalar)).utf8))
    }

    private static func readHex(_ bytes: [UInt8], at position: inout Int, digits: Int, escapeStart: Int) throws(Failure) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<digits {
            guard position < bytes.count else {
                throw Failure(message: "truncated escape (\(digits) hex digits expected)", offset: escapeStart)
            }
            let c = bytes[position]
            let digit: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(c - UInt8(ascii: "A") + 10)
            default: throw Failure(message: "invalid hex digit in escape (\(digits) hex digits expected)", offset: escapeStart)
            }
            value = value << 4 | digit
            position += 1
        }
        return value
    }
}
