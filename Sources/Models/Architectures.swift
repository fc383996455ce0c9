import GGUF

/// The architectures leap-ref can run, keyed by `general.architecture`.
public enum Architectures {
    struct Entry: Sendable {
        let hyperparameters: @Sendable (GGUFMetadata) throws(ModelError) -> Hyperparameters
        let weights: @Sendable (WeightLoader) throws(ModelError) -> TransformerWeights
    }

    static let registry: [String: Entry] = [
        Llama.name: Entry(hyperparameters: Llama.hyperparameters, weights: Llama.weights),
        LFM2.name: Entry(hyperparameters: LFM2.hyperparameters, weights: LFM2.weights)
    ]

    /// Names of the supported architectures.
    public static var supported: [String] { registry.keys.sorted() }

    static func entry(for file: GGUFFile) throws(ModelError) -> Entry {
        let arch: String
        do { arch = try file.metadata.string("general.architecture") } catch { throw .file(error) }
        guard let entry = registry[arch] else { throw .unsupportedArchitecture(arch, supported: supported) }
        return entry
    }
}
