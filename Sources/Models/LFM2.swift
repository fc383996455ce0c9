import GGUF
import Kernels

/// Liquid AI's `lfm2`: a hybrid of gated short-convolution layers and grouped-query
/// attention layers (`attention.head_count_kv` is 0 for a convolution layer). Attention
/// layers RMS-normalize each query and key head before RoPE, which rotates the two halves
/// of a head against each other (the NeoX pairing). The final norm is `token_embd_norm`;
/// the head is tied unless `output.weight` exists.
///
/// The same blocks make LFM2.5-Audio's detokenizer (`tokenizer-*.gguf`), an embedding
/// model, which two keys describe: `attention.sliding_window` (every attention layer sees
/// the latest `window` positions: rows `i - window < j <= i`) and `embedding_length_out`
/// (the width of its output projection `dense_2.weight` `[out, d]` with `dense_2.bias`,
/// `TransformerWeights.outputProjection`). A language model has neither.
enum LFM2: Architecture {
    static let name = "lfm2"

    static func hyperparameters(_ m: GGUFMetadata) throws(ModelError) -> Hyperparameters {
        try hyperparameters(m, architecture: name)
    }

    /// What LFM2 reads beyond the shared keys.
    struct Settings: Equatable {
        /// `shortconv.l_cache`: the convolution's kernel length `L` (0 when no layer is a
        /// convolution).
        var convolutionLength: Int
        /// `attention.sliding_window`: the positions each attention layer's query sees (its
        /// own and the `window - 1` before it), or nil (absent or 0): every earlier one.
        var window: Int? = nil
        /// `embedding_length_out`: an embedding model's output width (`dense_2`), or nil
        /// for a language model.
        var outputWidth: Int? = nil
    }

    static func settings(_ m: GGUFMetadata, _ hp: Hyperparameters) throws(ModelError) -> Settings {
        let windowKey = "\(name).attention.sliding_window", outputKey = "\(name).embedding_length_out"
        let window = try m.modelOptionalInt(windowKey) ?? 0
        guard window >= 0, window <= 1 << 20 else {
            throw .invalidHyperParameter(key: windowKey, value: String(window), reason: "must be 0 (none) or 1...1048576")
        }
        let outputWidth = try m.modelOptionalInt(outputKey)
        if let outputWidth, outputWidth < 1 || outputWidth > 1 << 20 {
            throw .invalidHyperParameter(key: outputKey, value: String(outputWidth), reason: "must be 1...1048576")
        }
        return Settings(convolutionLength: try convolutionLength(m, hp), window: window > 0 ? window : nil, outputWidth: outputWidth)
    }

    static func weights(_ w: WeightLoader, _ s: Settings) throws(ModelError) -> TransformerWeights {
        let hp = w.hp
        let (embedding, output) = try w.embeddingAndOutputHead()
        let kernelLength = s.convolutionLength
        var layers: [any DecoderLayer] = []
        for i in 0..<hp.layerCount {
            layers.append(
                LFM2Layer(
                    operatorNorm: try w.norm("blk.\(i).attn_norm.weight"),
                    mixer: try mixer(w, layer: i, kernelLength: kernelLength, window: s.window),
                    ffnNorm: try w.norm("blk.\(i).ffn_norm.weight"),
                    ffn: try w.swiGLU(i)))
        }
        // An embedding model's projection: dense_2 [out, d] and its bias.
        var projection: OutputProjection?
        if let width = s.outputWidth {
            projection = OutputProjection(
                weight: try w.linear("dense_2.weight", rows: width, cols: hp.embeddingLength),
                bias: try w.vector("dense_2.bias", count: width))
        }
        return TransformerWeights(
            tokenEmbedding: embedding, layers: layers,
            outputNorm: try w.norm("token_embd_norm.weight"),
            output: output, outputProjection: projection)
    }

    /// The shared keys of `architecture` (`lfm2`, or `lfm2moe` whose layers are LFM2's);
    /// `head_count_kv` says which layers are convolutions, so it must be there.
    static func hyperparameters(_ m: GGUFMetadata, architecture: String) throws(ModelError) -> Hyperparameters {
        let kvKey = "\(architecture).attention.head_count_kv"
        guard m.contains(kvKey) else { throw .file(.missingKey(kvKey)) }
        return try Hyperparameters.reading(m, architecture: architecture)
    }

