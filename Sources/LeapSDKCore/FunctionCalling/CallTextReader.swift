import LeapJSON

/// Why the text of a function-call block could not be parsed: what was wrong and where.
///
/// `offset` is the UTF-8 byte offset in the block body (the text between the markers,
/// markers excluded) at which the problem was found.
public struct LeapFunctionCallParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was wrong, e.g. `unterminated string starting at byte 18`.
    public let message: String
    /// UTF-8 byte offset in the block body.
    public let offset: Int

    public init(message: String, offset: Int) {
        self.message = message
        self.offset = offset
    }

    public var description: String { "invalid function call at byte \(offset): \(message)" }
}

/// Reads the text of a call block: Pythonic calls (`name(key=value, ...)`) and literal
/// values in a dialect that is a superset of both Python literals and JSON.
///
/// Values: strings in single or double quotes (`StringLiteral`'s Python-literal dialect:
/// Python's escapes plus JSON's `\/`), integers,
/// floats (with exponent), a leading `-` or `+`, `True`/`true`, `False`/`false`,
/// `None`/`null`, `NaN`/`nan`, `Infinity`/`inf`, lists `[...]`, tuples `(...)` (read as
/// lists), dicts `{...}` with string keys. Trailing commas are accepted, as in Python.
/// Values come back as `JSONValue`, so dict keys keep their order.
struct CallTextReader {
    let bytes: [UInt8]
    let maxDepth: Int
    var pos = 0

    init(_ text: String, maxDepth: Int) {
        self.bytes = Array(text.utf8)
        self.maxDepth = maxDepth
    }

    // MARK: - Basics

    func fail(_ message: String, at offset: Int? = nil) -> LeapFunctionCallParseError {
        LeapFunctionCallParseError(message: message, offset: offset ?? pos)
    }

    var atEnd: Bool { pos >= bytes.count }
    var current: UInt8? { pos < bytes.count ? bytes[pos] : nil }

    mutating func skipWhitespace() {
        while pos < bytes.count {
            switch bytes[pos] {
            case 0x20, 0x09, 0x0A, 0x0D: pos += 1
            default: return
            }
        }
    }

    /// A readable rendering of the byte at `pos` for error messages.
    func describeCurrent() -> String {
        guard pos < bytes.count else { return "the end of the text" }
        // Decode the whole scalar at pos (bytes are valid UTF-8: they came from a String).
        var end = pos + 1
        while end < bytes.count, bytes[end] & 0xC0 == 0x80 { end += 1 }
        return "'" + String(decoding: bytes[pos..<end], as: UTF8.self) + "'"
    }

    static func isIdentifierStart(_ c: UInt8) -> Bool {
        (c >= 0x61 && c <= 0x7A) || (c >= 0x41 && c <= 0x5A) || c == 0x5F || c >= 0x80
    }

    static func isIdentifierContinue(_ c: UInt8) -> Bool {
        isIdentifierStart(c) || (c >= 0x30 && c <= 0x39)
    }

