import GGUF
import Kernels
import Models

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The forward pass written out plainly, in the spirit of llama2.c's `forward`: one token
/// at a time, F32, one thread, plain loops (no SIMD kernels, no BLAS, no thread pool),
/// every weight row dequantized when it is used with the scalar reference dequantizers
/// (`GGMLType.dequantizeRowReference`), and the attention keys and values and LFM2's
/// convolution inputs kept in plain arrays.
///
/// It reads the tensors by their GGUF names itself, apart from the engine's weight
/// mapping, so that it is an oracle for the fast engine (`ReferenceTests`) and a first
/// read of how a model computes (docs/walkthrough.md). About 100 times slower than
/// `InferenceSession`: for tests and reading.
///
/// ```swift
/// let reference = ReferenceForward(model: model)
/// for t in tokens { logits = reference.next(t) }
/// ```
public final class ReferenceForward {
    public let model: TransformerModel
    /// The model's shape, read from the GGUF keys by `Shape.init` (not by the engine's
    /// `Hyperparameters`).
    let hp: Shape

    // What the architectures do differently (one switch, in `init`).
    /// RoPE rotates dimension `i` with `i + half` (NeoX) rather than `2i` with `2i+1`.
    let ropeRotatesHalves: Bool
    /// Attention RMS-normalizes each query and key head (`attn_q_norm`, `attn_k_norm`).
    let normalizesQueryKey: Bool
    /// The final norm's tensor.
    let finalNorm: String
    /// LFM2's short-convolution length `L` (0 without convolution layers).
    var convolutionLength = 0
    /// What the embedding rows are multiplied by (Gemma 3: `sqrt(d)`).
    var embeddingScale: Float = 1
    /// Gemma 3: each block's output is RMS-normalized too (`post_attention_norm`,
    /// `post_ffw_norm`), and the gated feed-forward block uses GELU instead of SiLU.
    var gemmaBlocks = false
    /// Per layer: the RoPE base, and the sliding window (positions a query sees; nil: all).
    var ropeBases: [Float]
    var windows: [Int?]
    /// What query-key dot products are multiplied by (default `1/sqrt(hd)`).
    var queryScale: Float
    /// The final logit soft cap `c` (`logits = c · tanh(logits / c)`), or nil.
    var finalLogitSoftcap: Float?
    /// LFM2-MoE's routing (nil without mixture-of-experts layers, which are the layers
    /// with a router, `blk.l.ffn_gate_inp`).
    var routing: Routing?

    /// The shape of the model, from the keys every architecture shares.
    struct Shape {
        let architecture: String
        let embeddingLength: Int
        let layerCount: Int
        let headCount: Int
        /// Per layer (0: a convolution layer of LFM2).
        let headCountKV: [Int]
        let headDim: Int
        let ropeDimensions: Int
        let ropeFreqBase: Float
        let rmsEpsilon: Float

        init(_ m: GGUFMetadata) throws(GGUFError) {
            let a = try m.string("general.architecture")
            architecture = a
            embeddingLength = try m.int("\(a).embedding_length")
            layerCount = try m.int("\(a).block_count")
            headCount = try m.int("\(a).attention.head_count")
            switch m["\(a).attention.head_count_kv"] {
            case .array: headCountKV = try m.intArray("\(a).attention.head_count_kv")
            case .some: headCountKV = Array(repeating: try m.int("\(a).attention.head_count_kv"), count: layerCount)
            case nil: headCountKV = Array(repeating: headCount, count: layerCount)
            }
            headDim = try m.optional("\(a).attention.key_length", m.int) ?? embeddingLength / headCount
            ropeDimensions = try m.optional("\(a).rope.dimension_count", m.int) ?? headDim
            ropeFreqBase = try m.optional("\(a).rope.freq_base", m.float) ?? 10000
            rmsEpsilon = try m.float("\(a).attention.layer_norm_rms_epsilon")
        }
    }

    /// LFM2-MoE's `expert_*` keys.
    struct Routing {
        let usedCount: Int
        let normalizesWeights: Bool
        let weightScale: Float
    }

