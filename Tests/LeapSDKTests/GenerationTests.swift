import Foundation
import LeapJSON
import TestSupport
import Testing

@testable import LeapSDK
@testable import LeapSDKCore

/// Loads lfm2-tiny (random weights, real LFM2 architecture and chat template), with a
/// default seed so that requests without `rngSeed` are reproducible too.
enum TinyModel {
    static let path = TestFixtures.path("models/lfm2-tiny.gguf")

    static func load(contextSize: Int? = 512) async throws -> LiquidInferenceEngineRunner {
        let runner = try await Leap.load(path: path, options: LiquidInferenceEngineOptions(contextSize: contextSize, defaultRNGSeed: 1))
        return try #require(runner as? LiquidInferenceEngineRunner)
    }
}

/// Everything a stream produced.
struct Collected {
    var chunks: [String] = []
    var reasoning: [String] = []
    var calls: [[LeapFunctionCall]] = []
    var completion: MessageCompletion?
    var text: String { chunks.joined() }
}

func collect(_ stream: AsyncThrowingStream<MessageResponse, Error>) async throws -> Collected {
    var c = Collected()
    for try await r in stream {
        switch r {
        case .chunk(let t): c.chunks.append(t)
        case .reasoningChunk(let t): c.reasoning.append(t)
        case .functionCall(let calls): c.calls.append(calls)
        case .audioSample: break
        case .complete(let m): c.completion = m
        }
    }
    return c
}

@Suite(.serialized) struct GenerationTests {
    @Test func loadReportsProgressAndModelId() async throws {
        let seen = Locked<[Double]>([])
        let runner = try await Leap.load(url: URL(fileURLWithPath: TinyModel.path), progress: { p in seen.withLock { $0.append(p) } })
        #expect(runner.modelId == "lfm2-synthetic-tiny")
        let values = seen.withLock { $0 }
        #expect(values.first == 0)
        #expect(values.last == 1)
        #expect(values == values.sorted())
        #expect(values.count > 3)
    }

    @Test func loadFailuresAreTypedErrors() async throws {
        await #expect(throws: LeapError.self) { try await Leap.load(path: "/nonexistent/model.gguf") }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("leap-sdk-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let junk = dir.appendingPathComponent("junk.gguf")
        try Data("not a gguf file at all".utf8).write(to: junk)
        do {
            _ = try await Leap.load(url: junk)
            Issue.record("a junk file loaded")
        } catch let error as LeapError {
            guard case .modelLoadingFailure(let message) = error else {
                Issue.record("wrong error \(error)")
                return
            }
            #expect(message.contains("junk.gguf"))
        }
        let truncated = dir.appendingPathComponent("truncated.gguf")
        let whole = try Data(contentsOf: URL(fileURLWithPath: TinyModel.path))
        try whole.prefix(100_000).write(to: truncated)
        await #expect(throws: LeapError.self) { try await Leap.load(url: truncated) }
        await #expect(throws: LeapError.self) { try await Leap.load(url: URL(string: "https://example.com/m.gguf")!) }
    }

    @Test func streamAssemblesReplyAndAppendsHistory() async throws {
        let runner = try await TinyModel.load()
        let conversation = runner.createConversation(systemPrompt: "You are terse.")
        let options = GenerationOptions(temperature: 0.7, rngSeed: 42, maxOutputTokens: 12)
        let c = try await collect(conversation.generateResponse(userTextMessage: "Hello", generationOptions: options))
        let completion = try #require(c.completion)
        #expect(completion.message.role == .assistant)
        #expect(completion.message.textContent == c.text)
        let stats = try #require(completion.stats)
        #expect(stats.completionTokens == 12)
        #expect(stats.totalTokens == stats.promptTokens + stats.completionTokens)
        #expect(stats.tokenPerSecond > 0)
        #expect(completion.finishReason == .stop)
        let history = conversation.history
        #expect(history.map(\.role) == [.system, .user, .assistant])
        #expect(history[1].textContent == "Hello")
        #expect(history[2].textContent == c.text)
        #expect(!conversation.isGenerating)
        // The prompt is the model's own template: count it independently.
        let expected = try runner.getPromptTokensSize(messages: Array(history.prefix(2)))
        #expect(Int(stats.promptTokens) == expected)
    }

