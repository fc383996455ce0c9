import LeapJSON

/// A type whose values the model can generate as JSON: it describes itself with a JSON
/// Schema (`generatableSchema`) used to constrain generation, and decodes from the
/// generated JSON with `Codable`.
///
/// Conform a struct with the `@Generatable("description")` macro rather than by hand:
/// the macro writes `generatableSchema` from the struct's stored properties.
///
/// ```swift
/// @Generatable("A fact about a city")
/// struct CityFact {
///     @Guide("The city's name")
///     let name: String
///     let population: Int
///     let nickname: String?
/// }
///
/// var options = GenerationOptions()
/// try options.setResponseFormat(type: CityFact.self)
/// ```
public protocol GeneratableType: Codable, SendableMetatype {
    /// The schema of the type's JSON form. For a `@Generatable` struct, an object with one
    /// property per stored property, in declaration order.
    static var generatableSchema: GeneratableSchema { get }
}

extension GeneratableType {
    /// The type's JSON Schema as a JSON value, nested `GeneratableType`s inlined.
    /// - Throws: `LeapError.serializationFailure` when the schema is malformed (a duplicate
    ///   or empty property name) or a type contains itself (recursive types are not supported).
    public static func jsonSchema() throws -> JSONValue {
        try generatableSchema.jsonValue()
    }
}

/// Marks a struct as generatable: conforms it to `GeneratableType`, with a JSON Schema built
/// from its stored properties in declaration order and `description` as the schema's
/// description. Property descriptions come from `@Guide`.
///
/// Supported property types: `String`; `Int`, `Int8`…`Int64`, `UInt`…`UInt64` (integer);
/// `Double`, `Float` (number); `Bool`; arrays of supported types; optionals of supported
/// types (left out of `required`); and other `GeneratableType`s (inlined). A named type that
/// is not one of the primitives is assumed to be a `GeneratableType`; if it is not, the
/// compiler reports that it does not conform. Dictionaries, tuples, sets, `Date`, `URL` and
/// similar types are compile-time errors naming the property. Static, computed and `lazy`
/// properties, and `let` constants with an initial value, are not part of the schema.
/// A custom `CodingKeys` enum is not supported (the JSON keys are the property names).
@attached(extension, conformances: GeneratableType, names: named(generatableSchema))
public macro Generatable(_ description: String) = #externalMacro(module: "LeapSDKMacrosPlugin", type: "GeneratableMacro")

/// Describes a stored property of a `@Generatable` struct for the model: the text becomes
/// the property schema's `description`. It generates no code of its own.
@attached(peer)
public macro Guide(_ description: String) = #externalMacro(module: "LeapSDKMacrosPlugin", type: "GuideMacro")
