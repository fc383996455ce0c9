import Dispatch
import Foundation
import GGUF
import Grammar
import Kernels
import LeapJSON
import Models
import Sampling
import Tokenizers

/// A thread-safe flag that a generation polls once per token.
final class CancellationFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false

    var isCancelled: Bool { lock.withLock { value } }
    func cancel() { lock.withLock { value = true } }
}

/// How one generation ended.
struct GenerationOutcome: Sendable {
    var message: ChatMessage
    var finishReason: GenerationFinishReason
    var stats: GenerationStats
    /// Stopped by `stop()` or by cancelling the consuming task.
    var cancelled: Bool
}

/// One loaded model and the state of its single sequence: the prompt cache.
///
/// All work runs on `queue`, one generation at a time, so the model's buffers and caches
/// are never shared between threads. `sequence` holds the caches and the prompt cache: a
/// new prompt reuses the longest common prefix with the tokens it holds.
final class InferenceEngine: @unchecked Sendable {
    let model: TransformerModel
    let tokenizer: Tokenizer
    let prompts: PromptBuilder
    let contextSize: Int
    /// Sampling defaults: the GGUF's `general.sampling.*` values where present.
    let defaults: SamplingParameters
    /// DRY's breaker strings as token sequences of this model's vocabulary.
    let dryBreakers: DRYBreakerResolver
    /// Serial queue on which every generation runs.
    let queue = DispatchQueue(label: "leap-ref.inference", qos: .userInitiated)

    // State below is touched only on `queue`.
    private var sequence: CachedSequence?
    private var maskComputers: [[Int]: TokenMaskComputer] = [:]
    private var compiledSchemas: [String: Grammar] = [:]

    init(path: String, options: LiquidInferenceEngineOptions) throws(LeapError) {
        let threads = max(1, options.cpuThreads ?? ThreadPool.defaultThreads)
        BLAS.setThreads(threads)
        do {
            model = try TransformerModel(path: path, threads: threads)
        } catch {
            throw .modelLoadingFailure("\(path): \(error)")
        }
        do {
            tokenizer = try Tokenizer(gguf: model.file)
        } catch {
            throw .modelLoadingFailure("\(path): the tokenizer cannot be read: \(error)")
        }
        let metadata = model.file.metadata
        prompts = try PromptBuilder(
            tokenizer: tokenizer,
            templateSource: try? metadata.string("tokenizer.chat_template"))
        let trained = model.hyperparameters.trainedContextLength
        contextSize = max(16, min(options.contextSize ?? min(trained, 4096), trained))
        defaults = InferenceEngine.samplingDefaults(metadata)
        dryBreakers = DRYBreakerResolver(tokenizer: tokenizer)
        sequence = CachedSequence(
            caches: InferenceSession(
                model: model, contextLength: contextSize,
                kvCacheType: options.kvCacheType == .f16 ? .f16 : .f32))
    }

    /// leap-ref's defaults, overridden by the model's `general.sampling.*` metadata.
    static func samplingDefaults(_ m: GGUFMetadata) -> SamplingParameters { SamplingDefaults.parameters(m) }

    /// Frees the caches; later generations fail with `LeapError.modelUnloaded`. Call on `queue`.
    func releaseState() {
        sequence = nil
        maskComputers = [:]
        compiledSchemas = [:]
        toolConstraints = [:]
    }

    /// The prompt tokens of a conversation (what `generate` would process).
    func promptTokens(messages: [ChatMessage], functions: [LeapFunction], options: GenerationOptions) throws(LeapError) -> [Int] {
        let text = try prompts.render(
            messages: messages, functions: functions,
            callFormat: options.functionCallParser ?? LFMFunctionCallParser(),
            enableThinking: options.enableThinking)
        return prompts.tokenize(text)
    }

    // MARK: Generation

