import Foundation

/// Cancels a running generation without tearing down the conversation.
public protocol GenerationHandler: Sendable {
    /// Stops the generation within one token. The reply is not appended to the history.
    func stop()
}

/// A loaded model: creates conversations and drives generation.
///
/// Hold a strong reference for as long as you generate; call `unload()` to release the
/// caches (the memory-mapped weights are released when the runner is deinitialized).
public protocol ModelRunner: AnyObject, Sendable {
    /// A new conversation, optionally starting with a system message.
    func createConversation(systemPrompt: String?) -> Conversation
    /// A conversation that continues the given messages.
    func createConversationFromHistory(history: [ChatMessage]) -> Conversation
    /// Generates the assistant's reply to the conversation's history as it is.
    ///
    /// Responses go to `onResponseCallback` (on a serial queue of the runner, not the main
    /// thread: hop to the main actor for UI work), errors to `onErrorCallback`. The reply is
    /// appended to the conversation's history when the generation finishes successfully.
    func generateResponse(
        conversation: Conversation,
        generationOptions: GenerationOptions?,
        onResponseCallback: @escaping @Sendable (MessageResponse) -> Void,
        onErrorCallback: (@Sendable (LeapError) -> Void)?
    ) -> GenerationHandler
    /// Releases the caches; later generations fail with `LeapError.modelUnloaded`.
    func unload() async
    /// The model's identifier (its `general.name`, or the file name).
    var modelId: String { get }
}

extension ModelRunner {
    /// A new conversation without a system message.
    public func createConversation() -> Conversation { createConversation(systemPrompt: nil) }
}

/// The handler of one generation: `stop()` sets its cancellation flag.
struct FlagGenerationHandler: GenerationHandler {
    let flag: CancellationFlag
    func stop() { flag.cancel() }
}
