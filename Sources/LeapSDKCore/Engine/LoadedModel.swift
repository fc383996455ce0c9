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
final class LoadedModel: @unchecked Sendable {
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
    /// The media encoder of the model's mmproj file (nil: a text-only model).
    let projector: MediaEncoder?
    /// Reads a message's image and audio parts for `projector`.
    let mediaReader: MediaReader?
    /// What the model speaks with (nil: it writes text only).
    let speech: SpeechParts?
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
            templateSource: options.chatTemplate ?? (try? metadata.string("tokenizer.chat_template")))
        let trained = model.hyperparameters.trainedContextLength
        contextSize = max(16, min(options.contextSize ?? min(trained, 4096), trained))
        kvCacheType = options.kvCacheType == .f16 ? .f16 : .f32
        defaults = LoadedModel.samplingDefaults(metadata, over: options.samplingDefaults)
        dryBreakers = DRYBreakerResolver(tokenizer: tokenizer)
        let projector = try LoadedModel.loadProjector(modelPath: path, options: options, model: model)
        self.projector = projector
        let tokenizer = self.tokenizer
        mediaReader = projector.map { MediaReader(projector: $0, tokenizer: tokenizer, limits: options.mediaLimits) }
        speech = try SpeechParts.load(modelPath: path, options: options, model: model, tokenizer: tokenizer)
    }

    /// The media encoder of the model: `options.mmProjPath`, or the `mmproj-*.gguf` beside
    /// the model file (`MultimodalProjectorFile.companion`). A projector whose output width
    /// is not the language model's is an error.
    static func loadProjector(modelPath: String, options: LiquidInferenceEngineOptions, model: TransformerModel) throws(LeapError)
        -> MediaEncoder?
    {
        guard let path = options.mmProjPath ?? MultimodalProjectorFile.companion(of: modelPath) else { return nil }
        do {
            let projector = try MediaEncoder.load(path: path, pool: model.pool)
            try projector.checkLanguageModelWidth(model.hyperparameters.embeddingLength, languageModel: modelPath)
            return projector
        } catch {
            throw .modelLoadingFailure("\(path): \(error)")
        }
    }

    /// leap-ref's defaults, overridden by the model's `general.sampling.*` metadata.
    static func samplingDefaults(_ m: GGUFMetadata) -> SamplingParameters { SamplingDefaults.parameters(m) }

    /// The model's defaults with the load options' `samplingDefaults` (a LEAP manifest's
    /// `sampling_parameters`) written over them.
    static func samplingDefaults(_ m: GGUFMetadata, over loaded: SamplingOverrides?) -> SamplingParameters {
        var p = SamplingDefaults.parameters(m)
        guard let o = loaded else { return p }
        if let v = o.temperature { p.temperature = v }
        if let v = o.topK { p.topK = v }
        if let v = o.topP { p.topP = v }
        if let v = o.minP { p.minP = v }
        if let v = o.repetitionPenalty { p.repetitionPenalty = v }
        return p
    }

    /// Frees the compiled masks (the caches belong to the serving engines). Call on `queue`.
    func releaseState() {
        maskComputers = [:]
    }

    /// The prompt tokens of a conversation without media (see `prompt`).
    func promptTokens(
        messages: [ChatMessage], tools: [JSONValue], callFormat: any LeapFunctionCallParserProtocol, enableThinking: Bool?
    ) throws(ServingError) -> [Int] {
        try prompt(messages: messages, tools: tools, callFormat: callFormat, enableThinking: enableThinking).keys
    }

    /// What stands for a media part in the rendered prompt text until it is split there: a
    /// string no tokenizer or user writes by accident (private-use characters).
    static let mediaMarker = "<\u{E000}leap-ref-media\u{E001}>"

    /// The prompt of a conversation: the chat template over `messages` with `tools` (the
    /// JSON the template receives; in LFM2's system-prompt form, written for `callFormat`,
    /// when the template ignores them) and the assistant's generation prompt, tokenized;
    /// each image or audio part is read by the media encoder's `MediaReader` and takes its
    /// positions where the message has it. With a `positionLimit`, a prompt of that many
    /// positions or more is refused (`ServingError.promptTooLong`) from the text and
    /// the media parts' headers, before any part is decoded; its text is tokenized only
    /// until it is known to be too long (`tokenizePrompt`).
    func prompt(
        messages: [ChatMessage], tools: [JSONValue], callFormat: any LeapFunctionCallParserProtocol, enableThinking: Bool?,
        positionLimit: Int? = nil
    ) throws(ServingError) -> PromptSequence {
        // The parts that take positions of their own, in order: the images and audio the
        // media encoder reads (a spoken reply's audio is not one: `PromptBuilder.render`
        // leaves it out), and a spoken reply's steps, read in its content's place.
        let parts: [PromptPart] = messages.flatMap { message -> [PromptPart] in
            if speech != nil, message.role == .assistant, let steps = message.speechSteps, !steps.isEmpty { return [.spoken(steps)] }
            return message.content.compactMap { part in
                switch part {
                case .text: return nil
                case .audio: return message.role == .assistant ? nil : .media(part)
                case .image: return .media(part)
                }
            }
        }
        let spoken = parts.contains { if case .spoken = $0 { return true } else { return false } }
        let marker = parts.isEmpty || (mediaReader == nil && !spoken) ? nil : Self.mediaMarker
        let text = try prompts.render(
            messages: messages, tools: tools, callFormat: callFormat, enableThinking: enableThinking, mediaMarker: marker,
            spokenRepliesAsMarkers: spoken)
        guard let marker else {
            return PromptSequence(tokens: try tokenizePrompt([text], positionLimit: positionLimit)[0])
        }
        let texts = text.components(separatedBy: marker)
        guard texts.count == parts.count + 1 else {
            throw .invalidRequest(
                "the chat template wrote \(texts.count - 1) of the conversation's \(parts.count) image, audio and spoken parts; it must write each message's content once"
            )
        }
        var partPositions = 0
        if positionLimit != nil {
            for part in parts {
                switch part {
                case .media(let content): partPositions += mediaReader?.positions(content) ?? 0
                case .spoken(let steps): partPositions += fedSteps(steps).count
                }
            }
        }
        let ids = try tokenizePrompt(texts, positionLimit: positionLimit, mediaPositions: partPositions)
        var prompt = PromptSequence()
        for (index, run) in ids.enumerated() {
            prompt.append(.tokens(run))
            guard index < parts.count else { continue }
            switch parts[index] {
            case .media(let content):
                guard let reader = mediaReader else {
                    throw .unsupportedContent(
                        "this model has no media encoder (mmproj file), so it cannot read image or audio content; send text only")
                }
                for piece in try reader.pieces(content) { prompt.append(piece) }
            case .spoken(let steps):
                for piece in try spokenPieces(steps) { prompt.append(piece) }
            }
        }
        return prompt
    }

    /// The steps of a spoken reply that are read back: all but a trailing `<|im_end|>`.
    private func fedSteps(_ steps: [SpeechStep]) -> ArraySlice<SpeechStep> {
        if case .text(let last)? = steps.last, last == speech?.tokens.endOfTurn { return steps.dropLast() }
        return steps[...]
    }

    /// A part of a prompt with positions of its own.
    private enum PromptPart {
        /// An image or audio part the media encoder reads.
        case media(ChatMessageContent)
        /// A spoken reply's steps.
        case spoken([SpeechStep])
    }

    /// A spoken reply's steps as the model reads them back: its text tokens as tokens, and
    /// each frame as one position holding its embedding (the summed `audio_embedding`
    /// rows, as when the frame was made), keyed as the generation keyed it, so that the
    /// turn that made the reply finds it in the prompt cache. A trailing `<|im_end|>` (a
    /// sequential reply's last step) is left out: the template closes the turn with its own.
    private func spokenPieces(_ steps: [SpeechStep]) throws(ServingError) -> [PromptSequence.Piece] {
        guard let speech else { return [] }
        var pieces: [PromptSequence.Piece] = []
        var run: [Int] = []
        for step in fedSteps(steps) {
            switch step {
            case .text(let id):
                guard id >= 0, id < tokenizer.vocabularySize else {
                    throw .invalidRequest("a spoken reply's step is token \(id), outside the vocabulary (0..<\(tokenizer.vocabularySize))")
                }
                run.append(id)
            case .frame(let codes):
                guard let frame = AudioFrame(checking: codes) else {
                    throw .invalidRequest(
                        "a spoken reply's frame is \(AudioFrame.codebookCount) codes of 0...\(AudioFrame.endOfAudioCode), not \(codes)")
                }
                if !run.isEmpty {
                    pieces.append(.tokens(run))
                    run = []
                }
                let vocoder = speech.vocoder
                pieces.append(
                    .media(
                        MediaChunk(kind: "speech", positions: 1, contentHash: SpeechGeneration.contentHash(frame)) {
                            () throws(ServingError) -> [Float] in vocoder.frameEmbedding(frame)
                        }))
            }
        }
        if !run.isEmpty { pieces.append(.tokens(run)) }
        return pieces
    }

    /// The token ids of a prompt's text parts (the text before the first part starts the
    /// prompt, with BOS as the tokenizer asks). With a `positionLimit`, a prompt whose text
    /// and `mediaPositions` come to that many positions or more is refused
    /// (`ServingError.promptTooLong`): counted exactly up to
    /// `LeapError.promptCountingFactor` times the limit, and beyond that only until the
    /// tokenizer knows it has more, so that a hostile megabyte of text costs no more than
    /// four contexts' worth of tokenization.
    func tokenizePrompt(_ parts: [String], positionLimit: Int?, mediaPositions: Int = 0) throws(ServingError) -> [[Int]] {
        let countLimit: Int = positionLimit.map(LeapError.countedPromptLength(limit:)) ?? Int.max
        var total = mediaPositions
        var texts: [[Int]] = []
        for (index, part) in parts.enumerated() {
            let remaining = countLimit - total
            // The text before the first media part starts the prompt (BOS as the tokenizer asks).
            let encoded: LimitedEncoding
            if index == 0 {
                encoded = prompts.tokenize(part, stoppingAbove: remaining)
            } else {
                encoded = tokenizer.encode(part, addSpecial: false, parseSpecial: true, stoppingAbove: remaining)
            }
            total += encoded.count
            if let positionLimit, !encoded.isComplete {
                throw .promptTooLong(tokens: total, limit: positionLimit)
            }
            texts.append(encoded.tokens.map(Int.init))
        }
        if let positionLimit, total >= positionLimit {
            throw .promptTooLong(tokens: total, limit: positionLimit)
        }
        return texts
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
