import Dispatch
import Foundation
import Grammar
import LeapJSON
import Models
import Sampling
import Tokenizers

/// Runs completions on one loaded model: `slots` sequences, each
/// with its own caches and prompt cache, over the model's shared weights (one load), and a
/// bounded queue of requests waiting for a slot.
///
/// A request goes to the idle slot whose cached tokens share the longest prefix with its
/// prompt (so a multi-turn client keeps hitting its cache; with no shared prefix, the
/// least recently used slot).
///
/// The slots are the sequences of one `BatchedSession`, and they advance together in
/// rounds on the model runner's queue (continuous batching): each round samples the next
/// token of every generating sequence, each with its own sampler, grammar mask, stop
/// strings and stream, then evaluates all those tokens, plus the next chunk
/// (`Configuration.prefillChunk` tokens) of every prompt still being processed, in one
/// forward pass, which reads the weights once for all of them. Requests join and leave
/// between rounds; a cancelled one stops within one token without disturbing the others.
/// A sequence's results do not depend on what else runs (docs/architecture.md, "Several
/// sequences at once"; a prompt is always cut into the same chunks), so a request at
/// temperature 0 gives the same text alone or beside others.
///
/// Every generation in leap-ref runs here: the server's requests, and `Conversation`'s
/// through `LiquidInferenceEngineRunner` (a one-slot engine unless
/// `LiquidInferenceEngineOptions.parallelSequences` asks for more). Each sequence's tokens
/// come from `SequenceGeneration.next`, the one per-token step.
///
/// The work is cut by job: this file holds the public surface (configuration, tokens,
/// submitting, status, shutdown); `ServingEngine+Rounds.swift` the admission of queued
/// requests and the round scheduler; `ServingEngine+Constraints.swift` the compiled
/// grammars of a request and their cache; `SequenceGeneration.swift` the per-token step;
/// `ServingJob.swift` the state of a request and of a slot.
///
/// Thread-safe: `submit` and `status` may be called from any thread.
public final class ServingEngine: @unchecked Sendable {
    /// Sizes and limits.
    public struct Configuration: Sendable {
        /// Number of sequences served at once.
        public var slots: Int
        /// Context window of each slot in tokens (default: the runner's context size).
        public var contextSize: Int?
        /// Requests that may wait for a slot; past it `submit` throws `.queueFull`.
        public var queueLimit: Int
        /// Called (on the engine's queue) when a completion ends, however it ends, whether
        /// or not its client still reads the events; the usage is nil for a request that
        /// was dropped while it waited. For metrics and logs.
        public var onFinish: (@Sendable (ServingFinishReason, ServingUsage?) -> Void)?
        /// Bounds on compiling a request's `response_format` JSON Schema and its tools'
        /// parameter schemas (depth, grammar size, compile time...;
        /// `JSONSchemaCompiler.Limits`' defaults unless set). A schema past them is an
        /// `.invalidRequest` with the compiler's message.
        public var schemaLimits: JSONSchemaCompiler.Limits

        /// Tokens of a prompt evaluated per round: a newcomer's prompt is processed in chunks
        /// of this size, each in one forward pass with the running sequences' next tokens,
        /// so that streams already running wait at most one chunk per token.
        public var prefillChunk: Int

        /// Slots, context, queue, prompt chunk, the finish callback and the schema
        /// compiler's limits; every argument has a default.
        public init(
            slots: Int = 1, contextSize: Int? = nil, queueLimit: Int = 64, prefillChunk: Int = 128,
            onFinish: (@Sendable (ServingFinishReason, ServingUsage?) -> Void)? = nil,
            schemaLimits: JSONSchemaCompiler.Limits = .init()
        ) {
            self.slots = slots
            self.contextSize = contextSize
            self.queueLimit = queueLimit
            self.prefillChunk = prefillChunk
            self.onFinish = onFinish
            self.schemaLimits = schemaLimits
        }
    }

    /// A snapshot of the slots and the queue.
    public struct Status: Sendable, Equatable {
        /// Slots in all, slots running a completion, and requests waiting for one.
        public var slots: Int
        public var busySlots: Int
        public var queuedRequests: Int
        /// Tokens in each slot's prompt cache.
        public var cachedTokens: [Int]
        /// Completions that ended, and how many of them were cancelled.
        public var finishedCompletions: Int
        public var cancelledCompletions: Int
        /// Forward passes run (one per round with work), and the sequences they evaluated
        /// summed over passes: `sequenceSteps / forwardPasses` is the mean batch size.
        public var forwardPasses: Int
        public var sequenceSteps: Int
    }

