import GGUF

/// Liquid AI's `lfm2`: a hybrid of gated short-convolution layers and grouped-query
/// attention layers (`attention.head_count_kv` is 0 for a convolution layer). Attention
/// layers RMS-normalize each query and key head before RoPE in the NeoX pairing. The
/// final norm is `token_embd_norm`; the head is tied unless `output.weight` exists.
///
/// ```
/// h   = x + Mixer(RMSNorm(x))            // blk.i.attn_norm; Mixer = ShortConv or Attention
/// out = h + SwiGLU(RMSNorm(h))           // blk.i.ffn_norm, ffn_gate/up/down
///
/// ShortConv(x): B, C, x' = split(in_proj x)          // blk.i.shortconv.in_proj
///               y = C * causal_depthwise_conv(B * x')  // blk.i.shortconv.conv, length l_cache
///               out_proj y                          // blk.i.shortconv.out_proj
/// ```
enum LFM2 {
    static let name = "lfm2"

    static func hyperparameters(_ m: GGUFMetadata) throws(ModelError) -> Hyperparameters {
        let a = name
        let d = try m.modelInt("\(a).embedding_length")
        let heads = try m.modelInt("\(a).attention.head_count")
        let blockCount = try m.modelInt("\(a).block_count")
        guard blockCount > 0, blockCount <= 1024 else {
            throw .invalidHyperParameter(key: "\(a).block_count", value: String(blockCount), reason: "must be 1...1024")
        }
        // head_count_kv is an array with one entry per layer (0 = convolution layer), or a
        // single number for all layers.
        var kvPerLayer: [Int]
        let kvKey = "\(a).attention.head_count_kv"
        guard let kvValue = m[kvKey] else { throw .file(.missingKey(kvKey)) }
        if case .array = kvValue {
            do { kvPerLayer = try m.intArray(kvKey) } catch { throw .file(error) }
            guard kvPerLayer.count == blockCount else {
                throw .invalidHyperParameter(key: kvKey, value: "\(kvPerLayer.count) entries", reason: "needs one per layer (\(blockCount))")
            }
        } else {
            kvPerLayer = [Int](repeating: try m.modelInt(kvKey), count: blockCount)
        }
        let headDim = heads > 0 ? d / heads : 0
        let vocab: Int
        if let v = try m.modelOptionalInt("\(a).vocab_size") { vocab = v } else {
            do { vocab = try m.array("tokenizer.ggml.tokens").count } catch { throw .file(error) }
        }
        return Hyperparameters(
            architecture: a, embeddingLength: d,
            layers: kvPerLayer.map { $0 == 0 ? .shortConv : .attention(kvHeads: $0) },
            headCount: heads, headDim: headDim,
            feedForwardLength: try m.modelInt("\(a).feed_forward_length"),
            vocabularySize: vocab,
            trainedContextLength: try m.modelInt("\(a).context_length"),
            rmsEpsilon: try m.modelFloat("\(a).attention.layer_norm_rms_epsilon"),
            ropeFreqBase: try m.modelOptionalFloat("\(a).rope.freq_base") ?? 10000,
            ropeDimensions: try m.modelOptionalInt("\(a).rope.dimension_count") ?? headDim,
            ropeStyle: .neox, normalizesQueryKey: true,
            convKernelLength: try m.modelInt("\(a).shortconv.l_cache"))
    }

    static func weights(_ w: WeightLoader) throws(ModelError) -> TransformerWeights {
        let hp = w.hp, d = hp.embeddingLength, L = hp.convKernelLength
        let embedding = try w.linear("token_embd.weight", rows: hp.vocabularySize, cols: d)
        var layers: [DecoderLayer] = []
        for i in 0..<hp.layerCount {
            let mixer: Mixer
            switch hp.layers[i] {
            case .attention(let kv):
                mixer = .attention(try w.attention(i, kvHeads: kv, queryKeyNorm: true))
            case .shortConv:
                mixer = .shortConv(ShortConvWeights(
                    inProj: try w.linear("blk.\(i).shortconv.in_proj.weight", rows: 3 * d, cols: d),
                    kernel: try w.vector("blk.\(i).shortconv.conv.weight", count: d * L),
                    outProj: try w.linear("blk.\(i).shortconv.out_proj.weight", rows: d, cols: d)))
            }
            layers.append(DecoderLayer(
                mixerNorm: try w.vector("blk.\(i).attn_norm.weight", count: d),
                mixer: mixer,
                ffnNorm: try w.vector("blk.\(i).ffn_norm.weight", count: d),
                ffn: try w.feedForward(i)))
        }
        return TransformerWeights(
            tokenEmbedding: embedding, layers: layers,
            outputNorm: try w.vector("token_embd_norm.weight", count: d),
            output: try w.outputHead(embedding: embedding))
    }
}
