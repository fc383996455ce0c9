import GGUF

/// One model architecture: how it reads its hyper-parameters and its own settings, and
/// maps the GGUF tensors to its layers. Each lives in its own file (`Llama.swift`,
/// `LFM2.swift`, `LFM2MoE.swift`, `Gemma3.swift`) with the layer types that make it what
/// it is; the shared engine (`ForwardPass`) runs any of them.
///
/// Loading (`load`) decodes everything once, in order: the shared hyper-parameters
/// (validated), the architecture's `Settings` (what only it reads, such as LFM2's
/// convolution length or Gemma 3's sliding windows: a file it cannot run is refused here,
/// before any tensor is read), then the weights built with them.
protocol Architecture: Sendable {
    /// What the architecture reads beyond the keys every architecture shares (mlx's
    /// `Configuration`), decoded once per load.
    associatedtype Settings
    /// `general.architecture` of its files.
    static var name: String { get }
    /// The hyper-parameters (default: the keys every architecture shares).
    static func hyperparameters(_ metadata: GGUFMetadata) throws(ModelError) -> Hyperparameters
    /// The architecture's own settings.
    static func settings(_ metadata: GGUFMetadata, _ hp: Hyperparameters) throws(ModelError) -> Settings
    /// The weights, as this architecture's layers.
    static func weights(_ loader: WeightLoader, _ settings: Settings) throws(ModelError) -> TransformerWeights
}

extension Architecture {
    static func hyperparameters(_ metadata: GGUFMetadata) throws(ModelError) -> Hyperparameters {
        try Hyperparameters.reading(metadata, architecture: name)
    }

    /// Reads the model in `file`: hyper-parameters (validated), settings, weights.
    static func load(_ file: GGUFFile) throws(ModelError) -> (Hyperparameters, TransformerWeights) {
        let hp = try hyperparameters(file.metadata)
        try hp.validate()
        let settings = try settings(file.metadata, hp)
        return (hp, try weights(WeightLoader(file: file, hp: hp), settings))
    }
}

extension Architecture where Settings == Void {
    /// An architecture with nothing of its own to read.
    static func settings(_ metadata: GGUFMetadata, _ hp: Hyperparameters) throws(ModelError) {}
}

/// The architectures leap-ref can run, keyed by `general.architecture`.
public enum Architectures {
    /// Every architecture: adding one is its file plus a line here.
    static let registry: [String: any Architecture.Type] = [
        Llama.name: Llama.self,
        LFM2.name: LFM2.self,
        LFM2MoE.name: LFM2MoE.self,
        Gemma3.name: Gemma3.self
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