    // The state: per layer, one row per position.
    var keys: [[[Float]]]  // [layer][position][kvHeads·hd]
    var values: [[[Float]]]  // [layer][position][kvHeads·hd]
    var convolutionInputs: [[[Float]]]  // [layer][position][d], LFM2's B ⊙ x̃
    /// The weight matrices dequantized so far (see `dequantized`).
    var dequantizedTensors: [String: [Float]] = [:]
    /// Tokens seen; the next token is evaluated at this position.
    public private(set) var position = 0

    /// A reference forward pass over the weights of `model` (llama, lfm2, lfm2moe or
    /// gemma3). It reads the file's keys itself, as llama.cpp decides them, apart from the
    /// engine's parsers: a wrong rule in the engine is not shared by its oracle.
    public init(model: TransformerModel) throws(GGUFError) {
        self.model = model
        let m = model.file.metadata
        let hp = try Shape(m)
        self.hp = hp
        let a = hp.architecture
        ropeBases = Array(repeating: hp.ropeFreqBase, count: hp.layerCount)
        windows = Array(repeating: nil, count: hp.layerCount)
        queryScale = 1 / Float(hp.headDim).squareRoot()
        switch a {
        case "llama":
            (ropeRotatesHalves, normalizesQueryKey, finalNorm) = (false, false, "output_norm.weight")
        case "lfm2", "lfm2moe":
            (ropeRotatesHalves, normalizesQueryKey, finalNorm) = (true, true, "token_embd_norm.weight")
            if hp.headCountKV.contains(0) { convolutionLength = try m.int("\(a).shortconv.l_cache") }
            if a == "lfm2moe" {
                let scale = try m.optional("\(a).expert_weights_scale", m.float) ?? 0
                routing = Routing(
                    usedCount: try m.int("\(a).expert_used_count"),
                    normalizesWeights: try m.optional("\(a).expert_weights_norm", m.bool) ?? true,
                    weightScale: scale == 0 ? 1 : scale)
            }
        case "gemma3":
            (ropeRotatesHalves, normalizesQueryKey, finalNorm) = (true, true, "output_norm.weight")
            embeddingScale = Float(hp.embeddingLength).squareRoot()
            gemmaBlocks = true
            // A layer is local (a sliding window, its own RoPE base) unless the pattern says
            // global: one flag per layer, or every n-th layer global (n = 6 by default).
            let window = try m.optional("\(a).attention.sliding_window", m.int) ?? 0
            let localBase = try m.optional("\(a).rope.freq_base_swa", m.float) ?? 10000
            let patternKey = "\(a).attention.sliding_window_pattern"
            var local = [Bool](repeating: false, count: hp.layerCount)
            if window > 0 {
                switch m[patternKey] {
                case .array(.bool(let flags)): local = flags
                case .array: local = try m.intArray(patternKey).map { $0 != 0 }
                default:
                    let n = try m.optional(patternKey, m.int) ?? 6
                    local = (0..<hp.layerCount).map { n == 0 || $0 % n < n - 1 }
                }
            }
            windows = local.map { $0 ? window : nil }
            ropeBases = local.map { $0 ? localBase : hp.ropeFreqBase }
            // Gemma 3 27B (62 layers) scales queries by 1/sqrt(d / heads), the others by
            // 1/sqrt(key_length) (llama.cpp's rule for `query_pre_attn_scalar`).
            if hp.layerCount == 62 { queryScale = 1 / Float(hp.embeddingLength / hp.headCount).squareRoot() }
            let cap = try m.optional("\(a).final_logit_softcapping", m.float) ?? 0
            finalLogitSoftcap = cap > 0 ? cap : nil
        default:
            throw .valueOutOfRange(key: "general.architecture", value: "\(a) (ReferenceForward has no such architecture)")
        }
        keys = Array(repeating: [], count: hp.layerCount)
        values = keys
        convolutionInputs = keys
    }

    /// Evaluates `token` at the next position and returns the logits (`vocabularySize`).
    public func next(_ token: Int) -> [Float] {
        logits(layers(row("token_embd.weight", token).map { $0 * embeddingScale }))
    }

    /// Evaluates an embedding row given in place of a token (a media encoder's output
    /// row, already in the model's embedding space: not scaled) at the next position and
    /// returns the logits.
    public func next(embedding: [Float]) -> [Float] {
        precondition(embedding.count == hp.embeddingLength, "an embedding row of the model's width")
        return logits(layers(embedding))
    }

