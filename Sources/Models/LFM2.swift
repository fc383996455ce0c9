import GGUF
import Kernels

/// Liquid AI's `lfm2`: a hybrid of gated short-convolution layers and grouped-query
/// attention layers (`attention.head_count_kv` is 0 for a convolution layer). Attention
/// layers RMS-normalize each query and key head before RoPE, which rotates the two halves
/// of a head against each other (the NeoX pairing). The final norm is `token_embd_norm`;
/// the head is tied unless `output.weight` exists.
enum LFM2: Architecture {
    static let name = "lfm2"

    static func hyperparameters(_ m: GGUFMetadata) throws(ModelError) -> Hyperparameters {
        // head_count_kv says which layers are convolutions: it must be there.
        let kvKey = "\(name).attention.head_count_kv"
        guard m.contains(kvKey) else { throw .file(.missingKey(kvKey)) }
        return try Hyperparameters.reading(m, architecture: name)
    }

    static func weights(_ w: WeightLoader) throws(ModelError) -> TransformerWeights {
        let hp = w.hp, d = hp.embeddingLength
        let embedding = try w.linear("token_embd.weight", rows: hp.vocabularySize, cols: d)
        let kernelLength = hp.headCountKV.contains(0) ? try convolutionLength(w.file.metadata) : 0
        var layers: [any DecoderLayer] = []
        for i in 0..<hp.layerCount {
            let mixer: LFM2Layer.Mixer
            if hp.headCountKV[i] == 0 {
                mixer = .shortConv(
                    ShortConv(
                        layer: i,
                        inProj: try w.linear("blk.\(i).shortconv.in_proj.weight", rows: 3 * d, cols: d),
                        kernel: try w.vector("blk.\(i).shortconv.conv.weight", count: d * kernelLength),
                        kernelLength: kernelLength,
                        outProj: try w.linear("blk.\(i).shortconv.out_proj.weight", rows: d, cols: d)))
            } else {
                mixer = .attention(try w.attention(i, kvHeads: hp.headCountKV[i], queryKeyNorm: true, ropeStyle: .neox))
            }
            layers.append(
                LFM2Layer(
                    operatorNorm: try w.norm("blk.\(i).attn_norm.weight"),
                    mixer: mixer,
                    ffnNorm: try w.norm("blk.\(i).ffn_norm.weight"),
                    ffn: try w.swiGLU(i)))
        }
        return TransformerWeights(
            tokenEmbedding: embedding, layers: layers,
            outputNorm: try w.norm("token_embd_norm.weight"),
            output: try w.outputHead(embedding: embedding))
    }

    /// `lfm2.shortconv.l_cache`: the convolution's kernel length `L`.
    static func convolutionLength(_ m: GGUFMetadata) throws(ModelError) -> Int {
        let L = try m.modelInt("\(name).shortconv.l_cache")
        guard L >= 2, L <= 64 else {
            throw .invalidHyperParameter(key: "\(name).shortconv.l_cache", value: String(L), reason: "must be 2...64")
        }
        return L
    }
}

/// One LFM2 decoder layer, its token mixer a short convolution or attention:
///
/// ```
/// h   = x + Mixer(RMSNorm(x))            // blk.i.attn_norm; Mixer = ShortConv or Attention
/// out = h + SwiGLU(RMSNorm(h))           // blk.i.ffn_norm; ffn_gate/up/down
/// ```
struct LFM2Layer: DecoderLayer {
    enum Mixer: Sendable {
        case shortConv(ShortConv)
        /// Attention with per-head q/k RMSNorm and NeoX-paired RoPE.
        case attention(Attention)
    }

    let operatorNorm: RMSNorm
    let mixer: Mixer
    let ffnNorm: RMSNorm
    let ffn: SwiGLU

    var cache: LayerCache {
        switch mixer {
        case .shortConv(let c): return c.cache
        case .attention(let a): return a.cache
        }
    }

    var linears: [Linear] {
        switch mixer {
        case .shortConv(let c): return c.linears + ffn.linears
        case .attention(let a): return a.linears + ffn.linears
        }
    }

    var rope: RotaryEmbedding? {
        if case .attention(let a) = mixer { return a.rope }
        return nil
    }

    var scratchWidth: Int {
        if case .shortConv(let c) = mixer { return c.scratchWidth }
        return 0
    }

    func callAsFunction(_ x: Rows, _ f: ForwardPass) {
        let input = operatorNorm(x, into: f.normed, f)
        switch mixer {
        case .shortConv(let conv): f.add(conv(input, into: f.mixed, f), to: x)
        case .attention(let attention): f.add(attention(input, into: f.mixed, f), to: x)
        }
        f.add(ffn(ffnNorm(x, into: f.normed, f), into: f.mixed, f), to: x)
    }
}

/// LFM2's gated short convolution: a causal depthwise convolution of length `L` over the
/// sequence, gated before and after by projections of the input:
///
/// ```
/// B, C, x̃ = split(x W_inᵀ)                  [n, d] each     blk.i.shortconv.in_proj
/// z_p     = B_p ⊙ x̃_p                       stored in the convolution cache at position p
/// y_p     = C_p ⊙ Σ_{k<L} w_k ⊙ z_{p-L+1+k}  z before position 0 is 0; blk.i.shortconv.conv
/// out     = y W_outᵀ                        [n, d]          blk.i.shortconv.out_proj
/// ```
struct ShortConv: Sendable {
    let layer: Int  // index of this layer's cache
    let inProj: Linear  // [3d, d], producing B, C, x̃ in that order
    let kernel: [Float]  // [d][L]: `kernel[c * L + k]`, tap k of channel c (k = L-1 is the newest input)
    let kernelLength: Int  // L
    let outProj: Linear  // [d, d]

    var linears: [Linear] { [inProj, outProj] }
    var cache: LayerCache { .convolutionInputs(width: outProj.rows) }
    /// `B, C, x̃` of every row.
    var scratchWidth: Int { inProj.rows }

    func callAsFunction(_ x: Rows, into out: UnsafeMutablePointer<Float>, _ f: ForwardPass) -> Rows {
        let d = x.width, L = kernelLength
        let bcx = f.project(inProj, f.quantize(x, for: inProj), into: f.scratch)
        // x's rows are no longer needed: y takes their place.
        let y = x
        let cache = f.sequence.conv, start = f.start
        kernel.withUnsafeBufferPointer { kernel in
            for i in 0..<x.count {
                let b = bcx[i], c = bcx[i] + d, xt = bcx[i] + 2 * d
                let p = start + i
                let z = cache.row(layer: layer, position: p)
                for ch in 0..<d { z[ch] = b[ch] * xt[ch] }
                let yi = y[i]
                for ch in 0..<d { yi[ch] = 0 }
                for tap in 0..<L {
                    let src = p - (L - 1) + tap
                    guard src >= 0 else { continue }
                    let past = cache.row(layer: layer, position: src)
                    for ch in 0..<d { yi[ch] += kernel[ch * L + tap] * past[ch] }
                }
                for ch in 0..<d { yi[ch] *= c[ch] }
            }
        }
        return f.project(outProj, f.quantize(y, for: outProj), into: out)
    }
}
