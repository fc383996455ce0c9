import GGUF
import Kernels

/// A loaded decoder-only language model: hyper-parameters and weights, read-only and
/// shareable. The weights stay in the memory-mapped file; nothing is copied but the
/// small norm vectors. Run it through an `InferenceSession`.
public final class TransformerModel: Sendable {
    public let file: GGUFFile
    public let hyperparameters: Hyperparameters
    let weights: TransformerWeights
    /// The threads that run this model's matrix products.
    public let pool: ThreadPool

    /// Loads the model in `file`, checking the architecture, the hyper-parameters and
    /// every tensor's presence, shape and type. `threads` defaults to the number of cores.
    public init(file: GGUFFile, threads: Int? = nil) throws(ModelError) {
        let architecture = try Architectures.architecture(of: file)
        let hp = try architecture.hyperparameters(file.metadata)
        try hp.validate()
        self.file = file
        self.hyperparameters = hp
        self.weights = try architecture.weights(WeightLoader(file: file, hp: hp))
        self.pool = ThreadPool(threads: threads ?? ThreadPool.defaultThreads)
    }

    /// Opens and loads the GGUF model at `path`.
    public convenience init(path: String, threads: Int? = nil) throws(ModelError) {
        let file: GGUFFile
        do { file = try GGUFFile(path: path) } catch { throw .file(error) }
        try self.init(file: file, threads: threads)
    }

    /// Every weight matrix, for sizing scratch and reporting.
    var linears: [Linear] {
        [weights.tokenEmbedding, weights.output] + weights.layers.flatMap(\.linears)
    }

    /// Number of parameters (elements of all tensors).
    public var parameterCount: Int { file.tensors.reduce(0) { $0 + $1.elementCount } }
}
