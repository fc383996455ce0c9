import Dispatch
import Foundation
import Grammar
import LeapJSON
import Models
import Sampling
import Tokenizers

/// Serves completions from several clients on one loaded model: `slots` sequences, each
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
/// A sequence's results do not depend on what else runs (the batched session computes
/// each row as it would alone, and a prompt is always cut into the same chunks), so a
/// request at temperature 0 gives the same text alone or beside others.
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

    let engine: InferenceEngine
    /// The runner's model identifier.
    public let modelId: String
    /// Context window of each slot.
    public let contextSize: Int
    /// The sizes and limits the engine was created with.
    public let configuration: Configuration
    /// How the model writes tool calls (`LiquidInferenceEngineRunner.functionCallFormat`),
    /// for requests that do not name a parser.
    let callParser: LeapFunctionCallParserProtocol

    /// The call-block grammar syntax of `parser`: JSON for Hermes, Pythonic (LFM2's) for
    /// any other.
    static func callSyntax(of parser: any LeapFunctionCallParserProtocol) -> ToolCallSyntax {
        if parser is HermesFunctionCallParser { return .json(start: parser.callStartMarker, end: parser.callEndMarker) }
        return .pythonic(start: parser.callStartMarker, end: parser.callEndMarker)
    }

    private let lock = NSLock()
    // Guarded by `lock`.
    private var waiting: [ServingJob] = []
    private var busy: [Bool]
    private var roundScheduled = false
    private var accepting = true
    private var cachedPromptCounts: [Int]
    private var grammars: [String: Grammar] = [:]
    private var nextJobID: UInt64 = 0
    private var finishedCount = 0
    private var cancelledCount = 0
    private var passCount = 0
    private var sequenceStepCount = 0
    // Touched only on `engine.queue`.
    private let slots: [ServingSlot]
    /// Every slot's caches, stepped together (one forward pass per round).
    private let batch: BatchedSession
    /// A round's step inputs and what each one evaluates, kept so that a round does not
    /// allocate them anew.
    private var stepInputs: [BatchedSession.Input] = []
    private var stepWork: [(ServingSlot, SlotSequence, StepWork)] = []
    /// `Configuration.prefillChunk`.
    private let prefillChunk: Int

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
        engine = runner.engine
        modelId = runner.modelId
        self.configuration = configuration
        let trained = engine.model.hyperparameters.trainedContextLength
        contextSize = max(16, min(configuration.contextSize ?? engine.contextSize, trained))
        // The runner's reading of the template (LFM2's syntax when it does not know it).
        callParser = runner.functionCallParser
        prefillChunk = configuration.prefillChunk
        // A step holds every generating sequence's token and at least one prompt chunk; up
        // to one chunk per slot while that stays within 1024 tokens (the pass's buffers grow
        // with it).
        let slotCount = configuration.slots
        let stepTokens = max(prefillChunk + slotCount, min(slotCount * prefillChunk, 1024))
        batch = BatchedSession(model: runner.engine.model, slots: slotCount, contextLength: contextSize, maxStepTokens: stepTokens)
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
        engine.tokenizer.encode(text, addSpecial: addSpecial, parseSpecial: parseSpecial).map(Int.init)
    }

    /// The text of `tokens`, special tokens rendered. Throws for an id outside the vocabulary.
    public func detokenize(_ tokens: [Int]) throws(ServingError) -> String {
        let size = engine.tokenizer.vocabularySize
        if let bad = tokens.first(where: { $0 < 0 || $0 >= size }) {
            throw .invalidRequest("token id \(bad) is outside the vocabulary (0..<\(size))")
        }
        return engine.tokenizer.decode(tokens.map { TokenID($0) }, renderSpecial: true)
    }

    /// The text of one token (special tokens rendered).
    public func tokenPiece(_ id: Int) -> String { engine.tokenizer.piece(for: TokenID(id), renderSpecial: true) }

    /// The vocabulary size.
    public var vocabularySize: Int { engine.tokenizer.vocabularySize }

    /// The prompt tokens of `prompt`, as a completion would process them (tools rendered
    /// for `callParser`'s syntax; nil: the model's, `ServingRequest.callParser`).
    public func promptTokens(
        _ prompt: ServingPrompt, enableThinking: Bool? = nil, callParser: (any LeapFunctionCallParserProtocol)? = nil
    ) throws(ServingError) -> [Int] {
        switch prompt {
        case .tokens(let ids):
            let size = vocabularySize
            if let bad = ids.first(where: { $0 < 0 || $0 >= size }) {
                throw .invalidRequest("prompt token id \(bad) is outside the vocabulary (0..<\(size))")
            }
            return ids
        case .text(let text):
            return engine.prompts.tokenize(text)
        case .chat(let messages, let tools):
            do {
                let text = try engine.prompts.render(
                    messages: messages, tools: tools.map(\.templateJSON), callFormat: callParser ?? self.callParser,
                    enableThinking: enableThinking)
                return engine.prompts.tokenize(text)
            } catch {
                throw .invalidRequest(error.description)
            }
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
        let tokens = try promptTokens(request.prompt, enableThinking: request.enableThinking, callParser: parser)
        guard !tokens.isEmpty else { throw .invalidRequest("the prompt is empty") }
        guard tokens.count < contextSize else { throw .promptTooLong(tokens: tokens.count, limit: contextSize) }
        if let max = request.maxTokens, max < 0 { throw .invalidRequest("max_tokens must not be negative, not \(max)") }
        if let n = request.logprobs, n < 0 || n > 20 { throw .invalidRequest("top_logprobs must be between 0 and 20, not \(n)") }
        let plan = try constraintPlan(request, syntax: Self.callSyntax(of: parser))
        var sampling = engine.defaults
        let s = request.sampling
        if let v = s.temperature { sampling.temperature = v }
        if let v = s.topK { sampling.topK = v }
        if let v = s.topP { sampling.topP = v }
        if let v = s.minP { sampling.minP = v }
        if let v = s.repetitionPenalty { sampling.repetitionPenalty = v }
        if let v = s.frequencyPenalty { sampling.frequencyPenalty = v }
        if let v = s.presencePenalty { sampling.presencePenalty = v }
        sampling.seed = s.seed ?? UInt64.random(in: 0...UInt64.max)
        sampling.applyDRY(s, breakers: engine.dryBreakers)

        let (stream, continuation) = AsyncThrowingStream<ServingEvent, any Error>.makeStream()
        let job = lock.withLock { () -> ServingJob? in
            nextJobID += 1
            return ServingJob(
                id: nextJobID, request: request, tokens: tokens, sampling: sampling, plan: plan, callParser: parser,
                continuation: continuation)
        }!
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
            engine.queue.async {
                if cancelRunning { for slot in self.slots { slot.sequence?.job.cancel.cancel() } }
                self.whenIdle { done.resume() }
            }
        }
    }

    /// Returns once no completion runs or waits.
    public func idle() async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            engine.queue.async { self.whenIdle { done.resume() } }
        }
    }

    /// Cancels every running completion (they end within one token).
    public func cancelAll() {
        engine.queue.async { for slot in self.slots { slot.sequence?.job.cancel.cancel() } }
    }

    private var idleWaiters: [() -> Void] = []

    /// Calls `body` on the queue once no slot is active. Call on the queue.
    private func whenIdle(_ body: @escaping () -> Void) {
        if slots.allSatisfy({ $0.sequence == nil }) && lock.withLock({ waiting.isEmpty }) {
            body()
        } else {
            idleWaiters.append(body)
            scheduleRound()
        }
    }

    private func dropWaiting(_ job: ServingJob) {
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

    // MARK: Constraints

    /// Compiles the request's grammars (cached by schema text), so that a schema the
    /// compiler cannot enforce is an `.invalidRequest` with the compiler's message.
    private func constraintPlan(_ request: ServingRequest, syntax callSyntax: ToolCallSyntax) throws(ServingError) -> ConstraintPlan {
        var plan = ConstraintPlan()
        if case .jsonSchema(let schema) = request.constraint {
            plan.schema = try grammar(key: "schema:" + schema.serialized()) { () throws(SchemaError) -> Grammar in
                try JSONSchemaCompiler.compile(schema, options: InferenceEngine.generationSchemaOptions(limits: configuration.schemaLimits))
            } describe: {
                "the JSON Schema cannot be enforced: \($0)"
            }
        }
        guard case .chat(_, let tools) = request.prompt, !tools.isEmpty, request.toolChoice != .none else {
            if request.toolChoice == .required { throw .invalidRequest("tool_choice 'required' needs at least one tool") }
            if case .function(let name) = request.toolChoice {
                throw .invalidRequest("tool_choice names '\(name)' but no tools were given")
            }
            if case .chat(_, let tools) = request.prompt, !tools.isEmpty { plan.forbidCallStart = true }
            return plan
        }
        guard plan.schema == nil else {
            throw .invalidRequest("response_format json_schema and tools cannot be combined; send one or the other")
        }
        var chosen = tools
        if case .function(let name) = request.toolChoice {
            chosen = tools.filter { $0.name == name }
            guard !chosen.isEmpty else {
                throw .invalidRequest(
                    "tool_choice names '\(name)', which is not among the tools (\(tools.map(\.name).joined(separator: ", ")))")
            }
        }
        let list = chosen.map { (name: $0.name, parameters: $0.parameters) }
        let key = "\(callSyntax)" + JSONValue.array(list.map { ["name": .string($0.name), "parameters": $0.parameters] }).serialized()
        let syntax = callSyntax
        var toolOptions = ToolCallGrammar.defaultOptions
        toolOptions.limits = configuration.schemaLimits
        if request.toolChoice == .auto {
            plan.toolsAfterStart = try grammar(key: "after:" + key) { () throws(SchemaError) -> Grammar in
                try ToolCallGrammar.build(functions: list, syntax: syntax, includeStartMarker: false, options: toolOptions)
            } describe: {
                "the tools cannot be turned into a call grammar: \($0)"
            }
        } else {
            plan.toolsWithStart = try grammar(key: "with:" + key) { () throws(SchemaError) -> Grammar in
                try ToolCallGrammar.build(functions: list, syntax: syntax, includeStartMarker: true, options: toolOptions)
            } describe: {
                "the tools cannot be turned into a call grammar: \($0)"
            }
        }
        return plan
    }

    /// Compiled grammars, at most this many kept.
    static let grammarCacheLimit = 64

    private func grammar(
        key: String, _ build: () throws(SchemaError) -> Grammar, describe: (SchemaError) -> String
    ) throws(ServingError) -> Grammar {
        if let g = lock.withLock({ grammars[key] }) { return g }
        let g: Grammar
        do { g = try build() } catch { throw .invalidRequest(describe(error)) }
        lock.withLock {
            if grammars.count >= Self.grammarCacheLimit { grammars.removeAll() }
            grammars[key] = g
        }
        return g
    }

    // MARK: Rounds (on engine.queue)

    private func scheduleRound() {
        let schedule = lock.withLock { () -> Bool in
            if roundScheduled { return false }
            roundScheduled = true
            return true
        }
        if schedule { engine.queue.async { self.runRound() } }
    }

    /// What a slot evaluates in a round's shared step.
    private enum StepWork {
        /// The token it just sampled.
        case token(Int)
        /// Its prompt's tokens up to this index.
        case prompt(end: Int)
    }

    /// One round: admits waiting requests into idle slots, samples the next token of every
    /// generating sequence, adds the next chunk of every prompt being processed (oldest
    /// request first, while the step has room), and evaluates all of it in one forward
    /// pass of the batched session, which reads the weights once for every sequence.
    private func runRound() {
        dispatchPrecondition(condition: .onQueue(engine.queue))
        lock.withLock { roundScheduled = false }
        admit()
        // The round's step, in buffers kept from round to round (emptied after the step, so
        // that they hold no finished request).
        defer {
            stepInputs.removeAll(keepingCapacity: true)
            stepWork.removeAll(keepingCapacity: true)
        }
        var room = batch.maxStepTokens
        for slot in slots {
            guard let seq = slot.sequence, seq.prefilled else { continue }
            if seq.job.cancel.isCancelled {
                finish(slot, .cancelled)
                continue
            }
            do throws(ServingError) {
                guard let next = try sampleNext(slot, seq) else { continue }
                stepInputs.append(.init(slot.handle, [next]))
                stepWork.append((slot, seq, .token(next)))
                room -= 1
            } catch {
                fail(slot, error)
            }
        }
        // Prompts in progress, oldest request first.
        let prompts = slots.filter { $0.sequence.map { !$0.prefilled } ?? false }.sorted {
            $0.sequence!.job.id < $1.sequence!.job.id
        }
        for slot in prompts {
            guard let seq = slot.sequence else { continue }
            if seq.job.cancel.isCancelled {
                finish(slot, .cancelled)
                continue
            }
            let end = chunkEnd(seq)
            guard end - seq.promptOffset <= room else { break }
            stepInputs.append(.init(slot.handle, Array(seq.job.tokens[seq.promptOffset..<end])))
            stepWork.append((slot, seq, .prompt(end: end)))
            room -= end - seq.promptOffset
        }
        if !stepInputs.isEmpty { evaluate(stepInputs, stepWork) }
        let more = lock.withLock { !waiting.isEmpty && busy.contains(false) } || slots.contains { $0.sequence != nil }
        if more {
            scheduleRound()
        } else if !idleWaiters.isEmpty && lock.withLock({ waiting.isEmpty }) {
            let waiters = idleWaiters
            idleWaiters = []
            for w in waiters { w() }
        }
    }

    /// Where the prompt chunk that starts at `seq.promptOffset` ends: `prefillChunk` tokens,
    /// cut so that the last chunk has at least two (the prompt's last token goes through
    /// the batch path, as in `CachedSequence`). A prompt is cut the same way whatever else
    /// runs, so its results do not depend on the other sequences.
    private func chunkEnd(_ seq: SlotSequence) -> Int {
        let count = seq.job.tokens.count, start = seq.promptOffset
        let chunk = prefillChunk
        if count - start <= chunk { return count }
        if count - start - chunk == 1 { return start + chunk - 1 }
        return start + chunk
    }

    /// Runs one shared step and records what it evaluated in each slot's prompt cache.
    private func evaluate(_ inputs: [BatchedSession.Input], _ work: [(ServingSlot, SlotSequence, StepWork)]) {
        lock.withLock {
            passCount += 1
            sequenceStepCount += inputs.count
        }
        do {
            try batch.step(inputs)
        } catch {
            for (slot, _, _) in work {
                slot.cache.reset()
                fail(slot, .engineFailure("\(error)"))
            }
            return
        }
        for (slot, seq, item) in work {
            switch item {
            case .token(let t):
                slot.cache.tokenEvaluated(t)
            case .prompt(let end):
                seq.promptOffset = end
                if end == seq.job.tokens.count {
                    slot.cache.promptEvaluated(seq.job.tokens)
                    beginGeneration(slot, seq)
                }
            }
        }
    }

    private func admit() {
        let now = DispatchTime.now().uptimeNanoseconds
        var admitted: [ServingSlot] = []
        lock.withLock {
            while !waiting.isEmpty, let slot = bestSlot(for: waiting[0].tokens) {
                let job = waiting.removeFirst()
                busy[slot.index] = true
                slot.lastUsed = now
                slot.sequence = SlotSequence(job: job, admitted: now)
                admitted.append(slot)
            }
        }
        for slot in admitted { beginPrompt(slot) }
    }

    /// The idle slot sharing the longest prefix with `tokens`, if that prefix is at least a
    /// tenth of the prompt (as llama-server's default `slot_prompt_similarity`); otherwise
    /// the least recently used idle slot, so that a short shared start (the chat
    /// template's first tokens) does not evict another client's cache. Call on the queue,
    /// under the lock.
    private func bestSlot(for tokens: [Int]) -> ServingSlot? {
        let idle = slots.filter { !busy[$0.index] }
        guard let leastRecent = idle.min(by: { $0.lastUsed < $1.lastUsed }) else { return nil }
        var best = leastRecent
        var bestShared = 0
        for slot in idle {
            let shared = slot.cache.sharedPrefix(with: tokens)
            if shared > bestShared {
                best = slot
                bestShared = shared
            }
        }
        return bestShared * 10 >= tokens.count ? best : leastRecent
    }

    /// Keeps the slot's reusable prefix of the new request's prompt; the rest is evaluated
    /// chunk by chunk in the following rounds (or nothing, when the whole prompt is cached).
    private func beginPrompt(_ slot: ServingSlot) {
        guard let seq = slot.sequence else { return }
        let job = seq.job
        seq.promptStart = DispatchTime.now().uptimeNanoseconds
        seq.cachedTokens = slot.cache.startPrompt(job.tokens, reuseCache: job.request.cachePrompt)
        seq.promptOffset = seq.cachedTokens
        if seq.promptOffset == job.tokens.count { beginGeneration(slot, seq) }
    }

    /// The prompt is in the caches: sets up the sampler, the constraints and the output,
    /// and reports `.started`.
    private func beginGeneration(_ slot: ServingSlot, _ seq: SlotSequence) {
        let job = seq.job
        lock.withLock { cachedPromptCounts[slot.index] = slot.cache.cachedTokens.count }
        seq.promptEnd = DispatchTime.now().uptimeNanoseconds
        seq.sampler = Sampler(job.sampling)
        for t in job.tokens.suffix(job.sampling.historyLength) { seq.sampler.accept(t) }
        seq.detokenizer = StreamingDetokenizer(tokenizer: engine.tokenizer, renderSpecial: true)
        seq.output = OutputAssembler(parser: job.isChat ? job.callParser : nil)
        seq.stops = StopStringMatcher(stops: job.request.stop)
        let plan = job.plan
        if let g = plan.schema {
            seq.constraint = InferenceEngine.ActiveConstraint(
                matcher: GrammarMatcher(grammar: g), masks: engine.maskComputer(literalSpecials: []), isToolCall: false)
        }
        let callParser = job.callParser
        let startID = engine.singleTokenID(callParser.callStartMarker)
        let callMasks = {
            self.engine.maskComputer(literalSpecials: [startID, self.engine.singleTokenID(callParser.callEndMarker)].compactMap { $0 })
        }
        if let g = plan.toolsWithStart {
            seq.constraint = InferenceEngine.ActiveConstraint(matcher: GrammarMatcher(grammar: g), masks: callMasks(), isToolCall: true)
        }
        if let g = plan.toolsAfterStart {
            seq.callOpening = CallOpening(grammar: g, masks: callMasks(), marker: callParser.callStartMarker, tokenID: startID)
        }
        if plan.forbidCallStart { seq.bannedToken = startID }
        job.continuation.yield(.started(promptTokens: job.tokens.count, cachedTokens: seq.cachedTokens, slot: slot.index))
    }

    /// Samples the sequence's next token from its logits and streams its text. Returns the
    /// token for the round's step to evaluate, or nil when the completion ended (then it
    /// is finished and the slot free).
    private func sampleNext(_ slot: ServingSlot, _ seq: SlotSequence) throws(ServingError) -> Int? {
        let job = seq.job
        if let c = seq.constraint, !c.isToolCall, !c.matcher.canContinue { return ended(slot, .stop) }
        if let max = job.request.maxTokens, seq.generated >= max { return ended(slot, .length) }
        if job.tokens.count + seq.generated >= contextSize { return ended(slot, .length) }
        let next: Int?
        let banned = seq.bannedToken ?? -1
        let ignoreEnd = job.request.ignoreEndOfGeneration
        let tokenizer = engine.tokenizer
        let permitted = { (id: Int) in id != banned && !(ignoreEnd && tokenizer.isEndOfGeneration(TokenID(id))) }
        if let c = seq.constraint {
            let mask = c.masks.mask(for: c.matcher)
            guard mask.allowedCount > 0 else {
                throw .engineFailure("the constraint allows no token here (output so far: \(seq.output.text.debugDescription))")
            }
            next = slot.cache.withNextLogits { seq.sampler.sample($0, allowed: { mask[$0] && permitted($0) }) }
        } else if seq.bannedToken != nil || ignoreEnd {
            next = slot.cache.withNextLogits { seq.sampler.sample($0, allowed: permitted) }
        } else {
            next = slot.cache.withNextLogits { seq.sampler.sample($0) }
        }
        guard let next else { return ended(slot, .stop) }
        if engine.tokenizer.isEndOfGeneration(TokenID(next)) { return ended(slot, .stop) }
        if let n = job.request.logprobs {
            let entry = slot.cache.withNextLogits { TokenLogprobs(logits: $0, chosen: next, top: n) }
            seq.pendingLogprobs.append(
                ServingTokenLogprob(
                    chosen: candidate(next, entry.chosen),
                    top: entry.top.map { candidate($0.id, $0.logprob) }))
        }
        var callClosed = false
        if let c = seq.constraint {
            guard c.matcher.accept(bytes: c.masks.vocabulary.tokens[next]) else {
                throw .engineFailure("internal error: the constraint rejected a token its mask allowed")
            }
            if c.isToolCall, !c.matcher.canContinue {
                seq.constraint = nil
                callClosed = true
            }
        }
        seq.sampler.accept(next)
        seq.generated += 1
        let delta = seq.detokenizer.append(TokenID(next))
        if seq.callOpening?.opened(by: next, delta: delta) == true, seq.constraint == nil, !callClosed,
            let opening = seq.callOpening
        {
            seq.constraint = InferenceEngine.ActiveConstraint(
                matcher: GrammarMatcher(grammar: opening.grammar), masks: opening.masks, isToolCall: true)
        }
        emit(seq, seq.output.feed(seq.stops.feed(delta)))
        if seq.stops.stopped { return ended(slot, .stop) }
        if callClosed { return ended(slot, .toolCalls) }
        if let max = job.request.maxTokens, seq.generated >= max { return ended(slot, .length) }
        if job.tokens.count + seq.generated >= contextSize { return ended(slot, .length) }
        if job.cancel.isCancelled { return ended(slot, .cancelled) }
        return next
    }

    private func candidate(_ id: Int, _ logprob: Float) -> ServingTokenLogprob.Candidate {
        ServingTokenLogprob.Candidate(
            token: engine.tokenizer.piece(for: TokenID(id), renderSpecial: true),
            bytes: engine.tokenizer.tokenBytes(TokenID(id), renderSpecial: true), logprob: logprob)
    }

    private func emit(_ seq: SlotSequence, _ responses: [MessageResponse]) {
        for response in responses {
            switch response {
            case .chunk(let text):
                seq.job.continuation.yield(.text(text, logprobs: seq.pendingLogprobs))
                seq.pendingLogprobs = []
            case .reasoningChunk(let text): seq.job.continuation.yield(.reasoning(text))
            case .functionCall(let calls):
                seq.calledTools = true
                seq.job.continuation.yield(.toolCalls(calls))
            case .audioSample, .complete: break
            }
        }
    }

    /// `finish`, for `sampleNext`: no token to evaluate.
    private func ended(_ slot: ServingSlot, _ reason: ServingFinishReason) -> Int? {
        finish(slot, reason)
        return nil
    }

    /// Ends the slot's completion with `error` and frees the slot.
    private func fail(_ slot: ServingSlot, _ error: ServingError) {
        guard let seq = slot.sequence else { return }
        release(slot)
        seq.job.continuation.finish(throwing: error)
    }

    /// Flushes the sequence's held-back text, reports how it ended and frees the slot.
    private func finish(_ slot: ServingSlot, _ reason: ServingFinishReason) {
        guard let seq = slot.sequence else { return }
        var reason = reason
        if reason != .cancelled && seq.prefilled {
            if !seq.stops.stopped {
                let tail = seq.stops.feed(seq.detokenizer.finish())
                emit(seq, seq.output.feed(tail + seq.stops.finish()))
            }
            emit(seq, seq.output.finish())
            if !seq.pendingLogprobs.isEmpty {
                seq.job.continuation.yield(.text("", logprobs: seq.pendingLogprobs))
                seq.pendingLogprobs = []
            }
            if seq.calledTools && reason == .stop { reason = .toolCalls }
        }
        let now = DispatchTime.now().uptimeNanoseconds
        let promptStart = seq.promptStart ?? now, promptEnd = seq.promptEnd ?? now
        let usage = ServingUsage(
            promptTokens: seq.job.tokens.count, cachedTokens: seq.cachedTokens, completionTokens: seq.generated,
            queueSeconds: Double(promptStart - seq.job.submitted) / 1e9,
            promptSeconds: Double(promptEnd - promptStart) / 1e9,
            generationSeconds: Double(now - promptEnd) / 1e9, slot: slot.index)
        lock.withLock {
            finishedCount += 1
            if reason == .cancelled { cancelledCount += 1 }
        }
        // The slot is free before anyone hears of the end.
        release(slot)
        configuration.onFinish?(reason, usage)
        seq.job.continuation.yield(.finished(reason, usage))
        seq.job.continuation.finish()
    }

    private func release(_ slot: ServingSlot) {
        slot.sequence = nil
        slot.lastUsed = DispatchTime.now().uptimeNanoseconds
        lock.withLock {
            busy[slot.index] = false
            cachedPromptCounts[slot.index] = slot.cache.cachedTokens.count
        }
    }
}

