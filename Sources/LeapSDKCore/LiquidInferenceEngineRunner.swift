import Foundation

/// leap-ref's `ModelRunner`: one GGUF model and its prompt cache. Generations run on the
/// engine's serial queue, one at a time (requests from several conversations wait their
/// turn), or, with `LiquidInferenceEngineOptions.parallelSequences` > 1, together in
/// shared forward passes on a `ServingEngine` of that many sequences; nothing else waits
/// on that queue except `unload()`.
public final class LiquidInferenceEngineRunner: ModelRunner, @unchecked Sendable {
    let engine: InferenceEngine
    /// The model's `general.name`, or its file name without extension.
    public let modelId: String
    /// The context window in tokens.
    public var contextSize: Int { engine.contextSize }
    /// The call syntax of the model's chat template (or special tokens); see
    /// `FunctionCallFormat.detect(chatTemplate:hasToken:)`. Nil when leap-ref does not know it.
    public let functionCallFormat: FunctionCallFormat?
    /// The seed of requests that leave `GenerationOptions.rngSeed` nil (nil: a new random
    /// seed each time), from `LiquidInferenceEngineOptions.defaultRNGSeed`.
    public let defaultRNGSeed: UInt64?
    /// `LiquidInferenceEngineOptions.parallelSequences`.
    public let parallelSequences: Int

    private let schedulerLock = NSLock()
    /// The scheduler of concurrent generations, made at the first one (guarded by
    /// `schedulerLock`); nil after `unload()`.
    private var scheduler: ServingEngine?
    private var unloaded = false

    init(engine: InferenceEngine, path: String, options: LiquidInferenceEngineOptions = LiquidInferenceEngineOptions()) {
        self.engine = engine
        let fileName = URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent
        modelId = (try? engine.model.file.metadata.string("general.name")) ?? fileName
        functionCallFormat = FunctionCallFormat.detect(
            chatTemplate: try? engine.model.file.metadata.string("tokenizer.chat_template"),
            hasToken: { engine.tokenizer.tokenID(forText: $0) != nil })
        defaultRNGSeed = options.defaultRNGSeed
        parallelSequences = max(1, options.parallelSequences)
    }

    /// The scheduler shared by concurrent generations (`parallelSequences` > 1), made on
    /// first use; nil when generations run one at a time or the runner is unloaded.
    func sharedScheduler() throws(LeapError) -> ServingEngine? {
        guard parallelSequences > 1 else { return nil }
        schedulerLock.lock()
        defer { schedulerLock.unlock() }
        if unloaded { throw .modelUnloaded }
        if let scheduler { return scheduler }
        do {
            // Conversations wait for a sequence rather than being refused.
            let made = try ServingEngine(
                runner: self, configuration: .init(slots: parallelSequences, contextSize: contextSize, queueLimit: 1 << 20))
            scheduler = made
            return made
        } catch {
            throw .generationFailure("the parallel scheduler cannot be made: \(error)")
        }
    }

    /// The parser of `functionCallFormat`, or LFM2's when the format is unknown.
    public var functionCallParser: any LeapFunctionCallParserProtocol {
        functionCallFormat?.parser ?? LFMFunctionCallParser()
    }

    public func generate(
        _ request: GenerationRequest,
        onResponse: @escaping @Sendable (MessageResponse) -> Void,
        onError: @escaping @Sendable (LeapError) -> Void
    ) -> GenerationHandler {
        var seeded = request
        if seeded.options.rngSeed == nil { seeded.options.rngSeed = defaultRNGSeed }
        let request = seeded
        if parallelSequences > 1, let served = LiquidInferenceEngineRunner.servingRequest(request, contextSize: contextSize) {
            do throws(LeapError) {
                if let scheduler = try sharedScheduler() {
                    switch served {
                    case .success(let serving):
                        return LiquidInferenceEngineRunner.generate(serving, on: scheduler, onResponse: onResponse, onError: onError)
                    case .failure(let error):
                        onError(error)
                        return FlagGenerationHandler(flag: CancellationFlag())
                    }
                }
            } catch {
                onError(error)
                return FlagGenerationHandler(flag: CancellationFlag())
            }
        }
        let flag = CancellationFlag()
        let engine = self.engine
        engine.queue.async {
            do throws(LeapError) {
                let outcome = try engine.generate(request, cancel: flag, emit: onResponse)
                onResponse(
                    .complete(MessageCompletion(message: outcome.message, finishReason: outcome.finishReason, stats: outcome.stats)))
            } catch {
                onError(error)
            }
        }
        return FlagGenerationHandler(flag: flag)
    }

    public func unload() async {
        let scheduler = schedulerLock.withLock { () -> ServingEngine? in
            unloaded = true
            defer { self.scheduler = nil }
            return self.scheduler
        }
        await scheduler?.shutdown(cancelRunning: true)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            engine.queue.async {
                self.engine.unloadOnQueue()
                continuation.resume()
            }
        }
    }

    /// How many tokens the prompt of `messages` would take: the model's chat template over
    /// the messages, with the definitions of `functions` (as a generation with these
    /// `generationOptions` would render them; their call parser matters when the template
    /// does not read `tools`) and the assistant's generation prompt, with BOS when the
    /// template or tokenizer adds it.
    ///
    /// Never waits for a running generation (it reads only the tokenizer and the template),
    /// so it can be called from any thread, including from a response callback.
    public func getPromptTokensSize(
        messages: [ChatMessage], functions: [LeapFunction] = [], generationOptions: GenerationOptions? = nil,
        addBosToken: Bool = true
    ) throws -> Int {
        let ids = try engine.promptTokens(messages: messages, functions: functions, options: generationOptions ?? GenerationOptions())
        if !addBosToken, let bos = engine.tokenizer.bosID, ids.first == Int(bos) { return ids.count - 1 }
        return ids.count
    }
}

extension InferenceEngine {
    /// `unload()` for callers already on `queue`.
    func unloadOnQueue() {
        dispatchPrecondition(condition: .onQueue(queue))
        releaseState()
    }
}