    /// Runs one generation. Call on `queue`. `emit` receives chunks, reasoning and calls;
    /// the caller emits `.complete` from the outcome.
    func generate(
        _ request: GenerationRequest, cancel: CancellationFlag,
        emit: (MessageResponse) -> Void
    ) throws(LeapError) -> GenerationOutcome {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let sequence else { throw .modelUnloaded }
        let options = request.options
        let tokens = try promptTokens(messages: request.messages, functions: request.functions, options: options)
        let limit = min(options.sequenceLength ?? contextSize, contextSize)
        guard tokens.count < limit else { throw .promptExceedContextLengthFailure(tokens: tokens.count, limit: limit) }
        if let max = options.maxOutputTokens, max < 0 {
            throw .generationFailure("maxOutputTokens is \(max); pass a positive number or nil")
        }

        // Constraints, compiled before any state changes so that a bad schema leaves the cache as it was.
        var constraint: ActiveConstraint?
        var tools: ToolCallConstraint?
        if let schema = options.jsonSchemaConstraint {
            constraint = ActiveConstraint(
                matcher: GrammarMatcher(grammar: try compiledSchema(schema)),
                masks: maskComputer(literalSpecials: []), isToolCall: false)
        } else if !request.functions.isEmpty, let parser = options.functionCallParser {
            tools = try toolCallConstraint(functions: request.functions, parser: parser)
        }
        let callMode = options.functionCallMode ?? .auto
        if let t = tools, callMode == .required {
            constraint = ActiveConstraint(matcher: GrammarMatcher(grammar: t.withStart), masks: t.masks, isToolCall: true)
        }
        // With calls forbidden, a single-token start marker is masked out.
        let forbiddenToken: Int? = callMode == .none ? options.functionCallParser.flatMap { singleTokenID($0.callStartMarker) } : nil
        // The end of the output, as long as the call-start marker, for a marker that is not a
        // single token (then the model spells it over several tokens).
        var outputTail = ""

        let start = DispatchTime.now().uptimeNanoseconds
        let reused = try evaluatePrompt(tokens, reuseCache: options.cacheControl != .noCache)
        let promptDone = DispatchTime.now().uptimeNanoseconds

        var parameters = defaults
        if let v = options.temperature { parameters.temperature = v }
        if let v = options.topK { parameters.topK = v }
        if let v = options.topP { parameters.topP = v }
        if let v = options.minP { parameters.minP = v }
        if let v = options.repetitionPenalty { parameters.repetitionPenalty = v }
        parameters.seed = options.rngSeed ?? UInt64.random(in: 0...UInt64.max)
        parameters.applyDRY(options, breakers: dryBreakers)
        var sampler = Sampler(parameters)
        for t in tokens.suffix(parameters.historyLength) { sampler.accept(t) }

        var output = OutputAssembler(parser: options.functionCallParser)
        var detokenizer = StreamingDetokenizer(tokenizer: tokenizer, renderSpecial: true)
        var generated = 0
        var finish = GenerationFinishReason.stop
        var cancelled = false
        while true {
            if cancel.isCancelled {
                cancelled = true
                break
            }
            if let c = constraint, !c.isToolCall, !c.matcher.canContinue { break }  // the document is complete
            if let max = options.maxOutputTokens, generated >= max { break }
            if tokens.count + generated >= limit {
                finish = .exceedContext
                break
            }
            let next: Int
            if let c = constraint {
                let mask = c.masks.mask(for: c.matcher)
                guard mask.allowedCount > 0 else {
                    throw .generationFailure(
                        "the JSON Schema constraint allows no token here (output so far: \(output.text.debugDescription))")
                }
                guard let id = withNextLogits({ sampler.sample($0, allowed: { mask[$0] }) }) else { break }
                next = id
            } else if let banned = forbiddenToken {
                guard let id = withNextLogits({ sampler.sample($0, allowed: { $0 != banned }) }) else { break }
                next = id
            } else {
                guard let id = withNextLogits({ sampler.sample($0) }) else { break }
                next = id
            }
            if tokenizer.isEndOfGeneration(TokenID(next)) { break }
            if let c = constraint {
                guard c.matcher.accept(bytes: c.masks.vocabulary.tokens[next]) else {
                    throw .generationFailure("internal error: the constraint rejected a token its mask allowed")
                }
                // A finished call block hands generation back to the model.
                if c.isToolCall, !c.matcher.canContinue { constraint = nil }
            }
            sampler.accept(next)
            generated += 1
            let delta = detokenizer.append(TokenID(next))
            if let t = tools, t.startTokenID == nil {
                outputTail += delta
                if outputTail.count > t.startMarker.count { outputTail = String(outputTail.suffix(t.startMarker.count)) }
            }
            if constraint == nil, let t = tools, callMode != .none {
                // The model opened a call: constrain the rest of the block.
                if next == t.startTokenID || (t.startTokenID == nil && outputTail.hasSuffix(t.startMarker)) {
                    constraint = ActiveConstraint(matcher: GrammarMatcher(grammar: t.afterStart), masks: t.masks, isToolCall: true)
                }
            }
            for response in output.feed(delta) { emit(response) }
            if let max = options.maxOutputTokens, generated >= max { break }
            if tokens.count + generated >= limit {
                finish = .exceedContext
                break
            }
            if cancel.isCancelled {
                cancelled = true
                break
            }
            do {
                try sequence.evaluate(next)
            } catch {
                throw .generationFailure("the model failed while generating: \(error)")
            }
        }
        for response in output.feed(detokenizer.finish()) { emit(response) }
        for response in output.finish() { emit(response) }
        let end = DispatchTime.now().uptimeNanoseconds

        let decodeSeconds = Double(end - promptDone) / 1e9
        let promptSeconds = Double(promptDone - start) / 1e9
        let stats = GenerationStats(
            promptTokens: UInt64(tokens.count), completionTokens: UInt64(generated),
            totalTokens: UInt64(tokens.count + generated),
            tokenPerSecond: decodeSeconds > 0 ? Float(Double(generated) / decodeSeconds) : 0,
            cachedPromptTokens: UInt64(reused),
            promptTokenPerSecond: promptSeconds > 0 ? Float(Double(tokens.count - reused) / promptSeconds) : 0)
        return GenerationOutcome(message: output.message, finishReason: finish, stats: stats, cancelled: cancelled)
    }