/// A submitted completion: its events, and a way to cancel it.
public struct ServingCompletion: Sendable {
    /// `.started`, text/reasoning/tool-call events, then `.finished`; throws a
    /// `ServingError` if the completion fails. Dropping the stream cancels the completion.
    public let events: AsyncThrowingStream<ServingEvent, any Error>
    let cancelFlag: CancellationFlag

    init(events: AsyncThrowingStream<ServingEvent, any Error>, cancel: CancellationFlag) {
        self.events = events
        self.cancelFlag = cancel
    }

    /// Stops the completion within one token (it finishes with `.cancelled`).
    public func cancel() { cancelFlag.cancel() }
}

/// The grammars a request is constrained by, compiled at submission.
struct ConstraintPlan {
    /// The whole reply (response_format json_schema).
    var schema: Grammar?
    /// A call block from the first token (tool_choice required or a named function).
    var toolsWithStart: Grammar?
    /// A call block once the model opens one (tool_choice auto).
    var toolsAfterStart: Grammar?
    /// tool_choice none: the call-start marker's token is masked out.
    var forbidCallStart = false
}

/// A request from submission to its end.
final class ServingJob: @unchecked Sendable {
    let id: UInt64
    let request: ServingRequest
    let tokens: [Int]
    let sampling: SamplingParameters
    let plan: ConstraintPlan
    /// How the reply's calls are written, parsed and constrained.
    let callParser: any LeapFunctionCallParserProtocol
    let continuation: AsyncThrowingStream<ServingEvent, any Error>.Continuation
    let cancel = CancellationFlag()
    let submitted = DispatchTime.now().uptimeNanoseconds

