import LeapJSON

/// The JSON Schema of a `GeneratableType`, as a tree that nested generatable types compose
/// into. `@Generatable` writes these; `jsonValue()` turns one into JSON Schema.
///
/// The JSON form: a string, integer, number or boolean schema is `{"type": …}`; an array is
/// `{"type": "array", "items": …}`; a nullable element is `{"anyOf": [schema, {"type": "null"}]}`;
/// an object is `{"type": "object", "description": …, "properties": {…}, "required": […],
/// "additionalProperties": false}` with properties in order and `required` listing the
/// required ones (left out when none is). A description, when present, follows `type`.
public struct GeneratableSchema: Sendable, Equatable {
    /// What a schema node accepts.
    public indirect enum Kind: Sendable, Equatable {
        case string
        case integer
        case number
        case boolean
        /// A JSON array whose elements all match the schema.
        case array(GeneratableSchema)
        /// The schema or `null`.
        case nullable(GeneratableSchema)
        /// A JSON object with exactly these properties (the optional ones may be absent).
        case object([Property])
        /// The schema of another generatable type, resolved when the JSON is built.
        case generatable(GeneratableReference)
    }

    /// A property of an object schema.
    public struct Property: Sendable, Equatable {
        /// The JSON key (the Swift property name).
        public var name: String
        /// The schema of the value.
        public var schema: GeneratableSchema
        /// The property's description for the model (from `@Guide`); it replaces the
        /// description of `schema`.
        public var description: String?
        /// Whether the key must be present (false for optional properties).
        public var isRequired: Bool

        public init(name: String, schema: GeneratableSchema, description: String? = nil, isRequired: Bool = true) {
            self.name = name
            self.schema = schema
            self.description = description
            self.isRequired = isRequired
        }
    }

    /// What the node accepts.
    public var kind: Kind
    /// The node's description for the model.
    public var description: String?

    public init(kind: Kind, description: String? = nil) {
        self.kind = kind
        self.description = description
    }

    /// A JSON string.
    public static let string = GeneratableSchema(kind: .string)
    /// A JSON integer (a number without fraction or exponent).
    public static let integer = GeneratableSchema(kind: .integer)
    /// A JSON number.
    public static let number = GeneratableSchema(kind: .number)
    /// `true` or `false`.
    public static let boolean = GeneratableSchema(kind: .boolean)

    /// A JSON array of `element`s.
    public static func array(of element: GeneratableSchema, description: String? = nil) -> GeneratableSchema {
        GeneratableSchema(kind: .array(element), description: description)
    }

    /// `schema` or `null` (an optional array element).
    public static func nullable(_ schema: GeneratableSchema) -> GeneratableSchema {
        GeneratableSchema(kind: .nullable(schema))
    }

    /// A JSON object with these properties, in this order, and no others.
    public static func object(description: String? = nil, properties: [Property]) -> GeneratableSchema {
        GeneratableSchema(kind: .object(properties), description: description)
    }

    /// The schema of another generatable type (inlined when the JSON is built).
    public static func generatable<T: GeneratableType>(_ type: T.Type) -> GeneratableSchema {
        GeneratableSchema(kind: .generatable(GeneratableReference(type)))
    }

    /// The JSON Schema of this node, nested generatable types inlined.
    /// - Throws: `LeapError.serializationFailure` for a duplicate or empty property name, or
    ///   a generatable type that contains itself.
    public func jsonValue() throws -> JSONValue {
        var resolving: [GeneratableReference] = []
        return try jsonValue(descriptionOverride: nil, resolving: &resolving)
    }

    private func jsonValue(descriptionOverride: String?, resolving: inout [GeneratableReference]) throws -> JSONValue {
        let description = descriptionOverride ?? self.description
        var object = JSONObject()
        func typed(_ name: String) {
            object["type"] = .string(name)
            if let description { object["description"] = .string(description) }
        }
        switch kind {
        case .string: typed("string")
        case .integer: typed("integer")
        case .number: typed("number")
        case .boolean: typed("boolean")
        case .array(let element):
            typed("array")
            object["items"] = try element.jsonValue(descriptionOverride: nil, resolving: &resolving)
        case .nullable(let schema):
            if let description { object["description"] = .string(description) }
            object["anyOf"] = .array([
                try schema.jsonValue(descriptionOverride: nil, resolving: &resolving),
                .object(JSONObject([("type", .string("null"))]))
            ])
        case .object(let properties):
            typed("object")
            var propertySchemas = JSONObject()
            var required: [JSONValue] = []
            for property in properties {
                guard !property.name.isEmpty else {
                    throw LeapError.serializationFailure("a generatable schema has a property with an empty name")
                }
                guard propertySchemas[property.name] == nil else {
                    throw LeapError.serializationFailure(
                        "a generatable schema has two properties named '\(property.name)'")
                }
                propertySchemas[property.name] = try property.schema.jsonValue(
                    descriptionOverride: property.description, resolving: &resolving)
                if property.isRequired { required.append(.string(property.name)) }
            }
            object["properties"] = .object(propertySchemas)
            if !required.isEmpty { object["required"] = .array(required) }
            object["additionalProperties"] = .bool(false)
        case .generatable(let reference):
            if resolving.contains(reference) {
                let path = (resolving + [reference]).map(\.typeName).joined(separator: " → ")
                throw LeapError.serializationFailure(
                    "the generatable type \(reference.typeName) contains itself (\(path)); recursive types are not supported")
            }
            resolving.append(reference)
            defer { resolving.removeLast() }
            return try reference.schema().jsonValue(descriptionOverride: descriptionOverride, resolving: &resolving)
        }
        return .object(object)
    }
}

/// A reference to a `GeneratableType` inside another's schema. Its schema is read only when
/// the JSON is built, so that a type containing itself is reported instead of recursing forever.
public struct GeneratableReference: Sendable, Equatable {
    /// The type's name, for error messages.
    public let typeName: String
    private let identifier: ObjectIdentifier
    private let readSchema: @Sendable () -> GeneratableSchema

    public init<T: GeneratableType>(_ type: T.Type) {
        typeName = String(describing: type)
        identifier = ObjectIdentifier(type)
        readSchema = { T.generatableSchema }
    }

    /// The referenced type's schema.
    public func schema() -> GeneratableSchema { readSchema() }

    public static func == (a: GeneratableReference, b: GeneratableReference) -> Bool { a.identifier == b.identifier }
}
