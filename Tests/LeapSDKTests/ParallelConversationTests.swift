import Foundation
import LeapJSON
import TestSupport
import Testing

@testable import LeapSDKCore

/// Concurrent conversations on one runner with `parallelSequences` > 1: they share forward
/// passes, and each one's reply is the one it gets alone.
@Suite(.serialized) struct ParallelConversationTests {
    static let questions = ["Tell me about the sea.", "List three colors, please.", "Write a haiku about rain."]

    static func load(parallel: Int) async throws -> LiquidInferenceEngineRunner {
        let runner = try await Leap.load(
            path: TinyModel.path, options: LiquidInferenceEngineOptions(contextSize: 512, defaultRNGSeed: 1, parallelSequences: parallel))
        return try #require(runner as? LiquidInferenceEngineRunner)
    }

    /// Sampled (temperature 1, a seed per conversation), so that the test also checks each
    /// conversation keeps its own sampler.
    static func options(_ seed: UInt64) -> GenerationOptions {
        GenerationOptions(temperature: 1.0, rngSeed: seed, maxOutputTokens: 16, cacheControl: .noCache)
    }

    @Test func concurrentConversationsShareStepsAndGetTheirOwnReplies() async throws {
        let runner = try await Self.load(parallel: 3)
        var alone: [Collected] = []
        for (i, q) in Self.questions.enumerated() {
            alone.append(
                try await collect(
                    runner.createConversation().generateResponse(userTextMessage: q, generationOptions: Self.options(UInt64(i)))))
        }
        let scheduler = try #require(try runner.sharedScheduler())
        let before = scheduler.status
        let together = try await withThrowingTaskGroup(of: (Int, Collected).self) { group in
            for (i, q) in Self.questions.enumerated() {
                let stream = runner.createConversation().generateResponse(userTextMessage: q, generationOptions: Self.options(UInt64(i)))
                group.addTask { (i, try await collect(stream)) }
            }
            var out = [Collected?](repeating: nil, count: Self.questions.count)
            for try await (i, c) in group { out[i] = c }
            return out.map { $0! }
        }
        let after = scheduler.status
        for i in 0..<Self.questions.count {
            #expect(together[i].text == alone[i].text)
            #expect(!alone[i].text.isEmpty)
            let stats = try #require(together[i].completion?.stats)
            #expect(stats.completionTokens == alone[i].completion?.stats?.completionTokens)
            #expect(together[i].completion?.message.textContent == together[i].text)
        }
        // Three conversations in shared passes: fewer passes than sequence steps.
        let passes = after.forwardPasses - before.forwardPasses, steps = after.sequenceSteps - before.sequenceSteps
        #expect(passes * 2 < steps)
    }

    @Test func theReplyIsTheOneTheSequentialRunnerGivesWithinRounding() async throws {
        // The same request on a runner that runs one generation at a time: the prompt
        // takes the same path; decode rows differ only in float summation order, so at
        // temperature 0 the greedy text agrees on this model.
        let sequential = try await TinyModel.load()
        let parallel = try await Self.load(parallel: 2)
        let options = GenerationOptions(temperature: 0, maxOutputTokens: 12)
        let a = try await collect(
            sequential.createConversation().generateResponse(userTextMessage: "Hello there", generationOptions: options))
        let b = try await collect(
            parallel.createConversation().generateResponse(userTextMessage: "Hello there", generationOptions: options))
        #expect(a.text == b.text)
        #expect(a.completion?.stats?.promptTokens == b.completion?.stats?.promptTokens)
        #expect(b.completion?.finishReason == .stop)
    }

    @Test func stoppingOneConversationLeavesTheOthersUnchanged() async throws {
        let runner = try await Self.load(parallel: 2)
        let options = GenerationOptions(temperature: 0, maxOutputTokens: 24, cacheControl: .noCache)
        let alone = try await collect(
            runner.createConversation().generateResponse(userTextMessage: "Keep going", generationOptions: options))
        let kept = runner.createConversation().generateResponse(userTextMessage: "Keep going", generationOptions: options)
        let keptTask = Task { try await collect(kept) }
        let stopped = runner.createConversation()
        var chunks = 0
        for try await response in stopped.generateResponse(userTextMessage: "Stop me", generationOptions: options) {
            if case .chunk = response {
                chunks += 1
                if chunks == 2 { break }  // ends the stream: the generation is cancelled
            }
        }
        #expect(try await keptTask.value.text == alone.text)
        let scheduler = try #require(try runner.sharedScheduler())
        await scheduler.idle()
        #expect(scheduler.status.busySlots == 0)
    }

    @Test func errorsAreTheSDKsErrors() async throws {
        let runner = try await Self.load(parallel: 2)
        let long = String(repeating: "word ", count: 700)
        await #expect(throws: LeapError.self) {
            _ = try await collect(runner.createConversation().generateResponse(userTextMessage: long))
        }
        do {
            _ = try await collect(runner.createConversation().generateResponse(userTextMessage: long))
        } catch let error as LeapError {
            guard case .promptExceedContextLengthFailure(let tokens, let limit) = error else { throw error }
            #expect(tokens > 512 && limit == 512)
        }
        let bad = GenerationOptions(jsonSchemaConstraint: "{not json")
        await #expect(throws: LeapError.self) {
            _ = try await collect(runner.createConversation().generateResponse(userTextMessage: "x", generationOptions: bad))
        }
        await #expect(throws: LeapError.self) {
            _ = try await Leap.load(path: TinyModel.path, options: LiquidInferenceEngineOptions(parallelSequences: 0))
        }
        await runner.unload()
        await #expect(throws: LeapError.modelUnloaded) {
            _ = try await collect(runner.createConversation().generateResponse(userTextMessage: "after"))
        }
    }

    @Test func aJSONSchemaReplyIsValidWhenGeneratedBesideAnother() async throws {
        let runner = try await Self.load(parallel: 2)
        let schema =
            #"{"type":"object","properties":{"name":{"type":"string","maxLength":8},"n":{"type":"integer"}},"required":["name","n"],"additionalProperties":false}"#
        let constrained = runner.createConversation().generateResponse(
            userTextMessage: "Give me JSON",
            generationOptions: GenerationOptions(temperature: 0, maxOutputTokens: 60, jsonSchemaConstraint: schema))
        let free = runner.createConversation().generateResponse(
            userTextMessage: "Say anything", generationOptions: GenerationOptions(temperature: 0, maxOutputTokens: 20))
        async let a = collect(constrained)
        async let b = collect(free)
        let (json, _) = try await (a, b)
        let value = try JSONValue.parse(json.text)
        guard case .object(let object) = value else {
            Issue.record("not an object: \(json.text)")
            return
        }
        #expect(object.keys.sorted() == ["n", "name"])
    }
}
