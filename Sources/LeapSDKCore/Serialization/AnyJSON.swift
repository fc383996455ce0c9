import Foundation
import LeapJSON

/// Conversions between LeapJSON's `JSONValue` and the `Any`-typed dictionaries of the
/// LEAP API (`exportToJSON`, `init(from json:)`, function-call arguments).
///
/// To `Any`: objects become `[String: Any]`, arrays `[Any]`, `null` becomes `NSNull()`
/// (what `JSONSerialization` produces). From `Any`: see `JSONValue(functionArgument:)`.
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

    /// The JSON value of an `Any` (the same conversion as function-call arguments, see
    /// `JSONValue(functionArgument:)`), with a serialization error naming the bad value.
    static func fromAny(_ value: Any?) throws(LeapError) -> JSONValue {
        do {
            return try JSONValue(functionArgument: value)
        } catch {
            throw .serializationFailure(error.description)
        }
    }
}
