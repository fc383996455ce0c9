import Foundation

/// The state of a chat (its messages and registered functions) and the streaming helpers
/// that generate the assistant's replies. Create conversations from a `ModelRunner`.
///
/// Thread-safe: its state is guarded by a lock. One generation runs at a time per
/// conversation; starting another while one runs finishes at once with an empty stream
/// (or, for the callback variant, returns nil after emitting `.complete` with `.stop`).
public final class Conversation: @unchecked Sendable {
    /// The runner that generates for this conversation.
    public let modelRunner: ModelRunner
    private let lock = NSLock()
    private var storedHistory: [ChatMessage]
    private var storedFunctions: [LeapFunction] = []
    private var generating = false

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

    /// True while a generation runs.
    public var isGenerating: Bool { lock.withLock { generating } }

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

    /// Streams the reply to `message`. Cancelling the task that iterates the stream stops
    /// the generation within one token. Errors are thrown from the iteration as `LeapError`.
    public func generateResponse(message: ChatMessage, generationOptions: GenerationOptions? = nil)
        -> AsyncThrowingStream<MessageResponse, Error>
    {
        AsyncThrowingStream { continuation in
            guard let runner = modelRunner as? LiquidInferenceEngineRunner else {
                continuation.finish(throwing: LeapError.generationFailure("this conversation's model runner is not a leap-ref runner"))
                return
            }
            let flag = runner.start(
                conversation: self, pending: message, options: generationOptions,
                emit: { continuation.yield($0) },
                finished: { error in
                    if let error { continuation.finish(throwing: error) } else { continuation.finish() }
                })
            guard let flag else {
                continuation.finish()
                return
            }
            continuation.onTermination = { _ in flag.cancel() }
        }
    }

    /// Generates the reply to `message`, delivering responses to `onResponse` (on the
    /// runner's queue). Returns nil, after emitting `.complete` with `.stop`, when a
    /// generation is already running. Errors are not surfaced here: use the stream variant
    /// or `ModelRunner.generateResponse(conversation:...)` for error handling.
    @discardableResult
    public func generateResponse(
        message: ChatMessage, generationOptions: GenerationOptions? = nil,
        onResponse: @escaping @Sendable (MessageResponse) -> Void
    ) -> GenerationHandler? {
        guard let runner = modelRunner as? LiquidInferenceEngineRunner else { return nil }
        let flag = runner.start(
            conversation: self, pending: message, options: generationOptions,
            emit: onResponse, finished: { _ in })
        guard let flag else {
            onResponse(
                .complete(
                    MessageCompletion(
                        message: ChatMessage(role: .assistant, content: []),
                        finishReason: .stop, stats: nil)))
            return nil
        }
        return FlagGenerationHandler(flag: flag)
    }

    // MARK: Internal

    /// Marks the conversation as generating; false if it already was.
    func beginGenerating() -> Bool {
        lock.withLock {
            if generating { return false }
            generating = true
            return true
        }
    }

    /// Ends a generation, appending `messages` when it succeeded.
    func endGenerating(appending messages: [ChatMessage]?) {
        lock.withLock {
            if let messages { storedHistory += messages }
            generating = false
        }
    }
}