    /// Layer `i`'s token mixer: a `ShortConv` where `head_count_kv` is 0, else attention
    /// with q/k norms and NeoX-paired RoPE (over a sliding `window`, when given).
    static func mixer(_ w: WeightLoader, layer i: Int, kernelLength: Int, window: Int? = nil) throws(ModelError) -> LFM2Layer.Mixer {
        let hp = w.hp, d = hp.embeddingLength
        guard hp.headCountKV[i] == 0 else {
            return .attention(try w.attention(i, queryKeyNorm: true, ropeStyle: .neox, window: window))
        }
        return .shortConv(
            ShortConv(
                layer: i,
                inProj: try w.linear("blk.\(i).shortconv.in_proj.weight", rows: 3 * d, cols: d),
                kernel: try w.vector("blk.\(i).shortconv.conv.weight", count: d * kernelLength),
                kernelLength: kernelLength,
                outProj: try w.linear("blk.\(i).shortconv.out_proj.weight", rows: d, cols: d)))
    }

    /// `<arch>.shortconv.l_cache`: the convolution's kernel length `L` (0 when no layer is
    /// a convolution), for `lfm2` and `lfm2moe`.
    static func convolutionLength(_ m: GGUFMetadata, _ hp: Hyperparameters) throws(ModelError) -> Int {
        guard hp.headCountKV.contains(0) else { return 0 }
        let key = "\(hp.architecture).shortconv.l_cache"
        let L = try m.modelInt(key)
        guard L >= 2, L <= 64 else {
            throw .invalidHyperParameter(key: key, value: String(L), reason: "must be 2...64")
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
    /// The token mixer of a layer (LFM2-MoE's layers have the same).
    enum Mixer: Sendable {
        case shortConv(ShortConv)
        /// Attention with per-head q/k RMSNorm and NeoX-paired RoPE.
        case attention(Attention)

        var cache: LayerCache {
            switch self {
            case .shortConv(let c): return c.cache
            case .attention(let a): return a.cache
            }
        }

        var linears: [Linear] {
            switch self {
            case .shortConv(let c): return c.linears
            case .attention(let a): return a.linears
            }
        }

        var rope: RotaryEmbedding? {
            if case .attention(let a) = self { return a.rope }
            return nil
        }

        var scratchWidth: Int {
            if case .shortConv(let c) = self { return c.scratchWidth }
            return 0
        }

        func callAsFunction(_ x: Rows, _ f: ForwardPass) -> Rows {
            switch self {
            case .shortConv(let conv): return conv(x, f)
            case .attention(let attention): return attention(x, f)
            }
        }
    }

    let operatorNorm: RMSNorm
    let mixer: Mixer
    let ffnNorm: RMSNorm
    let ffn: SwiGLU

    var cache: LayerCache { mixer.cache }
    var linears: [Linear] { mixer.linears + ffn.linears }
    var rope: RotaryEmbedding? { mixer.rope }
    var scratchWidth: Int { mixer.scratchWidth }

    func callAsFunction(_ x: Rows, _ f: ForwardPass) {
        x += mixer(operatorNorm(x, f), f)
        x += ffn(ffnNorm(x, f), f)
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

    /// `ShortConv(x)` in the pass's `mixed` rows (`x`'s rows hold `y` meanwhile).
    func callAsFunction(_ x: Rows, _ f: ForwardPass) -> Rows {
        let d = x.width, L = kernelLength
        let bcx = f.project(inProj, f.quantize(x, for: inProj), into: f.scratch)
        // x's rows are no longer needed: y takes their place.
        let y = x
        let segments = f.segments, positions = f.positions, rowSegment = f.rowSegment
        kernel.withUnsafeBufferPointer { kernel in
            for i in 0..<x.count {
                let b = bcx[i], c = bcx[i] + d, xt = bcx[i] + 2 * d
                let cache = segments[rowSegment[i]].sequence.conv, p = positions[i]
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
        return f.project(outProj, f.quantize(y, for: outProj), into: f.mixed)
    }
}
