import Foundation
import LeapJSON

/// A function-call argument value that has no JSON form.
public struct FunctionArgumentConversionError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Where in the arguments the value was (e.g. `arguments.cities[2]`).
    public let path: String
    /// The Swift type of the value.
    public let typeName: String

    public init(path: String, typeName: String) {
        self.path = path
        self.typeName = typeName
    }

    public var description: String {
        "the function argument at \(path) has type \(typeName), which has no JSON form; "
            + "use String, Int, Double, Bool, nil, [Any?] or [String: Any?]"
    }
}

extension JSONValue {
    /// The JSON form of a function-call argument value.
    ///
    /// Accepts `nil`, `String`, `Bool`, any integer type, any floating-point type,
    /// `NSNumber`, `NSNull`, arrays and string-keyed dictionaries of these (with optional or
    /// non-optional elements), and `JSONValue`/`JSONObject` themselves. Dictionary keys are
    /// sorted, because a Swift dictionary has no order.
    public init(functionArgument value: Any?) throws(FunctionArgumentConversionError) {
        self = try JSONValue.convert(value, path: "arguments")
    }

    private static func convert(_ value: Any?, path: String) throws(FunctionArgumentConversionError) -> JSONValue {
        guard let value else { return .null }
        // A nested optional (`Any?` stored inside `Any`) unwraps to its payload or nil.
        if let optional = value as? OptionalArgument {
            guard let inner = optional.unwrappedArgument else { return .null }
            return try convert(inner, path: path)
        }
        switch value {
        case is NSNull: return .null
        case let v as JSONValue: return v
        case let v as JSONObject: return .object(v)
        case let v as String: return .string(v)
        case let v as Substring: return .string(String(v))
        case let v as Character: return .string(String(v))
        default: break
        }
        if type(of: value) == Bool.self, let b = value as? Bool { return .bool(b) }
        if let i = value as? any BinaryInteger {
            guard let exact = Int(exactly: i) else { return .double(Double(i)) }
            return .integer(exact)
        }
        if let d = value as? any BinaryFloatingPoint { return .double(Double(d)) }
        if let n = value as? NSNumber {
            let code = String(cString: n.objCType)
            if code == "c" || code == "B" { return .bool(n.boolValue) }
            if ["f", "d"].contains(code) { return .double(n.doubleValue) }
            return .integer(n.intValue)
        }
        if let array = value as? [Any?] {
            var out: [JSONValue] = []
            out.reserveCapacity(array.count)
            for (i, element) in array.enumerated() { out.append(try convert(element, path: "\(path)[\(i)]")) }
            return .array(out)
        }
        if let dictionary = value as? [String: Any?] {
            var object = JSONObject()
            for key in dictionary.keys.sorted() {
                object[key] = try convert(dictionary[key]!, path: "\(path).\(key)")
            }
            return .object(object)
        }
        throw FunctionArgumentConversionError(path: path, typeName: String(describing: type(of: value)))
    }

    /// The Swift form of this value as a function-call argument, as `JSONSerialization`
    /// would give it: `NSNull()` for null, then `Bool`, `Int`, `Double`, `String`, `[Any]`,
    /// `[String: Any]`.
    public var functionArgumentValue: Any { AnyJSON.toAny(self) }
}

/// Lets the converter see through `Optional` values boxed in `Any`.
private protocol OptionalArgument {
    var unwrappedArgument: Any? { get }
}

extension Optional: OptionalArgument {
    fileprivate var unwrappedArgument: Any? {
        switch self {
        case .none: return nil
        case .some(let wrapped): return wrapped
        }
    }
}

extension JSONObject {
    /// The object as a function call's `arguments` (null members become `NSNull()`).
    public var functionArguments: [String: Any] {
        var out: [String: Any] = [:]
        for (key, value) in self { out[key] = value.functionArgumentValue }
        return out
    }
}

extension LeapFunctionCall {
    /// A call whose arguments come from a JSON object (null members become `NSNull()`).
    public init(name: String, argumentsJSON: JSONObject) {
        self.init(name: name, arguments: argumentsJSON.functionArguments)
    }

    /// The arguments as a JSON object, keys sorted (a Swift dictionary has no order).
    /// Throws when an argument has a type with no JSON form; see `JSONValue(functionArgument:)`.
    public func argumentsJSONObject() throws(FunctionArgumentConversionError) -> JSONObject {
        var object = JSONObject()
        for key in arguments.keys.sorted() {
            object[key] = try JSONValue.convertArgument(arguments[key]!, key: key)
        }
        return object
    }

    /// The arguments as a JSON object, keys sorted. A value with no JSON form (which
    /// parsed calls never contain) is written as its `String(describing:)` text; use
    /// `argumentsJSONObject()` to get an error instead.
    public var argumentsJSON: JSONObject {
        var object = JSONObject()
        for key in arguments.keys.sorted() {
            let value = arguments[key]!
            object[key] = (try? JSONValue.convertArgument(value, key: key)) ?? .string(String(describing: value))
        }
        return object
    }

    /// The arguments as JSON text (keys sorted), e.g. `{"city":"NYC"}`.
    public func argumentsJSONString(_ format: JSONFormat = .compact) -> String {
        JSONValue.object(argumentsJSON).serialized(format)
    }

    /// The call in OpenAI's chat-completions shape:
    /// `{"id": ..., "type": "function", "function": {"name": ..., "arguments": "<JSON text>"}}`,
    /// where `arguments` is a string holding compact JSON. `id` is left out when nil.
    public func openAIToolCallJSON(id: String? = nil) -> JSONValue {
        var call = JSONObject()
        if let id { call["id"] = .string(id) }
        call["type"] = "function"
        call["function"] = .object(JSONObject([("name", .string(name)), ("arguments", .string(argumentsJSONString()))]))
        return .object(call)
    }
}

extension JSONValue {
    fileprivate static func convertArgument(_ value: Any?, key: String) throws(FunctionArgumentConversionError) -> JSONValue {
        try convert(value, path: "arguments.\(key)")
    }
}
