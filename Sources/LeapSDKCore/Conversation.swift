import Foundation

/// The state of a chat (its messages and registered functions) and the streaming helpers
/// that generate the assistant's replies. Create conversations from a `ModelRunner`.
///
/// Thread-safe: its state is guarded by a lock, and every method may be called from any
/// thread, including from inside its own callbacks. One generation runs at a time per
/// conversation; starting another while one runs finishes at once with an empty stream
/// (or, for the callback variant, returns nil after emitting `.complete` with `.stop`).
///
/// Generation goes through `modelRunner.generate(_:onResponse:onError:)`, so a
/// conversation works with any `ModelRunner`. The history and `isGenerating` are updated
/// as the runner reports, never waiting for the consumer of a stream or for the main
/// thread: a main thread blocked on something else cannot hold a generation up.
public final class Conversation: @unchecked Sendable {
    /// The runner that generates for this conversation.
    public let modelRunner: ModelRunner
    private let lock = NSLock()
    private var storedHistory: [ChatMessage]
    private var storedFunctions: [LeapFunction] = []
    /// The running generation, nil when idle.
    private var current: GenerationRun?
    /// Tasks waiting for the running generation to end (`waitUntilIdle`).
    private var idleWaiters: [CheckedContinuation<Void, Never>] = []

    /// A conversation over `history`. Prefer `modelRunner.createConversation(...)`.
    public init(modelRunner: ModelRunner, history: [ChatMessage]) {
        self.modelRunner = modelRunner
        self.storedHistory = history
    }

    /// A copy of the messages so far. A generation that finishes successfully appends the
    /// message it answered and the assistant's reply; a failed or stopped one appends nothing.
    public var history: [ChatMessage] { lock.withLock { storedHistory } }

    /// The functions the model may call.
    public var functions: [LeapFunction] { lock.withLock { storedFunctions } }

    /// True while a generation runs: from the call that starts it until the runner has
    /// finished with it (before its `.complete` reaches a stream or a callback).
    public var isGenerating: Bool { lock.withLock { current != nil } }

    /// Makes a function available to the model (replacing one with the same name).
    public func registerFunction(_ function: LeapFunction) {
        lock.withLock {
            storedFunctions.removeAll { $0.name == function.name }
            storedFunctions.append(function)
        }
    }

    /// The Kotlin-bridged spelling of `registerFunction(_:)`.
    public func registerFunction(function: LeapFunction) { registerFunction(function) }

    /// The history in OpenAI's chat-completions message form (see `ChatMessage.toJSON()`).
    public func exportToJSON() throws -> [[String: Any]] {
        history.map { $0.toJSON() }
    }

    // MARK: Generation

    /// Streams the reply to a user text message.
    public func generateResponse(userTextMessage: String, generationOptions: GenerationOptions? = nil)
        -> AsyncThrowingStream<MessageResponse, Error>
    {
        generateResponse(
            message: ChatMessage(role: .user, content: [.text(userTextMessage)]),
            generationOptions: generationOptions)
    }

    /// Streams the reply to `message`. The stream is not tied to any actor: responses
    /// arrive in the iterating task. Cancelling that task, or leaving the loop early,
    /// stops the generation within one token. Errors are thrown from the iteration as
    /// `LeapError`.
    public func generateResponse(message: ChatMessage, generationOptions: GenerationOptions? = nil)
        -> AsyncThrowingStream<MessageResponse, Error>
    {
        AsyncThrowingStream { continuation in
            guard let run = startGeneration(answering: message, options: generationOptions, delivery: .stream(continuation))
            else {
                continuation.finish()
                return
            }
            continuation.onTermination = { termination in
                if case .cancelled = termination { run.stop() }
            }
        }
    }

    /// Generates the reply to `message`, delivering each response to `onResponse` on the
    /// main actor, in order. After `stop()` on the returned handler no further chunk is
    /// delivered, only the final `.complete`.
    ///
    /// Returns nil, after delivering `.complete` with `.stop` and an empty message, when a
    /// generation is already running. Errors are not surfaced here: use the stream variant
    /// or `ModelRunner.generateResponse(conversation:...)` for error handling.
    @discardableResult
    public func generateResponse(
        message: ChatMessage, generationOptions: GenerationOptions? = nil,
        onResponse: @escaping @MainActor (MessageResponse) -> Void
    ) -> GenerationHandler? {
        let delivery = MainActorDelivery(onResponse: onResponse, onError: nil)
        guard let run = startGeneration(answering: message, options: generationOptions, delivery: .mainActor(delivery)) else {
            delivery.deliverRefusal()
            return nil
        }
        return run
    }

    // MARK: Internal

    /// Starts a generation answering `message` (nil: the history as it is) through the
    /// runner; nil when one is already running.
    func startGeneration(answering message: ChatMessage?, options: GenerationOptions?, delivery: GenerationDelivery)
        -> GenerationRun?
    {
        let started: (GenerationRun, GenerationRequest)? = lock.withLock {
            guard current == nil else { return nil }
            let run = GenerationRun(conversation: self, answering: message, delivery: delivery)
            current = run
            let request = GenerationRequest(
                messages: storedHistory + (message.map { [$0] } ?? []), functions: storedFunctions,
                options: options ?? GenerationOptions())
            return (run, request)
        }
        guard let (run, request) = started else { return nil }
        // Outside the lock: a runner may report (even finish) before `generate` returns.
        let handler = modelRunner.generate(request, onResponse: { run.receive($0) }, onError: { run.fail($0) })
        run.attach(handler)
        return run
    }