    static func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }

    /// Reads `[A-Za-z_][A-Za-z0-9_]*` (non-ASCII letters allowed).
    mutating func readIdentifier() -> String? {
        guard let c = current, Self.isIdentifierStart(c) else { return nil }
        let start = pos
        while let c = current, Self.isIdentifierContinue(c) { pos += 1 }
        return String(decoding: bytes[start..<pos], as: UTF8.self)
    }

    // MARK: - Values

    mutating func readValue(depth: Int) throws(LeapFunctionCallParseError) -> JSONValue {
        guard depth <= maxDepth else { throw fail("values nested deeper than \(maxDepth) levels") }
        guard let c = current else { throw fail("unexpected end of the text where a value was expected") }
        switch c {
        case UInt8(ascii: "\""), UInt8(ascii: "'"): return .string(try readString())
        case UInt8(ascii: "["): return .array(try readSequence(close: UInt8(ascii: "]"), what: "list", depth: depth))
        case UInt8(ascii: "("): return .array(try readSequence(close: UInt8(ascii: ")"), what: "tuple", depth: depth))
        case UInt8(ascii: "{"): return .object(try readDict(depth: depth))
        case UInt8(ascii: "-"), UInt8(ascii: "+"), UInt8(ascii: "."), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return try readNumber()
        default:
            if Self.isIdentifierStart(c) {
                let start = pos
                let word = readIdentifier()!
                switch word {
                case "True", "true": return .bool(true)
                case "False", "false": return .bool(false)
                case "None", "null": return .null
                case "NaN", "nan": return .double(.nan)
                case "Infinity", "inf": return .double(.infinity)
                default:
                    throw fail("unexpected name '\(word)' where a value was expected (strings need quotes)", at: start)
                }
            }
            throw fail("unexpected \(describeCurrent()) where a value was expected")
        }
    }

    /// A list `[...]` or tuple `(...)`; `pos` is at the opening bracket.
    mutating func readSequence(close: UInt8, what: String, depth: Int) throws(LeapFunctionCallParseError) -> [JSONValue] {
        let start = pos
        pos += 1
        var items: [JSONValue] = []
        skipWhitespace()
        if current == close {
            pos += 1
            return items
        }
        while true {
            skipWhitespace()
            guard !atEnd else { throw fail("unterminated \(what) starting at byte \(start)", at: start) }
            items.append(try readValue(depth: depth + 1))
            skipWhitespace()
            guard let c = current else { throw fail("unterminated \(what) starting at byte \(start)", at: start) }
            if c == UInt8(ascii: ",") {
                pos += 1
                skipWhitespace()
                if current == close {
                    pos += 1
                    return items
                }  // trailing comma
                continue
            }
            if c == close {
                pos += 1
                return items
            }
            throw fail("expected ',' or '\(Character(Unicode.Scalar(close)))' in \(what), found \(describeCurrent())")
        }
    }

    /// A dict `{...}` whose keys are strings; `pos` is at `{`. A repeated key keeps its
    /// first position and its last value, as Python does.
    mutating func readDict(depth: Int) throws(LeapFunctionCallParseError) -> JSONObject {
        let start = pos
        pos += 1
        var object = JSONObject()
        skipWhitespace()
        if current == UInt8(ascii: "}") {
            pos += 1
            return object
        }
        while true {
            skipWhitespace()
            guard let c = current else { throw fail("unterminated dict starting at byte \(start)", at: start) }
            guard c == UInt8(ascii: "\"") || c == UInt8(ascii: "'") else {
                throw fail("dict keys must be quoted strings, found \(describeCurrent())")
            }
            let key = try readString()
            skipWhitespace()
            guard current == UInt8(ascii: ":") else {
                if atEnd { throw fail("unterminated dict starting at byte \(start)", at: start) }
                throw fail("expected ':' after dict key \"\(key)\", found \(describeCurrent())")
            }
            pos += 1
            skipWhitespace()
            guard !atEnd else { throw fail("unterminated dict starting at byte \(start)", at: start) }
            object[key] = try readValue(depth: depth + 1)
            skipWhitespace()
            guard let next = current else { throw fail("unterminated dict starting at byte \(start)", at: start) }
            if next == UInt8(ascii: ",") {
                pos += 1
                skipWhitespace()
                if current == UInt8(ascii: "}") {
                    pos += 1
                    return object
                }  // trailing comma
                continue
            }
            if next == UInt8(ascii: "}") {
                pos += 1
                return object
            }
            throw fail("expected ',' or '}' in dict, found \(describeCurrent())")
        }
    }

    /// A quoted string; `pos` is at the opening quote. Escapes are decoded by LeapJSON's
    /// `StringLiteral` in its Python-literal dialect.
    mutating func readString() throws(LeapFunctionCallParseError) -> String {
        do {
            return try StringLiteral.read(bytes, at: &pos, dialect: .pythonLiteral)
        } catch {
            throw fail(error.message, at: error.offset)
        }
    }

    /// An integer or a float. An integer too large for `Int` becomes a `Double`.
    mutating func readNumber() throws(LeapFunctionCallParseError) -> JSONValue {
        let start = pos
        var negative = false
        if bytes[pos] == UInt8(ascii: "-") || bytes[pos] == UInt8(ascii: "+") {
            negative = bytes[pos] == UInt8(ascii: "-")
            pos += 1
            if let c = current, Self.isIdentifierStart(c) {
                let wordStart = pos
                let word = readIdentifier()!
                if word == "Infinity" || word == "inf" { return .double(negative ? -.infinity : .infinity) }
                throw fail("unexpected name '\(word)' after a sign", at: wordStart)
            }
        }
        var integerDigits = 0
        var fractionDigits = 0
        var isInteger = true
        while let c = current, Self.isDigit(c) {
            pos += 1
            integerDigits += 1
        }
        if current == UInt8(ascii: ".") {
            isInteger = false
            pos += 1
            while let c = current, Self.isDigit(c) {
                pos += 1
                fractionDigits += 1
            }
        }
        guard integerDigits + fractionDigits > 0 else { throw fail("invalid number", at: start) }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            isInteger = false
            pos += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { pos += 1 }
            guard let c = current, Self.isDigit(c) else { throw fail("invalid number: digits expected in the exponent", at: start) }
            while let c = current, Self.isDigit(c) { pos += 1 }
        }
        if let c = current, Self.isIdentifierContinue(c) || c == UInt8(ascii: ".") {
            throw fail("invalid number '\(String(decoding: bytes[start...pos], as: UTF8.self))'", at: start)
        }
        // Swift's parsers want digits on both sides of the point.
        var text = ""
        for (i, b) in bytes[start..<pos].enumerated() {
            if b == UInt8(ascii: "+") && i == 0 { continue }
            if b == UInt8(ascii: ".") {
                if integerDigits == 0 { text += "0" }
                text += "."
                if fractionDigits == 0 { text += "0" }
                continue
            }
            text.unicodeScalars.append(Unicode.Scalar(b))
        }
        if isInteger, let i = Int(text) { return .integer(i) }
        guard let d = Double(text) else { throw fail("invalid number", at: start) }
        return .double(d)
    }
}