    @Test func sameSeedSameTextDifferentSeedDifferentText() async throws {
        let runner = try await TinyModel.load()
        func reply(seed: UInt64) async throws -> String {
            let c = runner.createConversation(systemPrompt: nil)
            return try await collect(
                c.generateResponse(
                    userTextMessage: "Tell me a story",
                    generationOptions: GenerationOptions(temperature: 1.0, rngSeed: seed, maxOutputTokens: 16))
            ).text
        }
        let a = try await reply(seed: 7)
        let b = try await reply(seed: 7)
        let c = try await reply(seed: 8)
        #expect(a == b)
        #expect(!a.isEmpty)
        #expect(a != c)
    }

    @Test func defaultSeedMakesUnseededRequestsReproducible() async throws {
        let runner = try await TinyModel.load()
        #expect(runner.defaultRNGSeed == 1)
        func reply(seed: UInt64?) async throws -> String {
            try await collect(
                runner.createConversation().generateResponse(
                    userTextMessage: "Tell me a story",
                    generationOptions: GenerationOptions(temperature: 1.0, rngSeed: seed, maxOutputTokens: 16))
            ).text
        }
        let unseeded = try await reply(seed: nil)
        #expect(!unseeded.isEmpty)
        #expect(try await reply(seed: nil) == unseeded)
        #expect(try await reply(seed: 1) == unseeded, "an unseeded request uses the default seed")
    }

    @Test func sequenceLengthEndsWithExceedContext() async throws {
        let runner = try await TinyModel.load()
        let conversation = runner.createConversation(systemPrompt: nil)
        let promptTokens = try runner.getPromptTokensSize(messages: [ChatMessage(role: .user, textContent: "Hi")])
        let options = GenerationOptions(temperature: 0.8, rngSeed: 1, sequenceLength: promptTokens + 5)
        let c = try await collect(conversation.generateResponse(userTextMessage: "Hi", generationOptions: options))
        let completion = try #require(c.completion)
        // lfm2-tiny's random weights do not pick the end-of-turn token in 5 steps at this seed;
        // if they did, the reason would be .stop and this assertion would say so.
        #expect(completion.finishReason == .exceedContext)
        #expect(completion.stats?.completionTokens == 5)
        #expect(completion.stats?.totalTokens == UInt64(promptTokens + 5))
        #expect(conversation.history.count == 2)
    }

    @Test func promptLongerThanContextIsATypedErrorAndLeavesConversationUsable() async throws {
        let runner = try await TinyModel.load(contextSize: 64)
        let conversation = runner.createConversation(systemPrompt: nil)
        let long = String(repeating: "word ", count: 200)
        do {
            _ = try await collect(conversation.generateResponse(userTextMessage: long))
            Issue.record("a prompt longer than the context was accepted")
        } catch let error as LeapError {
            guard case .promptExceedContextLengthFailure(let tokens, let limit) = error else {
                Issue.record("wrong error \(error)")
                return
            }
            #expect(tokens > 64)
            #expect(limit == 64)
            #expect(error.description.contains("shorten"))
        }
        #expect(conversation.history.isEmpty)
        #expect(!conversation.isGenerating)
        let c = try await collect(
            conversation.generateResponse(
                userTextMessage: "Hi", generationOptions: GenerationOptions(rngSeed: 3, maxOutputTokens: 4)))
        #expect(c.completion != nil)
        #expect(conversation.history.count == 2)
    }

    @Test func imagesAndAudioAreRejectedByATextOnlyModel() async throws {
        let runner = try await TinyModel.load()
        let conversation = runner.createConversation(systemPrompt: nil)
        for part in [ChatMessageContent.image(Data([0xFF, 0xD8])), .audio(Data([0x52]))] {
            do {
                _ = try await collect(
                    conversation.generateResponse(message: ChatMessage(role: .user, content: [.text("What is this?"), part])))
                Issue.record("a text-only model accepted \(part)")
            } catch let error as LeapError {
                guard case .unsupportedContent(let message) = error else {
                    Issue.record("wrong error \(error)")
                    return
                }
                #expect(message.contains("no vision encoder") || message.contains("no audio encoder"))
            }
        }
        #expect(conversation.history.isEmpty)
    }

