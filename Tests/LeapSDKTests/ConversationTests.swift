import Dispatch
import Foundation
import LeapJSON
import TestSupport
import Testing

@testable import LeapSDKCore

/// `Conversation` over a `ModelRunner` that is not leap-ref's engine (`ScriptedRunner`):
/// streams, main-actor callbacks, history, stop, errors, a busy conversation, and a main
/// thread that is blocked while a generation runs.
@Suite struct ConversationTests {
    static let weatherCall = LeapFunctionCall(name: "get_weather", arguments: ["city": "Paris"])

    @Test func streamGoesThroughTheRunnerAndCommitsTheHistory() async throws {
        let runner = ScriptedRunner([[.reasoning("hmm"), .chunk("It is "), .calls([Self.weatherCall]), .chunk("sunny.")]])
        let conversation = runner.createConversation(systemPrompt: "Be brief.")
        conversation.registerFunction(LeapFunction(name: "get_weather", description: "Weather", parameters: []))
        let options = GenerationOptions(temperature: 0.25, rngSeed: 5, functionCallParser: HermesFunctionCallParser())
        let c = try await collect(conversation.generateResponse(userTextMessage: "Weather?", generationOptions: options))

        #expect(c.reasoning == ["hmm"])
        #expect(c.chunks == ["It is ", "sunny."])
        #expect(c.calls.map { $0.map(\.name) } == [["get_weather"]])
        let completion = try #require(c.completion)
        #expect(completion.message.textContent == "It is sunny.")
        #expect(completion.message.reasoningContent == "hmm")
        // The runner was asked for the whole transcript, with the functions and options.
        let request = try #require(runner.requests.first)
        #expect(request.messages.map(\.role) == [.system, .user])
        #expect(request.messages.last?.textContent == "Weather?")
        #expect(request.functions.map(\.name) == ["get_weather"])
        #expect(request.options.temperature == 0.25 && request.options.rngSeed == 5)
        #expect(request.options.functionCallParser is HermesFunctionCallParser)
        // The message and the reply are in the history, before the stream ended.
        let history = conversation.history
        #expect(history.map(\.role) == [.system, .user, .assistant])
        #expect(history[2].functionCalls?.first?.arguments["city"] as? String == "Paris")
        #expect(!conversation.isGenerating)
    }