    /// Brings the sequence to the state after `tokens`, reusing the cached prefix when
    /// `reuseCache` (see `CachedSequence.evaluatePrompt`). Returns the number of tokens
    /// reused. Call on `queue`.
    func evaluatePrompt(_ tokens: [Int], reuseCache: Bool) throws(LeapError) -> Int {
        guard let sequence else { throw .modelUnloaded }
        do {
            return try sequence.evaluatePrompt(tokens, reuseCache: reuseCache)
        } catch {
            throw .generationFailure("the model failed on the prompt: \(error)")
        }
    }

    /// The logits the next token is sampled from.
    private func withNextLogits<R>(_ body: (UnsafeBufferPointer<Float>) -> R) -> R {
        sequence!.withNextLogits(body)
    }

    /// A copy of the logits after the last evaluated token (for tests). Call on `queue`.
    func currentLogits() -> [Float] { sequence?.withNextLogits { Array($0) } ?? [] }

    // MARK: Constraints

    /// How `jsonSchemaConstraint` is compiled for generation: at most one whitespace
    /// character between JSON tokens (a model cannot pad forever) and plain integers (so
    /// integer fields decode into `Int`). Neither admits a document the schema forbids.
    static var generationSchemaOptions: JSONSchemaCompiler.Options {
        var o = JSONSchemaCompiler.Options()
        o.maxWhitespaceRun = 1
        o.plainIntegers = true
        return o
    }

    /// `generationSchemaOptions` with the compiler's bounds set to `limits` (a server's
    /// configured limits).
    static func generationSchemaOptions(limits: JSONSchemaCompiler.Limits) -> JSONSchemaCompiler.Options {
        var o = generationSchemaOptions
        o.limits = limits
        return o
    }