    @Test func secondTurnReusesThePromptCache() async throws {
        let runner = try await TinyModel.load()
        let conversation = runner.createConversation(systemPrompt: "Be brief.")
        let options = GenerationOptions(temperature: 0.5, rngSeed: 5, maxOutputTokens: 8)
        let first = try await collect(conversation.generateResponse(userTextMessage: "One", generationOptions: options))
        let s1 = try #require(first.completion?.stats)
        #expect(s1.cachedPromptTokens == 0)
        let second = try await collect(conversation.generateResponse(userTextMessage: "Two", generationOptions: options))
        let s2 = try #require(second.completion?.stats)
        // Turn 2's prompt starts with turn 1's prompt and reply: at least the first prompt is reused.
        #expect(s2.cachedPromptTokens >= s1.promptTokens)
        #expect(s2.cachedPromptTokens < s2.promptTokens)
        var noCache = options
        noCache.cacheControl = .noCache
        let third = try await collect(conversation.generateResponse(userTextMessage: "Three", generationOptions: noCache))
        #expect(third.completion?.stats?.cachedPromptTokens == 0)
    }

    /// The prompt cache is exact: truncating to a common prefix discards everything after
    /// it (two engines that evaluated different continuations of the same prefix give
    /// bit-identical logits for the same new suffix), and a second turn served from the
    /// cache matches a cold run of the whole prompt to within the prefill/decode tolerance
    /// of docs/numerics.md (the reply's tokens were evaluated by decode, with 8-bit activations).
    @Test func cachedLogitsEqualColdLogits() async throws {
        let a = try await TinyModel.load()
        let b = try await TinyModel.load()
        let prefix = [49152, 1, 4093, 198, 9690, 314, 253, 1743]  // <|startoftext|><|im_start|>user\n...
        let (logitsA, reusedA) = try a.loaded.queue.sync { () throws -> ([Float], Int) in
            _ = try a.sharedScheduler().evaluatePrompt(prefix + [288, 1300, 451, 77, 12], reuseCache: true)
            let r = try a.sharedScheduler().evaluatePrompt(prefix + [900, 901, 902], reuseCache: true)
            return (try a.sharedScheduler().currentLogits(), r)
        }
        let (logitsB, reusedB) = try b.loaded.queue.sync { () throws -> ([Float], Int) in
            _ = try b.sharedScheduler().evaluatePrompt(prefix + [31, 32, 33, 34, 35], reuseCache: true)
            let r = try b.sharedScheduler().evaluatePrompt(prefix + [900, 901, 902], reuseCache: true)
            return (try b.sharedScheduler().currentLogits(), r)
        }
        #expect(reusedA == prefix.count)
        #expect(reusedB == prefix.count)
        #expect(logitsA == logitsB)

        let warm = try await TinyModel.load()
        let cold = try await TinyModel.load()
        let conversation = warm.createConversation(systemPrompt: nil)
        let first = try await collect(
            conversation.generateResponse(
                userTextMessage: "First question", generationOptions: GenerationOptions(rngSeed: 9, maxOutputTokens: 6)))
        let firstPrompt = Int(try #require(first.completion?.stats?.promptTokens))
        let next = conversation.history + [ChatMessage(role: .user, textContent: "Second question")]
        let tokens = try warm.loaded.queue.sync { () throws -> [Int] in
            try warm.loaded.promptTokens(messages: next, tools: [], callFormat: LFMFunctionCallParser(), enableThinking: nil)
        }
        let (reused, warmLogits) = try warm.loaded.queue.sync { () throws -> (Int, [Float]) in
            let r = try warm.sharedScheduler().evaluatePrompt(tokens, reuseCache: true)
            return (r, try warm.sharedScheduler().currentLogits())
        }
        // At least the first turn's prompt comes from the cache (how much of the reply does
        // depends on how its text tokenizes again).
        #expect(reused >= firstPrompt && reused < tokens.count)
        let coldLogits = try cold.loaded.queue.sync { () throws -> [Float] in
            _ = try cold.sharedScheduler().evaluatePrompt(tokens, reuseCache: false)
            return try cold.sharedScheduler().currentLogits()
        }
        let range = (coldLogits.max()! - coldLogits.min()!)
        let maxError = zip(coldLogits, warmLogits).map { abs($0 - $1) }.max()!
        #expect(maxError / range < 0.05, "max error \(maxError) over range \(range)")
        #expect(coldLogits.indices.max { coldLogits[$0] < coldLogits[$1] } == warmLogits.indices.max { warmLogits[$0] < warmLogits[$1] })
    }

    @Test func cancellingTheTaskStopsWithinOneTokenAndKeepsHistory() async throws {
        let runner = try await TinyModel.load()
        let conversation = runner.createConversation(systemPrompt: nil)
        let chunksAfterCancel = Locked(0)
        let cancelled = Locked(false)
        let task = Task {
            var count = 0
            for try await r in conversation.generateResponse(
                userTextMessage: "Go on forever", generationOptions: GenerationOptions(rngSeed: 2, maxOutputTokens: 400))
            {
                if case .chunk = r {
                    count += 1
                    if cancelled.withLock({ $0 }) { chunksAfterCancel.withLock { $0 += 1 } }
                    if count == 3 {
                        cancelled.withLock { $0 = true }
                        withUnsafeCurrentTask { $0?.cancel() }
                    }
                }
            }
            return count
        }
        let count = try await task.value
        #expect(count >= 3)
        #expect(count < 400)
        // The engine notices within one token and finishes.
        try await within(120, "the cancelled generation to end") { await conversation.waitUntilIdle() }
        #expect(!conversation.isGenerating)
        #expect(conversation.history.isEmpty)
        // Usable afterwards.
        let c = try await collect(
            conversation.generateResponse(
                userTextMessage: "Hi", generationOptions: GenerationOptions(rngSeed: 3, maxOutputTokens: 3)))
        #expect(c.completion?.stats?.completionTokens == 3)
        #expect(conversation.history.count == 2)
    }

    /// The runner's `stop()`: called from the response callback of the second chunk, no
    /// chunk follows, then `.complete` with the partial reply, which is exactly the two
    /// chunks delivered (what the engine made before it noticed is dropped, however far
    /// the callbacks lag behind it, e.g. on a busy machine), and the generation ends early.
    @Test func runnerStopEndsWithinOneToken() async throws {
        let runner = try await TinyModel.load()
        struct State {
            var chunks = 0
            var afterStop = 0
            var delivered = ""
            var handler: GenerationHandler?
        }
        let state = Locked(State())
        let done = AsyncStream<MessageCompletion>.makeStream()
        // Hold the engine's queue so that the handler is stored before the first token.
        let gate = DispatchSemaphore(value: 0)
        runner.loaded.queue.async { gate.wait() }
        let handler = runner.generate(
            GenerationRequest(
                messages: [ChatMessage(role: .user, textContent: "Talk")],
                options: GenerationOptions(rngSeed: 4, maxOutputTokens: 300)),
            onResponse: { response in
                switch response {
                case .chunk(let text):
                    let stop: GenerationHandler? = state.withLock { s in
                        s.chunks += 1
                        if s.chunks <= 2 { s.delivered += text }
                        if s.chunks > 2 { s.afterStop += 1 }
                        return s.chunks == 2 ? s.handler : nil
                    }
                    stop?.stop()
                case .complete(let completion):
                    done.continuation.yield(completion)
                    done.continuation.finish()
                default: break
                }
            },
            onError: { _ in done.continuation.finish() })
        state.withLock { $0.handler = handler }
        gate.signal()
        let completion: MessageCompletion? = try await within(120, "the stopped generation's .complete") {
            for await completion in done.stream { return completion }
            return nil
        }
        #expect(completion?.finishReason == .stop)
        #expect(state.withLock { $0.afterStop } == 0)
        #expect(completion?.message.content == [.text(state.withLock { $0.delivered })])
        #expect((completion?.stats?.completionTokens ?? 999) < 300)
    }

    /// `stop()` on the callback variant's handler: no chunk is delivered after it, the
    /// callback still receives `.complete`, and nothing is appended.
    @MainActor @Test func callbackStopDeliversNothingMoreAndDoesNotAppend() async throws {
        let runner = try await TinyModel.load()
        let conversation = runner.createConversation(systemPrompt: nil)
        let recorder = CallbackRecorder()
        var chunksAfterStop = 0
        var handler: GenerationHandler?
        handler = conversation.generateResponse(
            message: ChatMessage(role: .user, textContent: "Talk"),
            generationOptions: GenerationOptions(rngSeed: 4, maxOutputTokens: 300)
        ) { response in
            recorder.record(response)
            guard case .chunk = response else { return }
            if recorder.responses.count > 2 { chunksAfterStop += 1 }
            if recorder.responses.count == 2 { handler?.stop() }
        }
        #expect(handler != nil)
        try await recorder.waitUntilDelivered(conversation)
        #expect(chunksAfterStop == 0)
        #expect(recorder.completion?.finishReason == .stop)
        #expect(conversation.history.isEmpty)
        #expect(!conversation.isGenerating)
    }

    @MainActor @Test func secondGenerationWhileOneRunsFinishesEmpty() async throws {
        let runner = try await TinyModel.load()
        let conversation = runner.createConversation(systemPrompt: nil)
        let first = conversation.generateResponse(
            userTextMessage: "Long", generationOptions: GenerationOptions(rngSeed: 6, maxOutputTokens: 64))
        #expect(conversation.isGenerating)
        let second = try await collect(conversation.generateResponse(userTextMessage: "Again"))
        #expect(second.chunks.isEmpty)
        #expect(second.completion == nil)
        let refused = CallbackRecorder()
        let handler = conversation.generateResponse(message: ChatMessage(role: .user, textContent: "And again")) { r in
            refused.record(r)
        }
        #expect(handler == nil)
        let c = try await collect(first)
        #expect(c.completion?.stats?.completionTokens == 64)
        #expect(conversation.history.count == 2)
        try await refused.waitUntilDelivered(conversation)
        #expect(refused.responses.count == 1)
        #expect(refused.completion?.finishReason == .stop)
    }

    @Test func lowLevelRunnerAPIAnswersTheHistoryAndReportsErrors() async throws {
        let runner = try await TinyModel.load(contextSize: 64)
        let conversation = runner.createConversationFromHistory(history: [ChatMessage(role: .user, textContent: "Hi")])
        let done = AsyncStream<(MessageCompletion?, LeapError?)>.makeStream()
        _ = runner.generateResponse(
            conversation: conversation, generationOptions: GenerationOptions(rngSeed: 1, maxOutputTokens: 5),
            onResponseCallback: { r in
                if case .complete(let m) = r {
                    done.continuation.yield((m, nil))
                    done.continuation.finish()
                }
            },
            onErrorCallback: { e in
                done.continuation.yield((nil, e))
                done.continuation.finish()
            })
        var result: (MessageCompletion?, LeapError?)?
        for await r in done.stream { result = r }
        #expect(result?.0?.stats?.completionTokens == 5)
        #expect(conversation.history.count == 2)

        let tooLong = runner.createConversationFromHistory(history: [
            ChatMessage(role: .user, textContent: String(repeating: "x y ", count: 100))
        ])
        let failed = AsyncStream<LeapError?>.makeStream()
        _ = runner.generateResponse(
            conversation: tooLong, generationOptions: nil,
            onResponseCallback: { _ in },
            onErrorCallback: { e in
                failed.continuation.yield(e)
                failed.continuation.finish()
            })
        var error: LeapError??
        for await e in failed.stream { error = e }
        if case .promptExceedContextLengthFailure? = error ?? nil {
        } else {
            Issue.record("expected promptExceedContextLengthFailure, got \(String(describing: error))")
        }
    }

    /// The prompt size counts the functions' definitions, and is the prompt size of a
    /// generation with them.
    @Test func promptTokensSizeCountsTheFunctions() async throws {
        let runner = try await TinyModel.load()
        let function = LeapFunction(
            name: "get_weather", description: "Query the weather of a city",
            parameters: [LeapFunctionParameter(name: "city", type: .string(StringType()), description: "The city")])
        let messages = [ChatMessage(role: .system, textContent: "Be brief."), ChatMessage(role: .user, textContent: "Weather in Paris?")]
        let without = try runner.getPromptTokensSize(messages: messages)
        let with = try runner.getPromptTokensSize(messages: messages, functions: [function])
        #expect(with > without + 20, "the tool list is missing from the count: \(with) vs \(without)")
        let conversation = runner.createConversation(systemPrompt: "Be brief.")
        conversation.registerFunction(function)
        let c = try await collect(
            conversation.generateResponse(
                userTextMessage: "Weather in Paris?", generationOptions: GenerationOptions(rngSeed: 1, maxOutputTokens: 2)))
        #expect(c.completion?.stats?.promptTokens == UInt64(with))
        // LFM2's template writes BOS (<|startoftext|>) first.
        #expect(try runner.getPromptTokensSize(messages: messages, functions: [function], addBosToken: false) == with - 1)
    }

    /// `getPromptTokensSize` reads only the tokenizer and the template: it returns while the
    /// engine is busy (here its queue is held, as by a long generation).
    @Test func promptTokensSizeDoesNotWaitForTheEngine() async throws {
        let runner = try await TinyModel.load()
        let gate = DispatchSemaphore(value: 0)
        runner.loaded.queue.async { gate.wait() }
        defer { gate.signal() }
        let count = try await within(60, "getPromptTokensSize while the engine is busy") {
            try runner.getPromptTokensSize(messages: [ChatMessage(role: .user, textContent: "Hi")])
        }
        #expect(count > 3)
    }

    /// `getPromptTokensSize` from inside every kind of callback while a generation runs: the
    /// runner's own (on the engine's thread, where the old queue-bound count deadlocked), the
    /// main actor's, and a stream consumer's.
    @MainActor @Test func promptTokensSizeFromInsideCallbacks() async throws {
        let runner = try await TinyModel.load()
        let messages = [ChatMessage(role: .user, textContent: "Hi")]
        let expected = try runner.getPromptTokensSize(messages: messages)
        let options = GenerationOptions(rngSeed: 1, maxOutputTokens: 3)

        let fromEngine = Locked<[Int]>([])
        let done = AsyncStream<Void>.makeStream()
        _ = runner.generate(
            GenerationRequest(messages: messages, options: options),
            onResponse: { response in
                fromEngine.withLock { $0.append((try? runner.getPromptTokensSize(messages: messages)) ?? -1) }
                if case .complete = response { done.continuation.finish() }
            },
            onError: { _ in done.continuation.finish() })
        try await within(120, "the generation to end") { for await _ in done.stream {} }
        #expect(fromEngine.withLock { $0 }.count >= 2, "a chunk and .complete")
        #expect(fromEngine.withLock { $0 }.allSatisfy { $0 == expected })

        let conversation = runner.createConversation()
        let recorder = CallbackRecorder()
        var fromMain: [Int] = []
        _ = conversation.generateResponse(message: messages[0], generationOptions: options) { response in
            recorder.record(response)
            fromMain.append((try? runner.getPromptTokensSize(messages: messages)) ?? -1)
        }
        try await recorder.waitUntilDelivered(conversation)
        #expect(fromMain.count == recorder.responses.count)
        #expect(fromMain.count >= 2)
        #expect(fromMain.allSatisfy { $0 == expected })

        var fromStream: [Int] = []
        for try await _ in runner.createConversation().generateResponse(message: messages[0], generationOptions: options) {
            fromStream.append(try runner.getPromptTokensSize(messages: messages))
        }
        #expect(fromStream.count >= 2)
        #expect(fromStream.allSatisfy { $0 == expected })
    }

    @Test func unloadMakesGenerationFail() async throws {
        let runner = try await TinyModel.load()
        await runner.unload()
        let conversation = runner.createConversation(systemPrompt: nil)
        do {
            _ = try await collect(conversation.generateResponse(userTextMessage: "Hi"))
            Issue.record("generated after unload")
        } catch let error as LeapError {
            #expect(error == .modelUnloaded)
        }
    }
}
