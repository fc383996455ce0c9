/// The type ids of GGUF metadata values (`enum gguf_type`).
public enum GGUFValueType: UInt32, Sendable, CaseIterable, CustomStringConvertible {
    case uint8 = 0
    case int8 = 1
    case uint16 = 2
    case int16 = 3
    case uint32 = 4
    case int32 = 5
    case float32 = 6
    case bool = 7
    case
        string = 8
    case array = 9
    case uint64 = 10
    case int64 = 11
    case float64 = 12

    public var description: String {
        switch self {
        case .uint8: return "u8"
        case .int8: return "i8"
        case .uint16: return "u16"
        case .int16: return "i16"
        case .uint32: return "u32"
        case .int32: return "i32"
        case .float32: return "f32"
        case .bool: return "bool"
        case .string: return "string"
        case .array: return "array"
        case .uint64: return "u64"
        case .int64: return "i64"
        case .float64: return "f64"
        }
    }

    /// Size in bytes of a fixed-size value, nil for strings and arrays.
    var fixedSize: Int? {
        switch self {
        case .uint8, .int8, .bool: return 1
        case .uint16, .int16: return 2
        case .uint32, .int32, .float32: return 4
        case .uint64, .int64, .float64: return 8
        case .string, .array: return nil
        }
    }
}

/// A metadata value. Arrays are stored with one Swift array of their element type, so a
/// 150k-entry vocabulary costs one allocation per string and no per-element enum boxes.
public enum GGUFValue: Sendable, Equatable {
    case uint8(UInt8)
    case int8(Int8)
    case uint16(UInt16)
    case int16(Int16)
    case uint32(UInt32)
    case int32(Int32)
    case float32(Float)
    case bool(Bool)
    case string(String)
    case uint64(UInt64)
    case int64(Int64)
    case float64(Double)
    case array(GGUFArray)

    /// The value's GGUF type.
    public var type: GGUFValueType {
        switch self {
        case .uint8: return .uint8
        case .int8: return .int8
        case .uint16: return .uint16
        case .int16: return .int16
        case .uint32: return .uint32
        case .int32: return .int32
        case .float32: return .float32
        case .bool: return .bool
        case .string: return .string
        case .uint64: return .uint64
        case .int64: return .int64
        case .float64: return .float64
        case .array: return .array
        }
    }

    /// A description of the type for error messages: `u32`, `array of string`...
    public var typeDescription: String {
        if case .array(let a) = self { return "array of \(a.elementType)" }
        return type.description
    }

    /// The value as an integer if it is one of the integer types and fits `Int`.
    public var intValue: Int? {
        switch self {
        case .uint8(let v): return Int(v)
        case .int8(let v): return Int(v)
        case .uint16(let v): return Int(v)
        case .int16(let v): return Int(v)
        case .uint32(let v): return Int(v)
        case .int32(let v): return Int(v)
        case .uint64(let v): return Int(exactly: v)
        case .int64(let v): return Int(exactly: v)
        default: return nil
        }
    }

    /// The value as a Double if it is a float or an integer.
    public var doubleValue: Double? {
        switch self {
        case .float32(let v): return Double(v)
        case .float64(let v): return v
        default: return intValue.map(Double.init)
        }
    }
}

/// A homogeneous metadata array.
public enum GGUFArray: Sendable, Equatable {
    case uint8([UInt8])
    case int8([Int8])
    case uint16([UInt16])
    case int16([Int16])
    case uint32([UInt32])
    case int32([Int32])
    case float32([Float])
    case bool([Bool])
    case string([String])
    case uint64([UInt64])
    case int64([Int64])
    case float64([Double])
    /// An array of arrays (rare; GGUF allows it).
    case array([GGUFArray])

    /// The one switch over the element types: the element count, a value of the element
    /// type (so that the types are named once, in `GGUFValue.type`), and element `i` as a
    /// value.
    private var elements: (count: Int, sample: GGUFValue, at: (Int) -> GGUFValue) {
        switch self {
        case .uint8(let a): return (a.count, .uint8(0), { .uint8(a[$0]) })
        case .int8(let a): return (a.count, .int8(0), { .int8(a[$0]) })
        case .uint16(let a): return (a.count, .uint16(0), { .uint16(a[$0]) })
        case .int16(let a): return (a.count, .int16(0), { .int16(a[$0]) })
        case .uint32(let a): return (a.count, .uint32(0), { .uint32(a[$0]) })
        case .int32(let a): return (a.count, .int32(0), { .int32(a[$0]) })
        case .float32(let a): return (a.count, .float32(0), { .float32(a[$0]) })
        case .bool(let a): return (a.count, .bool(false), { .bool(a[$0]) })
        case .string(let a): return (a.count, .string(""), { .string(a[$0]) })
        case .uint64(let a): return (a.count, .uint64(0), { .uint64(a[$0]) })
        case .int64(let a): return (a.count, .int64(0), { .int64(a[$0]) })
        case .float64(let a): return (a.count, .float64(0), { .float64(a[$0]) })
        case .array(let a): return (a.count, .array(.uint8([])), { .array(a[$0]) })
        }
    }

    /// The type of the elements (`.array` for an array of arrays).
    public var elementType: GGUFValueType { elements.sample.type }

    /// The number of elements.
    public var count: Int { elements.count }

    /// Element `i` as a scalar value (arrays of arrays give `.array`).
    public subscript(i: Int) -> GGUFValue { elements.at(i) }

    /// Integer elements widened to Int, or nil when the elements are not integers or one
    /// does not fit.
    public var intValues: [Int]? {
        switch self {
        case .uint8(let a): return a.map(Int.init)
        case .int8(let a): return a.map(Int.init)
        case .uint16(let a): return a.map(Int.init)
        case .int16(let a): return a.map(Int.init)
        case .uint32(let a): return a.map(Int.init)
        case .int32(let a): return a.map(Int.init)
        case .uint64(let a):
            var out: [Int] = []
            out.reserveCapacity(a.count)
            for v in a {
                guard let i = Int(exactly: v) else { return nil }
                out.append(i)
            }
            return out
        case .int64(let a):
            return a.map { Int($0) }
        default: return nil
        }
    }

    /// Float elements (or integer elements converted), or nil.
    public var floatValues: [Float]? {
        switch self {
        case .float32(let a): return a
        case .float64(let a): return a.map(Float.init)
        default: return intValues?.map(Float.init)
        }
    }
}
