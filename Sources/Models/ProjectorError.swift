import GGUF

/// Why a multimodal projector file (an `mmproj-*.gguf`: a vision tower or an audio encoder
/// with its projector into a language model) could not be loaded, or why an input could not
/// be encoded. Both encoders (`SigLIP2VisionEncoder`, `FastConformerEncoder`), their loader
/// (`MediaEncoder.load`) and their references throw it. Every file case names the
/// file and the key or tensor involved.
public enum ProjectorError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file could not be opened, or is not a valid GGUF container.
    case file(path: String, GGUFError)
    /// `general.architecture` is not `clip`: not a projector file (perhaps a language model).
    case notAProjector(path: String, architecture: String)
    /// `clip.projector_type` names a projector the encoder (or the loader) does not run:
    /// another modality's, or a model leap-ref does not implement.
    case unsupportedProjectorType(path: String, type: String, expected: [String])
    /// A metadata key the encoder needs is absent.
    case missingKey(path: String, key: String)
    /// A metadata key has a type or value the encoder cannot use.
    case invalidValue(path: String, key: String, value: String, reason: String)
    /// A tensor the encoder needs is absent.
    case missingTensor(path: String, name: String)
    /// A tensor has another shape (ggml order, row length first) than the keys imply.
    case tensorShape(path: String, name: String, expected: [Int], found: [Int])
    /// A tensor is stored in a type the encoder does not accept for it.
    case tensorType(path: String, name: String, type: GGMLType, accepted: [GGMLType])
    /// The file holds a tensor that would change the computation in a way this encoder does
    /// not implement (llama.cpp would apply it).
    case unsupportedTensor(path: String, name: String, reason: String)
    /// The projector's output width differs from the language model's embedding width.
    case widthMismatch(path: String, projectorWidth: Int, languageModel: String, languageModelWidth: Int)
    /// An input dimension (a slice side, a number of mel frames) is below what the encoder
    /// accepts.
    case inputTooSmall(what: String, value: Int, minimum: Int)
    /// An input dimension is above what the encoder accepts.
    case inputTooLarge(what: String, value: Int, maximum: Int)
    /// An input is inconsistent (a side that is not a multiple of the patch grid, a buffer
    /// of the wrong size, a value that is not finite).
    case invalidInput(String)

    public var description: String {
        switch self {
        case .file(let path, let e):
            return "\(path): \(e.description)"
        case .notAProjector(let path, let architecture):
            return
                "\(path): general.architecture is '\(architecture)', not 'clip': this is not a multimodal projector (mmproj) file."
        case .unsupportedProjectorType(let path, let type, let expected):
            return
                "\(path): clip.projector_type is '\(type)'; supported here: \(expected.map { "'\($0)'" }.joined(separator: ", "))."
        case .missingKey(let path, let key):
            return "\(path): the metadata key \(key) is missing; the file is not a complete projector conversion."
        case .invalidValue(let path, let key, let value, let reason):
            return "\(path): \(key) = \(value): \(reason)."
        case .missingTensor(let path, let name):
            return "\(path): the tensor '\(name)' is missing; the file is not a complete projector conversion."
        case .tensorShape(let path, let name, let expected, let found):
            return "\(path): tensor '\(name)' has shape \(found), expected \(expected) from the metadata; the file is inconsistent."
        case .tensorType(let path, let name, let type, let accepted):
            return "\(path): tensor '\(name)' is stored as \(type); accepted: \(accepted.map(\.name).joined(separator: ", "))."
        case .unsupportedTensor(let path, let name, let reason):
            return "\(path): tensor '\(name)': \(reason)."
        case .widthMismatch(let path, let projectorWidth, let languageModel, let languageModelWidth):
            return
                "\(path) writes \(projectorWidth)-wide embeddings but the language model \(languageModel) is \(languageModelWidth) wide; use the mmproj file made for this model."
        case .inputTooSmall(let what, let value, let minimum):
            return "\(what) is \(value), below the minimum \(minimum)."
        case .inputTooLarge(let what, let value, let maximum):
            return "\(what) is \(value), above the maximum \(maximum)."
        case .invalidInput(let reason):
            return reason
        }
    }

    /// Throws `invalidInput` naming the first value of `values` (`what`) that is NaN or
    /// infinite.
    static func checkFinite(_ values: UnsafeBufferPointer<Float>, _ what: String) throws(ProjectorError) {
        if let bad = values.firstIndex(where: { !$0.isFinite }) {
            throw .invalidInput("\(what) holds a NaN or infinite value at index \(bad) (\(values[bad]))")
        }
    }
}
