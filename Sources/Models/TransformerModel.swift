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
    public convenience init(file: GGUFFile, threads: Int? = nil) throws(ModelError) {
        try self.init(file: file, pool: ThreadPool(threads: threads ?? ThreadPool.defaultThreads))
    }

    /// Loads the model in `file`, its products running on `pool`, which it shares with
    /// the pool's other users (a model run beside another and never at the same time, as
    /// LFM2.5-Audio's detokenizer beside its language model).
    public init(file: GGUFFile, pool: ThreadPool) throws(ModelError) {
        let architecture = try Architectures.architecture(of: file)
        (hyperparameters, weights) = try architecture.load(file)
        self.file = file
        self.pool = pool
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

    /// Bytes of the output head (`output`, or the token embedding it is tied to), which a
    /// step that computes no logits does not read.
    public var outputHeadByteCount: Int { weights.output.byteCount }

    /// Bytes of weights one decoded token reads: every matrix of every layer and the
    /// output head once, one row of the token embedding (when it is not the head), and of
    /// a mixture-of-experts layer only the router and the `expert_used_count` experts a
    /// token is sent to. Divided into the memory bandwidth, the fastest decode possible.
    public var weightBytesPerToken: Int {
        func bytes(_ linears: [Linear]) -> Int { linears.reduce(0) { $0 + $1.byteCount } }
        var total = bytes([weights.output])
        if weights.tokenEmbedding.name != weights.output.name {
            total += weights.tokenEmbedding.byteCount / max(1, weights.tokenEmbedding.rows)
        }
        for layer in weights.layers {
            total += bytes(layer.linears)
            if let moe = layer.mixtureOfExperts { total += moe.byteCountPerToken - bytes(moe.linears) }
        }
        return total
    }

    /// The width of an embedding model's output, its final hidden states mapped through its
    /// own projection (LFM2's `embedding_length_out`, `dense_2`: LFM2.5-Audio's
    /// detokenizer), or nil for a language model.
    public var outputEmbeddingLength: Int? { weights.outputProjection?.weight.rows }

    /// Number of parameters (elements of all tensors).
    public var parameterCount: Int { file.tensors.reduce(0) { $0 + $1.elementCount } }
}
