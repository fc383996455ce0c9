import Foundation
import GGUF
import LeapJSON
import TestSupport
import Testing
import Tokenizers

@testable import LeapSDKCore

/// `tool_choice: "none"` (issue #27): the tools stay in the prompt, but the model cannot
/// write the call syntax and no text is parsed as a call.
@Suite(.serialized) struct ToolChoiceNoneTests {
    static let weather = ServingTool(
        name: "get_weather", description: "The weather of a city",
        parameters: ["type": "object", "properties": ["city": ["type": "string", "enum": ["Paris", "Rome"]]], "required": ["city"]])

    /// The conversation of the report: a required call, its result, then the question again.
    static func conversation(_ engine: ServingEngine) async throws -> [ChatMessage] {
        let question = ChatMessage(role: .user, textContent: "Weather in Paris?")
        let forced = try await collect(
            try engine.submit(
                ServingRequest(
                    prompt: .chat(messages: [question], tools: [weather]), sampling: SamplingOverrides(temperature: 0.8, seed: 3),
                    maxTokens: 400, toolChoice: .required)))
        #expect(forced.reason == .toolCalls)
        let call = try #require(forced.calls.first)
        #expect(call.name == "get_weather")
        return [
            question, ChatMessage(role: .assistant, content: [], functionCalls: [call]),
            ChatMessage(role: .tool, textContent: #"{"temperature": 21, "sky": "clear"}"#)
        ]
    }

    @Test func noneAfterAToolResultAnswersWithText() async throws {
        let engine = try await tinyEngine()
        let messages = try await Self.conversation(engine)
        for seed in 0..<8 {
            let none = try await collect(
                try engine.submit(
                    ServingRequest(
                        prompt: .chat(messages: messages, tools: [Self.weather]),
                        sampling: SamplingOverrides(temperature: 3, topP: 1, topK: 0, minP: 0, seed: UInt64(seed)), maxTokens: 48,
                        toolChoice: .none)))
            #expect(none.calls.isEmpty, "seed \(seed): \(none.calls)")
            #expect(none.reason != .toolCalls)
            #expect(!none.text.contains("<|tool_call_start|>"), "seed \(seed): \(none.text.debugDescription)")
        }
    }

    /// The step itself, where the model wants nothing but to call: logits whose best token by
    /// far is `<|tool_call_start|>`. Allowed (tool_choice auto), greedy takes it and the call
    /// block is constrained from there; banned (none), the next best token is taken.
    @Test func theCallOpeningIsMaskedUnderNone() throws {
        let file = try GGUFFile(path: TestFixtures.path("models/lfm2-tiny.gguf"))
        let tokenizer = try Tokenizer(gguf: file)
        let start = Int(try #require(tokenizer.tokenID(forText: "<|tool_call_start|>")))
        var logits = [Float](repeating: 0, count: tokenizer.vocabularySize)
        logits[start] = 50
        logits[300] = 10
        func step(_ constraints: ActiveConstraints) throws -> SequenceGeneration.Step {
            var generation = SequenceGeneration(
                tokenizer: tokenizer, sampling: .greedy, prompt: [1, 2, 3], constraints: constraints, callParser: nil,
                splitsReasoning: true,
                stops: [],
                maxTokens: 8, lengthLimit: 512, logprobs: nil, ignoresEndOfGeneration: false, continuesAfterToolCalls: false)
            return try logits.withUnsafeBufferPointer { try generation.next($0) { _ in } }
        }
        #expect(try step(ActiveConstraints()) == .next(start))
        let ban = CallMarkerBan(CallMarkerTokens(marker: "<|tool_call_start|>", tokenizer: tokenizer))
        #expect(try step(ActiveConstraints(callBan: ban)) == .next(300))
    }

    /// A marker spelled over several tokens (Hermes's `<tool_call>` in SmolLM2's
    /// vocabulary): the token that would complete it is refused, others are not.
    @Test func aSpelledMarkerCannotBeCompleted() throws {
        let file = try GGUFFile(path: try TestFixtures.require(TestFixtures.smolLM2Q4_1))
        let tokenizer = try Tokenizer(gguf: file)
        let marker = "<tool_call>"
        let ids = tokenizer.encode(marker, addSpecial: false, parseSpecial: false).map(Int.init)
        try #require(ids.count >= 2, "the marker must take several tokens here: \(ids)")
        var ban = CallMarkerBan(CallMarkerTokens(marker: marker, tokenizer: tokenizer))
        for id in ids.dropLast() {
            #expect(ban.allows(id))
            ban.accept(id)
        }
        #expect(!ban.allows(ids.last!), "the marker's last piece after its start")
        // Text that merely contains the last piece elsewhere stays allowed.
        let plain = tokenizer.encode(" call", addSpecial: false, parseSpecial: false).map(Int.init)
        #expect(plain.allSatisfy { ban.allows($0) })
    }
}
