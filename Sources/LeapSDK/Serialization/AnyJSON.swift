import Foundation
import LeapJSON

/// Conversions between LeapJSON's `JSONValue` and the `Any`-typed dictionaries of the
/// LEAP API (`exportToJSON`, `init(from json:)`, function-call arguments).
///
/// To `Any`: objects become `[String: Any]`, arrays `[Any]`, `null` becomes `NSNull()`
/// inside containers. From `Any`: Swift and Foundation values (`String`, `Bool`, integer
/// and floating-point types, `NSNumber`, `NSNull`, `Optional.none`, arrays and
/// dictionaries of those, nested) are accepted; anything else is a serialization error.
enum AnyJSON {
    /// The `Any` form of a JSON value (`NSNull()` for null).
    static func toAny(_ value: JSONValue) -> Any {
        switch value {
        case .null: return NSNull()
        case .bool(let b): return b
        case .integer(let i): return i
        case .double(let d): return d
        case .string(let s): return s
        case .array(let a): return a.map(toAny)
        case .object(let o):
            var d: [String: Any] = [:]
            for (k, v) in o { d[k] = toAny(v) }
            return d
        }
    }

    /// The JSON value of an `Any` (see the type's documentation for what is accepted).
    static func fromAny(_ value: Any?, path: String = "$", depth: Int = 0) throws(LeapError) -> JSONValue {
        guard depth < 256 else { throw .serializationFailure("\(path): nesting deeper than 256 levels") }
        guard let value else { return .null }
        // A value stored in `[String: Any?]` arrives as `Optional<Any>` boxed in `Any`: unwrap.
        let mirror = Mirror(reflecting: value)
        if mirror.displayStyle == .optional {
            guard let inner = mirror.children.first?.value else { return .null }
            return try fromAny(inner, path: path, depth: depth + 1)
        }
        return try fromAnyUnwrapped(value, path: path, depth: depth)
    }

    private static func fromAnyUnwrapped(_ value: Any, path: String, depth: Int) throws(LeapError) -> JSONValue {
        switch value {
        case is NSNull: return .null
        case let v as JSONValue: return v
        case let s as String: return .string(s)
        case let s as Substring: return .string(String(s))
        case let b as Bool: return .bool(b)
        case let i as Int: return .integer(i)
        case let i as Int8: return .integer(Int(i))
        case let i as Int16: return .integer(Int(i))
        case let i as Int32: return .integer(Int(i))
        case let i as Int64: return .integer(Int(i))
        case let i as UInt8: return .integer(Int(i))
        case let i as UInt16: return .integer(Int(i))
        case let i as UInt32: return .integer(Int(i))
        case let i as UInt:
            guard i <= UInt(Int.max) else { return .double(Double(i)) }
            return .integer(Int(i))
        case let i as UInt64:
            guard i <= UInt64(Int.max) else { return .double(Double(i)) }
            return .integer(Int(i))
        case let d as Double: return try finite(d, path)
        case let f as Float: return try finite(Double(f), path)
        case let n as NSNumber:
            // Foundation numbers that are not bridged to a Swift type above.
            let d = n.doubleValue
            if d == d.rounded(), abs(d) < 9.0e15 { return .integer(Int(d)) }
            return try finite(d, path)
        case let a as [Any?]:
            var out: [JSONValue] = []
            out.reserveCapacity(a.count)
            for (i, e) in a.enumerated() { out.append(try fromAny(e, path: "\(path)[\(i)]", depth: depth + 1)) }
            return .array(out)
        case let a as [Any]:
            var out: [JSONValue] = []
            out.reserveCapacity(a.count)
            for (i, e) in a.enumerated() { out.append(try fromAny(e, path: "\(path)[\(i)]", depth: depth + 1)) }
            return .array(out)
        case let d as [String: Any?]:
            var o = JSONObject()
            for k in d.keys.sorted() { o[k] = try fromAny(d[k]!, path: "\(path).\(k)", depth: depth + 1) }
            return .object(o)
        case let d as [String: Any]:
            var o = JSONObject()
            for k in d.keys.sorted() { o[k] = try fromAny(d[k]!, path: "\(path).\(k)", depth: depth + 1) }
            return .object(o)
        default:
            throw .serializationFailure("\(path): a value of type \(type(of: value)) cannot be represented as JSON")
        }
    }

    private static func finite(_ d: Double, _ path: String) throws(LeapError) -> JSONValue {
        guard d.isFinite else { throw .serializationFailure("\(path): \(d) is not a JSON number") }
        return .double(d)
    }
}
