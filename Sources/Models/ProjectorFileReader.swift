import GGUF
import Kernels

/// A projector file being read by an encoder's loader: its path (for errors) and typed
/// accessors for its keys and tensors, by llama.cpp's names (`clip-impl.h`), whose errors
/// are `ProjectorError`s naming the file and the key or tensor. Shapes are in ggml order
/// (`[cols, rows]` for a matrix, the reverse of PyTorch's).
struct ProjectorFileReader {
    let path: String
    let file: GGUFFile
    var metadata: GGUFMetadata { file.metadata }

    init(path: String, file: GGUFFile) {
        self.path = path
        self.file = file
    }

    /// A reader of `file` for an encoder of `modality` that runs the projector `types`
    /// (see ``requireProjector(_:modality:)``).
    init(file: GGUFFile, path: String, types: [String], modality: String) throws(ProjectorError) {
        self.init(path: path, file: file)
        _ = try requireProjector(types, modality: modality)
    }

    /// The GGUF file at `path`, opened (memory-mapped) and validated as a container.
    static func open(_ path: String) throws(ProjectorError) -> GGUFFile {
        do { return try GGUFFile(path: path) } catch { throw .file(path: path, error) }
    }

    /// The types small tensors (biases, norms, convolution kernels, tables) may be stored
    /// in; they are copied out as F32.
    static let floatTypes: [GGMLType] = [.f32, .f16, .bf16]

    // MARK: - Keys

    /// The projector type the file names for an encoder of one of `modalities` (`vision`,
    /// `audio`), after checking that `general.architecture` is `clip`: `clip.projector_type`,
    /// or in a file without it (one of several modalities, each with its own key) the first
    /// `clip.<modality>.projector_type` present, as llama.cpp reads them. Neither is
    /// `missingKey` naming `clip.projector_type`. The one place a projector type is read.
    func projectorType(modalities: [String]) throws(ProjectorError) -> String {
        let architecture = try string("general.architecture")
        guard architecture == "clip" else { throw .notAProjector(path: path, architecture: architecture) }
        let keys = ["clip.projector_type"] + modalities.map { "clip.\($0).projector_type" }
        guard let key = keys.first(where: metadata.contains) else { throw .missingKey(path: path, key: "clip.projector_type") }
        return try string(key)
    }

    /// The projector type for an encoder of `modality` (``projectorType(modalities:)``),
    /// checked to be one of `types`, the ones the encoder runs: `unsupportedProjectorType`
    /// naming the type and `types` otherwise.
    func requireProjector(_ types: [String], modality: String) throws(ProjectorError) -> String {
        let type = try projectorType(modalities: [modality])
        guard types.contains(type) else { throw .unsupportedProjectorType(path: path, type: type, expected: types) }
        return type
    }

    /// Checks `clip.has_<modality>_encoder` is true: `missingKey` when absent,
    /// `invalidValue` when false.
    func requireEncoder(_ modality: String) throws(ProjectorError) {
        let key = "clip.has_\(modality)_encoder"
        guard try bool(key) else {
            throw .invalidValue(path: path, key: key, value: "false", reason: "the file has no \(modality) encoder")
        }
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

    // MARK: - Tensors

    func has(_ name: String) -> Bool { file.tensor(named: name) != nil }

    /// The tensor `name`, of any shape and type.
    func tensor(_ name: String) throws(ProjectorError) -> GGUFTensorInfo {
        guard let t = file.tensor(named: name) else { throw .missingTensor(path: path, name: name) }
        return t
    }

    /// The tensor `name`, checked to have `shape` and one of the types `accepted`.
    func tensor(_ name: String, shape: [Int], accepted: [GGMLType]) throws(ProjectorError) -> GGUFTensorInfo {
        let t = try tensor(name)
        guard t.shape == shape else { throw .tensorShape(path: path, name: name, expected: shape, found: t.shape) }
        guard accepted.contains(t.type) else { throw .tensorType(path: path, name: name, type: t.type, accepted: accepted) }
        return t
    }

    /// A small tensor (``floatTypes``), checked to have `shape`, copied out as F32 in file
    /// order.
    func floats(tensor name: String, shape: [Int]) throws(ProjectorError) -> [Float] {
        let t = try tensor(name, shape: shape, accepted: Self.floatTypes)
        var out = [Float](repeating: 0, count: t.elementCount)
        let src = file.data(for: t).baseAddress!
        out.withUnsafeMutableBufferPointer { t.type.dequantizeRow(src, into: $0.baseAddress!, count: t.elementCount) }
        return out
    }

    /// A vector of `count` floats: a small tensor whose dimensions are all 1 but one of
    /// `count` (a bias may be stored `[count]` or, for a convolution, `[1, 1, count]`).
    func vector(_ name: String, count: Int) throws(ProjectorError) -> [Float] {
        let t = try tensor(name)
        guard t.shape.filter({ $0 != 1 }) == (count == 1 ? [] : [count]) else {
            throw .tensorShape(path: path, name: name, expected: [count], found: t.shape)
        }
        return try floats(tensor: name, shape: t.shape)
    }
}
