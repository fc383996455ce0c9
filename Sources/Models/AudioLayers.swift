import GGUF
import Kernels

// LFM2-Audio's audio encoder, layer by layer: a FastConformer (Rekesh et al., 2023, "Fast
// Conformer with Linearly Scalable Attention for Efficient Speech Recognition"; NeMo's
// `ConformerEncoder` with `dw_striding` subsampling and `rel_pos` attention) and the MLP
// adapter that maps its output to the language model's width. llama.cpp runs it as the
// `lfm2a` projector.
//
// ```
// mel [n_mels][T_mel]                                        the log-mel front end's output
//   → ConvolutionSubsampling (x8 in time and in frequency)   [T][d], T = ⌈⌈⌈T_mel/2⌉/2⌉/2⌉
//   → ConformerBlock × L                                     [T][d]
//   → LFM2AudioAdapter                                       [T][projection_dim]
// ```
//
// The layers write the activations of an `AudioWorkspace`, which owns every buffer of one
// encode, and run on the encoder's pool (docs/media-encoders.md has the equations and
// shapes).

/// The weights of an LFM2-Audio encoder, by llama.cpp's tensor names (ggml shapes, row
/// length first; `C` subsampling channels, `F₃` the bins left after subsampling, `K` the
/// depthwise kernel, `P` the sinusoid width):
///
/// ```
/// a.conv1d.0                 [3, 3, 1, C], [C]     first convolution (one input channel)
/// a.conv1d.2 / .5            [3, 3, 1, C], [C]     depthwise 3x3
/// a.conv1d.3 / .6            [1, 1, C, C], [C]     pointwise
/// a.pre_encode.out           [C·F₃, d], [d]
/// a.blk.i.ffn_norm(_1)       [d] weight, bias;     ffn_up(_1) [d, ff], [ff];  ffn_down(_1) [ff, d], [d]
/// a.blk.i.ln1                [d];  attn_q/k/v/out [d, d], [d];  linear_pos [P, d] (no bias)
/// a.blk.i.pos_bias_u / _v    [d/H, H]
/// a.blk.i.norm_conv          [d];  conv_pw1 [d, 2d], [2d];  conv_dw [K, d], [d]
/// a.blk.i.conv_norm          [d] scale, shift (batch norm folded);  conv_pw2 [d, d], [d]
/// a.blk.i.ln2                [d]
/// mm.a.mlp.0                 [d] (LayerNorm);  mm.a.mlp.1 [d, D], [D];  mm.a.mlp.3 [D, D], [D]
/// ```
///
/// Matrices may be of any type the kernels multiply; the rest (convolution kernels, biases,
/// norms, the position biases) F32, F16 or BF16, copied out as F32.
struct AudioWeights: Sendable {
    let subsampling: ConvolutionSubsampling
    let blocks: [ConformerBlock]
    let adapter: LFM2AudioAdapter