    /// The grammar of a JSON Schema, compiled once per schema text.
    private func compiledSchema(_ schema: String) throws(LeapError) -> Grammar {
        if let g = compiledSchemas[schema] { return g }
        do {
            let g = try JSONSchemaCompiler.compile(schema, options: InferenceEngine.generationSchemaOptions)
            compiledSchemas[schema] = g
            return g
        } catch {
            throw .generationFailure("jsonSchemaConstraint cannot be used: \(error)")
        }
    }

    /// The grammars that constrain a call block once the model opens one.
    struct ToolCallConstraint {
        /// The whole block, start marker included (for `.required`).
        let withStart: Grammar
        /// The block after its start marker.
        let afterStart: Grammar
        let startMarker: String
        /// The start marker's token, when the vocabulary has it as one token.
        let startTokenID: Int?
        let masks: TokenMaskComputer
    }

    /// A grammar being enforced: a JSON Schema for the whole reply, or one call block.
    struct ActiveConstraint {
        let matcher: GrammarMatcher
        let masks: TokenMaskComputer
        let isToolCall: Bool
    }

    private var toolConstraints: [String: ToolCallConstraint] = [:]

    /// The id of `text` when the vocabulary has it as a single token.
    func singleTokenID(_ text: String) -> Int? {
        tokenizer.tokenID(forText: text).map(Int.init)
    }

    /// The call-block grammars for the registered functions in the parser's syntax
    /// (Pythonic for `LFMFunctionCallParser`, JSON for `HermesFunctionCallParser`); nil for
    /// other parsers, whose syntax leap-ref does not know.
    private func toolCallConstraint(functions: [LeapFunction], parser: LeapFunctionCallParserProtocol) throws(LeapError)
        -> ToolCallConstraint?
    {
        let syntax: ToolCallSyntax
        switch parser {
        case is LFMFunctionCallParser: syntax = .pythonic(start: parser.callStartMarker, end: parser.callEndMarker)
        case is HermesFunctionCallParser: syntax = .json(start: parser.callStartMarker, end: parser.callEndMarker)
        default: return nil
        }
        let list = functions.map { (name: $0.name, parameters: $0.parametersSchema) }
        let key = "\(syntax)" + JSONValue.array(list.map { ["name": .string($0.name), "parameters": $0.parameters] }).serialized()
        if let cached = toolConstraints[key] { return cached }
        do {
            let startID = singleTokenID(parser.callStartMarker)
            let literal = [startID, singleTokenID(parser.callEndMarker)].compactMap { $0 }
            let constraint = ToolCallConstraint(
                withStart: try ToolCallGrammar.build(functions: list, syntax: syntax, includeStartMarker: true),
                afterStart: try ToolCallGrammar.build(functions: list, syntax: syntax, includeStartMarker: false),
                startMarker: parser.callStartMarker, startTokenID: startID,
                masks: maskComputer(literalSpecials: literal))
            toolConstraints[key] = constraint
            return constraint
        } catch {
            throw .generationFailure("the registered functions cannot be turned into a call grammar: \(error)")
        }
    }

    /// A mask computer over the vocabulary in which the end-of-generation tokens are the
    /// special tokens (allowed where the grammar may end), `literalSpecials` (control
    /// tokens such as `<|tool_call_end|>`) match their text, and other control tokens are
    /// never allowed.
    func maskComputer(literalSpecials: [Int]) -> TokenMaskComputer {
        if let c = maskComputers[literalSpecials] { return c }
        var bytes = tokenizer.allTokenBytes(renderSpecial: false)
        for id in literalSpecials where id >= 0 && id < bytes.count {
            bytes[id] = tokenizer.tokenBytes(TokenID(id), renderSpecial: true)
        }
        let vocabulary = TokenVocabulary(tokens: bytes, specialTokens: Set(tokenizer.endOfGenerationIDs.map(Int.init)))
        let computer = TokenMaskComputer(vocabulary: vocabulary)
        maskComputers[literalSpecials] = computer
        return computer
    }
}
