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
///
/// The sampling fields (`temperature` ... `rngSeed`, the `dry*` fields) are views of
/// `sampling`, the `SamplingOverrides` that the generation applies over the model's
/// defaults, as the server and the command line do.
public struct GenerationOptions: Sendable {
    /// How tokens are drawn: the settings this generation sets over the model's defaults.
    public var sampling: SamplingOverrides
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
    /// The order of the properties of `jsonSchemaConstraint`'s objects (nil is `.schema`:
    /// the schema's order, which reads best; `.any` accepts them in any order).
    public var jsonSchemaPropertyOrder: JSONSchemaPropertyOrder?
    /// Parses the model's function calls; `nil` passes call text through as `.chunk`s.
    public var functionCallParser: LeapFunctionCallParserProtocol?
    /// Whether the model may, must, or must not call the registered functions
    /// (leap-ref's addition; `nil` is `.auto`).
    public var functionCallMode: FunctionCallMode?
    /// Whether a speech-capable model speaks its reply (`nil` is `.automatic`: as the
    /// system prompt says). The audio arrives as `.audioSample`s while the model talks,
    /// and `.complete`'s message holds it as a WAV `.audio` part.
    public var speech: SpeechOutput?
    /// The temperature of a spoken reply's audio codes (nil: the mode's default, or greedy
    /// when `temperature` is 0; see `SpeechRequest`).
    public var audioTemperature: Float?
    /// The most likely codes an audio code is drawn from (nil: the mode's default).
    public var audioTopK: Int?

    /// Sampling temperature; 0 is greedy (`sampling.temperature`).
    public var temperature: Float? {
        get { sampling.temperature }
        set { sampling.temperature = newValue }
    }
    /// Nucleus sampling: keep the most likely tokens whose probabilities sum to `topP`.
    public var topP: Float? {
        get { sampling.topP }
        set { sampling.topP = newValue }
    }
    /// Keep only the `topK` most likely tokens.
    public var topK: Int? {
        get { sampling.topK }
        set { sampling.topK = newValue }
    }
    /// Drop tokens less likely than `minP` times the most likely one.
    public var minP: Float? {
        get { sampling.minP }
        set { sampling.minP = newValue }
    }
    /// Penalize recently generated tokens (1 = off).
    public var repetitionPenalty: Float? {
        get { sampling.repetitionPenalty }
        set { sampling.repetitionPenalty = newValue }
    }
    /// Seed of the random draw: the same seed gives the same text (`sampling.seed`).
    public var rngSeed: UInt64? {
        get { sampling.seed }
        set { sampling.seed = newValue }
    }
    /// DRY's multiplier, leap-ref's addition; 0 turns DRY off (see `SamplingOverrides`).
    public var dryMultiplier: Float? {
        get { sampling.dryMultiplier }
        set { sampling.dryMultiplier = newValue }
    }
    /// DRY's base (at least 1; below, DRY is off).
    public var dryBase: Float? {
        get { sampling.dryBase }
        set { sampling.dryBase = newValue }
    }
    /// Repeats up to this many tokens go unpenalized by DRY.
    public var dryAllowedLength: Int? {
        get { sampling.dryAllowedLength }
        set { sampling.dryAllowedLength = newValue }
    }
    /// How many of the latest tokens DRY searches: -1 the whole context, 0 off.
    public var dryPenaltyLastN: Int? {
        get { sampling.dryPenaltyLastN }
        set { sampling.dryPenaltyLastN = newValue }
    }
    /// Strings that cut repeats for DRY (`SamplingOverrides.drySequenceBreakers`).
    public var drySequenceBreakers: [String]? {
        get { sampling.drySequenceBreakers }
        set { sampling.drySequenceBreakers = newValue }
    }

    /// Options with the given fields set; every argument has a default (unset, and
    /// LFM2's call parser).
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
        sampling = SamplingOverrides(
            temperature: temperature, topP: topP, topK: topK, minP: minP, repetitionPenalty: repetitionPenalty, seed: rngSeed,
            dryMultiplier: dryMultiplier, dryBase: dryBase, dryAllowedLength: dryAllowedLength,
            dryPenaltyLastN: dryPenaltyLastN, drySequenceBreakers: drySequenceBreakers)
        self.enableThinking = enableThinking
        self.maxOutputTokens = maxOutputTokens
        self.sequenceLength = sequenceLength
        self.cacheControl = cacheControl
        self.jsonSchemaConstraint = jsonSchemaConstraint
        self.functionCallParser = functionCallParser
        self.functionCallMode = functionCallMode
    }
}
