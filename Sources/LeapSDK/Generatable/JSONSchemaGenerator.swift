import Foundation
import LeapJSON

/// Produces the JSON Schema text of a `GeneratableType`, for
/// `GenerationOptions.jsonSchemaConstraint`.
public enum JSONSchemaGenerator {
    /// The JSON Schema of `type` as compact JSON text, properties in declaration order and
    /// nested generatable types inlined.
    /// - Throws: `LeapError.serializationFailure` when the schema is malformed (a duplicate
    ///   or empty property name) or the type contains itself.
    public static func getJSONSchema<T: GeneratableType>(for type: T.Type) throws -> String {
        try type.jsonSchema().serialized()
    }
}

extension GenerationOptions {
    /// Constrains generation to JSON values of `type`: sets `jsonSchemaConstraint` to the
    /// type's JSON Schema. Decode the reply with `MessageCompletion.decode(_:)`.
    /// - Throws: `LeapError.serializationFailure` when the type's schema cannot be built.
    public mutating func setResponseFormat<T: GeneratableType>(type: T.Type) throws {
        jsonSchemaConstraint = try JSONSchemaGenerator.getJSONSchema(for: type)
    }
}

extension ChatMessage {
    /// Decodes the message's text (a JSON document, as produced under
    /// `setResponseFormat(type:)`) into `type`.
    /// - Throws: `LeapError.serializationFailure` naming the type and what did not match
    ///   when the text is not JSON or does not fit the type.
    public func decode<T: GeneratableType>(_ type: T.Type) throws -> T {
        let text = textContent
        let typeName = String(describing: type)
        guard !text.allSatisfy(\.isWhitespace) else {
            throw LeapError.serializationFailure("cannot decode \(typeName): the message has no text")
        }
        // LeapJSON's parser says where the text stops being JSON; JSONDecoder then checks the fit.
        do {
            _ = try JSONValue.parse(text)
        } catch {
            throw LeapError.serializationFailure("cannot decode \(typeName): the message text is not valid JSON (\(error))")
        }
        do {
            return try JSONDecoder().decode(type, from: Data(text.utf8))
        } catch let error as DecodingError {
            throw LeapError.serializationFailure("cannot decode \(typeName) from the message text: \(Self.explain(error))")
        } catch {
            throw LeapError.serializationFailure("cannot decode \(typeName) from the message text: \(error)")
        }
    }

    /// A one-line account of a decoding error: what went wrong and at which key path.
    private static func explain(_ error: DecodingError) -> String {
        func path(_ keys: [CodingKey]) -> String {
            keys.isEmpty
                ? "the top level"
                : keys.map { key in
                    key.intValue.map { "[\($0)]" } ?? key.stringValue
                }.joined(separator: ".")
        }
        switch error {
        case .keyNotFound(let key, let context):
            let parent = context.codingPath.isEmpty ? "" : " in \(path(context.codingPath))"
            return "required key '\(key.stringValue)' is missing\(parent)"
        case .typeMismatch(let expected, let context):
            return "expected \(expected) at \(path(context.codingPath)): \(context.debugDescription)"
        case .valueNotFound(let expected, let context):
            return "expected \(expected) but found null at \(path(context.codingPath))"
        case .dataCorrupted(let context):
            // The text parsed as JSON, so the decoder rejected a value (Foundation reports a
            // number out of range for its integer type this way, without a path).
            let underlying = context.underlyingError.map { ": \($0)" } ?? ""
            return "a value does not fit its Swift type, for example a number out of range "
                + "(at \(path(context.codingPath)): \(context.debugDescription)\(underlying))"
        @unknown default:
            return "\(error)"
        }
    }
}

extension MessageCompletion {
    /// Decodes the reply's text (a JSON document, as produced under
    /// `setResponseFormat(type:)`) into `type`.
    ///
    /// ```swift
    /// if case .complete(let completion) = response {
    ///     let fact = try completion.decode(CityFact.self)
    /// }
    /// ```
    /// - Throws: `LeapError.serializationFailure` naming the type and what did not match
    ///   when the text is not JSON or does not fit the type.
    public func decode<T: GeneratableType>(_ type: T.Type) throws -> T {
        try message.decode(type)
    }
}
