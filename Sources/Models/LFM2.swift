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
        var hp = try Hyperparameters.reading(m, architecture: name) { (blocks, _) throws(ModelError) in
            // head_count_kv is an array with one entry per layer (0 = convolution layer), or
            // a single number for all layers.
            let kvKey = "\(name).attention.head_count_kv"
            guard let kvValue = m[kvKey] else { throw .file(.missingKey(kvKey)) }
            var kvPerLayer: [Int]
            if case .array = kvValue {
                do throws(GGUFError) { kvPerLayer = try m.intArray(kvKey) } catch { throw .file(error) }
                guard kvPerLayer.count == blocks else {
                    throw .invalidHyperParameter(
                        key: kvKey, value: "\(kvPerLayer.count) entries", reason: "needs one per layer (\(blocks))")
                }
            } else {
                kvPerLayer = [Int](repeating: try m.modelInt(kvKey), count: blocks)
            }
            return kvPerLayer.map { $0 == 0 ? .shortConv : .attention(kvHeads: $0) }
        }
        hp.ropeStyle = .neox
        hp.normalizesQueryKey = true
        hp.convKernelLength = try m.modelInt("\(name).shortconv.l_cache")
        return hp
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
                mixer = .shortConv(
                    ShortConvWeights(
                        inProj: try w.linear("blk.\(i).shortconv.in_proj.weight", rows: 3 * d, cols: d),
                        kernel: try w.vector("blk.\(i).shortconv.conv.weight", count: d * L),
                        outProj: try w.linear("blk.\(i).shortconv.out_proj.weight", rows: d, cols: d)))
            }
            layers.append(
                DecoderLayer(
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
