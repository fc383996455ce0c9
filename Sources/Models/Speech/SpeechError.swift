import GGUF

/// Why a speech-output file (LFM2.5-Audio's `vocoder-*.gguf`: the depthformer and the
/// audio-code embeddings) could not be loaded, or why a depthformer step was refused.
/// Every file case names the file and the key or tensor involved.
public enum SpeechError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file could not be opened, or is not a valid GGUF container.
    case file(path: String, GGUFError)
    /// A metadata key the depthformer needs is absent.
    case missingKey(path: String, key: String)
    /// A metadata key has a type or value the depthformer cannot use.
    case invalidValue(path: String, key: String, value: String, reason: String)
    /// A tensor the depthformer or the embeddings need is absent.
    case missingTensor(path: String, name: String)
    /// A tensor has another shape (ggml order, row length first) than the keys imply.
    case tensorShape(path: String, name: String, expected: [Int], found: [Int])
    /// A tensor is stored in a type that is not accepted for it.
    case tensorType(path: String, name: String, type: GGMLType, accepted: [GGMLType])
    /// The file has another number of codebooks (`depth_embeddings.N`) than the 8 of the
    /// format.
    case codebookCount(path: String, found: Int, expected: Int)
    /// The file reads (`depth_linear`) and writes (`audio_embedding`) hidden states of
    /// another width than the language model's.
    case widthMismatch(path: String, tensor: String, vocoderWidth: Int, languageModel: String, languageModelWidth: Int)
    /// A step's input is unusable: a hidden state of the wrong size or with a value that
    /// is not finite, a code outside a codebook.
    case invalidInput(String)

    public var description: String {
        switch self {
        case .file(let path, let e):
            return "\(path): \(e.description)"
        case .missingKey(let path, let key):
            return "\(path): the metadata key \(key) is missing; the file is not a complete vocoder conversion."
        case .invalidValue(let path, let key, let value, let reason):
            return "\(path): \(key) = \(value): \(reason)."
        case .missingTensor(let path, let name):
            return "\(path): the tensor '\(name)' is missing; the file is not a complete vocoder conversion."
        case .tensorShape(let path, let name, let expected, let found):
            return "\(path): tensor '\(name)' has shape \(found), expected \(expected); the file is inconsistent."
        case .tensorType(let path, let name, let type, let accepted):
            return "\(path): tensor '\(name)' is stored as \(type); accepted: \(accepted.map(\.name).joined(separator: ", "))."
        case .codebookCount(let path, let found, let expected):
            return "\(path): \(found) codebooks (depth_embeddings.N), expected \(expected); this is not an LFM2.5-Audio vocoder."
        case .widthMismatch(let path, let tensor, let vocoderWidth, let languageModel, let languageModelWidth):
            return
                "\(path): '\(tensor)' is made for a \(vocoderWidth)-wide language model but \(languageModel) is \(languageModelWidth) wide; use the vocoder file made for this model."
        case .invalidInput(let reason):
            return reason
        }
    }
}
