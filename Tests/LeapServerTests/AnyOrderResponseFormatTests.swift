import Foundation
import Grammar
import LeapJSON
import OpenAIWire
import Testing

@testable import LeapSDKCore
@testable import LeapServer

/// leap-ref's `response_format.json_schema.property_order` extension.
@Suite(.serialized) struct AnyOrderResponseFormatTests {
    static let schema =
        #"{"type": "object", "properties": {"answer": {"enum": ["yes", "no"]}, "sure": {"type": "boolean"}}, "#
        + #""required": ["answer", "sure"], "additionalProperties": false}"#

    static func body(_ order: String?) -> String {
        let field = order.map { #", "property_order": "\#($0)""# } ?? ""
        return #"{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 60, "temperature": 0, "#
            + #""response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": \#(schema)\#(field)}}}"#
    }

    static func request(_ order: String?) throws -> ServingRequest {
        let wire = try ChatCompletionRequest(json: try JSONValue.parse(body(order)))
        return try WireMapping.chatRequest(wire, maxTokensLimit: nil)
    }

    @Test func propertyOrderIsReadAndChecked() throws {
        #expect(try Self.request(nil).schemaPropertyOrder == .schema)
        #expect(try Self.request("schema").schemaPropertyOrder == .schema)
        #expect(try Self.request("any").schemaPropertyOrder == .any)
        let error = #expect(throws: WireError.self) { try ChatCompletionRequest(json: try JSONValue.parse(Self.body("sorted"))) }
        #expect(error?.param == "response_format.json_schema.property_order")
    }

    @Test func theEngineCompilesTheSchemaInTheAskedOrder() async throws {
        let engine = try await tinyEngine()
        let reordered = #"{"sure": true, "answer": "no"}"#
        for (order, accepted) in [("schema", false), ("any", true), ("schema", false)] {
            let plan = try engine.constraintPlan(try Self.request(order), parser: nil)
            let m = GrammarMatcher(grammar: try #require(plan.schema))
            #expect((m.accept(reordered) && m.canAcceptEnd) == accepted, "\(order)")
        }
        // A whole completion through the engine stays valid.
        let r = try await collect(try engine.submit(try Self.request("any")))
        #expect(r.reason == .stop, "\(r.text)")
        let value = try JSONValue.parse(r.text)
        #expect(Set(value.objectValue?.keys ?? []) == ["answer", "sure"])
    }
}
