import GGUF
import Kernels

/// The kind of token mixer in one decoder layer.
public enum LayerKind: Sendable, Equatable {
    /// Grouped-query self-attention with `kvHeads` key/value heads.
    case attention(kvHeads: Int)
    /// LFM2's gated short convolution.
    case shortConv
}

/// The shape of a decoder-only transformer, read from GGUF metadata
/// (`<arch>.embedding_length` and friends).
public struct Hyperparameters: Sendable, Equatable {
    public var architecture: String
    /// Model width `d`.
    public var embeddingLength: Int
    /// One entry per layer.
    public var layers: [LayerKind]
    /// Query heads per attention layer.
    public var headCount: Int
    /// Width of one head (`embeddingLength / headCount` unless the file says otherwise).
    public var headDim: Int
    /// Hidden width of the SwiGLU feed-forward block.
    public var feedForwardLength: Int
    public var vocabularySize: Int
    /// The context the model was trained for.
    public var trainedContextLength: Int
    public var rmsEpsilon: Float
    public var ropeFreqBase: Float
    /// Number of head dimensions that RoPE rotates.
    public var ropeDimensions: Int
    public var ropeStyle: Elementwise.RopeStyle
    /// Whether attention layers RMS-normalize each query and key head (LFM2).
    public var normalizesQueryKey: Bool
    /// Short-convolution kernel length (LFM2's `shortconv.l_cache`), 0 when unused.
    public var convKernelLength: Int

    public var layerCount: Int { layers.count }

    /// Reads the keys every decoder-only architecture shares (`<arch>.embedding_length`,
    /// `.attention.head_count`, `.feed_forward_length`, `.context_length`,
    /// `.attention.layer_norm_rms_epsilon`, `.rope.*`, `.vocab_size` or the token list),
    /// with `layers` given by the architecture, which then sets its own specifics.
    static func reading(
        _ m: GGUFMetadata, architecture a: String,
        layers: (_ blockCount: Int, _ heads: Int) throws(ModelError) -> [LayerKind]
    ) throws(ModelError) -> Hyperparameters {
        let d = try m.modelInt("\(a).embedding_length")
        let heads = try m.modelInt("\(a).attention.head_count")
        let blockCount = try m.modelInt("\(a).block_count")
        guard blockCount > 0, blockCount <= 1024 else {
            throw .invalidHyperParameter(key: "\(a).block_count", value: String(blockCount), reason: "must be 1...1024")
        }
        let headDim = try m.modelOptionalInt("\(a).attention.key_length") ?? (heads > 0 ? d / heads : 0)
        let vocab: Int
        if let v = try m.modelOptionalInt("\(a).vocab_size") {
            vocab = v
        } else {
            do { vocab = try m.array("tokenizer.ggml.tokens").count } catch { throw .file(error) }
        }
        return Hyperparameters(
            architecture: a, embeddingLength: d, layers: try layers(blockCount, heads),
            headCount: heads, headDim: headDim,
            feedForwardLength: try m.modelInt("\(a).feed_forward_length"),
            vocabularySize: vocab,
            trainedContextLength: try m.modelInt("\(a).context_length"),
            rmsEpsilon: try m.modelFloat("\(a).attention.layer_norm_rms_epsilon"),
            ropeFreqBase: try m.modelOptionalFloat("\(a).rope.freq_base") ?? 10000,
            ropeDimensions: try m.modelOptionalInt("\(a).rope.dimension_count") ?? headDim,
            ropeStyle: .adjacentPairs, normalizesQueryKey: false, convKernelLength: 0)
    }

    /// Checks the relations the forward pass relies on.
    func validate() throws(ModelError) {
        func bad(_ key: String, _ value: Int, _ reason: String) -> ModelError {
            .invalidHyperParameter(key: "\(architecture).\(key)", value: String(value), reason: reason)
        }
        guard embeddingLength > 0, embeddingLength <= 1 << 16 else { throw bad("embedding_length", embeddingLength, "must be 1...65536") }
        guard !layers.isEmpty, layers.count <= 1024 else { throw bad("block_count", layers.count, "must be 1...1024") }
        guard headCount > 0, headCount <= 1024 else { throw bad("attention.head_count", headCount, "must be 1...1024") }
        guard headDim > 0, headDim <= 1024, headDim % 2 == 0 else {
            throw bad("attention.key_length", headDim, "must be an even number up to 1024")
        }
        guard feedForwardLength > 0, feedForwardLength <= 1 << 18 else {
            throw bad("feed_forward_length", feedForwardLength, "must be 1...262144")
        }
        guard vocabularySize > 0, vocabularySize <= 1 << 22 else { throw bad("vocab_size", vocabularySize, "must be 1...4194304") }
        guard trainedContextLength > 0 else { throw bad("context_length", trainedContextLength, "must be positive") }
        guard ropeDimensions > 0, ropeDimensions <= headDim, ropeDimensions % 2 == 0 else {
            throw bad("rope.dimension_count", ropeDimensions, "must be even and at most the head width \(headDim)")
        }
        for kind in layers {
            if case .attention(let kv) = kind {
                guard kv > 0, headCount % kv == 0 else {
                    throw bad("attention.head_count_kv", kv, "must divide the head count \(headCount)")
                }
            }
        }
        if layers.contains(.shortConv) {
            guard convKernelLength >= 2, convKernelLength <= 64 else { throw bad("shortconv.l_cache", convKernelLength, "must be 2...64") }
        }
        guard rmsEpsilon.isFinite, rmsEpsilon >= 0 else {
            throw .invalidHyperParameter(
                key: "\(architecture).attention.layer_norm_rms_epsilon", value: "\(rmsEpsilon)", reason: "must be a non-negative number")
        }
        guard ropeFreqBase.isFinite, ropeFreqBase > 0 else {
            throw .invalidHyperParameter(key: "\(architecture).rope.freq_base", value: "\(ropeFreqBase)", reason: "must be positive")
        }
    }
}
