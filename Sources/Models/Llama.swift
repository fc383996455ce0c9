import GGUF

/// The `llama` architecture (Llama 2/3, SmolLM2, ...): pre-norm decoder layers of grouped-query
/// attention with RoPE and a SwiGLU feed-forward block; the output head is tied to the
/// token embedding when `output.weight` is absent.
///
/// ```
/// h   = x + Attention(RMSNorm(x))        // blk.i.attn_norm, attn_q/k/v/output
/// out = h + SwiGLU(RMSNorm(h))           // blk.i.ffn_norm, ffn_gate/up/down
/// logits = output(RMSNorm(x_L))          // output_norm, output (or token_embd)
/// ```
enum Llama {
    static let name = "llama"

    static func hyperparameters(_ m: GGUFMetadata) throws(ModelError) -> Hyperparameters {
        let a = name
        let d = try m.modelInt("\(a).embedding_length")
        let heads = try m.modelInt("\(a).attention.head_count")
        let layers = try m.modelInt("\(a).block_count")
        let kv = try m.modelOptionalInt("\(a).attention.head_count_kv") ?? heads
        let headDim = try m.modelOptionalInt("\(a).attention.key_length") ?? (heads > 0 ? d / heads : 0)
        let vocab: Int
        if let v = try m.modelOptionalInt("\(a).vocab_size") { vocab = v } else {
            do { vocab = try m.array("tokenizer.ggml.tokens").count } catch { throw .file(error) }
        }
        return Hyperparameters(
            architecture: a, embeddingLength: d,
            layers: [LayerKind](repeating: .attention(kvHeads: kv), count: max(0, min(layers, 1025))),
            headCount: heads, headDim: headDim,
            feedForwardLength: try m.modelInt("\(a).feed_forward_length"),
            vocabularySize: vocab,
            trainedContextLength: try m.modelInt("\(a).context_length"),
            rmsEpsilon: try m.modelFloat("\(a).attention.layer_norm_rms_epsilon"),
            ropeFreqBase: try m.modelOptionalFloat("\(a).rope.freq_base") ?? 10000,
            ropeDimensions: try m.modelOptionalInt("\(a).rope.dimension_count") ?? headDim,
            ropeStyle: .adjacentPairs, normalizesQueryKey: false, convKernelLength: 0)
    }

    static func weights(_ w: WeightLoader) throws(ModelError) -> TransformerWeights {
        let hp = w.hp, d = hp.embeddingLength
        let embedding = try w.linear("token_embd.weight", rows: hp.vocabularySize, cols: d)
        var layers: [DecoderLayer] = []
        for i in 0..<hp.layerCount {
            guard case .attention(let kv) = hp.layers[i] else { continue }
            layers.append(DecoderLayer(
                mixerNorm: try w.vector("blk.\(i).attn_norm.weight", count: d),
                mixer: .attention(try w.attention(i, kvHeads: kv, queryKeyNorm: false)),
                ffnNorm: try w.vector("blk.\(i).ffn_norm.weight", count: d),
                ffn: try w.feedForward(i)))
        }
        return TransformerWeights(
            tokenEmbedding: embedding, layers: layers,
            outputNorm: try w.vector("output_norm.weight", count: d),
            output: try w.outputHead(embedding: embedding))
    }
}
