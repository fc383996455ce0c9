import Dispatch
import Foundation
import TestSupport
import Testing

@testable import LeapSDKCore

/// An in-memory `ModelRunner` that plays scripted replies: the `ModelRunner` of an app or a
/// test, which `Conversation` must work with as it works with leap-ref's engine.
///
/// Each `generate` call takes the next script (one chunk "ok" when none is left), records
/// the request, and plays the script on a thread of its own (generations of several
/// conversations run at the same time, as with a batching engine), then emits `.complete`
/// with the assembled reply. After the last callback of a generation has returned, it
/// signals `generationEnded`.
final class ScriptedRunner: ModelRunner, @unchecked Sendable {
    enum Step: Sendable {
        case chunk(String)
        case reasoning(String)
        case calls([LeapFunctionCall])
        /// Fails the generation (no `.complete`).
        case fail(LeapError)
        /// Blocks the generation until `stop()` is called on its handler.
        case waitUntilStopped
        /// Blocks until `count` generations of this runner have reached a rendezvous.
        case rendezvous(count: Int)
    }

    let modelId = "scripted"
    private let lock = NSLock()
    private var scripts: [[Step]]
    private var recorded: [GenerationRequest] = []
    private var stopCalls = 0
    private var arrived = 0
    private let rendezvousCondition = NSCondition()
    /// Signalled once per generation, after its last callback returned.
    let generationEnded = DispatchSemaphore(value: 0)

    init(_ scripts: [[Step]]) { self.scripts = scripts }

    /// The requests received, in order.
    var requests: [GenerationRequest] { lock.withLock { recorded } }
    /// How many times a handler's `stop()` was called.
    var stops: Int { lock.withLock { stopCalls } }

    func unload() async {}

    final class Handler: GenerationHandler, @unchecked Sendable {
        private let condition = NSCondition()
        private var stopped = false
        private let onStop: @Sendable () -> Void
        init(onStop: @escaping @Sendable () -> Void) { self.onStop = onStop }

        func stop() {
            condition.withLock {
                stopped = true
                condition.broadcast()
            }
            onStop()
        }
        var isStopped: Bool { condition.withLock { stopped } }
        func waitUntilStopped() {
            condition.withLock { while !stopped { condition.wait() } }
        }
    }

    func generate(
        _ request: GenerationRequest,
        onResponse: @escaping @Sendable (MessageResponse) -> Void,
        onError: @escaping @Sendable (LeapError) -> Void
    ) -> GenerationHandler {
        let script: [Step] = lock.withLock {
            recorded.append(request)
            return scripts.isEmpty ? [.chunk("ok")] : scripts.removeFirst()
        }
        let handler = Handler(onStop: { [weak self] in self?.lock.withLock { self?.stopCalls += 1 } })
        Thread.detachNewThread { [self] in
            defer { generationEnded.signal() }
            var text = ""
            var reasoning = ""
            var calls: [LeapFunctionCall] = []
            for step in script {
                if handler.isStopped { break }
                switch step {
                case .chunk(let piece):
                    text += piece
                    onResponse(.chunk(piece))
                case .reasoning(let piece):
                    reasoning += piece
                    onResponse(.reasoningChunk(piece))
                case .calls(let parsed):
                    calls += parsed
                    onResponse(.functionCall(parsed))
                case .fail(let error):
                    onError(error)
                    return
                case .waitUntilStopped:
                    handler.waitUntilStopped()
                case .rendezvous(let count):
                    rendezvousCondition.withLock {
                        arrived += 1
                        rendezvousCondition.broadcast()
                        while arrived < count { rendezvousCondition.wait() }
                    }
                }
            }
            let message = ChatMessage(
                role: .assistant, content: [.text(text)], reasoningContent: reasoning.isEmpty ? nil : reasoning,
                functionCalls: calls.isEmpty ? nil : calls)
            let tokens = UInt64(script.count)
            onResponse(
                .complete(
                    MessageCompletion(
                        message: message, finishReason: .stop,
                        stats: GenerationStats(promptTokens: 1, completionTokens: tokens, totalTokens: tokens + 1, tokenPerSecond: 1))))
        }
        return handler
    }
}

/// Records what main-actor callbacks receive, and waits for a generation's `.complete` as
/// an event: it returns as soon as `.complete` arrives, and fails at once when the
/// generation ended without one (an error, which the callback variant does not report).
@MainActor final class CallbackRecorder {
    private(set) var responses: [MessageResponse] = []
    private(set) var errors: [LeapError] = []
    /// Whether every callback ran on the main queue, the main actor's executor. (Not
    /// `Thread.isMainThread`: on Linux an `async` main hands the main queue to a worker
    /// thread, `dispatch_main()`'s way, so the main actor runs there.)
    private(set) var allOnMainQueue = true

    private static let mainQueueKey: DispatchSpecificKey<Bool> = {
        let key = DispatchSpecificKey<Bool>()
        DispatchQueue.main.setSpecific(key: key, value: true)
        return key
    }()

    init() { _ = Self.mainQueueKey }

    private func noteQueue() {
        allOnMainQueue = allOnMainQueue && DispatchQueue.getSpecific(key: Self.mainQueueKey) == true
    }

    func record(_ response: MessageResponse) {
        noteQueue()
        responses.append(response)
    }

    func record(_ error: LeapError) {
        noteQueue()
        errors.append(error)
    }

    var completion: MessageCompletion? {
        for case .complete(let completion) in responses { return completion }
        return nil
    }

    var text: String {
        responses.map { if case .chunk(let t) = $0 { return t } else { return "" } }.joined()
    }

    /// Returns once `conversation` has stopped generating and everything it delivered to
    /// the main actor has run (its last delivery is queued on the main queue before the
    /// conversation reports idle, and the main queue runs in order).
    func waitUntilDelivered(_ conversation: Conversation, seconds: Double = 300) async throws {
        try await within(seconds, "the generation to end") { await conversation.waitUntilIdle() }
        await Task.yield()
    }
}
