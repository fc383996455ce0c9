/// A JSON document that keeps the order of object keys, as Python's `json` module and
/// jinja2's `tojson` do. Chat templates, JSON Schemas (property order is significant) and
/// the OpenAI-style conversation export all need that order, which Foundation's
/// `JSONSerialization` loses.
///
/// Integers that fit in `Int` stay integers (`1` prints as `1`, not `1.0`); any other
/// number is a `Double`.
public enum JSONValue: Sendable, Equatable, Hashable {
    case null
    case bool(Bool)
    case integer(Int)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// The value at `key` when this is an object, else nil.
    public subscript(key: String) -> JSONValue? {
        if case .object(let object) = self { return object[key] }
        return nil
    }

    /// The object when this is one.
    public var objectValue: JSONObject? {
        if case .object(let o) = self { return o }
        return nil
    }
    /// The elements when this is an array.
    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }
    /// The text when this is a string.
    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }
    /// The truth value when this is a boolean.
    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }
    /// The number as a Double when this is an integer or a double.
    public var doubleValue: Double? {
        switch self {
        case .integer(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }
    /// The number when this is an integer, or a double with an exact integer value.
    public var intValue: Int? {
        switch self {
        case .integer(let i): return i
        case .double(let d) where d.rounded() == d && abs(d) < 9.2e18: return Int(d)
        default: return nil
        }
    }
    /// True for `.null`.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }
}

/// A JSON object: key/value pairs in document order with hashed lookup. Setting an
/// existing key replaces its value in place (Python dict semantics).
public struct JSONObject: Sendable, Equatable, Hashable, Sequence {
    public private(set) var keys: [String] = []
    private var storage: [String: JSONValue] = [:]

    public init() {}

    public init(_ pairs: [(String, JSONValue)]) {
        for (k, v) in pairs { self[k] = v }
    }

    public var count: Int { keys.count }
    public var isEmpty: Bool { keys.isEmpty }

    public subscript(key: String) -> JSONValue? {
        get { storage[key] }
        set {
            if let newValue {
                if storage.updateValue(newValue, forKey: key) == nil { keys.append(key) }
            } else if storage.removeValue(forKey: key) != nil {
                keys.removeAll { $0 == key }
            }
        }
    }

    /// The pairs in document order.
    public var pairs: [(key: String, value: JSONValue)] { keys.map { ($0, storage[$0]!) } }

    public func makeIterator() -> AnyIterator<(key: String, value: JSONValue)> {
        var index = 0
        return AnyIterator {
            guard index < keys.count else { return nil }
            defer { index += 1 }
            return (keys[index], storage[keys[index]]!)
        }
    }

    public static func == (a: JSONObject, b: JSONObject) -> Bool { a.keys == b.keys && a.storage == b.storage }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(keys)
        for k in keys { hasher.combine(storage[k]) }
    }
}

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(JSONObject(elements)) }
}