    /// Ends `run`, appending `messages` when it succeeded. Returns the `waitUntilIdle`
    /// callers to resume once the run has passed its last response on.
    func finish(_ run: GenerationRun, appending messages: [ChatMessage]?) -> [CheckedContinuation<Void, Never>] {
        lock.withLock {
            guard current === run else { return [] }
            if let messages { storedHistory += messages }
            current = nil
            defer { idleWaiters = [] }
            return idleWaiters
        }
    }

    /// Returns when no generation is running (at once if none is). When it returns after
    /// a generation, that generation's last response has been yielded to its stream, or
    /// queued on the main queue for its callbacks.
    func waitUntilIdle() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let idle = lock.withLock {
                if current == nil { return true }
                idleWaiters.append(continuation)
                return false
            }
            if idle { continuation.resume() }
        }
    }
}

/// Where a generation's responses go: a stream's continuation, or callbacks on the main actor.
enum GenerationDelivery: Sendable {
    case stream(AsyncThrowingStream<MessageResponse, Error>.Continuation)
    case mainActor(MainActorDelivery)
}

/// Delivers responses to main-actor callbacks through the main dispatch queue, which
/// keeps them in order. Nothing waits for a delivery: when the main thread is busy the
/// deliveries queue up and the generation goes on.
struct MainActorDelivery: Sendable {
    let onResponse: @MainActor (MessageResponse) -> Void
    let onError: (@MainActor (LeapError) -> Void)?

    /// Delivers `response` unless `isSuppressed` says otherwise when its turn comes.
    func deliver(_ response: MessageResponse, unless isSuppressed: @escaping @Sendable () -> Bool = { false }) {
        let onResponse = self.onResponse
        DispatchQueue.main.async {
            MainActor.assumeIsolated {
                if !isSuppressed() { onResponse(response) }
            }
        }
    }

    func deliver(_ error: LeapError) {
        guard let onError else { return }
        DispatchQueue.main.async { MainActor.assumeIsolated { onError(error) } }
    }

    /// The `.complete` that refuses a second generation on a busy conversation.
    func deliverRefusal() {
        deliver(.complete(MessageCompletion(message: ChatMessage(role: .assistant, content: []), finishReason: .stop, stats: nil)))
    }
}

/// One generation of a conversation: keeps the books (history, `isGenerating`) as the
/// runner reports, and passes the responses on to the stream or the callbacks.
final class GenerationRun: GenerationHandler, @unchecked Sendable {
    private let conversation: Conversation
    /// The message being answered; nil when the history is answered as it is.
    private let message: ChatMessage?
    private let delivery: GenerationDelivery
    private let lock = NSLock()
    // Guarded by `lock`.
    private var runnerHandler: GenerationHandler?
    private var stopped = false
    private var ended = false

    init(conversation: Conversation, answering message: ChatMessage?, delivery: GenerationDelivery) {
        self.conversation = conversation
        self.message = message
        self.delivery = delivery
    }

    /// True once `stop()` was called.
    var isStopped: Bool { lock.withLock { stopped } }

    /// Stops the generation: the runner is told, nothing more than the final `.complete`
    /// is delivered, and the reply is not appended to the history.
    func stop() {
        let handler: GenerationHandler? = lock.withLock {
            if stopped || ended { return nil }
            stopped = true
            return runnerHandler
        }
        handler?.stop()
    }

    /// Takes the runner's handler (after `generate` returned); forwards an earlier `stop()`.
    func attach(_ handler: GenerationHandler) {
        let stopNow = lock.withLock {
            runnerHandler = handler
            return stopped && !ended
        }
        if stopNow { handler.stop() }
    }

    /// A response from the runner.
    func receive(_ response: MessageResponse) {
        guard case .complete(let completion) = response else {
            let (skip, stopped) = lock.withLock { (ended, self.stopped) }
            if skip || stopped { return }
            forward(response)
            return
        }
        let stopped: Bool? = lock.withLock {
            if ended { return nil }
            ended = true
            return self.stopped
        }
        guard let stopped else { return }
        // The books first, so that whoever reacts to `.complete` sees the new history.
        let waiters = conversation.finish(self, appending: stopped ? nil : (message.map { [$0] } ?? []) + [completion.message])
        forward(response)
        if case .stream(let continuation) = delivery { continuation.finish() }
        for waiter in waiters { waiter.resume() }
    }

    /// The runner's error: nothing is appended.
    func fail(_ error: LeapError) {
        let first = lock.withLock {
            if ended { return false }
            ended = true
            return true
        }
        guard first else { return }
        let waiters = conversation.finish(self, appending: nil)
        switch delivery {
        case .stream(let continuation): continuation.finish(throwing: error)
        case .mainActor(let callbacks): callbacks.deliver(error)
        }
        for waiter in waiters { waiter.resume() }
    }

    private func forward(_ response: MessageResponse) {
        switch delivery {
        case .stream(let continuation):
            continuation.yield(response)
        case .mainActor(let callbacks):
            if case .complete = response {
                callbacks.deliver(response)
            } else {
                // The run stays alive until its deliveries have run (nothing else holds the closure).
                callbacks.deliver(response, unless: { self.isStopped })
            }
        }
    }
}
