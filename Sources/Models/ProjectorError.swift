import GGUF

/// Why a multimodal projector file (an `mmproj-*.gguf`: a vision tower or an audio encoder
/// with its projector into a language model) could not be loaded, or why an input could not
/// be encoded. Every file case names the file and the key or tensor involved.
public enum ProjectorError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file could not be opened, or is not a valid GGUF container.
    case file(path: String, GGUFError)
    /// `general.architecture` is not `clip`: not a projector file (perhaps a language model).
    case notAProjector(path: String, architecture: String)
    /// `clip.projector_type` names a projector this encoder does not run (another modality,
    /// such as `lfm2a` audio, or a model leap-ref does not implement).
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
    case widthMismatch(path: String, projectorWidth: Int, languageModelWidth: Int)
    /// An input dimension is below what the encoder accepts.
    case inputTooSmall(what: String, value: Int, minimum: Int)
    /// An input dimension is above what the encoder accepts.
    case inputTooLarge(what: String, value: Int, maximum: Int)
    /// An input has an inconsistent shape (a side that is not a multiple of the patch grid,
    /// a buffer of the wrong size).
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
                "\(path): clip.projector_type is '\(type)'; this encoder runs \(expected.map { "'\($0)'" }.joined(separator: ", "))."
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
        case .widthMismatch(let path, let projectorWidth, let languageModelWidth):
            return
                "\(path): the projector writes \(projectorWidth)-wide embeddings but the language model is \(languageModelWidth) wide; use the mmproj file made for this model."
        case .inputTooSmall(let what, let value, let minimum):
            return "\(what) is \(value), below the minimum \(minimum)."
        case .inputTooLarge(let what, let value, let maximum):
            return "\(what) is \(value), above the maximum \(maximum)."
        case .invalidInput(let reason):
            return reason
        }
    }
}

/// What kind of multimodal projector a file holds, before loading it with the encoder of
/// that kind (`SigLIP2VisionEncoder` for `lfm2`).
public enum MultimodalProjector {
    /// The projector type of an mmproj file: `clip.projector_type`, or else
    /// `clip.vision.projector_type` / `clip.audio.projector_type` (files with one modality
    /// per key), after checking that `general.architecture` is `clip`.
    public static func type(of file: GGUFFile, path: String) throws(ProjectorError) -> String {
        let r = ProjectorFileReader(path: path, file: file)
        let architecture = try r.string("general.architecture")
        guard architecture == "clip" else { throw .notAProjector(path: path, architecture: architecture) }
        for key in ["clip.projector_type", "clip.vision.projector_type", "clip.audio.projector_type"] where file.metadata.contains(key) {
            return try r.string(key)
        }
        throw .missingKey(path: path, key: "clip.projector_type")
    }
}

/// A projector file being read: its path (for errors) and typed accessors for its keys and
/// tensors whose errors are `ProjectorError`s naming the file.
struct ProjectorFileReader {
    let path: String
    let file: GGUFFile
    var metadata: GGUFMetadata { file.metadata }

    /// Checks `general.architecture` (`clip`) and that the projector type, `clip.projector_type`
    /// or else `clip.<modality>.projector_type`, is one of `types`; returns it.
    func requireProjector(_ types: [String], modality: String) throws(ProjectorError) -> String {
        let architecture = try string("general.architecture")
        guard architecture == "clip" else { throw .notAProjector(path: path, architecture: architecture) }
        let fallback = "clip.\(modality).projector_type"
        let type = try string(!metadata.contains("clip.projector_type") && metadata.contains(fallback) ? fallback : "clip.projector_type")
        guard types.contains(type) else { throw .unsupportedProjectorType(path: path, type: type, expected: types) }
        return type
    }

    func wrap(_ e: GGUFError, _ key: String) -> ProjectorError {
        switch e {
        case .missingKey: return .missingKey(path: path, key: key)
        case .typeMismatch(_, let expected, let found):
            return .invalidValue(path: path, key: key, value: found, reason: "expected \(expected)")
        case .valueOutOfRange(_, let value): return .invalidValue(path: path, key: key, value: value, reason: "out of range")
        default: return .file(path: path, e)
        }
    }

    func string(_ key: String) throws(ProjectorError) -> String {
        do { return try metadata.string(key) } catch { throw wrap(error, key) }
    }

    func bool(_ key: String) throws(ProjectorError) -> Bool {
        do { return try metadata.bool(key) } catch { throw wrap(error, key) }
    }

    /// An optional bool: nil when absent.
    func optionalBool(_ key: String) throws(ProjectorError) -> Bool? {
        metadata.contains(key) ? try bool(key) : nil
    }

    /// An integer in `range`.
    func int(_ key: String, in range: ClosedRange<Int>) throws(ProjectorError) -> Int {
        let v: Int
        do { v = try metadata.int(key) } catch { throw wrap(error, key) }
        guard range.contains(v) else {
            throw .invalidValue(path: path, key: key, value: String(v), reason: "must be \(range.lowerBound)...\(range.upperBound)")
        }
        return v
    }

    /// An optional integer in `range`: nil when absent.
    func optionalInt(_ key: String, in range: ClosedRange<Int>) throws(ProjectorError) -> Int? {
        metadata.contains(key) ? try int(key, in: range) : nil
    }

    /// A finite number in `range`.
    func float(_ key: String, in range: ClosedRange<Double>) throws(ProjectorError) -> Float {
        let v: Double
        do { v = try metadata.double(key) } catch { throw wrap(error, key) }
        guard v.isFinite, range.contains(v) else {
            throw .invalidValue(
                path: path, key: key, value: "\(v)", reason: "must be a number in \(range.lowerBound)...\(range.upperBound)")
        }
        return Float(v)
    }

    /// An array of at least `count` finite numbers; its first `count`.
    func floats(_ key: String, count: Int) throws(ProjectorError) -> [Float] {
        let values: [Float]
        do { values = try metadata.floatArray(key) } catch { throw wrap(error, key) }
        guard values.count >= count else {
            throw .invalidValue(path: path, key: key, value: "\(values.count) values", reason: "needs \(count)")
        }
        let first = Array(values.prefix(count))
        guard first.allSatisfy(\.isFinite) else {
            throw .invalidValue(path: path, key: key, value: "\(first)", reason: "must be finite numbers")
        }
        return first
    }

    /// The tensor `name`, checked to have `shape` and one of the types `accepted`.
    func tensor(_ name: String, shape: [Int], accepted: [GGMLType]) throws(ProjectorError) -> GGUFTensorInfo {
        guard let t = file.tensor(named: name) else { throw .missingTensor(path: path, name: name) }
        guard t.shape == shape else { throw .tensorShape(path: path, name: name, expected: shape, found: t.shape) }
        guard accepted.contains(t.type) else { throw .tensorType(path: path, name: name, type: t.type, accepted: accepted) }
        return t
    }

    /// A vector or small table (F32 or F16), checked to have `shape`, copied out as F32.
    func floats(tensor name: String, shape: [Int]) throws(ProjectorError) -> [Float] {
        let t = try tensor(name, shape: shape, accepted: [.f32, .f16])
        var out = [Float](repeating: 0, count: t.elementCount)
        let src = file.data(for: t).baseAddress!
        out.withUnsafeMutableBufferPointer { t.type.dequantizeRow(src, into: $0.baseAddress!, count: t.elementCount) }
        return out
    }

    func has(_ name: String) -> Bool { file.tensor(named: name) != nil }
}