    @Test func runnerErrorsAreThrownFromTheStreamAndAppendNothing() async throws {
        let runner = ScriptedRunner([[.chunk("par"), .fail(.generationFailure("the remote model is gone"))]])
        let conversation = runner.createConversation()
        await #expect(throws: LeapError.generationFailure("the remote model is gone")) {
            _ = try await collect(conversation.generateResponse(userTextMessage: "Hi"))
        }
        #expect(conversation.history.isEmpty)
        #expect(!conversation.isGenerating)
    }

    @MainActor @Test func callbacksRunOnTheMainActorInOrder() async throws {
        let runner = ScriptedRunner([[.chunk("a"), .chunk("b"), .calls([Self.weatherCall]), .chunk("c")]])
        let conversation = runner.createConversation()
        let recorder = CallbackRecorder()
        var historyAtComplete: [ChatMessageRole] = []
        var generatingAtComplete = true
        let handler = conversation.generateResponse(message: ChatMessage(role: .user, textContent: "Go")) { response in
            // A main-actor closure: it may touch main-actor state without hopping.
            recorder.record(response)
            if case .complete = response {
                historyAtComplete = conversation.history.map(\.role)
                generatingAtComplete = conversation.isGenerating
            }
        }
        #expect(handler != nil)
        try await recorder.waitUntilDelivered(conversation)

        #expect(recorder.allOnMainQueue)
        #expect(recorder.text == "abc")
        #expect(recorder.responses.count == 5)
        guard case .functionCall(let calls) = recorder.responses[2] else {
            Issue.record("the third response is not the call: \(recorder.responses)")
            return
        }
        #expect(calls.map(\.name) == ["get_weather"])
        #expect(recorder.completion?.message.textContent == "abc")
        // The history was committed before `.complete` was delivered.
        #expect(historyAtComplete == [.user, .assistant])
        #expect(!generatingAtComplete)
    }

    @MainActor @Test func lowLevelAPIReportsErrorsOnTheMainActor() async throws {
        let runner = ScriptedRunner([
            [.chunk("x"), .fail(.promptExceedContextLengthFailure(tokens: 9, limit: 4))],
            [.chunk("fine")]
        ])
        let conversation = runner.createConversationFromHistory(history: [ChatMessage(role: .user, textContent: "Hi")])
        let recorder = CallbackRecorder()
        _ = runner.generateResponse(
            conversation: conversation, generationOptions: nil,
            onResponseCallback: { recorder.record($0) },
            onErrorCallback: { recorder.record($0) })
        try await recorder.waitUntilDelivered(conversation)
        #expect(recorder.errors == [.promptExceedContextLengthFailure(tokens: 9, limit: 4)])
        #expect(recorder.completion == nil)
        #expect(recorder.allOnMainQueue)
        #expect(conversation.history.count == 1)

        // The low-level API answers the history as it is: only the reply is appended.
        let second = CallbackRecorder()
        _ = runner.generateResponse(
            conversation: conversation, generationOptions: nil,
            onResponseCallback: { second.record($0) }, onErrorCallback: { second.record($0) })
        try await second.waitUntilDelivered(conversation)
        #expect(second.errors.isEmpty)
        #expect(conversation.history.map(\.textContent) == ["Hi", "fine"])
        #expect(runner.requests[1].messages.map(\.textContent) == ["Hi"])
    }

    @MainActor @Test func stopFromACallbackDeliversOnlyTheFinalComplete() async throws {
        // The runner keeps producing until it is told to stop.
        let runner = ScriptedRunner([[.chunk("first"), .chunk("second"), .waitUntilStopped, .chunk("after stop")]])
        let conversation = runner.createConversation()
        let recorder = CallbackRecorder()
        var handler: GenerationHandler?
        handler = conversation.generateResponse(message: ChatMessage(role: .user, textContent: "Talk")) { response in
            recorder.record(response)
            if case .chunk("first") = response { handler?.stop() }
        }
        try await recorder.waitUntilDelivered(conversation)
        // "second" was queued before the stop but is not delivered after it.
        #expect(recorder.text == "first")
        #expect(recorder.responses.count == 2)
        #expect(recorder.completion?.finishReason == .stop)
        #expect(runner.stops == 1)
        #expect(conversation.history.isEmpty, "a stopped generation appends nothing")
    }

    @Test func cancellingTheStreamStopsTheRunner() async throws {
        let runner = ScriptedRunner([[.chunk("one"), .waitUntilStopped, .chunk("two")]])
        let conversation = runner.createConversation()
        let task = Task {
            var chunks: [String] = []
            for try await response in conversation.generateResponse(userTextMessage: "Hi") {
                if case .chunk(let t) = response {
                    chunks.append(t)
                    withUnsafeCurrentTask { $0?.cancel() }
                }
            }
            return chunks
        }
        #expect(try await task.value == ["one"])
        try await within(60, "the generation to stop") { await conversation.waitUntilIdle() }
        #expect(runner.stops == 1)
        #expect(conversation.history.isEmpty)
    }

    @MainActor @Test func aBusyConversationRefusesEveryKindOfRequest() async throws {
        let runner = ScriptedRunner([[.chunk("long"), .waitUntilStopped]])
        let conversation = runner.createConversation()
        let started = conversation.generateResponse(message: ChatMessage(role: .user, textContent: "1")) { _ in }
        let first = try #require(started)
        #expect(conversation.isGenerating)

        let streamed = try await collect(conversation.generateResponse(userTextMessage: "2"))
        #expect(streamed.chunks.isEmpty && streamed.completion == nil)
        let refused = CallbackRecorder()
        let third = conversation.generateResponse(message: ChatMessage(role: .user, textContent: "3")) { refused.record($0) }
        #expect(third == nil)
        let lowLevel = CallbackRecorder()
        let noOp = runner.generateResponse(
            conversation: conversation, generationOptions: nil,
            onResponseCallback: { lowLevel.record($0) }, onErrorCallback: { lowLevel.record($0) })
        noOp.stop()  // does nothing to the running generation
        #expect(conversation.isGenerating)

        first.stop()
        try await refused.waitUntilDelivered(conversation)
        for recorder in [refused, lowLevel] {
            #expect(recorder.responses.count == 1)
            #expect(recorder.completion?.finishReason == .stop)
            #expect(recorder.completion?.message.content.isEmpty == true)
        }
        #expect(runner.requests.count == 1)
        #expect(conversation.history.isEmpty)
    }

    /// Two conversations of one runner generate at the same time: each generation waits
    /// for the other to start, which would never happen if they were run one after the other.
    @Test func conversationsOfOneRunnerMayGenerateConcurrently() async throws {
        let runner = ScriptedRunner([[.chunk("a"), .rendezvous(count: 2)], [.chunk("b"), .rendezvous(count: 2)]])
        let one = runner.createConversation()
        let two = runner.createConversation()
        let texts = try await within(120, "two concurrent generations") {
            async let a = collect(one.generateResponse(userTextMessage: "x"))
            async let b = collect(two.generateResponse(userTextMessage: "y"))
            return try await [a.text, b.text]
        }
        #expect(Set(texts) == ["a", "b"])
    }

    /// A main thread blocked while a generation runs (here: waiting for the runner to end
    /// synchronously) does not hold the generation up: the runner finishes, the history is
    /// committed and `isGenerating` turns false while the main thread is still blocked;
    /// the callbacks run, in order, once it is free again.
    @MainActor @Test func aBlockedMainThreadDoesNotHoldUpAGeneration() async throws {
        let runner = ScriptedRunner([[.chunk("a"), .chunk("b"), .chunk("c")]])
        let conversation = runner.createConversation()
        let recorder = CallbackRecorder()
        _ = conversation.generateResponse(message: ChatMessage(role: .user, textContent: "Hi")) { recorder.record($0) }

        // Block the main thread (this test runs on it) until the runner has ended.
        let ended = runner.generationEnded.wait(timeout: .now() + 120)
        #expect(ended == .success, "the generation did not end while the main thread was blocked")
        #expect(!conversation.isGenerating)
        #expect(conversation.history.map(\.textContent) == ["Hi", "abc"])
        #expect(recorder.responses.isEmpty, "nothing can run on the main thread while it is blocked")

        try await recorder.waitUntilDelivered(conversation)
        #expect(recorder.text == "abc")
        #expect(recorder.completion != nil)
    }

    /// The stream is not tied to the main actor: a main thread blocked until a background
    /// task has read a whole reply is not a deadlock.
    @MainActor @Test func aBlockedMainThreadCanWaitForAStreamConsumer() async throws {
        let runner = ScriptedRunner([[.chunk("x"), .chunk("y")]])
        let conversation = runner.createConversation()
        let consumed = DispatchSemaphore(value: 0)
        let text = Locked("")
        Task.detached {
            let c = try await collect(conversation.generateResponse(userTextMessage: "Hi"))
            text.withLock { $0 = c.text }
            consumed.signal()
        }
        #expect(consumed.wait(timeout: .now() + 120) == .success)
        #expect(text.withLock { $0 } == "xy")
    }

    /// Calling back into the SDK from a callback (history, `isGenerating`, starting the next
    /// turn) does not deadlock.
    @MainActor @Test func theNextTurnCanStartFromTheCompleteCallback() async throws {
        let runner = ScriptedRunner([[.chunk("one")], [.chunk("two")]])
        let conversation = runner.createConversation()
        let first = CallbackRecorder()
        let second = CallbackRecorder()
        var started = false
        _ = conversation.generateResponse(message: ChatMessage(role: .user, textContent: "1")) { response in
            first.record(response)
            if case .complete = response {
                let next = conversation.generateResponse(message: ChatMessage(role: .user, textContent: "2")) { second.record($0) }
                started = next != nil
            }
        }
        try await first.waitUntilDelivered(conversation)
        #expect(started)
        try await second.waitUntilDelivered(conversation)
        #expect(second.text == "two")
        #expect(conversation.history.map(\.textContent) == ["1", "one", "2", "two"])
    }

    @Test func customRunnersGetTheDefaultsOfTheProtocol() async throws {
        let runner: ModelRunner = ScriptedRunner([])
        #expect(runner.functionCallParser is LFMFunctionCallParser)
        #expect(runner.createConversation(systemPrompt: "s").history.map(\.role) == [.system])
        #expect(runner.createConversation().history.isEmpty)
        let conversation = runner.createConversationFromHistory(history: [ChatMessage(role: .user, textContent: "q")])
        #expect(conversation.modelRunner === runner)
        let c = try await collect(conversation.generateResponse(userTextMessage: "again"))
        #expect(c.text == "ok")
        #expect(conversation.history.count == 3)
    }
}