    let loaded: LoadedModel
    /// The runner's model identifier.
    public let modelId: String
    /// Context window of each slot.
    public let contextSize: Int
    /// The sizes and limits the engine was created with.
    public let configuration: Configuration
    /// How the model writes tool calls (`LiquidInferenceEngineRunner.functionCallFormat`),
    /// for requests that do not name a parser.
    let callParser: LeapFunctionCallParserProtocol

    let lock = NSLock()
    // Guarded by `lock`.
    var waiting: [ServingJob] = []
    var busy: [Bool]
    var roundScheduled = false
    var accepting = true
    var cachedPromptCounts: [Int]
    /// Compiled grammars and call-marker tables, by what they were made from
    /// (`ServingEngine+Constraints.swift`).
    var grammars: [String: Grammar] = [:]
    var callMarkers: [String: CallMarkerTokens] = [:]
    var nextJobID: UInt64 = 0
    var finishedCount = 0
    var cancelledCount = 0
    var passCount = 0
    var sequenceStepCount = 0
    // Touched only on `engine.queue`.
    let slots: [ServingSlot]
    /// Every slot's caches, stepped together (one forward pass per round).
    let batch: BatchedSession
    /// A round's step inputs and what each one evaluates, kept so that a round does not
    /// allocate them anew.
    var stepInputs: [BatchedSession.Input] = []
    var stepWork: [(ServingSlot, SlotSequence, StepWork)] = []
    /// Callers waiting for every slot to be idle.
    var idleWaiters: [() -> Void] = []
    /// `Configuration.prefillChunk`.
    let prefillChunk: Int

    /// Serves `runner`'s model (a runner from `Leap.load`). Allocates each slot's caches.
    public init(runner: ModelRunner, configuration: Configuration = Configuration()) throws(ServingError) {
        guard let runner = runner as? LiquidInferenceEngineRunner else {
            throw .invalidRequest("ServingEngine serves models loaded with Leap.load")
        }
        guard configuration.slots >= 1 else { throw .invalidRequest("slots must be at least 1, not \(configuration.slots)") }
        guard configuration.queueLimit >= 0 else { throw .invalidRequest("queueLimit must not be negative") }
        guard configuration.prefillChunk >= 2 else {
            throw .invalidRequest("prefillChunk must be at least 2, not \(configuration.prefillChunk)")
        }
        loaded = runner.loaded
        modelId = runner.modelId
        self.configuration = configuration
        let trained = loaded.model.hyperparameters.trainedContextLength
        contextSize = max(16, min(configuration.contextSize ?? loaded.contextSize, trained))
        // The runner's reading of the template (LFM2's syntax when it does not know it).
        callParser = runner.functionCallParser
        prefillChunk = configuration.prefillChunk
        // A step holds every generating sequence's token and at least one prompt chunk; up
        // to one chunk per slot while that stays within 1024 tokens (the pass's buffers grow
        // with it).
        let slotCount = configuration.slots
        let stepTokens = max(prefillChunk + slotCount, min(slotCount * prefillChunk, 1024))
        batch = BatchedSession(
            model: runner.loaded.model, slots: slotCount, contextLength: contextSize, maxStepTokens: stepTokens,
            kvCacheType: runner.loaded.kvCacheType)
        var slots: [ServingSlot] = []
        for index in 0..<slotCount {
            do {
                slots.append(ServingSlot(index: index, caches: try BatchedSequenceCaches(batch: batch)))
            } catch {
                throw .engineFailure("\(error)")
            }
        }
        self.slots = slots
        busy = Array(repeating: false, count: configuration.slots)
        cachedPromptCounts = Array(repeating: 0, count: configuration.slots)
    }

    // MARK: Tokens

    /// Token ids of `text` (`addSpecial`: BOS as the model asks; `parseSpecial`: control
    /// tokens written out, such as `<|im_start|>`, become their ids).
    public func tokenize(_ text: String, addSpecial: Bool, parseSpecial: Bool) -> [Int] {
        loaded.tokenizer.encode(text, addSpecial: addSpecial, parseSpecial: parseSpecial).map(Int.init)
    }

    /// The text of `tokens`, special tokens rendered. Throws for an id outside the vocabulary.
    public func detokenize(_ tokens: [Int]) throws(ServingError) -> String {
        let size = loaded.tokenizer.vocabularySize
        if let bad = tokens.first(where: { $0 < 0 || $0 >= size }) {
            throw .invalidRequest("token id \(bad) is outside the vocabulary (0..<\(size))")
        }
        return loaded.tokenizer.decode(tokens.map { TokenID($0) }, renderSpecial: true)
    }

