import GGUF

/// What `leap-ref quantize --type NAME` produces: which type each tensor gets, and which
/// tool's file layout the output follows.
public enum QuantizationScheme: Equatable, Sendable, CustomStringConvertible {
    /// Every 2-D tensor whose rows are whole blocks of 32 values in `type`, every other
    /// tensor in F32, in the input's tensor order: the layout of gguf-py's `requant_gguf.py`
    /// (byte-identical for the types both produce). Types: F32, F16, BF16, Q8_0, Q4_0,
    /// Q4_1, Q5_0, Q5_1.
    case uniform(GGMLType)
    /// llama-quantize's file type `fileType`, in its layout (see ``LlamaQuantizeRules``).
    /// `pure` is llama-quantize's `--pure`: every quantizable tensor in the file type's
    /// default type instead of its mixture (K-quants still fall back to a 32-value type
    /// for rows that are not whole super-blocks of 256).
    case llamaQuantize(LlamaFileType, pure: Bool)

    /// The `--type` names, in the order the help lists them.
    public static let names: [String] = [
        "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k_m", "q5_k_m", "q6_k", "q4_k", "q5_k"
    ]

    /// The scheme for a `--type` name (case-insensitive), or nil.
    ///
    /// `q4_k_m`, `q5_k_m` and `q6_k` are llama-quantize's `Q4_K_M`, `Q5_K_M` and `Q6_K`;
    /// `q4_k` and `q5_k` are `llama-quantize --pure ... Q4_K` / `Q5_K` (every matrix in one
    /// type, like `q4_0`; llama-quantize's own `Q4_K` without `--pure` is an alias of
    /// `Q4_K_M`).
    public init?(name: String) {
        switch name.lowercased() {
        case "q4_k_m": self = .llamaQuantize(.q4_K_M, pure: false)
        case "q5_k_m": self = .llamaQuantize(.q5_K_M, pure: false)
        case "q6_k": self = .llamaQuantize(.q6_K, pure: false)
        case "q4_k": self = .llamaQuantize(.q4_K_M, pure: true)
        case "q5_k": self = .llamaQuantize(.q5_K_M, pure: true)
        default:
            guard let type = GGMLType(name: name), Self.uniformTypes.contains(type) else { return nil }
            self = .uniform(type)
        }
    }

    /// The types ``uniform(_:)`` can produce.
    public static let uniformTypes: [GGMLType] = [.f32, .f16, .bf16, .q8_0, .q4_0, .q4_1, .q5_0, .q5_1]

    /// llama.cpp's `general.file_type` (`llama_ftype`) written to the output.
    public var fileType: UInt32 {
        switch self {
        case .uniform(let type):
            switch type {
            case .f16: return 1
            case .q4_0: return 2
            case .q4_1: return 3
            case .q8_0: return 7
            case .q5_0: return 8
            case .q5_1: return 9
            case .bf16: return 32
            default: return 0
            }
        case .llamaQuantize(let fileType, _): return fileType.rawValue
        }
    }

    public var description: String {
        switch self {
        case .uniform(let type): return type.name.lowercased()
        case .llamaQuantize(let fileType, let pure): return pure ? "\(fileType.defaultType.name) (pure)" : fileType.name
        }
    }
}

/// The llama.cpp file types (`llama_ftype`) leap-ref writes with llama-quantize's rules.
public enum LlamaFileType: UInt32, Sendable, CaseIterable {
    case q4_K_M = 15
    case q5_K_M = 17
    case q6_K = 18

    /// The type of the tensors no rule singles out (llama.cpp's `llama_ftype_get_default_type`).
    public var defaultType: GGMLType {
        switch self {
        case .q4_K_M: return .q4_K
        case .q5_K_M: return .q5_K
        case .q6_K: return .q6_K
        }
    }

    /// llama-quantize's name for it.
    public var name: String {
        switch self {
        case .q4_K_M: return "Q4_K_M"
        case .q5_K_M: return "Q5_K_M"
        case .q6_K: return "Q6_K"
        }
    }
}
