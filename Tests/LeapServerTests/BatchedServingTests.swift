import Foundation
import Grammar
import LeapJSON
import LeapSDKCore
import TestSupport
import Testing

/// The serving engine's continuous batching: sequences share forward passes, join and
/// leave between them, and each one's tokens (and their log-probabilities, to the bit) are
/// the same as when it runs alone.
@Suite(.serialized) struct BatchedServingTests {
    static let prompts = [
        "Tell me about the sea.", "List three colors, please.", "What is a prompt cache?", "Write a haiku about rain."
    ]

    /// A greedy chat request that reports each token's log-probability, with the prompt
    /// evaluated from scratch (so its chunks are the same alone and beside others).
    static func request(_ text: String, maxTokens: Int) -> ServingRequest {
        var r = greedyChat(text, maxTokens: maxTokens)
        r.cachePrompt = false
        r.logprobs = 1
        return r
    }

    /// What identifies a run: its text, its tokens' log-probabilities (bit for bit) and
    /// how it ended.
    struct Run: Equatable {
        var text: String
        var logprobs: [UInt32]
        var reason: ServingFinishReason?
        init(_ r: CompletionResult) {
            text = r.text
            logprobs = r.logprobs.map(\.chosen.logprob.bitPattern)
            reason = r.reason
        }
    }

    /// Runs `requests` one at a time, then all at once; returns both and the engine's
    /// pass counts of the concurrent run.
    static func aloneAndTogether(_ engine: ServingEngine, _ requests: [ServingRequest]) async throws -> (
        alone: [Run], together: [Run], passes: Int, sequenceSteps: Int
    ) {
        var alone: [Run] = []
        for r in requests { alone.append(Run(try await collect(try engine.submit(r)))) }
        let before = engine.status
        let completions = try requests.map { try engine.submit($0) }
        let together = try await withThrowingTaskGroup(of: (Int, Run).self) { group in
            for (i, c) in completions.enumerated() { group.addTask { (i, Run(try await collect(c))) } }
            var runs = [Run?](repeating: nil, count: requests.count)
            for try await (i, run) in group { runs[i] = run }
            return runs.map { $0! }
        }
        let after = engine.status
        return (alone, together, after.forwardPasses - before.forwardPasses, after.sequenceSteps - before.sequenceSteps)
    }

    @Test func lfm2TinyGivesTheSameTokensAloneAndBatched() async throws {
        let engine = try await tinyEngine(slots: 4)
        let requests = Self.prompts.map { Self.request($0, maxTokens: 16) }
        let r = try await Self.aloneAndTogether(engine, requests)
        #expect(r.together == r.alone)
        #expect(r.alone.allSatisfy { $0.logprobs.count == 16 && $0.reason == .length })
        // The four shared passes: far fewer passes than sequence steps.
        #expect(r.sequenceSteps >= 4 * 16)
        #expect(r.passes * 2 < r.sequenceSteps)
    }

    @Test func smolLM2GivesTheSameTokensAloneAndBatched() async throws {
        let runner = try await Leap.load(
            path: try TestFixtures.require(TestFixtures.smolLM2Q4_1), options: LiquidInferenceEngineOptions(cpuThreads: 2, contextSize: 512)
        )
        let engine = try ServingEngine(runner: runner, configuration: .init(slots: 3, contextSize: 512))
        let requests = Self.prompts.prefix(3).map { Self.request($0, maxTokens: 12) }
        let r = try await Self.aloneAndTogether(engine, Array(requests))
        #expect(r.together == r.alone)
        #expect(r.alone.allSatisfy { !$0.text.isEmpty })
        #expect(r.passes * 2 < r.sequenceSteps)
    }

    @Test func sequencesJoinAndLeaveBetweenSteps() async throws {
        let engine = try await tinyEngine(slots: 3, contextSize: 1024)
        let long = Self.request(Self.prompts[0], maxTokens: 48)
        let short1 = Self.request(Self.prompts[1], maxTokens: 4)
        let short2 = Self.request(Self.prompts[2], maxTokens: 6)
        let alone = try await [long, short1, short2].asyncMap { Run(try await collect(try engine.submit($0))) }

        // The long one runs; a short one joins after its third text event and leaves long
        // before it ends; another joins after that.
        let a = try engine.submit(long)
        var text = ""
        var logprobs: [UInt32] = []
        var reason: ServingFinishReason?
        var joined: [Task<Run, any Error>] = []
        var events = 0
        for try await event in a.events {
            switch event {
            case .text(let t, let lp):
                text += t
                logprobs += lp.map(\.chosen.logprob.bitPattern)
                events += 1
                if events == 3 {
                    let c = try engine.submit(short1)
                    joined.append(Task { Run(try await collect(c)) })
                }
                if events == 12 {
                    let c = try engine.submit(short2)
                    joined.append(Task { Run(try await collect(c)) })
                }
            case .finished(let r, _): reason = r
            default: break
            }
        }
        var first = CompletionResult()
        first.text = text
        first.reason = reason
        var longRun = Run(first)
        longRun.logprobs = logprobs
        #expect(longRun == alone[0])
        #expect(joined.count == 2)
        #expect(try await joined[0].value == alone[1])
        #expect(try await joined[1].value == alone[2])
        await engine.idle()
        #expect(engine.status.busySlots == 0)
    }