    init(_ r: ProjectorFileReader, _ hp: AudioHyperparameters, storage: MediaEncoder.WeightStorage) throws(ProjectorError) {
        func linear(_ name: String, outputs: Int, inputs: Int, bias: Bool = true) throws(ProjectorError) -> EncoderLinear {
            try EncoderLinear(r, name, outputs: outputs, inputs: inputs, bias: bias, storage: storage)
        }
        let C = hp.subsamplingChannels, d = hp.width, eps = hp.layerNormEpsilon
        subsampling = ConvolutionSubsampling(
            channels: C, melBins: hp.melBins,
            firstKernel: try r.floats(tensor: "a.conv1d.0.weight", shape: [3, 3, 1, C]),
            firstBias: try r.vector("a.conv1d.0.bias", count: C),
            depthwiseKernels: [
                try r.floats(tensor: "a.conv1d.2.weight", shape: [3, 3, 1, C]),
                try r.floats(tensor: "a.conv1d.5.weight", shape: [3, 3, 1, C])
            ],
            depthwiseBiases: [try r.vector("a.conv1d.2.bias", count: C), try r.vector("a.conv1d.5.bias", count: C)],
            pointwiseWeights: [
                try r.floats(tensor: "a.conv1d.3.weight", shape: [1, 1, C, C]),
                try r.floats(tensor: "a.conv1d.6.weight", shape: [1, 1, C, C])
            ],
            pointwiseBiases: [try r.vector("a.conv1d.3.bias", count: C), try r.vector("a.conv1d.6.bias", count: C)],
            out: try linear("a.pre_encode.out", outputs: d, inputs: C * ConvolutionSubsampling.subsampled(hp.melBins)))
        var blocks: [ConformerBlock] = []
        for i in 0..<hp.layerCount {
            let b = "a.blk.\(i).", ff = hp.feedForwardLength, H = hp.headCount, hd = hp.headDim, K = hp.convolutionKernelLength
            func feedForward(_ suffix: String) throws(ProjectorError) -> ConformerFeedForward {
                ConformerFeedForward(
                    norm: try EncoderLayerNorm(r, b + "ffn_norm" + suffix, width: d, epsilon: eps),
                    up: try linear(b + "ffn_up" + suffix, outputs: ff, inputs: d),
                    down: try linear(b + "ffn_down" + suffix, outputs: d, inputs: ff))
            }
            blocks.append(
                ConformerBlock(
                    feedForward1: try feedForward(""), feedForward2: try feedForward("_1"),
                    attentionNorm: try EncoderLayerNorm(r, b + "ln1", width: d, epsilon: eps),
                    convolutionNorm: try EncoderLayerNorm(r, b + "norm_conv", width: d, epsilon: eps),
                    outputNorm: try EncoderLayerNorm(r, b + "ln2", width: d, epsilon: eps),
                    attention: RelativePositionSelfAttention(
                        query: try linear(b + "attn_q", outputs: d, inputs: d), key: try linear(b + "attn_k", outputs: d, inputs: d),
                        value: try linear(b + "attn_v", outputs: d, inputs: d), output: try linear(b + "attn_out", outputs: d, inputs: d),
                        positionProjection: try linear(b + "linear_pos", outputs: d, inputs: hp.positionTableWidth, bias: false),
                        biasU: try r.floats(tensor: b + "pos_bias_u", shape: [hd, H]),
                        biasV: try r.floats(tensor: b + "pos_bias_v", shape: [hd, H]),
                        heads: H),
                    convolution: ConformerConvolution(
                        pointwise1: try linear(b + "conv_pw1", outputs: 2 * d, inputs: d),
                        depthwiseKernel: try r.floats(tensor: b + "conv_dw.weight", shape: [K, d]),
                        depthwiseBias: try r.vector(b + "conv_dw.bias", count: d),
                        kernelLength: K,
                        normScale: try r.vector(b + "conv_norm.weight", count: d),
                        normShift: try r.vector(b + "conv_norm.bias", count: d),
                        pointwise2: try linear(b + "conv_pw2", outputs: d, inputs: d))))
        }
        self.blocks = blocks
        adapter = LFM2AudioAdapter(
            norm: try EncoderLayerNorm(r, "mm.a.mlp.0", width: d, epsilon: eps),
            up: try linear("mm.a.mlp.1", outputs: hp.projectionDim, inputs: d),
            down: try linear("mm.a.mlp.3", outputs: hp.projectionDim, inputs: hp.projectionDim))
    }
}

/// The x8 convolutional subsampling of FastConformer (`dw_striding`): the log-mel matrix
/// as a one-channel image (rows: frames, columns: mel bins), then
///
/// ```
/// h = ReLU(Conv3x3/2(x))                           [C][T₁][F₁]   a.conv1d.0
/// h = ReLU(Pointwise(DepthwiseConv3x3/2(h)))       [C][T₂][F₂]   a.conv1d.2, a.conv1d.3
/// h = ReLU(Pointwise(DepthwiseConv3x3/2(h)))       [C][T₃][F₃]   a.conv1d.5, a.conv1d.6
/// x_t = h[·][t][·] flattened channel-major (c·F₃ + f), then x_t W_outᵀ + b   a.pre_encode.out
/// ```
///
/// Every 3x3 convolution has stride 2 and zero padding 1 (a side of `n` becomes
/// `⌊(n+1)/2⌋`) and a bias per channel.
struct ConvolutionSubsampling: Sendable {
    let channels: Int  // C
    let melBins: Int  // F
    let firstKernel: [Float]  // [C][3][3]
    let firstBias: [Float]  // [C]
    let depthwiseKernels: [[Float]]  // 2 x [C][3][3]
    let depthwiseBiases: [[Float]]  // 2 x [C]
    let pointwiseWeights: [[Float]]  // 2 x [C][C]
    let pointwiseBiases: [[Float]]  // 2 x [C]
    let out: EncoderLinear  // [d, C·F₃]

    /// A length after the three stride-2 convolutions: `⌈⌈⌈n/2⌉/2⌉/2⌉`.
    static func subsampled(_ n: Int) -> Int {
        ConformerKernels.stride2Length(ConformerKernels.stride2Length(ConformerKernels.stride2Length(n)))
    }

