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

    // DRY ("don't repeat yourself"), leap-ref's addition: a token that would extend a
    // sequence already in the context loses `dryMultiplier × dryBase^(n - dryAllowedLength)`
    // from its logit, n being the length of the repeat (see `DRYParameters`). `nil` fields
    // take `SamplingDefaults.dry` (multiplier 0.8, base 1.75, allowed length 2, the whole
    // context, llama.cpp's breakers).

    /// DRY's multiplier; 0 turns DRY off.
    public var dryMultiplier: Float?
    /// DRY's base (at least 1; below, DRY is off).
    public var dryBase: Float?
    /// Repeats up to this many tokens go unpenalized.
    public var dryAllowedLength: Int?
    /// How many of the latest tokens (prompt and output) DRY searches: -1 the whole
    /// context, 0 off.
    public var dryPenaltyLastN: Int?
    /// Strings that cut repeats (a repeat never reaches back past one, and a token that
    /// contains one is never penalized); default `["\n", ":", "\"", "*"]`. The model's
    /// end-of-generation tokens always break repeats.
    public var drySequenceBreakers: [String]?

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
        functionCallMode: FunctionCallMode? = nil,
        dryMultiplier: Float? = nil,
        dryBase: Float? = nil,
        dryAllowedLength: Int? = nil,
        dryPenaltyLastN: Int? = nil,
        drySequenceBreakers: [String]? = nil
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
        self.dryMultiplier = dryMultiplier
        self.dryBase = dryBase
        self.dryAllowedLength = dryAllowedLength
        self.dryPenaltyLastN = dryPenaltyLastN
        self.drySequenceBreakers = drySequenceBreakers
    }
}

extension GenerationOptions: DRYOptions {}
