import GGUF

/// The `llama` architecture (Llama 2/3, SmolLM2, ...; Touvron et al., 2023): pre-norm
/// decoder layers of grouped-query attention with RoPE and a SwiGLU feed-forward block.
/// RoPE rotates adjacent pairs of dimensions (the GGUF converter permuted the q/k weights
/// for that pairing); the output head is tied to the token embedding when `output.weight`
/// is absent.
enum Llama: Architecture {
    static let name = "llama"
    typealias Settings = Void

    static func weights(_ w: WeightLoader, _: Void) throws(ModelError) -> TransformerWeights {
        let hp = w.hp
        let (embedding, output) = try w.embeddingAndOutputHead()
        var layers: [any DecoderLayer] = []
        for i in 0..<hp.layerCount {
            layers.append(
                LlamaLayer(
                    attentionNorm: try w.norm("blk.\(i).attn_norm.weight"),
                    attention: try w.attention(i, queryKeyNorm: false, ropeStyle: .adjacentPairs),
                    ffnNorm: try w.norm("blk.\(i).ffn_norm.weight"),
                    ffn: try w.swiGLU(i)))
        }
        return TransformerWeights(
            tokenEmbedding: embedding, layers: layers,
            outputNorm: try w.norm("output_norm.weight"),
            output: output)
    }
}

/// One Llama decoder layer:
///
/// ```
/// h   = x + Attention(RMSNorm(x))        // blk.i.attn_norm; attn_q/k/v/output
/// out = h + SwiGLU(RMSNorm(h))           // blk.i.ffn_norm; ffn_gate/up/down
/// ```
struct LlamaLayer: DecoderLayer {
    let attentionNorm: RMSNorm
    let attention: Attention
    let ffnNorm: RMSNorm
    let ffn: SwiGLU

    var cache: LayerCache { attention.cache }
    var rope: RotaryEmbedding? { attention.rope }
    var linears: [Linear] { attention.linears + ffn.linears }

    func callAsFunction(_ x: Rows, _ f: ForwardPass) {
        x += attention(attentionNorm(x, f), f)
        x += ffn(ffnNorm(x, f), f)
    }
}