    /// `[T][d]` rows from the mel matrix (`melBins x frames`, bin-major as the front end
    /// stores it), into `w.x`. With `roundingToHalf`, the first convolution's input and
    /// kernel are rounded to IEEE half, as in llama.cpp (its `conv_2d` goes through an F16
    /// im2col).
    func callAsFunction(mel: UnsafePointer<Float>, frames: Int, roundingToHalf: Bool, _ w: AudioWorkspace, _ pool: ThreadPool) -> Rows {
        let C = channels
        let T1 = ConformerKernels.stride2Length(frames), F1 = ConformerKernels.stride2Length(melBins)
        let T2 = ConformerKernels.stride2Length(T1), F2 = ConformerKernels.stride2Length(F1)
        let T3 = ConformerKernels.stride2Length(T2), F3 = ConformerKernels.stride2Length(F2)
        // The image: row t is frame t's mel bins (the transpose of the stored matrix).
        let image = w.planes
        for f in 0..<melBins {
            for t in 0..<frames { image[t * melBins + f] = mel[f * frames + t] }
        }
        let a = w.planesB, b = w.planes
        firstKernel.withUnsafeBufferPointer { k in
            firstBias.withUnsafeBufferPointer { bias in
                ConformerKernels.convolution3x3Stride2(
                    image: image, height: frames, width: melBins, kernels: k.baseAddress!, bias: bias.baseAddress!, channels: C,
                    roundingToHalf: roundingToHalf, output: a, scratch: w.im2col, pool: pool)
            }
        }
        // Two depthwise-separable stride-2 stages: [C][T₁][F₁] → [C][T₂][F₂] → [C][T₃][F₃],
        // each depthwise into `b`, pointwise back into `a`.
        for (stage, (height, width)) in [(T1, F1), (T2, F2)].enumerated() {
            let pixels = ConformerKernels.stride2Length(height) * ConformerKernels.stride2Length(width)
            depthwiseKernels[stage].withUnsafeBufferPointer { k in
                depthwiseBiases[stage].withUnsafeBufferPointer { bias in
                    ConformerKernels.depthwiseConvolution3x3Stride2(
                        input: a, channels: C, height: height, width: width, kernels: k.baseAddress!, bias: bias.baseAddress!,
                        output: b, pool: pool)
                }
            }
            pointwiseWeights[stage].withUnsafeBufferPointer { k in
                pointwiseBiases[stage].withUnsafeBufferPointer { bias in
                    ConformerKernels.pointwiseConvolution(
                        input: b, inChannels: C, pixels: pixels, weights: k.baseAddress!, bias: bias.baseAddress!, outChannels: C,
                        relu: true, output: a, pool: pool)
                }
            }
        }
        // Flatten each time step channel-major: row t = (h[0][t][·], h[1][t][·], ...).
        let flat = Rows(base: b, count: T3, width: C * F3)
        for t in 0..<T3 {
            for c in 0..<C { flat[t].advanced(by: c * F3).update(from: a + (c * T3 + t) * F3, count: F3) }
        }
        return out(flat, into: w.x, pool)
    }
}

/// The feed-forward module of a Conformer block: `FFN(x) = SiLU(LN(x) W_upᵀ + b_up) W_downᵀ
/// + b_down` (`ffn_norm`, `ffn_up`, `ffn_down`; the second one `_1`). The block adds half
/// of it to the residual stream (the "macaron" pair of half-step FFNs).
struct ConformerFeedForward: Sendable {
    let norm: EncoderLayerNorm
    let up: EncoderLinear  // [ff, d]
    let down: EncoderLinear  // [d, ff]

    func callAsFunction(_ x: Rows, _ w: AudioWorkspace, _ pool: ThreadPool) -> Rows {
        let h = up(norm(x, into: w.normed, pool), into: w.hidden, pool)
        EncoderKernels.silu(h.base, count: h.count * h.width, pool: pool)
        return down(h, into: w.mixed, pool)
    }
}

/// Multi-head self-attention with Transformer-XL relative positions (NeMo's `rel_pos`;
/// Dai et al., 2019), over the whole sequence, no mask:
///
/// ```
/// q, k, v = x W_qᵀ + b_q, x W_kᵀ + b_k, x W_vᵀ + b_v         attn_q, attn_k, attn_v
/// p       = P W_posᵀ                                    P: the sinusoids of distances T-1 … -(T-1); linear_pos
/// score_h(i, j) = ((q_i + u_h) · k_j + (q_i + v_h) · p_(T-1-i+j)) / √d_h    pos_bias_u, pos_bias_v
/// out     = concat_h(softmax_j(score_h) v) W_oᵀ + b_o    attn_out
/// ```
struct RelativePositionSelfAttention: Sendable {
    let query, key, value, output: EncoderLinear
    let positionProjection: EncoderLinear  // [d, table width], no bias
    let biasU, biasV: [Float]  // [heads][d_h] each
    let heads: Int