    /// The logits of the residual stream `x` of the last position.
    func logits(_ x: [Float]) -> [Float] {
        // logits = output(RMSNorm(x)), the head tied to the embedding without output.weight
        let head = model.file.tensor(named: "output.weight") == nil ? "token_embd.weight" : "output.weight"
        var logits = matmul(head, rmsNorm(x, finalNorm))
        if let cap = finalLogitSoftcap { logits = logits.map { cap * tanh($0 / cap) } }
        return logits
    }

    /// Evaluates `token` at the next position without its logits (the output head is the
    /// largest product of a model with a large vocabulary): to reach a long position fast.
    public func skip(_ token: Int) {
        _ = layers(row("token_embd.weight", token).map { $0 * embeddingScale })
    }

    /// The residual stream after every layer for the input row `x` (a token's scaled
    /// embedding, or a given one) at the next position, which it appends to the caches.
    func layers(_ input: [Float]) -> [Float] {
        let d = hp.embeddingLength
        var x = input  // [d]
        for l in 0..<hp.layerCount {
            // h = x + Mixer(RMSNorm(x))     (Gemma: x + RMSNorm(Attention(RMSNorm(x))))
            let input = rmsNorm(x, "blk.\(l).attn_norm.weight")
            var mixed = hp.headCountKV[l] == 0 ? shortConvolution(input, layer: l) : attention(input, layer: l)
            if gemmaBlocks { mixed = rmsNorm(mixed, "blk.\(l).post_attention_norm.weight") }
            for i in 0..<d { x[i] += mixed[i] }
            // out = h + SwiGLU(RMSNorm(h)), or LFM2-MoE's mixture of SwiGLU experts
            // (Gemma: h + RMSNorm(GEGLU(RMSNorm(h))))
            let ffnInput = rmsNorm(x, "blk.\(l).ffn_norm.weight")
            var ffnOut: [Float]
            if let routing, model.file.tensor(named: "blk.\(l).ffn_gate_inp.weight") != nil {
                ffnOut = mixtureOfExperts(ffnInput, layer: l, routing)
            } else {
                ffnOut = gatedFeedForward(ffnInput, layer: l)
            }
            if gemmaBlocks { ffnOut = rmsNorm(ffnOut, "blk.\(l).post_ffw_norm.weight") }
            for i in 0..<d { x[i] += ffnOut[i] }
        }
        position += 1
        return x
    }

    /// Forgets every token.
    public func reset() {
        position = 0
        keys = Array(repeating: [], count: hp.layerCount)
        values = keys
        convolutionInputs = keys
    }

    // MARK: - The blocks

    /// Grouped-query causal self-attention with RoPE; appends this position's key and value.
    /// A sliding-window layer sees only the latest `window` positions.
    func attention(_ x: [Float], layer l: Int) -> [Float] {
        let hd = hp.headDim, heads = hp.headCount, kvHeads = hp.headCountKV[l], group = heads / kvHeads
        var q = matmul("blk.\(l).attn_q.weight", x)  // [heads·hd]
        var k = matmul("blk.\(l).attn_k.weight", x)  // [kvHeads·hd]
        let v = matmul("blk.\(l).attn_v.weight", x)  // [kvHeads·hd]
        if normalizesQueryKey {
            for h in 0..<heads { normalizeHead(&q, h * hd, "blk.\(l).attn_q_norm.weight") }
            for h in 0..<kvHeads { normalizeHead(&k, h * hd, "blk.\(l).attn_k_norm.weight") }
        }
        rope(&q, heads: heads, base: ropeBases[l])
        rope(&k, heads: kvHeads, base: ropeBases[l])
        keys[l].append(k)
        values[l].append(v)

        // The positions this query sees: every one so far, or the window's.
        let seen = windows[l].map { max(0, position - $0 + 1) } ?? 0
        var out = [Float](repeating: 0, count: heads * hd)
        for h in 0..<heads {
            let g = h / group  // the KV head this query head reads
            // scores_t = q_h · k_t · scale for every position t seen
            var scores = keys[l][seen...].map { key in
                var s: Float = 0
                for i in 0..<hd { s += q[h * hd + i] * key[g * hd + i] }
                return s * queryScale
            }
            softmax(&scores)
            // out_h = Σ_t softmax(scores)_t v_t
            for (t, value) in values[l][seen...].enumerated() {
                for i in 0..<hd { out[h * hd + i] += scores[t] * value[g * hd + i] }
            }
        }
        return matmul("blk.\(l).attn_output.weight", out)
    }

