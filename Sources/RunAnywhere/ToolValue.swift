import LeapJSON

/// A tagged union for tool arguments and tool results: the JSON value kinds.
///
/// Numbers are `Double`s (JSON has one number type); `intValue` reads a number that is a
/// whole number. Literals work too: `["city": "Paris", "temperature": 21.5, "sunny": true]`.
public indirect enum ToolValue: Sendable, Equatable, Hashable {
    case string(String)
    case number(Double)
    case bool(Bool)
    case array([ToolValue])
    case object([String: ToolValue])
    case null

    /// The string, if this is a `.string`.
    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// The number, if this is a `.number`.
    public var numberValue: Double? {
        if case .number(let n) = self { return n }
        return nil
    }

    /// The number as an `Int`, if this is a `.number` holding a whole number in `Int`'s range.
    public var intValue: Int? {
        guard case .number(let n) = self else { return nil }
        return Int(exactly: n)
    }

    /// The boolean, if this is a `.bool`.
    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    /// The elements, if this is an `.array`.
    public var arrayValue: [ToolValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    /// The members, if this is an `.object`.
    public var objectValue: [String: ToolValue]? {
        if case .object(let o) = self { return o }
        return nil
    }

    /// True for `.null`.
    public var isNull: Bool { self == .null }

    /// The value as JSON text (object keys sorted), e.g. `{"city":"Paris","temp":21.5}`.
    public var jsonString: String { jsonValue.serialized(.compact) }

    /// The LeapJSON form (object keys sorted; whole numbers in `Int`'s range become integers).
    public var jsonValue: JSONValue {
        switch self {
        case .string(let s): return .string(s)
        case .number(let n):
            if n.rounded() == n, abs(n) < 9.0e15, let i = Int(exactly: n) { return .integer(i) }
            return n.isFinite ? .double(n) : .null
        case .bool(let b): return .bool(b)
        case .array(let items): return .array(items.map(\.jsonValue))
        case .object(let members): return .object(ToolValue.jsonObject(members))
        case .null: return .null
        }
    }

    /// The value of a JSON value (integers become numbers).
    public init(json: JSONValue) {
        switch json {
        case .null: self = .null
        case .bool(let b): self = .bool(b)
        case .integer(let i): self = .number(Double(i))
        case .double(let d): self = .number(d)
        case .string(let s): self = .string(s)
        case .array(let items): self = .array(items.map(ToolValue.init(json:)))
        case .object(let object): self = .object(ToolValue.dictionary(object))
        }
    }

    /// A dictionary of tool values as a JSON object, keys sorted.
    public static func jsonObject(_ members: [String: ToolValue]) -> JSONObject {
        var object = JSONObject()
        for key in members.keys.sorted() { object[key] = members[key]!.jsonValue }
        return object
    }

    /// A JSON object as a dictionary of tool values.
    public static func dictionary(_ object: JSONObject) -> [String: ToolValue] {
        var out: [String: ToolValue] = [:]
        for (key, value) in object { out[key] = ToolValue(json: value) }
        return out
    }
}

extension ToolValue: ExpressibleByStringLiteral, ExpressibleByFloatLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: ToolValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, ToolValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

extension ToolValue: CustomStringConvertible {
    /// The JSON text of the value.
    public var description: String { jsonString }
}