    func callAsFunction(_ x: Rows, _ w: AudioWorkspace, _ pool: ThreadPool) -> Rows {
        let hd = x.width / heads
        let q = query(x, into: w.q, pool), k = key(x, into: w.k, pool), v = value(x, into: w.v, pool)
        let p = positionProjection(w.sinusoids, into: w.positions, pool)
        biasU.withUnsafeBufferPointer { u in
            biasV.withUnsafeBufferPointer { bv in
                RelativePositionAttention.attend(
                    queries: q.base, keys: k.base, values: v.base, positions: p.base, stride: q.width,
                    biasU: u.baseAddress!, biasV: bv.baseAddress!, tokens: x.count, heads: heads, headDim: hd,
                    scale: 1 / Float(hd).squareRoot(), out: w.attended, pool: pool)
            }
        }
        return output(Rows(base: w.attended, count: x.count, width: x.width), into: w.mixed, pool)
    }
}

/// The Conformer convolution module (Gulati et al., 2020), batch norm folded:
///
/// ```
/// g = x W_pw1ᵀ + b_pw1                                      [T][2d]   conv_pw1
/// a = g[:, :d] ⊙ σ(g[:, d:])                                 [T][d]    GLU
/// y_t = Σ_k w_k ⊙ a_(t+k-(K-1)/2) + b_dw                     [T][d]    conv_dw (K = 9), zero padded
/// y = SiLU(y ⊙ s + β)                                                  conv_norm: the folded batch norm
/// out = y W_pw2ᵀ + b_pw2                                     [T][d]    conv_pw2
/// ```
struct ConformerConvolution: Sendable {
    let pointwise1: EncoderLinear  // [2d, d]
    let depthwiseKernel: [Float]  // [d][K]
    let depthwiseBias: [Float]  // [d]
    let kernelLength: Int  // K
    let normScale: [Float]  // [d]
    let normShift: [Float]  // [d]
    let pointwise2: EncoderLinear  // [d, d]

    func callAsFunction(_ x: Rows, _ w: AudioWorkspace, _ pool: ThreadPool) -> Rows {
        let d = x.width, T = x.count
        let g = pointwise1(x, into: w.hidden, pool)
        let a = Rows(base: w.gated, count: T, width: d)
        ConformerKernels.sigmoidGLU(g.base, rows: T, width: d, into: a.base)
        let y = Rows(base: w.convolved, count: T, width: d)
        depthwiseKernel.withUnsafeBufferPointer { k in
            depthwiseBias.withUnsafeBufferPointer { b in
                ConformerKernels.depthwiseConvolutionOverTime(
                    a.base, rows: T, width: d, kernel: k.baseAddress!, kernelLength: kernelLength, bias: b.baseAddress!, into: y.base,
                    pool: pool)
            }
        }
        normScale.withUnsafeBufferPointer { s in
            normShift.withUnsafeBufferPointer { beta in
                EncoderKernels.parallel(T, minChunk: 4, pool) { rows in
                    ConformerKernels.scaleShiftSiLU(
                        y[rows.lowerBound], rows: rows.count, width: d, scale: s.baseAddress!, shift: beta.baseAddress!)
                }
            }
        }
        return pointwise2(y, into: w.mixed, pool)
    }
}

/// One Conformer block, FastConformer's order (Gulati et al., 2020), LayerNorm before
/// every module:
///
/// ```
/// x = x + ½ FFN₁(x)                                 ffn_norm, ffn_up, ffn_down
/// x = x + MHSA(LN(x))                               ln1, attn_*, linear_pos, pos_bias_u/v
/// x = x + Conv(LN(x))                               norm_conv, conv_*
/// x = x + ½ FFN₂(x)                                 ffn_norm_1, ffn_up_1, ffn_down_1
/// x = LN(x)                                         ln2
/// ```
struct ConformerBlock: Sendable {
    let feedForward1, feedForward2: ConformerFeedForward
    let attentionNorm, convolutionNorm, outputNorm: EncoderLayerNorm
    let attention: RelativePositionSelfAttention
    let convolution: ConformerConvolution