// The example runner of docs/leap-sdk.md ("Your own ModelRunner"), as written there; the
// test below runs it.
final class EchoRunner: ModelRunner {
    let modelId = "echo"
    func unload() async {}

    /// The echo is instant: there is nothing to stop.
    struct Handler: GenerationHandler { func stop() {} }

    func generate(
        _ request: GenerationRequest,  // messages (answered last), functions, options
        onResponse: @escaping @Sendable (MessageResponse) -> Void,
        onError: @escaping @Sendable (LeapError) -> Void
    ) -> GenerationHandler {
        let text = request.messages.last?.textContent ?? ""
        DispatchQueue.global().async {
            onResponse(.chunk(text))
            onResponse(
                .complete(
                    MessageCompletion(
                        message: ChatMessage(role: .assistant, textContent: text), finishReason: .stop, stats: nil)))
        }
        return Handler()
    }
}

extension ConversationTests {
    @MainActor @Test func theDocumentedEchoRunnerStreamsAndCallsBack() async throws {
        let conversation = EchoRunner().createConversation(systemPrompt: nil)  // streams and callbacks work
        let streamed = try await collect(conversation.generateResponse(userTextMessage: "hello"))
        #expect(streamed.text == "hello")
        let recorder = CallbackRecorder()
        _ = conversation.generateResponse(message: ChatMessage(role: .user, textContent: "again")) { recorder.record($0) }
        try await recorder.waitUntilDelivered(conversation)
        #expect(recorder.text == "again")
        #expect(conversation.history.map(\.textContent) == ["hello", "hello", "again", "again"])
    }
}