    /// LFM2's gated short convolution; appends this position's convolution input.
    func shortConvolution(_ x: [Float], layer l: Int) -> [Float] {
        let d = hp.embeddingLength, L = convolutionLength
        let bcx = matmul("blk.\(l).shortconv.in_proj.weight", x)  // [3d]: B, C, x̃
        convolutionInputs[l].append((0..<d).map { bcx[$0] * bcx[2 * d + $0] })  // B ⊙ x̃
        let kernel = vector("blk.\(l).shortconv.conv.weight")  // [d][L]
        var y = [Float](repeating: 0, count: d)
        for tap in 0..<L {
            // tap L-1 weighs this position, tap 0 the position L-1 before it
            let p = position - (L - 1) + tap
            guard p >= 0 else { continue }
            for c in 0..<d { y[c] += kernel[c * L + tap] * convolutionInputs[l][p][c] }
        }
        for c in 0..<d { y[c] *= bcx[d + c] }  // C ⊙ conv
        return matmul("blk.\(l).shortconv.out_proj.weight", y)
    }

    /// `down(act(gate x) ⊙ up x)`: SwiGLU (`act` = SiLU), or Gemma's GEGLU (`act` = GELU
    /// in its tanh form).
    func gatedFeedForward(_ x: [Float], layer l: Int) -> [Float] {
        let gate = matmul("blk.\(l).ffn_gate.weight", x), up = matmul("blk.\(l).ffn_up.weight", x)
        let hidden = zip(gate, up).map { g, u in gemmaBlocks ? gelu(g) * u : g / (1 + exp(-g)) * u }
        return matmul("blk.\(l).ffn_down.weight", hidden)
    }

    /// `½ x (1 + tanh(√(2/π) (x + 0.044715 x³)))`.
    func gelu(_ x: Float) -> Float {
        0.5 * x * (1 + tanh(0.797_884_56 * (x + 0.044715 * x * x * x)))
    }

    /// LFM2-MoE's sparse feed-forward: the router's sigmoid gates, with the selection bias
    /// added, pick `k` experts; their SwiGLU outputs are summed, weighted by their
    /// (unbiased) gates normalized to sum 1.
    func mixtureOfExperts(_ x: [Float], layer l: Int, _ routing: Routing) -> [Float] {
        let k = routing.usedCount
        let gates = matmul("blk.\(l).ffn_gate_inp.weight", x).map { 1 / (1 + exp(-$0)) }  // p = σ(r) [E]
        let bias = vector("blk.\(l).exp_probs_b.bias")  // [E]
        // The k highest p + b, best first (ties: the lower index)
        let chosen = gates.indices.sorted { a, b in
            gates[a] + bias[a] != gates[b] + bias[b] ? gates[a] + bias[a] > gates[b] + bias[b] : a < b
        }.prefix(k)
        var weights = chosen.map { gates[$0] }
        if routing.normalizesWeights {
            let sum = max(weights.reduce(0, +), 6.103515625e-5)
            weights = weights.map { $0 / sum }
        }
        weights = weights.map { $0 * routing.weightScale }
        var out = [Float](repeating: 0, count: hp.embeddingLength)
        for (e, weight) in zip(chosen, weights) {
            // Expert e: down(SiLU(gate x) ⊙ up x) with its slices of the 3-D tensors
            let gate = matmul("blk.\(l).ffn_gate_exps.weight", x, expert: e)
            let up = matmul("blk.\(l).ffn_up_exps.weight", x, expert: e)
            let hidden = zip(gate, up).map { g, u in g / (1 + exp(-g)) * u }
            let y = matmul("blk.\(l).ffn_down_exps.weight", hidden, expert: e)
            for i in out.indices { out[i] += weight * y[i] }
        }
        return out
    }

    // MARK: - The operations

