import GGUF

/// Why an audio projector (a multimodal "mmproj" GGUF) could not be loaded, or why a log-mel
/// input could not be encoded. Loading errors name the file (its path, or the name the
/// caller gave a file held in memory) and the key or tensor involved.
public enum AudioEncoderError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The GGUF itself could not be read (`GGUFFile(path:)` failed).
    case unreadableFile(file: String, GGUFError)
    /// `general.architecture` is not `clip`: a language model, not a projector.
    case notAProjector(file: String, architecture: String)
    /// `clip.projector_type` (or `clip.audio.projector_type`) names another projector.
    case unsupportedProjectorType(file: String, found: String, supported: [String])
    /// `clip.has_audio_encoder` is absent or false: the projector has no audio encoder.
    case noAudioEncoder(file: String)
    /// A required metadata key is absent.
    case missingKey(file: String, key: String)
    /// A metadata key holds a value of the wrong type, out of range, or inconsistent with
    /// the tensors.
    case invalidValue(file: String, key: String, value: String, reason: String)
    /// A tensor the encoder needs is absent.
    case missingTensor(file: String, name: String)
    /// A tensor has another shape (ggml order) than the hyper-parameters imply.
    case tensorShapeMismatch(file: String, name: String, expected: [Int], found: [Int])
    /// A tensor is stored in a type the encoder cannot use there.
    case unsupportedTensorType(file: String, name: String, type: GGMLType, allowed: String)
    /// The log-mel matrix does not hold `melBins x frames` values.
    case melShapeMismatch(values: Int, melBins: Int, frames: Int)
    /// Fewer mel frames than the encoder takes.
    case inputTooShort(frames: Int, minimum: Int)
    /// More mel frames than the projector's position table allows.
    case inputTooLong(frames: Int, maximum: Int)
    /// A mel value is NaN or infinite.
    case nonFiniteInput(index: Int)

    /// What is wrong and, where it helps, what to do.
    public var description: String {
        switch self {
        case .unreadableFile(let file, let error):
            return "cannot read the projector '\(file)': \(error.description)"
        case .notAProjector(let file, let architecture):
            return
                "'\(file)' is a '\(architecture)' model, not a multimodal projector (general.architecture 'clip'); pass the mmproj file."
        case .unsupportedProjectorType(let file, let found, let supported):
            return
                "the projector '\(file)' is of type '\(found)'; leap-ref's audio encoder runs \(supported.joined(separator: ", "))."
        case .noAudioEncoder(let file):
            return "the projector '\(file)' has no audio encoder (clip.has_audio_encoder is not true)."
        case .missingKey(let file, let key):
            return "the projector '\(file)' has no metadata key '\(key)'; it may be incomplete or made by another converter."
        case .invalidValue(let file, let key, let value, let reason):
            return "the projector '\(file)' has \(key) = \(value): \(reason)."
        case .missingTensor(let file, let name):
            return "the projector '\(file)' has no tensor '\(name)'; it may be incomplete or made by another converter."
        case .tensorShapeMismatch(let file, let name, let expected, let found):
            return
                "tensor '\(name)' of the projector '\(file)' has shape \(found), expected \(expected) (ggml order) from its hyper-parameters; the file is inconsistent."
        case .unsupportedTensorType(let file, let name, let type, let allowed):
            return "tensor '\(name)' of the projector '\(file)' is stored as \(type); the encoder needs \(allowed) there."
        case .melShapeMismatch(let values, let melBins, let frames):
            return "the log-mel input holds \(values) values, not \(melBins) mel bins x \(frames) frames."
        case .inputTooShort(let frames, let minimum):
            return
                "the audio is too short: \(frames) mel frames, the encoder needs at least \(minimum) (320 samples, 20 ms at 16 kHz)."
        case .inputTooLong(let frames, let maximum):
            return
                "the audio is too long: \(frames) mel frames, this projector takes at most \(maximum) (about \(maximum / 100) s); split it into shorter clips."
        case .nonFiniteInput(let index):
            return "the log-mel input holds a NaN or infinite value (at index \(index))."
        }
    }
}
