import Foundation
import LeapJSON
import TestSupport
import Testing

@testable import LeapSDK
@testable import LeapSDKCore

/// A fact about a city, as an app would declare it.
@Generatable("A fact about a city")
struct CityInfo {
    @Guide("The city's name")
    let name: String
    @Guide("The country the city is in")
    let country: String
    @Guide("Roughly how many people live there")
    let population: Int
}

/// Behaviour on the real model, SmolLM2-135M-Instruct (Q4_1), installed by scripts/setup.sh.
@Suite(.serialized) struct SmolLM2Tests {
    static func load() async throws -> LiquidInferenceEngineRunner {
        let path = try TestFixtures.require(TestFixtures.smolLM2Q4_1)
        return try #require(
            try await Leap.load(path: path, options: LiquidInferenceEngineOptions(contextSize: 1024, defaultRNGSeed: 135))
                as? LiquidInferenceEngineRunner)
    }

    @Test func twoTurnChatAnswersAndReusesTheCache() async throws {
        let runner = try await Self.load()
        let conversation = runner.createConversation(systemPrompt: nil)
        // Greedy as llama.cpp samples by default: no repetition penalty, no DRY.
        let greedy = GenerationOptions(temperature: 0, repetitionPenalty: 1, maxOutputTokens: 48, dryMultiplier: 0)
        let first = try await collect(conversation.generateResponse(userTextMessage: "What is 2+2?", generationOptions: greedy))
        // llama.cpp's greedy reply to the same prompt (golden file smollm2-q4_1.chat.json).
        #expect(first.text.hasPrefix("The answer to"), "\(first.text)")
        #expect(first.text.contains("4"))
        #expect(first.completion?.finishReason == .stop)
        let s1 = try #require(first.completion?.stats)
        #expect(s1.completionTokens < 48, "the model ended its turn")
        let second = try await collect(conversation.generateResponse(userTextMessage: "And 3+3?", generationOptions: greedy))
        let s2 = try #require(second.completion?.stats)
        #expect(!second.text.isEmpty)
        #expect(s2.cachedPromptTokens == s1.promptTokens + s1.completionTokens, "turn 2 reuses turn 1's prompt and reply")
        #expect(s2.promptTokens > s2.cachedPromptTokens)
        // user, assistant, user, assistant (SmolLM2's template adds its default system prompt itself).
        #expect(conversation.history.map(\.role) == [.user, .assistant, .user, .assistant])
    }

    @Test func generatableTypeDecodesFromConstrainedOutput() async throws {
        let runner = try await Self.load()
        let conversation = runner.createConversation(systemPrompt: "You answer with JSON.")
        var options = GenerationOptions(temperature: 0, maxOutputTokens: 120)
        try options.setResponseFormat(type: CityInfo.self)
        let c = try await collect(conversation.generateResponse(userTextMessage: "Give me facts about Paris.", generationOptions: options))
        let completion = try #require(c.completion)
        #expect(completion.finishReason == .stop)
        let info = try completion.decode(CityInfo.self)
        #expect(!info.name.isEmpty)
        let json = try JSONValue.parse(completion.message.textContent)
        #expect(json.objectValue?.keys == ["name", "country", "population"])
    }

    @Test func forcedCallOnSmolLM2ParsesAndValidates() async throws {
        let runner = try await Self.load()
        let conversation = runner.createConversation(systemPrompt: nil)
        for f in TestFunctions.all { conversation.registerFunction(f) }
        var options = GenerationOptions(temperature: 0, maxOutputTokens: 120)
        options.functionCallMode = .required
        let c = try await collect(
            conversation.generateResponse(userTextMessage: "What's the weather in Paris?", generationOptions: options))
        let calls = try #require(c.completion?.message.functionCalls)
        #expect(!calls.isEmpty)
        for call in calls { #expect(TestFunctions.problem(call) == nil, "\(call)") }
        #expect(c.calls.flatMap { $0 }.count == calls.count)
        // The call is in the history and renders back into the prompt of the next turn.
        let history = conversation.history
        #expect(history.last?.functionCalls?.count == calls.count)
        let tool = ChatMessage(role: .tool, textContent: #"{"temperature": 21, "condition": "sunny"}"#)
        let next = runner.createConversationFromHistory(history: history + [tool])
        let answer = try await collect(
            next.generateResponse(
                userTextMessage: "Thanks. Summarize.", generationOptions: GenerationOptions(temperature: 0, maxOutputTokens: 40)))
        #expect(answer.completion != nil)
        #expect((answer.completion?.stats?.cachedPromptTokens ?? 0) > 0)
    }
}