    /// The text of one token (special tokens rendered).
    public func tokenPiece(_ id: Int) -> String { loaded.tokenizer.piece(for: TokenID(id), renderSpecial: true) }

    /// The vocabulary size.
    public var vocabularySize: Int { loaded.tokenizer.vocabularySize }

    /// The prompt tokens of `prompt`, as a completion would process them (tools rendered
    /// for `callParser`'s syntax; nil: the model's, `ServingRequest.callParser`). An image or
    /// audio part's positions have negative placeholder ids (their prompt-cache keys); the
    /// count is the prompt's length in positions.
    public func promptTokens(
        _ prompt: ServingPrompt, enableThinking: Bool? = nil, callParser: (any LeapFunctionCallParserProtocol)? = nil
    ) throws(ServingError) -> [Int] {
        try promptSequence(prompt, enableThinking: enableThinking, callParser: callParser).keys
    }

    /// Whether the model speaks: it has its vocoder and audio tokenizer files
    /// (`ServingRequest.speech`).
    public var speaks: Bool { loaded.speech != nil }

    /// Refuses a spoken reply the model or the request cannot give.
    private func checkSpeech(_ speech: SpeechRequest, _ request: ServingRequest) throws(ServingError) {
        guard speaks else {
            throw .unsupportedContent(
                "this model cannot speak: speech needs a speech model (LFM2.5-Audio) with its vocoder-*.gguf and tokenizer-*.gguf files")
        }
        if request.constraint != .none { throw .invalidRequest("a JSON Schema constraint and speech cannot go together") }
        switch request.toolChoice {
        case .required, .function: throw .invalidRequest("a spoken reply cannot be made to call a tool")
        case .auto, .none: break
        }
        if let t = speech.audioTemperature, !(t >= 0 && t.isFinite) {
            throw .invalidRequest("the audio temperature must be a finite number of at least 0, not \(t)")
        }
        if let k = speech.audioTopK, k < 0 { throw .invalidRequest("the audio top-k must not be negative, not \(k)") }
    }

    /// Whether the model reads images (it has a vision encoder) and audio (an audio encoder).
    public var takesImages: Bool { if case .vision? = loaded.projector { return true } else { return false } }
    public var takesAudio: Bool { if case .audio? = loaded.projector { return true } else { return false } }

    /// The prompt of `prompt`: tokens and media chunks. A chat prompt of `positionLimit`
    /// positions or more is refused before its images and clips are decoded.
    func promptSequence(
        _ prompt: ServingPrompt, enableThinking: Bool?, callParser: (any LeapFunctionCallParserProtocol)?,
        positionLimit: Int? = nil
    ) throws(ServingError) -> PromptSequence {
        switch prompt {
        case .tokens(let ids):
            let size = vocabularySize
            if let bad = ids.first(where: { $0 < 0 || $0 >= size }) {
                throw .invalidRequest("prompt token id \(bad) is outside the vocabulary (0..<\(size))")
            }
            return PromptSequence(tokens: ids)
        case .text(let text):
            return PromptSequence(tokens: try loaded.tokenizePrompt([text], positionLimit: positionLimit)[0])
        case .chat(let messages, let tools):
            return try loaded.prompt(
                messages: messages, tools: tools.map(\.templateJSON), callFormat: callParser ?? self.callParser,
                enableThinking: enableThinking, positionLimit: positionLimit)
        }
    }

    /// A snapshot of the slots and the queue.
    public var status: Status {
        lock.withLock {
            Status(
                slots: busy.count, busySlots: busy.filter { $0 }.count, queuedRequests: waiting.count,
                cachedTokens: cachedPromptCounts, finishedCompletions: finishedCount, cancelledCompletions: cancelledCount,
                forwardPasses: passCount, sequenceSteps: sequenceStepCount)
        }
    }

    // MARK: Submitting