    @Test func cancellingOneSequenceLeavesTheOthersUnchanged() async throws {
        let engine = try await tinyEngine(slots: 3, contextSize: 1024)
        let requests = Self.prompts.prefix(3).map { Self.request($0, maxTokens: 24) }
        let alone = try await requests.asyncMap { Run(try await collect(try engine.submit($0))) }
        let completions = try requests.map { try engine.submit($0) }
        let keep0 = Task { Run(try await collect(completions[0])) }
        let keep2 = Task { Run(try await collect(completions[2])) }
        var seen = 0
        var reason: ServingFinishReason?
        for try await event in completions[1].events {
            if case .text = event {
                seen += 1
                if seen == 2 { completions[1].cancel() }
            }
            if case .finished(let r, _) = event { reason = r }
        }
        #expect(reason == .cancelled)
        #expect(try await keep0.value == alone[0])
        #expect(try await keep2.value == alone[2])
        await engine.idle()
        #expect(engine.status.busySlots == 0 && engine.status.cancelledCompletions == 1)
    }

    @Test func longPromptsArePrefilledInChunksBesideRunningStreams() async throws {
        // Chunks of 8 tokens: a prompt of ~100 tokens takes a dozen passes, and a short
        // request submitted right after it is prefilled and generates in those passes.
        let runner = try await Leap.load(
            path: TestFixtures.path("models/lfm2-tiny.gguf"), options: LiquidInferenceEngineOptions(cpuThreads: 2, contextSize: 1024))
        let engine = try ServingEngine(runner: runner, configuration: .init(slots: 2, contextSize: 1024, prefillChunk: 8))
        let story = String(repeating: "Once upon a time a small boat sailed to a far island. ", count: 6)
        let longPrompt = Self.request(story + "What happened next?", maxTokens: 8)
        let short = Self.request(Self.prompts[0], maxTokens: 24)
        let promptTokens = try engine.promptTokens(longPrompt.prompt).count
        let shortTokens = try engine.promptTokens(short.prompt).count
        #expect(promptTokens > 80)

        let before = engine.status
        let longAlone = Run(try await collect(try engine.submit(longPrompt)))
        let mid = engine.status
        // Alone: one pass per 8-token chunk, then one per generated token but the last.
        #expect(mid.forwardPasses - before.forwardPasses == (promptTokens + 7) / 8 + 7)
        let shortAlone = Run(try await collect(try engine.submit(short)))

        let r = try await Self.aloneAndTogether(engine, [longPrompt, short])
        #expect(r.alone == [longAlone, shortAlone])
        #expect(r.together == r.alone)
        // Together the two shared passes: fewer passes than the two runs one after the other.
        let sequential = (promptTokens + 7) / 8 + 7 + (shortTokens + 7) / 8 + 23
        #expect(r.sequenceSteps == sequential)
        #expect(r.passes < sequential)
    }

    @Test func aPrefillChunkBelowTwoIsRefused() async throws {
        let runner = try await Leap.load(
            path: TestFixtures.path("models/lfm2-tiny.gguf"), options: LiquidInferenceEngineOptions(cpuThreads: 2, contextSize: 256))
        #expect(throws: ServingError.invalidRequest("prefillChunk must be at least 2, not 1")) {
            try ServingEngine(runner: runner, configuration: .init(slots: 2, prefillChunk: 1))
        }
    }
}

extension Array {
    /// `map` with an async transform, one element at a time, in order.
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var out: [T] = []
        out.reserveCapacity(count)
        for element in self { out.append(try await transform(element)) }
        return out
    }
}

@Suite struct ToolSchemaLimitTests {
    /// `schemaLimits` bound the tools' parameter schemas as they bound `response_format`.
    @Test func aToolSchemaPastTheLimitsIsAnInvalidRequest() async throws {
        func closed(_ name: String, _ inner: JSONValue) -> JSONValue {
            ["type": "object", "additionalProperties": false, "properties": [name: inner], "required": [.string(name)]]
        }
        let nested = closed("a", closed("b", closed("c", closed("d", closed("e", ["type": "boolean"])))))
        let tool = ServingTool(name: "deep", description: "nested", parameters: nested)
        var request = greedyChat("Call it.")
        request.prompt = .chat(messages: [ChatMessage(role: .user, textContent: "Call it.")], tools: [tool])
        request.toolChoice = .required
        let byDefault = try await tinyEngine()
        _ = try byDefault.submit(request).events  // compiles within the default limits
        var tight = JSONSchemaCompiler.Limits()
        tight.maxDepth = 6
        let limited = try await tinyEngine(schemaLimits: tight)
        do {
            _ = try limited.submit(request)
            Issue.record("a tool schema nested past maxDepth 6 was accepted")
        } catch {
            guard case .invalidRequest(let message) = error else { throw error }
            #expect(message.hasPrefix("the tools cannot be turned into a call grammar:"))
            #expect(message.contains("limit maxDepth"))
        }
    }
}
