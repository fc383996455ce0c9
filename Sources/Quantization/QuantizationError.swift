import GGUF

/// Why a model could not be re-encoded.
public enum QuantizationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A tensor must be converted but its type has no dequantizer here.
    case unsupportedTensorType(name: String, type: GGMLType)
    /// A mixture-of-experts tensor whose name does not give a valid layer (`blk.N.`).
    case badLayerName(String, layers: Int)
    /// The input is malformed, lacks a key, or the output could not be written.
    case file(GGUFError)

    public var description: String {
        switch self {
        case .unsupportedTensorType(let name, let type):
            return
                "tensor '\(name)' is stored as \(type), which leap-ref cannot decode; convert the model from its F32, F16 or BF16 original."
        case .badLayerName(let name, let layers):
            return "tensor '\(name)' does not name a layer blk.N with N in 0..<\(layers)."
        case .file(let e):
            return e.description
        }
    }
}
