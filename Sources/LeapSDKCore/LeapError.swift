/// Errors of the LEAP API. Each message says what went wrong and what to do.
public enum LeapError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The model file could not be loaded (missing, unreadable, malformed, unsupported).
    case modelLoadingFailure(String)
    /// Generation failed (the engine reported an error, or the request cannot be served).
    case generationFailure(String)
    /// The rendered prompt has `tokens` tokens but the context holds only `limit`.
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
            return "the prompt has \(tokens) tokens, more than the context length \(limit); "
                + "shorten the conversation (start a new one, or drop old messages) or raise GenerationOptions.sequenceLength"
        case .serializationFailure(let m): return "serialization failed: \(m)"
        case .unsupportedContent(let m): return m
        case .modelUnloaded: return "the model runner was unloaded; load the model again with Leap.load(url:)"
        }
    }
}
