import GGUF
import Kernels

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Liquid AI's `lfm2moe` (the design of LFM2-8B-A1B): LFM2's layers, with the same gated
/// short convolutions and attention (`LFM2Layer.Mixer`), whose feed-forward block is, after
/// the first `leading_dense_block_count` layers, a sparse mixture of experts: each token
/// goes through `expert_used_count` of `expert_count` SwiGLU experts, picked by a sigmoid
/// router. Of LFM2-8B-A1B's 8.3B weights a token reads about 1.5B.
///
/// Every choice follows llama.cpp's `lfm2moe` graph (`build_moe_ffn`), as noted where it
/// is made (`ExpertRouting`, `MixtureOfExperts`).
enum LFM2MoE: Architecture {
    static let name = "lfm2moe"

    static func hyperparameters(_ m: GGUFMetadata) throws(ModelError) -> Hyperparameters {
        try LFM2.hyperparameters(m, architecture: name)
    }

    /// What LFM2-MoE reads beyond the shared keys: LFM2's convolution length and the
    /// experts' routing.
    struct Settings {
        var convolutionLength: Int
        var routing: ExpertRouting
    }

    static func settings(_ m: GGUFMetadata, _ hp: Hyperparameters) throws(ModelError) -> Settings {
        Settings(convolutionLength: try LFM2.convolutionLength(m, hp), routing: try ExpertRouting(m, hp))
    }

    static func weights(_ w: WeightLoader, _ s: Settings) throws(ModelError) -> TransformerWeights {
        let hp = w.hp
        let routing = s.routing
        let (embedding, output) = try w.embeddingAndOutputHead()
        let kernelLength = s.convolutionLength
        var layers: [any DecoderLayer] = []
        for i in 0..<hp.layerCount {
            let operatorNorm = try w.norm("blk.\(i).attn_norm.weight")
            let mixer = try LFM2.mixer(w, layer: i, kernelLength: kernelLength)
            let ffnNorm = try w.norm("blk.\(i).ffn_norm.weight")
            let ffn: LFM2MoELayer.FeedForward =
                i < routing.leadingDenseBlocks ? .dense(try w.swiGLU(i)) : .experts(try mixtureOfExperts(w, layer: i, routing))
            layers.append(LFM2MoELayer(operatorNorm: operatorNorm, mixer: mixer, ffnNorm: ffnNorm, ffn: ffn))
        }
        return TransformerWeights(
            tokenEmbedding: embedding, layers: layers,
            outputNorm: try w.norm("token_embd_norm.weight"),
            output: output)
    }

    /// Layer `i`'s experts: `blk.i.ffn_gate_inp` (the router), `exp_probs_b.bias` (the
    /// selection bias, required as llama.cpp requires it), and `ffn_{gate,up,down}_exps`,
    /// each a 3-D tensor of `expert_count` matrices.
    static func mixtureOfExperts(_ w: WeightLoader, layer i: Int, _ r: ExpertRouting) throws(ModelError) -> MixtureOfExperts {
        let d = w.hp.embeddingLength, ff = r.expertFeedForwardLength, count = r.expertCount
        let router = try w.linear("blk.\(i).ffn_gate_inp.weight", rows: count, cols: d)
        let bias = try w.vector("blk.\(i).exp_probs_b.bias", count: count)
        func stacked(_ kind: String, rows: Int, cols: Int) throws(ModelError) -> [Linear] {
            try Linear.stacked(file: w.file, name: "blk.\(i).\(kind).weight", count: count, rows: rows, cols: cols)
        }
        return MixtureOfExperts(
            router: router, selectionBias: bias,
            gate: try stacked("ffn_gate_exps", rows: ff, cols: d),
            up: try stacked("ffn_up_exps", rows: ff, cols: d),
            down: try stacked("ffn_down_exps", rows: d, cols: ff),
            used: r.usedCount, normalizesWeights: r.normalizesWeights, weightScale: r.weightScale)
    }
}

/// How the mixture-of-experts layers of an `lfm2moe` file route tokens (`lfm2moe.expert_*`
/// and `leading_dense_block_count`).
struct ExpertRouting {
    /// `expert_count`: experts per layer, `E`.
    let expertCount: Int
    /// `expert_used_count`: experts per token, `k`.
    let usedCount: Int
    /// `expert_feed_forward_length`: the hidden width of one expert.
    let expertFeedForwardLength: Int
    /// `leading_dense_block_count`: the first layers keep a dense SwiGLU (default 0, as
    /// llama.cpp).
    let leadingDenseBlocks: Int
    /// `expert_weights_norm`: whether the chosen experts' gates are normalized to sum 1.
    /// Default true: llama.cpp's `lfm2moe` graph always normalizes (it does not read the
    /// key, and its converter does not write it); a file that says false is taken at its
    /// word.
    let normalizesWeights: Bool
    /// `expert_weights_scale`: a factor on the weights (1 when absent or 0, as in llama.cpp,
    /// which skips a scale of 0 or 1; its `lfm2moe` graph does not read the key).
    let weightScale: Float

