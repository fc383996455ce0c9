// Seed 002, "Constrained generation helper": the `setResponseFormat(type:)` snippet.
// The snippet is verbatim; `CityFact` is the app's type (the seed does not show it). lfm2-tiny's random weights may not close a free string within the test's
// context, so the reply is checked as a valid prefix of a CityFact document, and decoded
// when complete; GeneratableGenerationTests decodes a complete CityFact from SmolLM2.

import Foundation
import Grammar
import TestSupport
import Testing

@testable import LeapSDK
@testable import LeapSDKCore

// `CityFact` is the one declared in GeneratableTests.swift.

@Suite(.serialized) struct SeedSnippet002Generatable {
    @Test func constrainedGenerationHelper() async throws {
        let path = seedTestModelPath
        let modelRunner = try await Leap.load(url: URL(fileURLWithPath: path), options: seedTestModelOptions)
        let conversation = modelRunner.createConversation(systemPrompt: nil)
        let user = ChatMessage(role: .user, content: [.text("Tell me a fact about Paris.")])
        var completions: [MessageCompletion] = []

        // Seed 002, "Constrained generation helper" (plus one line recording the completion:
        // the loop body is only a comment, and the unused loop variable draws a warning).
        var options = GenerationOptions(temperature: 0.6, topP: 0.9)
        try options.setResponseFormat(type: CityFact.self)
        for try await response in conversation.generateResponse(
            message: user,
            generationOptions: options
        ) {
            // Handle structured output
            if case .complete(let c) = response { completions.append(c) }  // (test: record)
        }

        // The constraint is the schema of CityFact, and the reply is a JSON object that
        // satisfies it (lfm2-tiny's words are random, the structure is not).
        let schema = try #require(options.jsonSchemaConstraint)
        #expect(schema == (try JSONSchemaGenerator.getJSONSchema(for: CityFact.self)))
        let completion = try #require(completions.first)
        let text = completion.message.textContent
        let matcher = GrammarMatcher(grammar: try JSONSchemaCompiler.compile(schema))
        #expect(matcher.accept(text), "\(text)")
        if completion.finishReason == .stop {
            // A complete reply must decode (this throws otherwise).
            _ = try completion.decode(CityFact.self)
        } else {
            #expect(completion.finishReason == .exceedContext)
        }
    }
}
