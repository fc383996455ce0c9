import GGUF
import Kernels
import Models

/// An mmproj file read plainly, for the reference encoders (`ReferenceSigLIP2VisionEncoder`,
/// `ReferenceFastConformerEncoder`): raw metadata keys, and tensors dequantized once with the
/// scalar reference dequantizers (`GGMLType.dequantizeRowReference`) to Double. It shares
/// nothing with the engine's loader (`ProjectorFileReader`), so that a reference checks
/// the engine's reading of the file as well as its arithmetic.
struct ReferenceProjectorFile {
    let path: String
    let file: GGUFFile

    /// Checks `general.architecture` (`clip`) and `clip.projector_type` (`type`).
    init(file: GGUFFile, path: String, projectorType type: String) throws(ProjectorError) {
        self.path = path
        self.file = file
        let architecture = Self.text(file.metadata["general.architecture"])
        guard architecture == "clip" else { throw .notAProjector(path: path, architecture: architecture) }
        let found = Self.text(file.metadata["clip.projector_type"])
        guard found == type else { throw .unsupportedProjectorType(path: path, type: found, expected: [type]) }
    }

    /// A string value, or what the key holds instead.
    static func text(_ value: GGUFValue?) -> String {
        guard let value else { return "(absent)" }
        if case .string(let s) = value { return s }
        return value.typeDescription
    }

    /// An integer key, 1...65536.
    func int(_ key: String) throws(ProjectorError) -> Int {
        guard let value = file.metadata[key] else { throw .missingKey(path: path, key: key) }
        guard let v = value.intValue, (1...65_536).contains(v) else {
            throw .invalidValue(path: path, key: key, value: "\(value)", reason: "must be 1...65536")
        }
        return v
    }

    /// The keys both encoders' shapes start from, under `prefix` (`clip.vision.`,
    /// `clip.audio.`): `embedding_length` (d), `attention.head_count` (dividing d),
    /// `block_count`, `projection_dim`, `attention.layer_norm_epsilon`.
    func encoderShape(_ prefix: String) throws(ProjectorError) -> (width: Int, heads: Int, layers: Int, outputs: Int, eps: Double) {
        let width = try int(prefix + "embedding_length"), key = prefix + "attention.head_count"
        let heads = try int(key)
        guard width % heads == 0 else { throw .invalidValue(path: path, key: key, value: "\(heads)", reason: "must divide \(width)") }
        return (
            width, heads, try int(prefix + "block_count"), try int(prefix + "projection_dim"),
            try epsilon(prefix + "attention.layer_norm_epsilon")
        )
    }

    /// A positive number key, rounded to Float (as the engine, and llama.cpp, hold it).
    func epsilon(_ key: String) throws(ProjectorError) -> Double {
        guard let value = file.metadata[key] else { throw .missingKey(path: path, key: key) }
        guard let v = value.doubleValue, v > 0, v.isFinite else {
            throw .invalidValue(path: path, key: key, value: "\(value)", reason: "must be a positive number")
        }
        return Double(Float(v))
    }

    /// The element count of tensor `name`.
    func count(_ name: String) throws(ProjectorError) -> Int {
        guard let t = file.tensor(named: name) else { throw .missingTensor(path: path, name: name) }
        return t.elementCount
    }

    /// Tensor `name`, checked to hold `count` values, dequantized in file order.
    func tensor(_ name: String, count: Int) throws(ProjectorError) -> [Double] {
        guard let t = file.tensor(named: name) else { throw .missingTensor(path: path, name: name) }
        guard count > 0, t.elementCount == count else { throw .tensorShape(path: path, name: name, expected: [count], found: t.shape) }
        guard t.type.hasKernels else { throw .tensorType(path: path, name: name, type: t.type, accepted: GGMLType.kernelTypes) }
        return ReferenceMath.dequantized(t, of: file)
    }
}
