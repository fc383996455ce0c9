import Foundation

/// leap-ref's `ModelRunner`: one GGUF model and its prompt cache. Every generation runs on
/// the runner's `ServingEngine` of `LiquidInferenceEngineOptions.parallelSequences`
/// sequences (default 1: generations from several conversations take turns; more: they
/// run together in shared forward passes), each token through the same step as the
/// server's (`SequenceGeneration`); nothing else waits on the engine's queue except
/// `unload()`.
public final class LiquidInferenceEngineRunner: ModelRunner, @unchecked Sendable {
    let loaded: LoadedModel
    /// The model's `general.name`, or its file name without extension.
    public let modelId: String
    /// The context window in tokens.
    public var contextSize: Int { loaded.contextSize }
    /// The call syntax of the model's chat template (or special tokens); see
    /// `FunctionCallFormat.detect(chatTemplate:hasToken:)`. Nil when leap-ref does not know it.
    public let functionCallFormat: FunctionCallFormat?
    /// The seed of requests that leave `GenerationOptions.rngSeed` nil (nil: a new random
    /// seed each time), from `LiquidInferenceEngineOptions.defaultRNGSeed`.
    public let defaultRNGSeed: UInt64?
    /// `LiquidInferenceEngineOptions.parallelSequences`.
    public let parallelSequences: Int

    private let schedulerLock = NSLock()
    /// The scheduler of every generation, made at the first one (guarded by
    /// `schedulerLock`); nil after `unload()`.
    private var scheduler: ServingEngine?
    private var unloaded = false

    init(loaded: LoadedModel, path: String, options: LiquidInferenceEngineOptions = LiquidInferenceEngineOptions()) {
        self.loaded = loaded
        let fileName = URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent
        modelId = (try? loaded.model.file.metadata.string("general.name")) ?? fileName
        functionCallFormat = FunctionCallFormat.detect(
            chatTemplate: options.chatTemplate ?? (try? loaded.model.file.metadata.string("tokenizer.chat_template")),
            hasToken: { loaded.tokenizer.tokenID(forText: $0) != nil })
        defaultRNGSeed = options.defaultRNGSeed
        parallelSequences = max(1, options.parallelSequences)
    }

    /// The scheduler that runs this runner's generations, made on first use.
    func sharedScheduler() throws(LeapError) -> ServingEngine {
        schedulerLock.lock()
        defer { schedulerLock.unlock() }
        if unloaded { throw .modelUnloaded }
        if let scheduler { return scheduler }
        do {
            // Conversations wait for a sequence rather than being refused. A single sequence
            // evaluates its prompt in chunks as large as a prompt batch (nothing else waits
            // on it); several share each pass in smaller chunks.
            let made = try ServingEngine(
                runner: self,
                configuration: .init(
                    slots: parallelSequences, contextSize: contextSize, queueLimit: 1 << 20,
                    prefillChunk: parallelSequences == 1 ? 512 : 128))
            scheduler = made
            return made
        } catch {
            throw .generationFailure("the scheduler cannot be made: \(error)")
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
        do throws(LeapError) {
            let serving = try LiquidInferenceEngineRunner.servingRequest(seeded, speaks: loaded.speech != nil)
            return LiquidInferenceEngineRunner.generate(serving, on: try sharedScheduler(), onResponse: onResponse, onError: onError)
        } catch {
            onError(error)
            return FlagGenerationHandler(flag: CancellationFlag())
        }
    }

    public func unload() async {
        let scheduler = schedulerLock.withLock { () -> ServingEngine? in
            unloaded = true
            defer { self.scheduler = nil }
            return self.scheduler
        }
        await scheduler?.shutdown(cancelRunning: true)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            loaded.queue.async {
                self.loaded.unloadOnQueue()
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
        let options = generationOptions ?? GenerationOptions()
        let ids: [Int]
        do {
            ids = try loaded.promptTokens(
                messages: messages, tools: functions.map(\.toolJSON), callFormat: options.functionCallParser ?? functionCallParser,
                enableThinking: options.enableThinking)
        } catch {
            throw LeapError(error)
        }
        if !addBosToken, let bos = loaded.tokenizer.bosID, ids.first == Int(bos) { return ids.count - 1 }
        return ids.count
    }
}

extension LoadedModel {
    /// `unload()` for callers already on `queue`.
    func unloadOnQueue() {
        dispatchPrecondition(condition: .onQueue(queue))
        releaseState()
    }
}
