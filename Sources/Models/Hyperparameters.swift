import GGUF

/// The shape of a decoder-only transformer, read from the GGUF metadata keys every
/// architecture shares (`<arch>.embedding_length` and friends). What only one architecture
/// reads (LFM2's convolution length, a RoPE pairing, q/k norms) lives in that
/// architecture's file and in its layers.
public struct Hyperparameters: Sendable, Equatable {
    public var architecture: String
    /// Model width `d`.
    public var embeddingLength: Int
    /// Query heads per attention layer.
    public var headCount: Int
    /// Key/value heads of each layer (`attention.head_count_kv`, one number for every
    /// layer or one per layer): as many as `headCount` without grouped-query attention,
    /// 0 in a layer that has no attention (LFM2's convolution layers).
    public var headCountKV: [Int]
    /// Width of one head (`embeddingLength / headCount` unless the file says otherwise).
    public var headDim: Int
    /// Hidden width of the feed-forward block.
    public var feedForwardLength: Int
    public var vocabularySize: Int
    /// The context the model was trained for.
    public var trainedContextLength: Int
    public var rmsEpsilon: Float
    /// The RoPE base frequency of the file (`rope.freq_base`, default 10000).
    public var ropeFreqBase: Float
    /// Number of head dimensions that RoPE rotates.
    public var ropeDimensions: Int

    /// Number of decoder layers (`block_count`).
    public var layerCount: Int { headCountKV.count }

    /// Reads the keys every decoder-only architecture shares: `<arch>.embedding_length`,
    /// `.block_count`, `.attention.head_count`, `.attention.head_count_kv` (default: the
    /// head count), `.attention.key_length`, `.feed_forward_length`, `.context_length`,
    /// `.attention.layer_norm_rms_epsilon`, `.rope.freq_base`, `.rope.dimension_count`,
    /// and `.vocab_size` or the token list.
    static func reading(_ m: GGUFMetadata, architecture a: String) throws(ModelError) -> Hyperparameters {
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
            architecture: a, embeddingLength: d, headCount: heads,
            headCountKV: try m.perLayerInt("\(a).attention.head_count_kv", layers: blockCount)
                ?? Array(repeating: heads, count: blockCount),
            headDim: headDim,
            feedForwardLength: try m.modelInt("\(a).feed_forward_length"),
            vocabularySize: vocab,
            trainedContextLength: try m.modelInt("\(a).context_length"),
            rmsEpsilon: try m.modelFloat("\(a).attention.layer_norm_rms_epsilon"),
            ropeFreqBase: try m.modelOptionalFloat("\(a).rope.freq_base") ?? 10000,
            ropeDimensions: try m.modelOptionalInt("\(a).rope.dimension_count") ?? headDim)
    }

    /// Checks the relations the forward pass relies on.
    func validate() throws(ModelError) {
        func bad(_ key: String, _ value: Int, _ reason: String) -> ModelError {
            .invalidHyperParameter(key: "\(architecture).\(key)", value: String(value), reason: reason)
        }
        guard embeddingLength > 0, embeddingLength <= 1 << 16 else { throw bad("embedding_length", embeddingLength, "must be 1...65536") }
        guard layerCount > 0, layerCount <= 1024 else { throw bad("block_count", layerCount, "must be 1...1024") }
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
        for kv in headCountKV where kv != 0 {
            guard kv > 0, headCount % kv == 0 else {
                throw bad("attention.head_count_kv", kv, "must divide the head count \(headCount)")
            }
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

extension GGUFMetadata {
    /// A per-layer integer: an array with one entry per layer, or one number for every
    /// layer; nil when the key is absent.
    func perLayerInt(_ key: String, layers: Int) throws(ModelError) -> [Int]? {
        guard let value = self[key] else { return nil }
        guard case .array = value else { return Array(repeating: try modelInt(key), count: layers) }
        let values: [Int]
        do throws(GGUFError) { values = try intArray(key) } catch { throw .file(error) }
        guard values.count == layers else {
            throw .invalidHyperParameter(key: key, value: "\(values.count) entries", reason: "needs one per layer (\(layers))")
        }
        return values
    }
}
