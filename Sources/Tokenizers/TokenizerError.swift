import GGUF

/// Why a tokenizer could not be built from a model's metadata. Each case names the
/// `tokenizer.ggml.*` key at fault and `description` says what to do.
public enum TokenizerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A required key is absent (`tokenizer.ggml.model`, `.tokens`, or `.merges` for BPE).
    case missingKey(String)
    /// A key holds a value of the wrong type or an impossible value.
    case malformedKey(key: String, reason: String)
    /// `tokenizer.ggml.model` names a tokenizer leap-ref does not implement.
    case unsupportedModel(String)
    /// `tokenizer.ggml.pre` names a pre-tokenizer leap-ref does not implement.
    case unsupportedPreTokenizer(String)
    /// The metadata could not be read at all (wraps the GGUF reader's error).
    case gguf(GGUFError)

    public var description: String {
        switch self {
        case .missingKey(let key):
            return
                "the model has no tokenizer metadata key '\(key)'; it was probably converted without a vocabulary. Re-convert it with a current llama.cpp convert script."
        case .malformedKey(let key, let reason):
            return "tokenizer metadata key '\(key)' is malformed: \(reason)."
        case .unsupportedModel(let name):
            return "tokenizer.ggml.model is '\(name)'; leap-ref supports 'gpt2' (byte-level BPE) and 'llama' (SentencePiece BPE)."
        case .unsupportedPreTokenizer(let name):
            return
                "tokenizer.ggml.pre is '\(name)', a pre-tokenizer leap-ref does not implement; supported: \(PreTokenizer.supportedGGUFNames.joined(separator: ", "))."
        case .gguf(let error):
            return error.description
        }
    }

    /// Converts a metadata lookup error into a tokenizer error naming the key.
    static func from(_ error: GGUFError) -> TokenizerError {
        switch error {
        case .missingKey(let key): return .missingKey(key)
        case .typeMismatch(let key, let expected, let found):
            return .malformedKey(key: key, reason: "it holds \(found), expected \(expected)")
        case .valueOutOfRange(let key, let value): return .malformedKey(key: key, reason: "the value \(value) is out of range")
        default: return .gguf(error)
        }
    }
}
