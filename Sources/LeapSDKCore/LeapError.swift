/// Errors of the LEAP API. Each message says what went wrong and what to do.
public enum LeapError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The model file could not be loaded (missing, unreadable, malformed, unsupported).
    case modelLoadingFailure(String)
    /// Generation failed (the engine reported an error, or the request cannot be served).
    case generationFailure(String)
    /// The rendered prompt has `tokens` tokens (with its images' and clips' positions) but
    /// the context holds fewer than that, `limit`. A prompt is counted exactly up to
    /// `promptCountingFactor` times the limit; a longer one only until that is known, and
    /// `tokens` is then the lower bound reached (more than the factor times the limit).
    case promptExceedContextLengthFailure(tokens: Int, limit: Int)
    /// A message or conversation could not be serialized or deserialized.
    case serializationFailure(String)
    /// The model cannot take this kind of input (an image or audio part for a text-only model).
    case unsupportedContent(String)
    /// The model runner was unloaded; load the model again.
    case modelUnloaded

    public var description: String {
        switch self {
        case .modelLoadingFailure(let m): return "model loading failed: \(m)"
        case .generationFailure(let m): return "generation failed: \(m)"
        case .promptExceedContextLengthFailure(let tokens, let limit):
            return "the prompt has \(Self.promptLength(tokens, limit: limit)), more than the context length \(limit); "
                + "shorten the conversation (start a new one, or drop old messages) or raise GenerationOptions.sequenceLength"
        case .serializationFailure(let m): return "serialization failed: \(m)"
        case .unsupportedContent(let m): return m
        case .modelUnloaded: return "the model runner was unloaded; load the model again with Leap.load(url:)"
        }
    }

    /// How far past the context a prompt's tokens are counted: a prompt of more than this
    /// many times the context length is tokenized only until that is known, so that a
    /// megabyte of hostile text costs no more than a few contexts' worth of tokenization.
    public static let promptCountingFactor = 4

    /// "N tokens" for a counted prompt length, "more than N tokens" for one that was not
    /// counted to its end (see `promptCountingFactor`).
    static func promptLength(_ tokens: Int, limit: Int) -> String {
        let counted = countedPromptLength(limit: limit)
        return tokens > counted ? "more than \(counted) tokens" : "\(tokens) tokens"
    }

    /// How many tokens of a prompt are counted for a context of `limit` (see
    /// `promptCountingFactor`).
    static func countedPromptLength(limit: Int) -> Int {
        let (product, overflow) = limit.multipliedReportingOverflow(by: promptCountingFactor)
        return overflow ? Int.max : product
    }
}