    /// llama.cpp's largest expert count (`LLAMA_MAX_EXPERTS`).
    static let maxExperts = 1024

    init(_ m: GGUFMetadata, _ hp: Hyperparameters) throws(ModelError) {
        let a = hp.architecture
        func bad(_ key: String, _ value: String, _ reason: String) -> ModelError {
            .invalidHyperParameter(key: "\(a).\(key)", value: value, reason: reason)
        }
        // Sigmoid gating is the only one llama.cpp's lfm2moe converter writes (type 2 of
        // llama_expert_gating_func_type); softmax (1) and the others would be another router.
        let gating = try m.modelInt("\(a).expert_gating_func")
        guard gating == 2 else {
            let names = [0: "none", 1: "softmax", 3: "softmax over the chosen", 4: "sqrt-softplus"]
            throw bad(
                "expert_gating_func", "\(gating) (\(names[gating] ?? "unknown"))",
                "lfm2moe routes with sigmoid gating (2), the only one leap-ref implements")
        }
        expertCount = try m.modelInt("\(a).expert_count")
        guard expertCount >= 1, expertCount <= Self.maxExperts else {
            throw bad("expert_count", "\(expertCount)", "must be 1...\(Self.maxExperts)")
        }
        usedCount = try m.modelInt("\(a).expert_used_count")
        guard usedCount >= 1, usedCount <= expertCount else {
            throw bad("expert_used_count", "\(usedCount)", "must be 1...\(expertCount) (the expert count)")
        }
        expertFeedForwardLength = try m.modelInt("\(a).expert_feed_forward_length")
        guard expertFeedForwardLength >= 1, expertFeedForwardLength <= 1 << 18 else {
            throw bad("expert_feed_forward_length", "\(expertFeedForwardLength)", "must be 1...262144")
        }
        leadingDenseBlocks = try m.modelOptionalInt("\(a).leading_dense_block_count") ?? 0
        guard leadingDenseBlocks >= 0, leadingDenseBlocks <= hp.layerCount else {
            throw bad("leading_dense_block_count", "\(leadingDenseBlocks)", "must be 0...\(hp.layerCount) (the block count)")
        }
        let normKey = "\(a).expert_weights_norm"
        do throws(GGUFError) {
            normalizesWeights = m.contains(normKey) ? try m.bool(normKey) : true
        } catch { throw .file(error) }
        let scale = try m.modelOptionalFloat("\(a).expert_weights_scale") ?? 0
        guard scale.isFinite, scale >= 0 else { throw bad("expert_weights_scale", "\(scale)", "must be a non-negative number") }
        weightScale = scale == 0 ? 1 : scale
    }
}

/// One LFM2-MoE decoder layer: LFM2's, with a mixture of experts as its feed-forward block
/// after the leading dense layers.
///
/// ```
/// h   = x + Mixer(RMSNorm(x))            // blk.i.attn_norm; Mixer = ShortConv or Attention (LFM2's)
/// out = h + FFN(RMSNorm(h))              // blk.i.ffn_norm; FFN = SwiGLU (ffn_gate/up/down) in the
///                                        // first leading_dense_block_count layers, else MixtureOfExperts
/// ```
struct LFM2MoELayer: DecoderLayer {
    enum FeedForward: Sendable {
        case dense(SwiGLU)
        case experts(MixtureOfExperts)

        func callAsFunction(_ x: Rows, _ f: ForwardPass) -> Rows {
            switch self {
            case .dense(let swiGLU): return swiGLU(x, f)
            case .experts(let moe): return moe(x, f)
            }
        }
    }

    let operatorNorm: RMSNorm
    let mixer: LFM2Layer.Mixer
    let ffnNorm: RMSNorm
    let ffn: FeedForward

    var cache: LayerCache { mixer.cache }
    var rope: RotaryEmbedding? { mixer.rope }
    var scratchWidth: Int { mixer.scratchWidth }
    var linears: [Linear] {
        switch ffn {
        case .dense(let swiGLU): return mixer.linears + swiGLU.linears
        case .experts(let moe): return mixer.linears + moe.linears
        }
    }
    var mixtureOfExperts: MixtureOfExperts? {
        if case .experts(let moe) = ffn { return moe }
        return nil
    }

    func callAsFunction(_ x: Rows, _ f: ForwardPass) {
        x += mixer(operatorNorm(x, f), f)
        x += ffn(ffnNorm(x, f), f)
    }
}

