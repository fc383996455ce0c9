import Foundation
import LeapJSON
import TestSupport
import Testing

@testable import LeapSDK
@testable import LeapSDKCore

/// `GenerationOptions.jsonSchemaPropertyOrder`: the schema constraint's objects in any order.
@Suite(.serialized) struct AnyOrderConstraintTests {
    static let schema =
        #"{"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"enum": ["x", "y"]}, "c": {"type": "boolean"}, "#
        + #""d": {"enum": [1, 2]}}, "required": ["a", "b", "c", "d"], "additionalProperties": false}"#

    @Test func theOptionReachesTheServingRequest() throws {
        var options = GenerationOptions(jsonSchemaConstraint: Self.schema)
        let message = ChatMessage(role: .user, textContent: "hi")
        #expect(
            try LiquidInferenceEngineRunner.servingRequest(.init(messages: [message], options: options), speaks: false)
                .schemaPropertyOrder == .schema)
        options.jsonSchemaPropertyOrder = .any
        #expect(
            try LiquidInferenceEngineRunner.servingRequest(.init(messages: [message], options: options), speaks: false)
                .schemaPropertyOrder == .any)
    }

    /// lfm2-tiny's random weights pick the keys: every output validates, each key once, and
    /// some come out of the schema's order (which the default grammar could not write).
    @Test func generationsInAnyOrderValidate() async throws {
        let runner = try await TinyModel.load()
        var failures: [String] = []
        var outOfOrder = 0
        for i in 0..<12 {
            let conversation = runner.createConversation(systemPrompt: nil)
            var options = GenerationOptions(temperature: 1.0, rngSeed: UInt64(i), maxOutputTokens: 200, jsonSchemaConstraint: Self.schema)
            options.jsonSchemaPropertyOrder = .any
            let c = try await collect(conversation.generateResponse(userTextMessage: "Reply in JSON.", generationOptions: options))
            let text = try #require(c.completion).message.textContent
            guard let value = try? JSONValue.parse(text), let keys = value.objectValue?.keys else {
                failures.append("\(i): not a JSON object: \(text)")
                continue
            }
            if let why = schemaProblem(value, try JSONValue.parse(Self.schema)) { failures.append("\(i): \(why): \(text)") }
            if Array(keys) != ["a", "b", "c", "d"] { outOfOrder += 1 }
            #expect(Set(keys).count == 4, "\(text)")
        }
        #expect(failures.isEmpty, "\(failures)")
        #expect(outOfOrder > 0)
    }
}
