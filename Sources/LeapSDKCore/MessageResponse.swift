/// What a generation emits, in order: text and reasoning chunks, function calls, audio,
/// and finally one `.complete`.
public enum MessageResponse: Sendable {
    /// A piece of the assistant's reply text.
    case chunk(String)
    /// A piece of the model's reasoning (text between `<think>` and `</think>`).
    case reasoningChunk(String)
    /// PCM audio from an audio-capable model.
    case audioSample(samples: [Float], sampleRate: Int)
    /// Function calls the model requested (parsed by the `functionCallParser`).
    case functionCall([LeapFunctionCall])
    /// The end of the generation: the assembled reply, why it ended, statistics.
    case complete(MessageCompletion)
}

/// Why a generation ended.
public enum GenerationFinishReason: String, Sendable, Equatable {
    /// The model ended its turn, or `maxOutputTokens` was reached, or it was stopped.
    case stop
    /// The context (`sequenceLength`) was full.
    case exceedContext
}

/// Statistics of one generation.
public struct GenerationStats: Sendable, Equatable {
    /// Tokens in the rendered prompt (the whole conversation so far).
    public var promptTokens: UInt64
    /// Tokens the model generated.
    public var completionTokens: UInt64
    /// `promptTokens + completionTokens`.
    public var totalTokens: UInt64
    /// Generation speed: completion tokens per second of decoding.
    public var tokenPerSecond: Float
    /// Prompt tokens whose state came from the prompt cache instead of being processed.
    public var cachedPromptTokens: UInt64
    /// Prompt-processing speed: newly processed prompt tokens per second.
    public var promptTokenPerSecond: Float
    /// A spoken reply's audio frames (80 ms of speech each, `samplesPerAudioFrame` samples;
    /// end-of-audio frames included, which make no sound), 0 for a text reply. Counted in
    /// `completionTokens` too. leap-ref's addition.
    public var audioFrames: UInt64 = 0
    /// Seconds from the request to its first audio sample (nil: no speech). leap-ref's
    /// addition.
    public var secondsToFirstAudioSample: Double?
    /// Samples of 24 kHz speech one audio frame makes.
    public static let samplesPerAudioFrame = 1920

    public init(
        promptTokens: UInt64, completionTokens: UInt64, totalTokens: UInt64, tokenPerSecond: Float,
        cachedPromptTokens: UInt64 = 0, promptTokenPerSecond: Float = 0
    ) {
        self.promptTokens = promptTokens
        self.completionTokens = completionTokens
        self.totalTokens = totalTokens
        self.tokenPerSecond = tokenPerSecond
        self.cachedPromptTokens = cachedPromptTokens
        self.promptTokenPerSecond = promptTokenPerSecond
    }
}

/// The finish reason and statistics of a completion.
public struct GenerationCompleteInfo: Sendable {
    public let finishReason: GenerationFinishReason
    public let stats: GenerationStats?
}

/// The end of a generation.
public struct MessageCompletion: Sendable {
    /// The assembled assistant reply (text, reasoning, function calls).
    public let message: ChatMessage
    public let finishReason: GenerationFinishReason
    public let stats: GenerationStats?

    public init(message: ChatMessage, finishReason: GenerationFinishReason, stats: GenerationStats?) {
        self.message = message
        self.finishReason = finishReason
        self.stats = stats
    }

    public var info: GenerationCompleteInfo { GenerationCompleteInfo(finishReason: finishReason, stats: stats) }

    /// The Kotlin-bridged name of `message`.
    public var fullMessage: ChatMessage { message }
}
