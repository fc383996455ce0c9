import GGUF
import Kernels

/// A loaded decoder-only language model: hyper-parameters and weights, read-only and
/// shareable. The weights stay in the memory-mapped file; nothing is copied but the
/// small norm vectors. Run it through an `InferenceSession`.
public final class TransformerModel: Sendable {
    public let file: GGUFFile
    public let hyperparameters: Hyperparameters
    let weights: TransformerWeights

    /// Loads the model in `file`, checking the architecture, the hyper-parameters and
    /// every tensor's presence, shape and type.
    public init(file: GGUFFile) throws(ModelError) {
        let entry = try Architectures.entry(for: file)
        let hp = try entry.hyperparameters(file.metadata)
        try hp.validate()
        self.file = file
        self.hyperparameters = hp
        self.weights = try entry.weights(WeightLoader(file: file, hp: hp))
    }

    /// Opens and loads the GGUF model at `path`.
    public convenience init(path: String) throws(ModelError) {
        let file: GGUFFile
        do { file = try GGUFFile(path: path) } catch { throw .file(error) }
        try self.init(file: file)
    }

    /// Number of parameters (elements of all tensors).
    public var parameterCount: Int { file.tensors.reduce(0) { $0 + $1.elementCount } }

    /// Largest row length of any weight matrix (sizes the scratch row).
    var maxColumns: Int {
        max(hyperparameters.embeddingLength, hyperparameters.feedForwardLength, hyperparameters.headCount * hyperparameters.headDim)
    }
}
