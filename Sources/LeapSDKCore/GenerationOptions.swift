/// How the prompt cache is used for one generation.
public enum CacheControl: Sendable, Equatable {
    /// Reuse the state of the longest common prefix with the previous turn (the default).
    case reuse
    /// Process the whole prompt again, discarding cached state first.
    case noCache
}

/// Whether a generation may call the conversation's registered functions.
public enum FunctionCallMode: Sendable, Equatable {
    /// The model decides; a call it opens is constrained to the registered functions.
    case auto
    /// The reply must start with a call to one of the registered functions.
    case required
    /// The model may not call functions (the call-start marker is masked out).
    case none
}

/// Per-request generation settings. A `nil` field falls back to the model's default
/// (read from the GGUF where it carries one, otherwise leap-ref's documented default).
public struct GenerationOptions: Sendable {
    /// Sampling temperature; 0 is greedy.
    public var temperature: Float?
    /// Nucleus sampling: keep the most likely tokens whose probabilities sum to `topP`.
    public var topP: Float?
    /// Keep only the `topK` most likely tokens.
    public var topK: Int?
    /// Drop tokens less likely than `minP` times the most likely one.
    public var minP: Float?
    /// Penalize recently generated tokens (1 = off).
    public var repetitionPenalty: Float?
    /// Seed of the random draw: the same seed gives the same text.
    public var rngSeed: UInt64?
    /// For thinking models: let the model reason (`true`) or skip the reasoning (`false`).
    public var enableThinking: Bool?
    /// The most tokens to generate.
    public var maxOutputTokens: Int?
    /// The most tokens of prompt plus output; reaching it ends with `.exceedContext`.
    public var sequenceLength: Int?
    /// Prompt-cache behaviour.
    public var cacheControl: CacheControl?
    /// A JSON Schema (as text) the output must satisfy; generation is constrained token by token.
    public var jsonSchemaConstraint: String?
    /// Parses the model's function calls; `nil` passes call text through as `.chunk`s.
    public var functionCallParser: LeapFunctionCallParserProtocol?
    /// Whether the model may, must, or must not call the registered functions
    /// (leap-ref's addition; `nil` is `.auto`).
    public var functionCallMode: FunctionCallMode?

    public init(
        temperature: Float? = nil,
        topP: Float? = nil,
        topK: Int? = nil,
        minP: Float? = nil,
        repetitionPenalty: Float? = nil,
        rngSeed: UInt64? = nil,
        enableThinking: Bool? = nil,
        maxOutputTokens: Int? = nil,
        sequenceLength: Int? = nil,
        cacheControl: CacheControl? = nil,
        jsonSchemaConstraint: String? = nil,
        functionCallParser: LeapFunctionCallParserProtocol? = LFMFunctionCallParser(),
        functionCallMode: FunctionCallMode? = nil
    ) {
        self.temperature = temperature
        self.topP = topP
        self.topK = topK
        self.minP = minP
        self.repetitionPenalty = repetitionPenalty
        self.rngSeed = rngSeed
        self.enableThinking = enableThinking
        self.maxOutputTokens = maxOutputTokens
        self.sequenceLength = sequenceLength
        self.cacheControl = cacheControl
        self.jsonSchemaConstraint = jsonSchemaConstraint
        self.functionCallParser = functionCallParser
        self.functionCallMode = functionCallMode
    }
}
