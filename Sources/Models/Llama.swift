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
        try Hyperparameters.reading(m, architecture: name) { (blocks, heads) throws(ModelError) in
            let kv = try m.modelOptionalInt("\(name).attention.head_count_kv") ?? heads
            return [LayerKind](repeating: .attention(kvHeads: kv), count: blocks)
        }
    }

    static func weights(_ w: WeightLoader) throws(ModelError) -> TransformerWeights {
        let hp = w.hp, d = hp.embeddingLength
        let embedding = try w.linear("token_embd.weight", rows: hp.vocabularySize, cols: d)
        var layers: [DecoderLayer] = []
        for i in 0..<hp.layerCount {
            guard case .attention(let kv) = hp.layers[i] else { continue }
            layers.append(
                DecoderLayer(
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