    init(
        id: UInt64, request: ServingRequest, tokens: [Int], sampling: SamplingParameters, plan: ConstraintPlan,
        callParser: any LeapFunctionCallParserProtocol, continuation: AsyncThrowingStream<ServingEvent, any Error>.Continuation
    ) {
        self.id = id
        self.request = request
        self.tokens = tokens
        self.sampling = sampling
        self.plan = plan
        self.callParser = callParser
        self.continuation = continuation
    }

    var isChat: Bool {
        if case .chat = request.prompt { return true }
        return false
    }
}

/// Watches the output for the model opening a call block (tool_choice auto).
struct CallOpening {
    let grammar: Grammar
    let masks: TokenMaskComputer
    let marker: String
    /// The marker's token when it is a single token.
    let tokenID: Int?
    /// The end of the output, as long as the marker (when the marker spans several tokens).
    private var tail = ""

    init(grammar: Grammar, masks: TokenMaskComputer, marker: String, tokenID: Int?) {
        self.grammar = grammar
        self.masks = masks
        self.marker = marker
        self.tokenID = tokenID
    }

    /// Whether `token` (whose text is `delta`) completes the call-start marker.
    mutating func opened(by token: Int, delta: String) -> Bool {
        if let id = tokenID { return token == id }
        tail += delta
        if tail.count > marker.count { tail = String(tail.suffix(marker.count)) }
        return tail.hasSuffix(marker)
    }
}

