import Sampling

/// The sampling settings one caller sets, each `nil` when it leaves that setting to the
/// layer below: a request's over the server's flags, those over the model's defaults
/// (`SamplingDefaults.parameters`: its `general.sampling.*` metadata, else leap-ref's).
/// The one type for such settings: the SDK's `GenerationOptions` holds one
/// (`GenerationOptions.sampling`), the server's requests carry one
/// (`ServingRequest.sampling`) and so do the command line's sampling flags.
///
/// Each field means what it means in `SamplingParameters` and `DRYParameters`;
/// `apply(to:breakers:)` is the one place where they are written over defaults.
public struct SamplingOverrides: Sendable, Equatable {
    /// Sampling temperature; 0 is greedy.
    public var temperature: Float?
    /// Nucleus sampling: keep the most likely tokens whose probabilities sum to `topP`.
    public var topP: Float?
    /// Keep only the `topK` most likely tokens (0: all).
    public var topK: Int?
    /// Drop tokens less likely than `minP` times the most likely one.
    public var minP: Float?
    /// Penalize recently generated tokens (1 = off).
    public var repetitionPenalty: Float?
    /// OpenAI's `frequency_penalty` (see `SamplingParameters.frequencyPenalty`).
    public var frequencyPenalty: Float?
    /// OpenAI's `presence_penalty` (see `SamplingParameters.presencePenalty`).
    public var presencePenalty: Float?
    /// Seed of the random draw: the same seed gives the same text. Unset, the
    /// `ServingEngine` draws a random seed for each completion.
    public var seed: UInt64?

    // DRY ("don't repeat yourself"): a token that would extend a sequence already in the
    // context loses `dryMultiplier × dryBase^(n - dryAllowedLength)` from its logit, n
    // being the length of the repeat (see `DRYParameters`). Unset fields take
    // `SamplingDefaults.dry` (multiplier 0.8, base 1.75, allowed length 2, the whole
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

    /// Settings with the given fields set; every argument defaults to unset.
    public init(
        temperature: Float? = nil, topP: Float? = nil, topK: Int? = nil, minP: Float? = nil,
        repetitionPenalty: Float? = nil, frequencyPenalty: Float? = nil, presencePenalty: Float? = nil,
        seed: UInt64? = nil, dryMultiplier: Float? = nil, dryBase: Float? = nil, dryAllowedLength: Int? = nil,
        dryPenaltyLastN: Int? = nil, drySequenceBreakers: [String]? = nil
    ) {
        self.temperature = temperature
        self.topP = topP
        self.topK = topK
        self.minP = minP
        self.repetitionPenalty = repetitionPenalty
        self.frequencyPenalty = frequencyPenalty
        self.presencePenalty = presencePenalty
        self.seed = seed
        self.dryMultiplier = dryMultiplier
        self.dryBase = dryBase
        self.dryAllowedLength = dryAllowedLength
        self.dryPenaltyLastN = dryPenaltyLastN
        self.drySequenceBreakers = drySequenceBreakers
    }

    /// `base` with every field set here written over it, and DRY's breakers (these
    /// settings' strings, else `DRYParameters.defaultSequenceBreakerStrings`) resolved to
    /// token sequences with `breakers`: what a generation with these settings samples
    /// with. Out-of-range DRY values are read as llama.cpp reads them: a window below -1 is
    /// -1, a negative allowed length is 0 (a multiplier of 0 or a base below 1 turns DRY off).
    public func apply(to base: SamplingParameters, breakers: DRYBreakerResolver) -> SamplingParameters {
        var p = base
        if let v = temperature { p.temperature = v }
        if let v = topK { p.topK = v }
        if let v = topP { p.topP = v }
        if let v = minP { p.minP = v }
        if let v = repetitionPenalty { p.repetitionPenalty = v }
        if let v = frequencyPenalty { p.frequencyPenalty = v }
        if let v = presencePenalty { p.presencePenalty = v }
        if let v = seed { p.seed = v }
        if let v = dryMultiplier { p.dry.multiplier = v }
        if let v = dryBase { p.dry.base = v }
        if let v = dryAllowedLength { p.dry.allowedLength = max(0, v) }
        if let v = dryPenaltyLastN { p.dry.penaltyLastN = max(-1, v) }
        p.dry.sequenceBreakers =
            p.dry.isEnabled ? breakers.restartSequences(drySequenceBreakers ?? DRYParameters.defaultSequenceBreakerStrings) : []
        return p
    }

    /// These settings, with the fields left unset here taken from `fallback`: a request's
    /// settings over a server's defaults.
    public func overriding(_ fallback: SamplingOverrides) -> SamplingOverrides {
        SamplingOverrides(
            temperature: temperature ?? fallback.temperature, topP: topP ?? fallback.topP, topK: topK ?? fallback.topK,
            minP: minP ?? fallback.minP, repetitionPenalty: repetitionPenalty ?? fallback.repetitionPenalty,
            frequencyPenalty: frequencyPenalty ?? fallback.frequencyPenalty,
            presencePenalty: presencePenalty ?? fallback.presencePenalty, seed: seed ?? fallback.seed,
            dryMultiplier: dryMultiplier ?? fallback.dryMultiplier, dryBase: dryBase ?? fallback.dryBase,
            dryAllowedLength: dryAllowedLength ?? fallback.dryAllowedLength,
            dryPenaltyLastN: dryPenaltyLastN ?? fallback.dryPenaltyLastN,
            drySequenceBreakers: drySequenceBreakers ?? fallback.drySequenceBreakers)
    }
}
