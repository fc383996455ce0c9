import GGUF
import Kernels

/// Google's Gemma 3 (`gemma3`; Gemma Team, "Gemma 3 Technical Report", 2025), as llama.cpp
/// runs its GGUF files:
///
/// - the token embedding is multiplied by `sqrt(d)` (Gemma's normalizer), and the output
///   head is tied to it;
/// - every block is wrapped in RMSNorm on both sides: `attn_norm` before attention and
///   `post_attention_norm` after it, `ffn_norm` before the feed-forward block and
///   `post_ffw_norm` after it, each output normalized before it joins the residual stream
///   (the stored norm weights already include Gemma's `1 +`: the converter added it);
/// - attention is grouped-query (the 270M model: 4 query heads share one key/value head of
///   256), each query and key head RMS-normalized (`attn_q_norm`, `attn_k_norm`) before
///   RoPE, which rotates the two halves of a head against each other (the NeoX pairing);
///   queries are scaled by `1/sqrt(key_length)` (for the 62-layer 27B model by
///   `1/sqrt(d / heads)`: llama.cpp's rule, from Gemma's `query_pre_attn_scalar`);
/// - local and global layers: a local layer attends over a sliding window of the latest
///   `attention.sliding_window` positions (512 for the 270M model) with the RoPE base
///   `rope.freq_base_swa` (default 10,000), and its cache holds only that window; the
///   others (every sixth layer by default: `attention.sliding_window_pattern`) attend
///   over the whole context with the RoPE base `rope.freq_base` (1,000,000);
/// - the feed-forward block is GEGLU with GELU in its tanh form.
///
/// RoPE scaling (the `rope.scaling.*` keys of the 4B and larger files) is not supported:
/// such files are refused with a typed error.
enum Gemma3: Architecture {
    static let name = "gemma3"

    /// What Gemma 3 reads beyond the keys every architecture shares.
    struct Settings: Equatable {
        /// Per layer: the positions a query sees (its own and the `window - 1` before it),
        /// or nil for a global layer, which sees every earlier position.
        var windows: [Int?]
        /// The RoPE base of the local layers; the global ones use `Hyperparameters.ropeFreqBase`.
        var localRopeBase: Float
        /// What queries are multiplied by before their dot products with the keys.
        var queryScale: Float
        /// `final_logit_softcapping` (nil when absent or 0).
        var finalLogitSoftcap: Float?

        /// The RoPE base of layer `i`.
        func ropeBase(_ i: Int, _ hp: Hyperparameters) -> Float { windows[i] == nil ? hp.ropeFreqBase : localRopeBase }
    }

    /// Reads Gemma 3's own keys as llama.cpp decides them: a layer is local when
    /// `attention.sliding_window` is positive and `attention.sliding_window_pattern` says
    /// so: an array with one flag per layer, or a number `n` (default 6) making layer `i`
    /// local unless `i % n == n - 1` (`n` = 0: every layer local).
    static func settings(_ m: GGUFMetadata, _ hp: Hyperparameters) throws(ModelError) -> Settings {
        func key(_ suffix: String) -> String { "\(name).\(suffix)" }
        try refuseRopeScaling(m)

        let window = try m.modelOptionalInt(key("attention.sliding_window")) ?? 0
        guard window >= 0, window <= 1 << 20 else {
            throw .invalidHyperParameter(
                key: key("attention.sliding_window"), value: String(window), reason: "must be 0 (none) or 1...1048576")
        }
        var isLocal = [Bool](repeating: false, count: hp.layerCount)
        if window > 0 {
            let patternKey = key("attention.sliding_window_pattern")
            if case .array(let flags) = m[patternKey] {
                let values: [Int]
                switch flags {
                case .bool(let b): values = b.map { $0 ? 1 : 0 }
                default:
                    guard let ints = flags.intValues else {
                        throw .invalidHyperParameter(
                            key: patternKey, value: "an array of \(flags.elementType)", reason: "needs booleans or integers")
                    }
                    values = ints
                }
                guard values.count == hp.layerCount else {
                    throw .invalidHyperParameter(
                        key: patternKey, value: "\(values.count) entries", reason: "needs one per layer (\(hp.layerCount))")
                }
                isLocal = values.map { $0 != 0 }
            } else {
                let n = try m.modelOptionalInt(patternKey) ?? 6
                guard n >= 0, n <= 1024 else {
                    throw .invalidHyperParameter(key: patternKey, value: String(n), reason: "must be 0...1024")
                }
                isLocal = (0..<hp.layerCount).map { n == 0 || $0 % n < n - 1 }
            }
        }

        let localBase = try m.modelOptionalFloat(key("rope.freq_base_swa")) ?? 10000
        guard localBase.isFinite, localBase > 0 else {
            throw .invalidHyperParameter(key: key("rope.freq_base_swa"), value: "\(localBase)", reason: "must be positive")
        }
        let cap = try m.modelOptionalFloat(key("final_logit_softcapping")) ?? 0
        guard cap.isFinite, cap >= 0 else {
            throw .invalidHyperParameter(key: key("final_logit_softcapping"), value: "\(cap)", reason: "must be 0 (none) or positive")
        }
        let is27B = hp.layerCount == 62
        let queryScale = 1 / Float(is27B ? hp.embeddingLength / hp.headCount : hp.headDim).squareRoot()
        return Settings(
            windows: isLocal.map { $0 ? window : nil }, localRopeBase: localBase, queryScale: queryScale,
            finalLogitSoftcap: cap > 0 ? cap : nil)
    }