    /// `x / sqrt(mean(x²) + ε) ⊙ weight`.
    func rmsNorm(_ x: [Float], _ weight: String) -> [Float] {
        let w = vector(weight)
        var sum: Float = 0
        for v in x { sum += v * v }
        let scale = 1 / (sum / Float(x.count) + hp.rmsEpsilon).squareRoot()
        return (0..<x.count).map { x[$0] * scale * w[$0] }
    }

    /// RMSNorm of the head at `v[start ..< start + hd]`, in place.
    func normalizeHead(_ v: inout [Float], _ start: Int, _ weight: String) {
        let head = rmsNorm(Array(v[start..<(start + hp.headDim)]), weight)
        v.replaceSubrange(start..<(start + hp.headDim), with: head)
    }

    /// Rotates the first `ropeDimensions` dimensions of each head, in pairs, by
    /// `θ_i = position · base^(-2i/dims)`.
    func rope(_ v: inout [Float], heads: Int, base: Float) {
        let hd = hp.headDim, dims = hp.ropeDimensions, half = dims / 2
        for h in 0..<heads {
            for i in 0..<half {
                let theta = Float(position) * powf(base, -2 * Float(i) / Float(dims))
                let (a, b) = ropeRotatesHalves ? (h * hd + i, h * hd + i + half) : (h * hd + 2 * i, h * hd + 2 * i + 1)
                let (x0, x1) = (v[a], v[b])
                v[a] = x0 * cos(theta) - x1 * sin(theta)
                v[b] = x0 * sin(theta) + x1 * cos(theta)
            }
        }
    }

    /// `e^(x - max) / Σ e^(x - max)`, in place.
    func softmax(_ x: inout [Float]) {
        let top = x.max()!
        var sum: Float = 0
        for i in x.indices {
            x[i] = exp(x[i] - top)
            sum += x[i]
        }
        for i in x.indices { x[i] /= sum }
    }

    /// `W x` for the weight matrix `name` (`[rows, cols]`), one dequantized row at a time;
    /// for a 3-D tensor of stacked matrices (`[count, rows, cols]`), matrix `expert`'s.
    func matmul(_ name: String, _ x: [Float], expert: Int? = nil) -> [Float] {
        let t = tensor(name)
        precondition(x.count == t.rowLength, "\(name): \(x.count) inputs for rows of \(t.rowLength)")
        let w = dequantized(name), cols = t.rowLength
        let rows = expert.map { e in (e * t.shape[1])..<((e + 1) * t.shape[1]) } ?? 0..<t.rowCount
        return rows.map { r in
            var sum: Float = 0
            for i in 0..<cols { sum += w[r * cols + i] * x[i] }
            return sum
        }
    }

    /// Tensor `name` dequantized to floats (row-major), once: the weights a long prompt
    /// reads at every position.
    func dequantized(_ name: String) -> [Float] {
        if let w = dequantizedTensors[name] { return w }
        let t = tensor(name)
        let data = model.file.data(for: t).baseAddress!, rowBytes = t.type.rowBytes(count: t.rowLength)!
        var w = [Float](repeating: 0, count: t.rowCount * t.rowLength)
        w.withUnsafeMutableBufferPointer { out in
            for r in 0..<t.rowCount {
                t.type.dequantizeRowReference(data + r * rowBytes, into: out.baseAddress! + r * t.rowLength, count: t.rowLength)
            }
        }
        dequantizedTensors[name] = w
        return w
    }

    /// Row `r` of tensor `name`, dequantized.
    func row(_ name: String, _ r: Int) -> [Float] {
        let t = tensor(name)
        let bytes = model.file.data(for: t).baseAddress! + r * t.type.rowBytes(count: t.rowLength)!
        var out = [Float](repeating: 0, count: t.rowLength)
        out.withUnsafeMutableBufferPointer { t.type.dequantizeRowReference(bytes, into: $0.baseAddress!, count: t.rowLength) }
        return out
    }

    /// A whole tensor, dequantized (norm weights, the convolution kernel).
    func vector(_ name: String) -> [Float] {
        (0..<tensor(name).rowCount).flatMap { row(name, $0) }
    }

    func tensor(_ name: String) -> GGUFTensorInfo {
        guard let t = model.file.tensor(named: name) else { preconditionFailure("\(name) is missing (the model loaded, so it checked)") }
        return t
    }
}
