import Foundation
import LeapSDKCore

/// One model reply of the tool loop: its text and the calls it made.
struct ToolRound: Sendable {
    var text: String
    var calls: [LeapFunctionCall]
}

/// Generates one model reply for the tool loop. The real implementation is
/// `ConversationRoundGenerator`; tests script replies with a fake.
protocol ToolRoundGenerator: AnyObject, Sendable {
    /// Appends `messages` (a user message, or the tool results of the previous round) to
    /// the conversation and generates the assistant's reply, streaming its text to `onText`.
    func generateRound(
        appending messages: [ChatMessage], functions: [LeapFunction], options: GenerationOptions,
        onText: @escaping @Sendable (String) -> Void
    ) async throws -> ToolRound
}

/// Generates rounds with a LEAP `Conversation`. Several messages before one reply (the
/// results of several calls) are added by continuing the history in a new conversation of
/// the same runner; the prompt cache keeps the shared prefix, so nothing is recomputed.
///
/// Calls are written and parsed in the model's own syntax: every round uses the runner's
/// `functionCallParser` (LFM2's Pythonic calls, or Hermes JSON calls for a model whose
/// template writes `<tool_call>` blocks), whatever parser the options carried, and the
/// engine constrains call blocks with the grammar of that syntax.
final class ConversationRoundGenerator: ToolRoundGenerator, @unchecked Sendable {
    // `@unchecked`: `conversation` is only replaced between rounds, which the loop runs
    // one after another; reads go through the lock.
    private let lock = NSLockBox()
    private var current: Conversation

    init(conversation: Conversation) { current = conversation }

    /// The conversation as it is now (after the last round: with its messages and reply).
    var conversation: Conversation { lock.withLock { current } }

    func generateRound(
        appending messages: [ChatMessage], functions: [LeapFunction], options: GenerationOptions,
        onText: @escaping @Sendable (String) -> Void
    ) async throws -> ToolRound {
        guard let last = messages.last else { preconditionFailure("a round answers at least one message") }
        var conversation = self.conversation
        if messages.count > 1 {
            conversation = conversation.modelRunner.createConversationFromHistory(
                history: conversation.history + messages.dropLast())
        }
        let registered = Set(conversation.functions.map(\.name))
        for function in functions where !registered.contains(function.name) { conversation.registerFunction(function) }
        lock.withLock { current = conversation }
        var options = options
        options.functionCallParser = conversation.modelRunner.functionCallParser

        var text = ""
        var calls: [LeapFunctionCall] = []
        var completed: ChatMessage?
        for try await response in conversation.generateResponse(message: last, generationOptions: options) {
            switch response {
            case .chunk(let piece):
                text += piece
                onText(piece)
            case .functionCall(let parsed):
                calls += parsed
            case .complete(let completion):
                completed = completion.message
            case .reasoningChunk, .audioSample:
                break
            }
        }
        guard let completed else {
            throw SDKError(.processingFailed, "the conversation is already generating a reply; wait for it to finish")
        }
        // The assembled message is authoritative (it is what the history now holds).
        return ToolRound(
            text: completed.textContent.isEmpty ? text : completed.textContent,
            calls: completed.functionCalls ?? calls)
    }
}

/// A lock usable from synchronous code in any isolation.
final class NSLockBox: @unchecked Sendable {
    private let lock = NSLock()
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }
}
