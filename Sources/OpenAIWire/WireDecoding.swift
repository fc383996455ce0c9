import LeapJSON

/// A request that does not follow the OpenAI wire format: which field (`param`, a path
/// such as `messages[2].content`) and what was expected.
public struct WireError: Error, Sendable, Equatable, CustomStringConvertible {
    public let message: String
    /// The offending field, when there is one.
    public let param: String?

    public init(_ message: String, param: String? = nil) {
        self.message = message
        self.param = param
    }

    public var description: String { message }
}

/// What a JSON value is, for error messages ("a string", "an array", ...).
func kindName(_ value: JSONValue) -> String {
    switch value {
    case .null: return "null"
    case .bool: return "a boolean"
    case .integer: return "an integer"
    case .double: return "a number"
    case .string: return "a string"
    case .array: return "an array"
    case .object: return "an object"
    }
}

/// Reads typed fields of one JSON object, naming the field's full path in every error.
/// A field that is absent or `null` reads as nil (OpenAI's clients send `null` for unset
/// optional fields).
struct FieldReader {
    let object: JSONObject
    /// The path of this object ("" for the request itself).
    let path: String

    init(_ value: JSONValue, path: String) throws(WireError) {
        guard case .object(let o) = value else {
            throw WireError(
                "\(path.isEmpty ? "the request body" : "'\(path)'") must be a JSON object, not \(kindName(value))",
                param: path.isEmpty ? nil : path)
        }
        object = o
        self.path = path
    }

    func field(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    func error(_ key: String, _ expected: String, got value: JSONValue) -> WireError {
        WireError("'\(field(key))' must be \(expected), not \(kindName(value))", param: field(key))
    }

    /// The raw value (nil when absent or null).
    func value(_ key: String) -> JSONValue? {
        guard let v = object[key], !v.isNull else { return nil }
        return v
    }

    func required(_ key: String) throws(WireError) -> JSONValue {
        guard let v = value(key) else { throw WireError("'\(field(key))' is required", param: field(key)) }
        return v
    }

    func string(_ key: String) throws(WireError) -> String? {
        guard let v = value(key) else { return nil }
        guard case .string(let s) = v else { throw error(key, "a string", got: v) }
        return s
    }

    func bool(_ key: String) throws(WireError) -> Bool? {
        guard let v = value(key) else { return nil }
        guard case .bool(let b) = v else { throw error(key, "a boolean", got: v) }
        return b
    }

    /// A number within `range` (inclusive).
    func number(_ key: String, in range: ClosedRange<Double>) throws(WireError) -> Double? {
        guard let v = value(key) else { return nil }
        guard let d = v.doubleValue, d.isFinite else { throw error(key, "a number", got: v) }
        guard range.contains(d) else {
            throw WireError(
                "'\(field(key))' must be between \(format(range.lowerBound)) and \(format(range.upperBound)), not \(format(d))",
                param: field(key))
        }
        return d
    }

    /// An integer within `range` (inclusive); a number with a fraction is rejected.
    func integer(_ key: String, in range: ClosedRange<Int>) throws(WireError) -> Int? {
        guard let v = value(key) else { return nil }
        guard let i = v.intValue else { throw error(key, "an integer", got: v) }
        guard range.contains(i) else {
            let upper = range.upperBound == Int.max ? "" : " and at most \(range.upperBound)"
            throw WireError("'\(field(key))' must be at least \(range.lowerBound)\(upper), not \(i)", param: field(key))
        }
        return i
    }

    func array(_ key: String) throws(WireError) -> [JSONValue]? {
        guard let v = value(key) else { return nil }
        guard case .array(let a) = v else { throw error(key, "an array", got: v) }
        return a
    }

    func objectValue(_ key: String) throws(WireError) -> JSONObject? {
        guard let v = value(key) else { return nil }
        guard case .object(let o) = v else { throw error(key, "an object", got: v) }
        return o
    }

    /// A nested object's reader.
    func reader(_ key: String) throws(WireError) -> FieldReader? {
        guard let v = value(key) else { return nil }
        return try FieldReader(v, path: field(key))
    }

    /// A string that must be one of `allowed`.
    func choice(_ key: String, _ allowed: [String]) throws(WireError) -> String? {
        guard let s = try string(key) else { return nil }
        guard allowed.contains(s) else {
            throw WireError(
                "'\(field(key))' must be one of \(allowed.map { "'\($0)'" }.joined(separator: ", ")), not '\(s)'", param: field(key))
        }
        return s
    }

    private func format(_ d: Double) -> String {
        d == d.rounded() && abs(d) < 1e15 ? String(Int(d)) : String(d)
    }
}

extension JSONValue {
    /// Parses a request body, turning a syntax error into a `WireError`.
    public static func parseRequestBody(_ bytes: [UInt8]) throws(WireError) -> JSONValue {
        guard !bytes.isEmpty else { throw WireError("the request body is empty; send a JSON object") }
        do {
            return try JSONValue.parse(bytes: bytes, maxDepth: 128)
        } catch {
            throw WireError("the request body is not valid JSON: \(error.description)")
        }
    }
}

/// Why base64 text could not be decoded.
struct Base64Error: Error, Sendable {
    let message: String
}

/// Standard base64 (RFC 4648's alphabet) as media parts carry it: `=` padding optional,
/// ASCII whitespace (line breaks) ignored, anything else refused with its offset.
enum Base64 {
    /// The value of each byte of the alphabet; -1 outside it.
    private static let values: [Int8] = {
        var table = [Int8](repeating: -1, count: 256)
        for (i, c) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8.enumerated() { table[Int(c)] = Int8(i) }
        return table
    }()

    static func decode<S: StringProtocol>(_ text: S) -> Result<[UInt8], Base64Error> {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count / 4 * 3 + 3)
        var accumulator: UInt32 = 0, bits = 0, digits = 0, padding = 0
        for (offset, c) in text.utf8.enumerated() {
            switch c {
            case 0x20, 0x09, 0x0A, 0x0D: continue
            case UInt8(ascii: "="):
                padding += 1
                guard padding <= 2 else { return .failure(Base64Error(message: "more than two '=' at offset \(offset)")) }
                continue
            default: break
            }
            let v = values[Int(c)]
            guard v >= 0 else {
                let shown = c >= 0x21 && c < 0x7F ? "'\(Character(Unicode.Scalar(c)))'" : "byte 0x\(String(c, radix: 16))"
                return .failure(Base64Error(message: "\(shown) at offset \(offset) is not a base64 character"))
            }
            guard padding == 0 else { return .failure(Base64Error(message: "data after '=' padding at offset \(offset)")) }
            accumulator = accumulator << 6 | UInt32(v)
            bits += 6
            digits += 1
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        guard digits % 4 != 1 else {
            return .failure(
                Base64Error(
                    message:
                        "it ends with a lone character (\(digits) base64 characters; a valid length is not 1 more than a multiple of 4)"))
        }
        if padding > 0, (digits + padding) % 4 != 0 {
            return .failure(Base64Error(message: "the '=' padding does not complete a group of 4 characters"))
        }
        return .success(out)
    }
}

extension String {
    /// The string without leading and trailing spaces and tabs.
    var trimmingSpaces: String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        return String(drop(while: isSpace).reversed().drop(while: isSpace).reversed())
    }
}
