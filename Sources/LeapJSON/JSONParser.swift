/// Why a JSON text could not be parsed: what was wrong and at which byte offset.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public let message: String
    public let offset: Int
    public var description: String { "invalid JSON at byte \(offset): \(message)" }
}

extension JSONValue {
    /// Parses a complete JSON text (RFC 8259). Object keys keep their order; a repeated key
    /// keeps its first position and its last value, as Python's `json.loads` does.
    /// Nesting deeper than `maxDepth` is rejected rather than risking the stack.
    public static func parse(_ text: String, maxDepth: Int = 512) throws(JSONParseError) -> JSONValue {
        var parser = JSONParser(bytes: Array(text.utf8), maxDepth: maxDepth)
        return try parser.parseDocument()
    }

    /// Parses UTF-8 bytes holding a complete JSON text.
    public static func parse(bytes: [UInt8], maxDepth: Int = 512) throws(JSONParseError) -> JSONValue {
        var parser = JSONParser(bytes: bytes, maxDepth: maxDepth)
        return try parser.parseDocument()
    }
}

struct JSONParser {
    let bytes: [UInt8]
    let maxDepth: Int
    var pos = 0

    init(bytes: [UInt8], maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        let value = try parseValue(depth: 0)
        skipWhitespace()
        if pos != bytes.count { throw fail("unexpected trailing characters") }
        return value
    }

    func fail(_ message: String) -> JSONParseError { JSONParseError(message: message, offset: pos) }

    mutating func skipWhitespace() {
        while pos < bytes.count, bytes[pos] == 0x20 || bytes[pos] == 0x0A || bytes[pos] == 0x0D || bytes[pos] == 0x09 {
            pos += 1
        }
    }

    mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth <= maxDepth else { throw fail("nesting deeper than \(maxDepth)") }
        guard pos < bytes.count else { throw fail("unexpected end of input") }
        switch bytes[pos] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth)
        case UInt8(ascii: "["): return try parseArray(depth: depth)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw fail("unexpected character '\(Character(Unicode.Scalar(bytes[pos])))'")
        }
    }

    mutating func expectLiteral(_ word: StaticString) throws(JSONParseError) {
        let count = word.utf8CodeUnitCount
        guard pos + count <= bytes.count else { throw fail("unexpected end of input") }
        let ok = word.withUTF8Buffer { buf in (0..<count).allSatisfy { bytes[pos + $0] == buf[$0] } }
        guard ok else { throw fail("invalid literal") }
        pos += count
    }

    mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONValue {
        pos += 1
        var object = JSONObject()
        skipWhitespace()
        if pos < bytes.count, bytes[pos] == UInt8(ascii: "}") {
            pos += 1
            return .object(object)
        }
        while true {
            skipWhitespace()
            guard pos < bytes.count, bytes[pos] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
            let key = try parseString()
            skipWhitespace()
            guard pos < bytes.count, bytes[pos] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            pos += 1
            skipWhitespace()
            object[key] = try parseValue(depth: depth + 1)
            skipWhitespace()
            guard pos < bytes.count else { throw fail("unexpected end of input in object") }
            if bytes[pos] == UInt8(ascii: ",") {
                pos += 1
                continue
            }
            if bytes[pos] == UInt8(ascii: "}") {
                pos += 1
                return .object(object)
            }
            throw fail("expected ',' or '}'")
        }
    }

    mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
        pos += 1
        var array: [JSONValue] = []
        skipWhitespace()
        if pos < bytes.count, bytes[pos] == UInt8(ascii: "]") {
            pos += 1
            return .array(array)
        }
        while true {
            skipWhitespace()
            array.append(try parseValue(depth: depth + 1))
            skipWhitespace()
            guard pos < bytes.count else { throw fail("unexpected end of input in array") }
            if bytes[pos] == UInt8(ascii: ",") {
                pos += 1
                continue
            }
            if bytes[pos] == UInt8(ascii: "]") {
                pos += 1
                return .array(array)
            }
            throw fail("expected ',' or ']'")
        }
    }

    mutating func parseString() throws(JSONParseError) -> String {
        do {
            return try StringLiteral.read(bytes, at: &pos, dialect: .json)
        } catch {
            throw JSONParseError(message: error.message, offset: error.offset)
        }
    }

    mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = pos
        var isInteger = true
        if bytes[pos] == UInt8(ascii: "-") { pos += 1 }
        guard pos < bytes.count, isDigit(bytes[pos]) else { throw fail("invalid number") }
        if bytes[pos] == UInt8(ascii: "0") {
            pos += 1
        } else {
            while pos < bytes.count, isDigit(bytes[pos]) { pos += 1 }
        }
        if pos < bytes.count, bytes[pos] == UInt8(ascii: ".") {
            isInteger = false
            pos += 1
            guard pos < bytes.count, isDigit(bytes[pos]) else { throw fail("invalid number: digit expected after '.'") }
            while pos < bytes.count, isDigit(bytes[pos]) { pos += 1 }
        }
        if pos < bytes.count, bytes[pos] == UInt8(ascii: "e") || bytes[pos] == UInt8(ascii: "E") {
            isInteger = false
            pos += 1
            if pos < bytes.count, bytes[pos] == UInt8(ascii: "+") || bytes[pos] == UInt8(ascii: "-") { pos += 1 }
            guard pos < bytes.count, isDigit(bytes[pos]) else { throw fail("invalid number: digit expected in exponent") }
            while pos < bytes.count, isDigit(bytes[pos]) { pos += 1 }
        }
        let text = String(decoding: bytes[start..<pos], as: UTF8.self)
        if isInteger, let i = Int(text) { return .integer(i) }
        guard let d = Double(text) else { throw fail("invalid number") }
        return .double(d)
    }

    func isDigit(_ c: UInt8) -> Bool { c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") }
}