    /// Validates `request` (prompt length, constraints) and queues it. Throws the request's
    /// errors before anything runs; the returned completion streams the events. Dropping
    /// the stream (or calling `cancel()`) cancels the completion within one token.
    public func submit(_ request: ServingRequest) throws(ServingError) -> ServingCompletion {
        let parser = request.callParser ?? callParser
        if let limit = request.contextLimit, limit < 1 { throw .invalidRequest("the context limit must be positive, not \(limit)") }
        if let speech = request.speech { try checkSpeech(speech, request) }
        let lengthLimit = min(request.contextLimit ?? contextSize, contextSize)
        let prompt = try promptSequence(
            request.prompt, enableThinking: request.enableThinking, callParser: parser, positionLimit: lengthLimit)
        let tokens = prompt.keys
        guard !tokens.isEmpty else { throw .invalidRequest("the prompt is empty") }
        guard tokens.count < lengthLimit else { throw .promptTooLong(tokens: tokens.count, limit: lengthLimit) }
        if let max = request.maxTokens, max < 0 { throw .invalidRequest("max_tokens must not be negative, not \(max)") }
        if let n = request.logprobs, n < 0 || n > 20 { throw .invalidRequest("top_logprobs must be between 0 and 20, not \(n)") }
        let plan = try constraintPlan(request, parser: request.parsesCalls && request.speech == nil ? parser : nil)
        var sampling = request.sampling.apply(to: loaded.defaults, breakers: loaded.dryBreakers)
        if request.sampling.seed == nil { sampling.seed = UInt64.random(in: 0...UInt64.max) }

        let (stream, continuation) = AsyncThrowingStream<ServingEvent, any Error>.makeStream()
        let job = lock.withLock { () -> ServingJob in
            nextJobID += 1
            return ServingJob(
                id: nextJobID, request: request, prompt: prompt, lengthLimit: lengthLimit, sampling: sampling, plan: plan,
                callParser: request.parsesCalls ? parser : nil, continuation: continuation)
        }
        let admitted = lock.withLock { () -> ServingError? in
            guard accepting else { return .shuttingDown }
            let idle = busy.filter { !$0 }.count
            if waiting.count >= idle + configuration.queueLimit { return .queueFull(limit: configuration.queueLimit) }
            waiting.append(job)
            return nil
        }
        if let admitted { throw admitted }
        continuation.onTermination = { [weak self] _ in
            job.cancel.cancel()
            self?.dropWaiting(job)
        }
        scheduleRound()
        return ServingCompletion(events: stream, cancel: job.cancel)
    }

    /// Stops taking requests: waiting ones fail with `.shuttingDown`; running ones go on
    /// unless `cancelRunning` (then they end with `.cancelled` within one token). Returns
    /// once every slot is idle.
    public func shutdown(cancelRunning: Bool) async {
        let dropped = lock.withLock { () -> [ServingJob] in
            accepting = false
            defer { waiting = [] }
            return waiting
        }
        for job in dropped { job.continuation.finish(throwing: ServingError.shuttingDown) }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            loaded.queue.async {
                if cancelRunning { for slot in self.slots { slot.sequence?.job.cancel.cancel() } }
                self.whenIdle { done.resume() }
            }
        }
    }

    /// Returns once no completion runs or waits.
    public func idle() async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            loaded.queue.async { self.whenIdle { done.resume() } }
        }
    }

    /// Cancels every running completion (they end within one token).
    public func cancelAll() {
        loaded.queue.async { for slot in self.slots { slot.sequence?.job.cancel.cancel() } }
    }

    /// Calls `body` on the queue once no slot is active. Call on the queue.
    func whenIdle(_ body: @escaping () -> Void) {
        if slots.allSatisfy({ $0.sequence == nil }) && lock.withLock({ waiting.isEmpty }) {
            body()
        } else {
            idleWaiters.append(body)
            scheduleRound()
        }
    }

    /// Forgets a request that was dropped while it waited for a slot.
    func dropWaiting(_ job: ServingJob) {
        let removed = lock.withLock { () -> Bool in
            guard let i = waiting.firstIndex(where: { $0 === job }) else { return false }
            waiting.remove(at: i)
            return true
        }
        guard removed else { return }
        lock.withLock {
            finishedCount += 1
            cancelledCount += 1
        }
        configuration.onFinish?(.cancelled, nil)
        job.continuation.finish()
    }

    // MARK: Test hooks (on the queue)

    /// Brings slot `slot`'s caches to the state after `tokens`, as a prompt (reusing the
    /// cached prefix when `reuseCache`); returns the tokens reused. Call on the engine's
    /// queue while no completion runs.
    func evaluatePrompt(_ tokens: [Int], reuseCache: Bool, slot: Int = 0) throws(ServingError) -> Int {
        dispatchPrecondition(condition: .onQueue(loaded.queue))
        do {
            return try slots[slot].cache.evaluatePrompt(tokens, reuseCache: reuseCache)
        } catch {
            throw .engineFailure("\(error)")
        }
    }

    /// A copy of the logits slot `slot` samples its next token from. Call on the queue.
    func currentLogits(slot: Int = 0) -> [Float] {
        slots[slot].cache.withNextLogits { logits, _ in Array(logits) }
    }
}