    /// Refuses files that ask for RoPE scaling (linear, YaRN, ...), which leap-ref does not
    /// implement; a type of `none`, or a factor of 0 or 1, is no scaling.
    static func refuseRopeScaling(_ m: GGUFMetadata) throws(ModelError) {
        let typeKey = "\(name).rope.scaling.type"
        let type: String?
        do { type = try m.optional(typeKey, m.string) } catch { throw .file(error) }
        for factorKey in ["\(name).rope.scaling.factor", "\(name).rope.scale_linear"] {
            let factor = try m.modelOptionalFloat(factorKey) ?? 0
            if factor != 0, factor != 1, type != "none" {
                throw .invalidHyperParameter(
                    key: factorKey, value: "\(factor)",
                    reason: "RoPE scaling is not supported (\(type ?? "linear") scaling of the larger Gemma 3 files)")
            }
        }
        if let type, type != "none", type != "linear" {
            throw .invalidHyperParameter(key: typeKey, value: type, reason: "RoPE scaling is not supported")
        }
    }

    static func weights(_ w: WeightLoader, _ s: Settings) throws(ModelError) -> TransformerWeights {
        let hp = w.hp, d = hp.embeddingLength
        let (embedding, output) = try w.embeddingAndOutputHead()
        var layers: [any DecoderLayer] = []
        for i in 0..<hp.layerCount {
            layers.append(
                Gemma3Layer(
                    attentionNorm: try w.norm("blk.\(i).attn_norm.weight"),
                    attention: try w.attention(
                        i, queryKeyNorm: true, ropeStyle: .neox, ropeBase: s.ropeBase(i, hp), scale: s.queryScale,
                        window: s.windows[i]),
                    postAttentionNorm: try w.norm("blk.\(i).post_attention_norm.weight"),
                    ffnNorm: try w.norm("blk.\(i).ffn_norm.weight"),
                    ffn: GeGLU(try w.feedForward(i)),
                    postFFNNorm: try w.norm("blk.\(i).post_ffw_norm.weight")))
        }
        return TransformerWeights(
            tokenEmbedding: embedding, layers: layers,
            outputNorm: try w.norm("output_norm.weight"),
            output: output,
            embeddingScale: Float(d).squareRoot(),
            finalLogitSoftcap: s.finalLogitSoftcap)
    }
}

/// One Gemma 3 decoder layer, each block normalized on the way in and on the way out:
///
/// ```
/// h   = x + RMSNorm(Attention(RMSNorm(x)))    // blk.i.attn_norm, post_attention_norm
/// out = h + RMSNorm(GEGLU(RMSNorm(h)))        // blk.i.ffn_norm, post_ffw_norm
/// ```
///
/// The attention of a local layer has a sliding window; a global layer's sees everything.
struct Gemma3Layer: DecoderLayer {
    let attentionNorm: RMSNorm
    let attention: Attention
    let postAttentionNorm: RMSNorm
    let ffnNorm: RMSNorm
    let ffn: GeGLU
    let postFFNNorm: RMSNorm

    var cache: LayerCache { attention.cache }
    var rope: RotaryEmbedding? { attention.rope }
    var linears: [Linear] { attention.linears + ffn.linears }

    func callAsFunction(_ x: Rows, _ f: ForwardPass) {
        x += postAttentionNorm(attention(attentionNorm(x, f), f), f)
        x += postFFNNorm(ffn(ffnNorm(x, f), f), f)
    }
}

/// The GEGLU feed-forward block (Shazeer, 2020), Gemma's FFN:
///
/// ```
/// g, u = x W_gateᵀ, x W_upᵀ                   [n, ff]    blk.i.ffn_gate, blk.i.ffn_up
/// h    = GELU(g) ⊙ u                          GELU(g) = ½ g (1 + tanh(√(2/π) (g + 0.044715 g³)))
/// out  = h W_downᵀ                            [n, d]     blk.i.ffn_down
/// ```
struct GeGLU: Sendable {
    let gate: Linear  // [ff, d]
    let up: Linear  // [ff, d]
    let down: Linear  // [d, ff]

    init(_ matrices: (gate: Linear, up: Linear, down: Linear)) {
        (gate, up, down) = matrices
    }

    var linears: [Linear] { [gate, up, down] }

    /// `GEGLU(x)` in the pass's `mixed` rows.
    func callAsFunction(_ x: Rows, _ f: ForwardPass) -> Rows {
        gatedFeedForward(x, gate: gate, up: up, down: down, f) { Elementwise.geluTanhMultiply($0, $1, count: $2) }
    }
}
