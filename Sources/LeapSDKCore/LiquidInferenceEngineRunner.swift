import Foundation

/// leap-ref's `ModelRunner`: one GGUF model, its prompt cache, and a serial queue on
/// which generations run one at a time (requests from several conversations wait their
/// turn).
public final class LiquidInferenceEngineRunner: ModelRunner, @unchecked Sendable {
    let engine: InferenceEngine
    /// The model's `general.name`, or its file name without extension.
    public let modelId: String
    /// The context window in tokens.
    public var contextSize: Int { engine.contextSize }

    init(engine: InferenceEngine, path: String) {
        self.engine = engine
        let fileName = URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent
        modelId = (try? engine.model.file.metadata.string("general.name")) ?? fileName
    }

    public func createConversation(systemPrompt: String?) -> Conversation {
        let history = systemPrompt.map { [ChatMessage(role: .system, content: [.text($0)])] } ?? []
        return Conversation(modelRunner: self, history: history)
    }

    public func createConversationFromHistory(history: [ChatMessage]) -> Conversation {
        Conversation(modelRunner: self, history: history)
    }

    public func generateResponse(
        conversation: Conversation,
        generationOptions: GenerationOptions?,
        onResponseCallback: @escaping @Sendable (MessageResponse) -> Void,
        onErrorCallback: (@Sendable (LeapError) -> Void)?
    ) -> GenerationHandler {
        let flag = start(
            conversation: conversation, pending: nil, options: generationOptions,
            emit: onResponseCallback, finished: { error in if let error { onErrorCallback?(error) } })
        if flag == nil {
            onResponseCallback(
                .complete(
                    MessageCompletion(
                        message: ChatMessage(role: .assistant, content: []), finishReason: .stop, stats: nil)))
        }
        return FlagGenerationHandler(flag: flag ?? CancellationFlag())
    }

    public func unload() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            engine.queue.async {
                self.engine.unloadOnQueue()
                continuation.resume()
            }
        }
    }

    /// How many tokens the conversation's prompt would take (with BOS when the template or
    /// tokenizer adds it), for budgeting before a request.
    public func getPromptTokensSize(messages: [ChatMessage], addBosToken: Bool = true) throws -> Int {
        let ids = try engine.queue.sync { () throws(LeapError) -> [Int] in
            try engine.promptTokens(messages: messages, functions: [], options: GenerationOptions())
        }
        if !addBosToken, let bos = engine.tokenizer.bosID, ids.first == Int(bos) { return ids.count - 1 }
        return ids.count
    }

    /// Starts a generation for `conversation` (answering `pending` when given, else the
    /// history as it is). Returns nil, doing nothing, when the conversation is already
    /// generating. `emit` receives every response including `.complete`; `finished` is
    /// called last, with the error if the generation failed.
    func start(
        conversation: Conversation, pending: ChatMessage?, options: GenerationOptions?,
        emit: @escaping @Sendable (MessageResponse) -> Void,
        finished: @escaping @Sendable (LeapError?) -> Void
    ) -> CancellationFlag? {
        guard conversation.beginGenerating() else { return nil }
        let flag = CancellationFlag()
        let request = GenerationRequest(
            messages: conversation.history + (pending.map { [$0] } ?? []),
            functions: conversation.functions,
            options: options ?? GenerationOptions())
        let engine = self.engine
        engine.queue.async {
            do throws(LeapError) {
                let outcome = try engine.generate(request, cancel: flag, emit: emit)
                // Commit before `.complete`, so that a caller reacting to it sees the new
                // history and can start the next turn at once.
                conversation.endGenerating(appending: outcome.cancelled ? nil : (pending.map { [$0] } ?? []) + [outcome.message])
                emit(
                    .complete(
                        MessageCompletion(
                            message: outcome.message, finishReason: outcome.finishReason,
                            stats: outcome.stats)))
                finished(nil)
            } catch {
                conversation.endGenerating(appending: nil)
                finished(error)
            }
        }
        return flag
    }
}

extension InferenceEngine {
    /// `unload()` for callers already on `queue`.
    func unloadOnQueue() {
        dispatchPrecondition(condition: .onQueue(queue))
        releaseState()
    }
}