/// A sparse mixture of SwiGLU experts (Shazeer et al., 2017) with LFM2-MoE's router: a
/// sigmoid gate per expert, and a per-expert bias that takes part in choosing the experts
/// but not in weighing them (DeepSeek-V3's auxiliary-loss-free balancing), for each row:
///
/// ```
/// r   = x W_routerᵀ                      [E]    blk.i.ffn_gate_inp
/// p   = σ(r)                             [E]    sigmoid gating (expert_gating_func 2)
/// S   = the k experts of highest p + b          b: blk.i.exp_probs_b.bias (picks, does not weigh)
/// w_e = p_e / Σ_{e'∈S} p_e'   (e ∈ S)           expert_weights_norm; times expert_weights_scale if set
/// out = Σ_{e∈S} w_e · SwiGLU_e(x)        [d]    expert e's slices of blk.i.ffn_{gate,up,down}_exps
/// ```
///
/// llama.cpp (`build_moe_ffn` with `lfm2moe`'s arguments) does the same: sigmoid of the
/// router logits, the bias added for the top-k only (`ffn_moe_probs_biased`), the weights
/// taken from the unbiased sigmoids, normalized with the sum clamped below at 6.1e-5,
/// scaled only by a scale other than 0 or 1, applied after each expert's down
/// projection, and the experts' outputs summed in rank order. Ties in the choice go to
/// the lower expert index here.
///
/// The engine runs it without reading the other experts: the rows of a pass are grouped
/// by expert (`ForwardPass.groupByExpert`), so each chosen expert's weights are read once
/// per pass, by the matvec for one-token rows and by the prefill product for a prompt's
/// rows (`ForwardPass.projectExperts`).
struct MixtureOfExperts: Sendable {
    let router: Linear  // [E, d]
    let selectionBias: [Float]  // [E]
    /// Expert `e`'s SwiGLU is `gate[e]` [ff, d], `up[e]` [ff, d], `down[e]` [d, ff].
    let gate: [Linear]
    let up: [Linear]
    let down: [Linear]
    /// Experts per row, `k`.
    let used: Int
    let normalizesWeights: Bool
    let weightScale: Float

    var expertCount: Int { router.rows }
    var linears: [Linear] { [router] + gate + up + down }
    /// Bytes of weights one token reads: the router and `k` experts.
    var byteCountPerToken: Int { router.byteCount + used * (gate[0].byteCount + up[0].byteCount + down[0].byteCount) }

    /// The mixture's output in the pass's `mixed` rows.
    func callAsFunction(_ x: Rows, _ f: ForwardPass) -> Rows {
        let b = f.experts!, k = used
        // r = x W_routerᵀ; each row's experts and weights
        let r = f.project(router, f.quantize(x, for: router), into: b.routerLogits)
        f.inParallel(rows: x.count) { rows in
            for i in rows { route(r[i], experts: b.chosen + i * k, weights: b.weights + i * k) }
        }
        // Each expert's rows together; h = SiLU(x W_gate,eᵀ) ⊙ x W_up,eᵀ for each (row, expert)
        let input = f.groupByExpert(x, choices: k, experts: expertCount, for: gate, up)
        let gu = f.projectExperts([(gate, b.gate), (up, b.up)], input)
        let g = gu[0], u = gu[1]
        f.inParallel(rows: g.count) { rows in
            for j in rows { Elementwise.siluMultiply(g[j], u[j], count: g.width) }
        }
        // y = h W_down,eᵀ; out = Σ_e w_e y_e
        let y = f.projectExperts(down, f.expertInput(g, for: down), into: b.inputs)
        return f.combineExperts(y, choices: k, into: f.mixed)
    }

    /// The router's decision for one row: `logits` (E router outputs, overwritten with
    /// their sigmoids) to the `k` chosen experts, best first, and their weights.
    func route(_ logits: UnsafeMutablePointer<Float>, experts: UnsafeMutablePointer<Int>, weights: UnsafeMutablePointer<Float>) {
        let count = expertCount, k = used
        for e in 0..<count { logits[e] = 1 / (1 + expf(-logits[e])) }  // p = σ(r)
        selectionBias.withUnsafeBufferPointer { bias in
            // The k highest p + b, one pass each (k is small); ties to the lower index.
            for c in 0..<k {
                var best = -1, bestScore = -Float.infinity
                for e in 0..<count {
                    let score = logits[e] + bias[e]
                    guard best < 0 || score > bestScore else { continue }
                    var taken = false
                    for prior in 0..<c where experts[prior] == e { taken = true }
                    if !taken { (best, bestScore) = (e, score) }
                }
                experts[c] = best
                weights[c] = logits[best]
            }
        }
        if normalizesWeights {
            var sum: Float = 0
            for c in 0..<k { sum += weights[c] }
            sum = max(sum, 6.103515625e-5)  // llama.cpp's clamp: the smallest normal F16
            for c in 0..<k { weights[c] /= sum }
        }
        if weightScale != 1 {
            for c in 0..<k { weights[c] *= weightScale }
        }
    }
}