/// One of a `ServingEngine`'s sequences. Touched only on the engine's queue.
final class ServingSlot {
    let index: Int
    let cache: CachedSequence
    /// The slot's sequence in the engine's batched session (open for the slot's lifetime).
    let handle: BatchedSession.Sequence
    /// When the slot last finished a request (uptime nanoseconds), for least-recently-used routing.
    var lastUsed: UInt64 = 0
    /// The request running in this slot.
    var sequence: SlotSequence?

    init(index: Int, caches: BatchedSequenceCaches) {
        self.index = index
        cache = CachedSequence(caches: caches)
        handle = caches.sequence
    }
}

/// The generation state of the request a slot is running. Touched only on the queue.
final class SlotSequence {
    let job: ServingJob
    let admitted: UInt64
    /// The prompt's tokens before this index are in the caches.
    var promptOffset = 0
    /// The whole prompt is in the caches: the sequence generates.
    var prefilled: Bool { promptOffset == job.tokens.count }
    var promptStart: UInt64?
    var promptEnd: UInt64?
    var cachedTokens = 0
    var sampler = Sampler(.greedy)
    var detokenizer: StreamingDetokenizer!
    var output = OutputAssembler(parser: nil)
    var stops = StopStringMatcher(stops: [])
    var constraint: InferenceEngine.ActiveConstraint?
    var callOpening: CallOpening?
    var bannedToken: Int?
    var generated = 0
    var calledTools = false
    var pendingLogprobs: [ServingTokenLogprob] = []

    init(job: ServingJob, admitted: UInt64) {
        self.job = job
        self.admitted = admitted
    }
}
