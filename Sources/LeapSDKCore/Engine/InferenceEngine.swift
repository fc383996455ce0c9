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

/// One loaded model, what reads and writes its text (tokenizer, chat template), its
/// sampling defaults and the compiled token masks. Generations run on a `ServingEngine`
/// over it (`LiquidInferenceEngineRunner` keeps one; a server makes its own), on `queue`.
final class InferenceEngine: @unchecked Sendable {
    let model: TransformerModel
    let tokenizer: Tokenizer
    let prompts: PromptBuilder
    let contextSize: Int
    /// How the attention caches store keys and values.
    let kvCacheType: KVCacheType
    /// Sampling defaults: the GGUF's `general.sampling.*` values where present.
    let defaults: SamplingParameters
    /// DRY's breaker strings as token sequences of this model's vocabulary.
    let dryBreakers: DRYBreakerResolver
    /// Serial queue on which every generation runs.
    let queue = DispatchQueue(label: "leap-ref.inference", qos: .userInitiated)

    // Touched only on `queue`.
    private var maskComputers: [[Int]: TokenMaskComputer] = [:]

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
        kvCacheType = options.kvCacheType == .f16 ? .f16 : .f32
        defaults = InferenceEngine.samplingDefaults(metadata)
        dryBreakers = DRYBreakerResolver(tokenizer: tokenizer)
    }

    /// leap-ref's defaults, overridden by the model's `general.sampling.*` metadata.
    static func samplingDefaults(_ m: GGUFMetadata) -> SamplingParameters { SamplingDefaults.parameters(m) }

    /// Frees the compiled masks (the caches belong to the serving engines). Call on `queue`.
    func releaseState() {
        maskComputers = [:]
    }

    /// The prompt tokens of a conversation: the chat template over `messages` with `tools`
    /// (the JSON the template receives; in LFM2's system-prompt form, written for
    /// `callFormat`, when the template ignores them) and the assistant's generation prompt.
    func promptTokens(
        messages: [ChatMessage], tools: [JSONValue], callFormat: any LeapFunctionCallParserProtocol, enableThinking: Bool?
    ) throws(LeapError) -> [Int] {
        let text = try prompts.render(messages: messages, tools: tools, callFormat: callFormat, enableThinking: enableThinking)
        return prompts.tokenize(text)
    }

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

    /// The id of `text` when the vocabulary has it as a single token.
    func singleTokenID(_ text: String) -> Int? {
        tokenizer.tokenID(forText: text).map(Int.init)
    }

    /// A mask computer over the vocabulary in which the end-of-generation tokens are the
    /// special tokens (allowed where the grammar may end), `literalSpecials` (control
    /// tokens such as `<|tool_call_end|>`) match their text, and other control tokens are
    /// never allowed. Call on `queue`.
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
