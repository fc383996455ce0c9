import Foundation

/// A function the model may call: its name, what it does, and its parameters.
///
/// Both spellings of the LEAP SDK work: the native Swift one
/// (`LeapFunction(name:description:parameters:)`) and the Kotlin-bridged one
/// (`LeapFunction(name:functionDescription:parameters:)`).
public struct LeapFunction: Equatable, Sendable {
    public var name: String
    public var description: String
    public var parameters: [LeapFunctionParameter]

    public init(name: String, description: String, parameters: [LeapFunctionParameter]) {
        self.name = name
        self.description = description
        self.parameters = parameters
    }

    /// The Kotlin-bridged spelling.
    public init(name: String, functionDescription: String, parameters: [LeapFunctionParameter]) {
        self.init(name: name, description: functionDescription, parameters: parameters)
    }

    /// The Kotlin-bridged name of `description`.
    public var functionDescription: String {
        get { description }
        set { description = newValue }
    }
}

/// One parameter of a `LeapFunction`.
public struct LeapFunctionParameter: Equatable, Sendable {
    public var name: String
    public var type: LeapFunctionParameterType
    public var description: String
    /// Whether the model may leave this parameter out.
    public var optional: Bool

    public init(name: String, type: LeapFunctionParameterType, description: String, optional: Bool = false) {
        self.name = name
        self.type = type
        self.description = description
        self.optional = optional
    }

    /// The Kotlin-bridged spelling (`optional` has no default there).
    public init(name: String, type: LeapFunctionParameterType, parameterDescription: String, optional: Bool) {
        self.init(name: name, type: type, description: parameterDescription, optional: optional)
    }

    /// The Kotlin-bridged name of `description`.
    public var parameterDescription: String {
        get { description }
        set { description = newValue }
    }
}

/// The type of a parameter, translated into JSON Schema for the model.
///
/// A type's own `description` is used only when the type is nested (an array's
/// `itemType`, an object's property); used directly as `LeapFunctionParameter.type`, the
/// parameter's description wins.
public indirect enum LeapFunctionParameterType: Codable, Equatable, Sendable {
    case string(StringType)
    case number(NumberType)
    case integer(IntegerType)
    case boolean(BooleanType)
    case array(ArrayType)
    case object(ObjectType)
    case null(NullType)

    // The Kotlin-bridged constructors (SKIE keeps Kotlin's nested-class names).

    /// A string, optionally restricted to `enumValues`.
    public static func LeapStr(enumValues: [String]? = nil, description: String? = nil) -> LeapFunctionParameterType {
        .string(StringType(enumValues: enumValues, description: description))
    }

    /// A number, optionally restricted to `enumValues`.
    public static func LeapNum(enumValues: [Double]? = nil, description: String? = nil) -> LeapFunctionParameterType {
        .number(NumberType(enumValues: enumValues, description: description))
    }

    /// An integer, optionally restricted to `enumValues`.
    public static func LeapInt(enumValues: [Int]? = nil, description: String? = nil) -> LeapFunctionParameterType {
        .integer(IntegerType(enumValues: enumValues, description: description))
    }

    /// A boolean.
    public static func LeapBool(description: String? = nil) -> LeapFunctionParameterType {
        .boolean(BooleanType(description: description))
    }

    /// An array whose items have `itemType`.
    public static func LeapArr(itemType: LeapFunctionParameterType, description: String? = nil) -> LeapFunctionParameterType {
        .array(ArrayType(itemType: itemType, description: description))
    }

    /// An object with the given properties, of which `required` must be present.
    public static func LeapObj(
        properties: [String: LeapFunctionParameterType], required: [String] = [],
        description: String? = nil
    ) -> LeapFunctionParameterType {
        .object(ObjectType(properties: properties, required: required, description: description))
    }

    /// JSON `null`.
    public static func LeapNull() -> LeapFunctionParameterType { .null(NullType()) }
}

/// A string parameter type.
public struct StringType: Codable, Equatable, Sendable {
    public var enumValues: [String]?
    public var description: String?
    public init(enumValues: [String]? = nil, description: String? = nil) {
        self.enumValues = enumValues
        self.description = description
    }
}

/// A number parameter type.
public struct NumberType: Codable, Equatable, Sendable {
    public var enumValues: [Double]?
    public var description: String?
    public init(enumValues: [Double]? = nil, description: String? = nil) {
        self.enumValues = enumValues
        self.description = description
    }
}

/// An integer parameter type.
public struct IntegerType: Codable, Equatable, Sendable {
    public var enumValues: [Int]?
    public var description: String?
    public init(enumValues: [Int]? = nil, description: String? = nil) {
        self.enumValues = enumValues
        self.description = description
    }
}

/// A boolean parameter type.
public struct BooleanType: Codable, Equatable, Sendable {
    public var description: String?
    public init(description: String? = nil) { self.description = description }
}

/// An array parameter type.
public struct ArrayType: Codable, Equatable, Sendable {
    public var itemType: LeapFunctionParameterType
    public var description: String?
    public init(itemType: LeapFunctionParameterType, description: String? = nil) {
        self.itemType = itemType
        self.description = description
    }
}

/// An object parameter type.
public struct ObjectType: Codable, Equatable, Sendable {
    public var properties: [String: LeapFunctionParameterType]
    public var required: [String]
    public var description: String?
    public init(properties: [String: LeapFunctionParameterType], required: [String] = [], description: String? = nil) {
        self.properties = properties
        self.required = required
        self.description = description
    }
}

/// The JSON `null` type.
public struct NullType: Codable, Equatable, Sendable {
    public init() {}
}
