/// The key/value metadata of a GGUF file, in file order, with typed accessors whose
/// errors name the key and the type found.
public struct GGUFMetadata: Sendable {
    /// Keys in the order the file lists them.
    public private(set) var keys: [String] = []
    private var values: [String: GGUFValue] = [:]

    public init() {}

    /// Adds or replaces a value (replacing keeps the key's position).
    public mutating func set(_ key: String, _ value: GGUFValue) {
        if values.updateValue(value, forKey: key) == nil { keys.append(key) }
    }

    /// Removes a key if present.
    public mutating func remove(_ key: String) {
        if values.removeValue(forKey: key) != nil { keys.removeAll { $0 == key } }
    }

    public var count: Int { keys.count }
    public subscript(key: String) -> GGUFValue? { values[key] }
    public func contains(_ key: String) -> Bool { values[key] != nil }

    /// Pairs in file order.
    public var pairs: [(key: String, value: GGUFValue)] { keys.map { ($0, values[$0]!) } }

    private func require(_ key: String) throws(GGUFError) -> GGUFValue {
        guard let v = values[key] else { throw .missingKey(key) }
        return v
    }

    /// An integer of any width, range-checked into `Int`.
    public func int(_ key: String) throws(GGUFError) -> Int {
        let v = try require(key)
        if let i = v.intValue { return i }
        switch v {
        case .uint64(let u): throw .valueOutOfRange(key: key, value: String(u))
        default: throw .typeMismatch(key: key, expected: "an integer", found: v.typeDescription)
        }
    }

    /// A float (f32 or f64) or an integer, as Double.
    public func double(_ key: String) throws(GGUFError) -> Double {
        let v = try require(key)
        guard let d = v.doubleValue else { throw .typeMismatch(key: key, expected: "a number", found: v.typeDescription) }
        return d
    }

    /// A float (f32 or f64) or an integer, as Float.
    public func float(_ key: String) throws(GGUFError) -> Float { Float(try double(key)) }

    public func bool(_ key: String) throws(GGUFError) -> Bool {
        let v = try require(key)
        guard case .bool(let b) = v else { throw .typeMismatch(key: key, expected: "a bool", found: v.typeDescription) }
        return b
    }

    public func string(_ key: String) throws(GGUFError) -> String {
        let v = try require(key)
        guard case .string(let s) = v else { throw .typeMismatch(key: key, expected: "a string", found: v.typeDescription) }
        return s
    }

    public func array(_ key: String) throws(GGUFError) -> GGUFArray {
        let v = try require(key)
        guard case .array(let a) = v else { throw .typeMismatch(key: key, expected: "an array", found: v.typeDescription) }
        return a
    }

    public func stringArray(_ key: String) throws(GGUFError) -> [String] {
        let a = try array(key)
        guard case .string(let s) = a else {
            throw .typeMismatch(key: key, expected: "an array of string", found: "array of \(a.elementType)")
        }
        return s
    }

    public func intArray(_ key: String) throws(GGUFError) -> [Int] {
        let a = try array(key)
        guard let ints = a.intValues else {
            throw .typeMismatch(key: key, expected: "an array of integers", found: "array of \(a.elementType)")
        }
        return ints
    }

    public func floatArray(_ key: String) throws(GGUFError) -> [Float] {
        let a = try array(key)
        guard let f = a.floatValues else {
            throw .typeMismatch(key: key, expected: "an array of numbers", found: "array of \(a.elementType)")
        }
        return f
    }

    /// The value if the key is present (type errors still throw), nil if it is absent.
    public func optional<T>(_ key: String, _ get: (String) throws(GGUFError) -> T) throws(GGUFError) -> T? {
        guard contains(key) else { return nil }
        return try get(key)
    }
}
