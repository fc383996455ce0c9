import Foundation

/// Cancels a running generation without tearing down the conversation.
public protocol GenerationHandler: Sendable {
    /// Stops the generation within one token. The reply is not appended to the history.
    func stop()
}

/// What a runner is asked to generate: the reply to a whole transcript.
public struct GenerationRequest: Sendable {
    /// The conversation so far, the message being answered last.
    public var messages: [ChatMessage]
    /// The functions the model may call.
    public var functions: [LeapFunction]
    /// Sampling, limits, constraints and the call parser.
    public var options: GenerationOptions

    public init(messages: [ChatMessage], functions: [LeapFunction] = [], options: GenerationOptions = GenerationOptions()) {
        self.messages = messages
        self.functions = functions
        self.options = options
    }
}

/// A loaded model: creates conversations and drives generation.
///
/// Hold a strong reference for as long as you generate; call `unload()` to release the
/// caches (the memory-mapped weights are released when the runner is deinitialized).
///
/// A runner of your own (a remote model, a test double) implements `modelId`, `unload()`
/// and `generate(_:onResponse:onError:)`; conversations, streams and main-actor
/// callbacks come from the default implementations.
public protocol ModelRunner: AnyObject, Sendable {
    /// A new conversation, optionally starting with a system message.
    func createConversation(systemPrompt: String?) -> Conversation
    /// A conversation that continues the given messages.
    func createConversationFromHistory(history: [ChatMessage]) -> Conversation
    /// Generates the assistant's reply to the conversation's history as it is.
    ///
    /// `onResponseCallback` receives the responses and `onErrorCallback` the error of a
    /// failed generation, on the main actor, in order. The reply is appended to the
    /// conversation's history when the generation finishes successfully, before `.complete`
    /// is delivered. When the conversation is already generating, `.complete` with
    /// `.stop` and an empty message is delivered and the returned handler does nothing.
    func generateResponse(
        conversation: Conversation,
        generationOptions: GenerationOptions?,
        onResponseCallback: @escaping @MainActor (MessageResponse) -> Void,
        onErrorCallback: (@MainActor (LeapError) -> Void)?
    ) -> GenerationHandler
    /// Releases the caches; later generations fail with `LeapError.modelUnloaded`.
    func unload() async
    /// The model's identifier (its `general.name`, or the file name).
    var modelId: String { get }

    /// The parser of the function-call syntax this model writes (chosen from its chat
    /// template and special tokens for leap-ref's runner; `LFMFunctionCallParser` by
    /// default). The tool loop of `RunAnywhere` generates and parses calls with it.
    var functionCallParser: any LeapFunctionCallParserProtocol { get }

    /// The generation entry point that `Conversation` (streams and callbacks) and the
    /// low-level `generateResponse(conversation:...)` are built on.
    ///
    /// Starts generating the reply to `request` and returns at once, without waiting for
    /// the model, for the main thread, or for other generations; it may be called from any
    /// thread, including the main thread and from inside these callbacks.
    ///
    /// - `onResponse` receives the responses in order, one at a time, on a thread of the
    ///   runner's choosing (possibly before `generate` returns): text and reasoning chunks
    ///   and function calls as they are decoded, then exactly one `.complete` whose
    ///   message is the assembled reply.
    /// - `onError` is called instead of `.complete` when the generation fails; nothing
    ///   follows it.
    /// - `stop()` on the returned handler ends the generation within one token; it still
    ///   ends with `.complete` (the partial reply, finish reason `.stop`).
    ///
    /// Neither callback may block on another generation or on the main thread: the runner
    /// may serve several requests at once (leap-ref's runs them one at a time today).
    func generate(
        _ request: GenerationRequest,
        onResponse: @escaping @Sendable (MessageResponse) -> Void,
        onError: @escaping @Sendable (LeapError) -> Void
    ) -> GenerationHandler
}

extension ModelRunner {
    /// A new conversation without a system message.
    public func createConversation() -> Conversation { createConversation(systemPrompt: nil) }

    /// A conversation starting with a system message when `systemPrompt` is given.
    public func createConversation(systemPrompt: String?) -> Conversation {
        let history = systemPrompt.map { [ChatMessage(role: .system, content: [.text($0)])] } ?? []
        return Conversation(modelRunner: self, history: history)
    }

    /// A conversation continuing `history`.
    public func createConversationFromHistory(history: [ChatMessage]) -> Conversation {
        Conversation(modelRunner: self, history: history)
    }

    /// Answers the conversation's history as it is, through `generate(_:onResponse:onError:)`,
    /// delivering on the main actor.
    public func generateResponse(
        conversation: Conversation,
        generationOptions: GenerationOptions?,
        onResponseCallback: @escaping @MainActor (MessageResponse) -> Void,
        onErrorCallback: (@MainActor (LeapError) -> Void)?
    ) -> GenerationHandler {
        let delivery = MainActorDelivery(onResponse: onResponseCallback, onError: onErrorCallback)
        guard let run = conversation.startGeneration(answering: nil, options: generationOptions, delivery: .mainActor(delivery))
        else {
            delivery.deliverRefusal()
            return FlagGenerationHandler(flag: CancellationFlag())
        }
        return run
    }

    /// LFM2's Pythonic call syntax.
    public var functionCallParser: any LeapFunctionCallParserProtocol { LFMFunctionCallParser() }
}

/// The handler of one generation: `stop()` sets its cancellation flag.
struct FlagGenerationHandler: GenerationHandler {
    let flag: CancellationFlag
    func stop() { flag.cancel() }
}