    /// Runs the block on the rows `x`, in place.
    func callAsFunction(_ x: Rows, _ w: AudioWorkspace, _ pool: ThreadPool) {
        let n = x.count * x.width
        EncoderKernels.add(feedForward1(x, w, pool).base, scaledBy: 0.5, into: x.base, count: n, pool: pool)
        EncoderKernels.add(attention(attentionNorm(x, into: w.normed, pool), w, pool).base, into: x.base, count: n, pool: pool)
        EncoderKernels.add(convolution(convolutionNorm(x, into: w.normed, pool), w, pool).base, into: x.base, count: n, pool: pool)
        EncoderKernels.add(feedForward2(x, w, pool).base, scaledBy: 0.5, into: x.base, count: n, pool: pool)
        outputNorm(x, into: x.base, pool)
    }
}

/// LFM2-Audio's adapter from the encoder's width to the language model's:
///
/// ```
/// out = GELU(LN(x) W₁ᵀ + b₁) W₃ᵀ + b₃              mm.a.mlp.0 (LayerNorm), mm.a.mlp.1, mm.a.mlp.3
/// ```
///
/// GELU in its exact (erf) form.
struct LFM2AudioAdapter: Sendable {
    let norm: EncoderLayerNorm
    let up: EncoderLinear  // [projection_dim, d]
    let down: EncoderLinear  // [projection_dim, projection_dim]

    func callAsFunction(_ x: Rows, into out: UnsafeMutablePointer<Float>, _ w: AudioWorkspace, _ pool: ThreadPool) {
        let h = up(norm(x, into: w.normed, pool), into: w.hidden, pool)
        EncoderKernels.geluErf(h.base, count: h.count * h.width, pool: pool)
        _ = down(h, into: out, pool)
    }
}

/// The activation buffers of one encode of `tokens` audio tokens, sized for its length and
/// allocated once (so concurrent encodes share nothing but the read-only weights).
final class AudioWorkspace {
    let tokens: Int
    /// The residual stream `[T][d]`.
    let x: UnsafeMutablePointer<Float>
    /// A normalized copy of `x` (a block's module input) `[T][d]`.
    let normed: UnsafeMutablePointer<Float>
    /// A module's output before it is added to `x` `[T][d]`.
    let mixed: UnsafeMutablePointer<Float>
    /// A module's hidden rows: the feed-forward's `[T][ff]`, the convolution module's first
    /// pointwise output `[T][2d]`, the adapter's `[T][D]`.
    let hidden: UnsafeMutablePointer<Float>
    let q, k, v: UnsafeMutablePointer<Float>
    /// The attention heads' concatenated outputs `[T][d]`.
    let attended: UnsafeMutablePointer<Float>
    /// The convolution module's GLU output `[T][d]`.
    let gated: UnsafeMutablePointer<Float>
    /// The convolution module's depthwise convolution output `[T][d]`, then its folded batch
    /// norm and SiLU (in place).
    let convolved: UnsafeMutablePointer<Float>
    /// The sinusoid table of the relative distances `[2T-1][table width]`, shared by the blocks.
    let sinusoids: Rows
    /// `linear_pos` of the table `[2T-1][d]`.
    let positions: UnsafeMutablePointer<Float>
    /// The subsampling's image and channel planes, and its im2col matrix.
    let planes, planesB, im2col: UnsafeMutablePointer<Float>
    private let buffers: [FloatBuffer]

    init(_ hp: AudioHyperparameters, frames: Int) {
        let T = ConvolutionSubsampling.subsampled(frames), d = hp.width
        let C = hp.subsamplingChannels, F = hp.melBins
        let T1 = ConformerKernels.stride2Length(frames), F1 = ConformerKernels.stride2Length(F)
        let T2 = ConformerKernels.stride2Length(T1), F2 = ConformerKernels.stride2Length(F1)
        var arena = FloatArena()
        tokens = T
        x = arena.allocate(T * d)
        normed = arena.allocate(T * d)
        mixed = arena.allocate(T * d)
        hidden = arena.allocate(T * max(hp.feedForwardLength, 2 * d, hp.projectionDim))
        q = arena.allocate(T * d)
        k = arena.allocate(T * d)
        v = arena.allocate(T * d)
        attended = arena.allocate(T * d)
        gated = arena.allocate(T * d)
        convolved = arena.allocate(T * d)
        let table = RelativePositionAttention.sinusoids(tokens: T, width: hp.positionTableWidth)
        sinusoids = Rows(base: arena.allocate(table.count), count: 2 * T - 1, width: hp.positionTableWidth)
        sinusoids.base.update(from: table, count: table.count)
        positions = arena.allocate((2 * T - 1) * d)
        planesB = arena.allocate(C * T1 * F1)
        planes = arena.allocate(max(frames * F, C * T2 * F2))
        im2col = arena.allocate(ConformerKernels.convolution3x3Stride2ScratchCount(height: frames, width: F))
        buffers = arena.buffers
    }
}
