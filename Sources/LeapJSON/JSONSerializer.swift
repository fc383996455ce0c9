/// How `JSONValue.serialized(_:)` lays out a document.
public struct JSONFormat: Sendable {
    /// Between an array's or object's items: `","` compact, `", "` Python's default.
    public var itemSeparator: String
    /// Between a key and its value: `":"` compact, `": "` Python's default.
    public var keySeparator: String
    /// Spaces per nesting level; nil writes everything on one line.
    public var indent: Int?
    /// Escape every non-ASCII character as `\uXXXX` (Python's `ensure_ascii=True`).
    public var asciiOnly: Bool
    /// Escape `<`, `>`, `&` and `'` as `\u003c` etc., as jinja2's `tojson` filter does.
    public var htmlSafe: Bool

    public init(
        itemSeparator: String = ",", keySeparator: String = ":", indent: Int? = nil,
        asciiOnly: Bool = false, htmlSafe: Bool = false
    ) {
        self.itemSeparator = itemSeparator
        self.keySeparator = keySeparator
        self.indent = indent
        self.asciiOnly = asciiOnly
        self.htmlSafe = htmlSafe
    }

    /// `{"a":1,"b":[1,2]}`
    public static let compact = JSONFormat()
    /// `{"a": 1, "b": [1, 2]}`: Python's `json.dumps(x, ensure_ascii=False)`.
    public static let python = JSONFormat(itemSeparator: ", ", keySeparator: ": ")
}

extension JSONValue {
    /// The document as JSON text. Doubles are written as Python's `repr` writes floats
    /// (`1.0`, `1e-05`, `1e+16`); non-finite doubles as `NaN`/`Infinity`, as Python does.
    public func serialized(_ format: JSONFormat = .compact) -> String {
        var out = ""
        write(into: &out, format: format, level: 0)
        return out
    }

    private func write(into out: inout String, format: JSONFormat, level: Int) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .integer(let i): out += String(i)
        case .double(let d): out += JSONValue.pythonFloatRepr(d)
        case .string(let s): JSONValue.writeString(s, into: &out, format: format)
        case .array(let items):
            if items.isEmpty {
                out += "[]"
                return
            }
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += format.indent == nil ? format.itemSeparator : trimmedTrailing(format.itemSeparator) }
                newline(&out, format, level + 1)
                item.write(into: &out, format: format, level: level + 1)
            }
            newline(&out, format, level)
            out += "]"
        case .object(let object):
            if object.isEmpty {
                out += "{}"
                return
            }
            out += "{"
            for (i, pair) in object.pairs.enumerated() {
                if i > 0 { out += format.indent == nil ? format.itemSeparator : trimmedTrailing(format.itemSeparator) }
                newline(&out, format, level + 1)
                JSONValue.writeString(pair.key, into: &out, format: format)
                out += format.keySeparator
                pair.value.write(into: &out, format: format, level: level + 1)
            }
            newline(&out, format, level)
            out += "}"
        }
    }

    private func trimmedTrailing(_ s: String) -> String {
        var s = s
        while s.last == " " { s.removeLast() }
        return s
    }

    private func newline(_ out: inout String, _ format: JSONFormat, _ level: Int) {
        guard let indent = format.indent else { return }
        out += "\n" + String(repeating: " ", count: indent * level)
    }

    /// Writes `s` as a JSON string literal with the escapes Python's encoder uses.
    public static func writeString(_ s: String, into out: inout String, format: JSONFormat = .compact) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            case "<" where format.htmlSafe: out += "\\u003c"
            case ">" where format.htmlSafe: out += "\\u003e"
            case "&" where format.htmlSafe: out += "\\u0026"
            case "'" where format.htmlSafe: out += "\\u0027"
            default:
                if scalar.value < 0x20 || (format.asciiOnly && scalar.value > 0x7E) {
                    if scalar.value > 0xFFFF {
                        let v = scalar.value - 0x10000
                        out += hex4(0xD800 + (v >> 10)) + hex4(0xDC00 + (v & 0x3FF))
                    } else {
                        out += hex4(scalar.value)
                    }
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }

    private static func hex4(_ v: UInt32) -> String {
        let digits = String(v, radix: 16)
        return "\\u" + String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    /// Python's `repr(float)`: the shortest digits that round-trip, in positional notation
    /// when the decimal exponent is in -5..<16 and in scientific notation otherwise.
    public static func pythonFloatRepr(_ d: Double) -> String {
        if d.isNaN { return "NaN" }
        if d.isInfinite { return d < 0 ? "-Infinity" : "Infinity" }
        if d == 0 { return d.sign == .minus ? "-0.0" : "0.0" }
        // Swift's description also yields the shortest round-trip digits; re-layout them.
        let swift = "\(abs(d))"
        var digits = ""
        var exponent = 0
        if let eIndex = swift.firstIndex(where: { $0 == "e" || $0 == "E" }) {
            let mantissa = swift[..<eIndex]
            exponent = Int(swift[swift.index(after: eIndex)...]) ?? 0
            let parts = mantissa.split(separator: ".", omittingEmptySubsequences: false)
            digits = String(parts[0]) + (parts.count > 1 ? String(parts[1]) : "")
            exponent += parts[0].count - 1
        } else {
            let parts = swift.split(separator: ".", omittingEmptySubsequences: false)
            let intPart = String(parts[0])
            let fracPart = parts.count > 1 ? String(parts[1]) : ""
            digits = intPart + fracPart
            exponent = intPart.count - 1
        }
        // Normalize: strip leading zeros (adjusting the exponent) and trailing zeros.
        while digits.first == "0" && digits.count > 1 {
            digits.removeFirst()
            exponent -= 1
        }
        while digits.last == "0" && digits.count > 1 { digits.removeLast() }
        let sign = d < 0 ? "-" : ""
        if exponent >= 16 || exponent < -4 {
            let head = String(digits.first!)
            let tail = String(digits.dropFirst())
            let mant = tail.isEmpty ? head : head + "." + tail
            let expSign = exponent < 0 ? "-" : "+"
            let expDigits = String(abs(exponent))
            return sign + mant + "e" + expSign + (expDigits.count < 2 ? "0" + expDigits : expDigits)
        }
        if exponent < 0 {
            return sign + "0." + String(repeating: "0", count: -exponent - 1) + digits
        }
        if digits.count <= exponent + 1 {
            return sign + digits + String(repeating: "0", count: exponent + 1 - digits.count) + ".0"
        }
        let idx = digits.index(digits.startIndex, offsetBy: exponent + 1)
        return sign + String(digits[..<idx]) + "." + String(digits[idx...])
    }
}
