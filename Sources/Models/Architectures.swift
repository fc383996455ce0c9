import GGUF

/// One model architecture: how it reads its hyper-parameters and maps the GGUF tensors to
/// its layers. Each lives in its own file (`Llama.swift`, `LFM2.swift`) with the layer
/// types that make it what it is; the shared engine (`ForwardPass`) runs any of them.
protocol Architecture: Sendable {
    /// `general.architecture` of its files.
    static var name: String { get }
    /// The hyper-parameters (default: the keys every architecture shares).
    static func hyperparameters(_ metadata: GGUFMetadata) throws(ModelError) -> Hyperparameters
    /// The weights, as this architecture's layers.
    static func weights(_ loader: WeightLoader) throws(ModelError) -> TransformerWeights
}

extension Architecture {
    static func hyperparameters(_ metadata: GGUFMetadata) throws(ModelError) -> Hyperparameters {
        try Hyperparameters.reading(metadata, architecture: name)
    }
}

/// The architectures leap-ref can run, keyed by `general.architecture`.
public enum Architectures {
    /// Every architecture: adding one is its file plus a line here.
    static let registry: [String: any Architecture.Type] = [
        Llama.name: Llama.self,
        LFM2.name: LFM2.self
    ]

    /// Names of the supported architectures.
    public static var supported: [String] { registry.keys.sorted() }

    static func architecture(of file: GGUFFile) throws(ModelError) -> any Architecture.Type {
        let arch: String
        do { arch = try file.metadata.string("general.architecture") } catch { throw .file(error) }
        guard let entry = registry[arch] else { throw .unsupportedArchitecture(arch, supported: supported) }
        return entry
    }
}
