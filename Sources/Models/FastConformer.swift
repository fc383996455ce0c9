import Kernels

// LFM2-Audio's audio encoder: a FastConformer (Rekesh et al., 2023, "Fast Conformer with
// Linearly Scalable Attention for Efficient Speech Recognition"; NeMo's `ConformerEncoder`
// with `dw_striding` subsampling and `rel_pos` attention) and the MLP adapter that maps its
// output to the language model's width. llama.cpp runs it as the `lfm2a` projector.
//
// ```
// mel [n_mels][T_mel]                                        the log-mel front end's output
//   → ConvolutionSubsampling (x8 in time and in frequency)   [T][d], T = ⌈⌈⌈T_mel/2⌉/2⌉/2⌉
//   → ConformerBlock × L                                     [T][d]
//   → LFM2AudioAdapter                                       [T][projection_dim]
// ```
//
// The blocks read the activations of an `AudioEncoderPass`, which owns every buffer of one
// encoding and runs the matrix products (docs/audio-encoder.md has the equations and
// shapes).

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

    /// The frequency bins left after the three stride-2 convolutions (F₃).
    var subsampledBins: Int { Self.subsampled(melBins) }

    /// A length after the three stride-2 convolutions: `⌈⌈⌈n/2⌉/2⌉/2⌉`.
    static func subsampled(_ n: Int) -> Int {
        ConformerKernels.stride2Length(ConformerKernels.stride2Length(ConformerKernels.stride2Length(n)))
    }

    /// `[T][d]` rows from the mel matrix (`melBins x frames`, bin-major as the front end
    /// stores it), into `e.x`. With `roundingToHalf`, the first convolution's input and
    /// kernel are rounded to IEEE half, as in llama.cpp (its `conv_2d` goes through an F16
    /// im2col).
    func callAsFunction(mel: UnsafePointer<Float>, frames: Int, roundingToHalf: Bool, _ e: AudioEncoderPass) -> Rows {
        let C = channels
        let T1 = ConformerKernels.stride2Length(frames), F1 = ConformerKernels.stride2Length(melBins)
        let T2 = ConformerKernels.stride2Length(T1), F2 = ConformerKernels.stride2Length(F1)
        let T3 = ConformerKernels.stride2Length(T2), F3 = ConformerKernels.stride2Length(F2)
        // The image: row t is frame t's mel bins (the transpose of the stored matrix).
        let image = e.planes
        for f in 0..<melBins {
            for t in 0..<frames { image[t * melBins + f] = mel[f * frames + t] }
        }
        let a = e.planesB, b = e.planes
        firstKernel.withUnsafeBufferPointer { k in
            firstBias.withUnsafeBufferPointer { bias in
                ConformerKernels.convolution3x3Stride2(
                    image: image, height: frames, width: melBins, kernels: k.baseAddress!, bias: bias.baseAddress!, channels: C,
                    roundingToHalf: roundingToHalf, output: a, scratch: e.im2col, pool: e.pool)
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
                        output: b, pool: e.pool)
                }
            }
            pointwiseWeights[stage].withUnsafeBufferPointer { w in
                pointwiseBiases[stage].withUnsafeBufferPointer { bias in
                    ConformerKernels.pointwiseConvolution(
                        input: b, inChannels: C, pixels: pixels, weights: w.baseAddress!, bias: bias.baseAddress!, outChannels: C,
                        relu: true, output: a, pool: e.pool)
                }
            }
        }
        // Flatten each time step channel-major: row t = (h[0][t][·], h[1][t][·], ...).
        let flat = Rows(base: b, count: T3, width: C * F3)
        for t in 0..<T3 {
            for c in 0..<C { flat[t].advanced(by: c * F3).update(from: a + (c * T3 + t) * F3, count: F3) }
        }
        return e.linear(out, flat, into: e.x.base)
    }
}

/// The feed-forward module of a Conformer block: `FFN(x) = SiLU(LN(x) W_upᵀ + b_up) W_downᵀ
/// + b_down` (`ffn_norm`, `ffn_up`, `ffn_down`; the second one `_1`). The block adds half
/// of it to the residual stream (the "macaron" pair of half-step FFNs).
struct ConformerFeedForward: Sendable {
    let norm: LayerNorm
    let up: EncoderLinear  // [ff, d]
    let down: EncoderLinear  // [d, ff]

    func callAsFunction(_ x: Rows, _ e: AudioEncoderPass) -> Rows {
        let h = e.linear(up, norm(x, into: e.normed, e), into: e.hidden)
        e.inParallel(rows: h.count) { rows in
            ConformerKernels.silu(h[rows.lowerBound], count: rows.count * h.width)
        }
        return e.linear(down, h, into: e.mixed)
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
    let wq: EncoderLinear
    let wk: EncoderLinear
    let wv: EncoderLinear
    let wo: EncoderLinear
    let positionProjection: EncoderLinear  // [d, table width], no bias
    let biasU: [Float]  // [heads][d_h]
    let biasV: [Float]  // [heads][d_h]
    let heads: Int
    let headDim: Int

    func callAsFunction(_ x: Rows, _ e: AudioEncoderPass) -> Rows {
        let q = e.linear(wq, x, into: e.q), k = e.linear(wk, x, into: e.k), v = e.linear(wv, x, into: e.v)
        let p = e.linear(positionProjection, e.sinusoids, into: e.positions)
        biasU.withUnsafeBufferPointer { u in
            biasV.withUnsafeBufferPointer { w in
                RelativePositionAttention.attend(
                    queries: q.base, keys: k.base, values: v.base, positions: p.base, stride: q.width,
                    biasU: u.baseAddress!, biasV: w.baseAddress!, tokens: x.count, heads: heads, headDim: headDim,
                    scale: 1 / Float(headDim).squareRoot(), out: e.attended.base, pool: e.pool)
            }
        }
        return e.linear(wo, e.attended, into: e.mixed)
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

    func callAsFunction(_ x: Rows, _ e: AudioEncoderPass) -> Rows {
        let d = x.width, T = x.count
        let g = e.linear(pointwise1, x, into: e.hidden)
        let a = Rows(base: e.attended.base, count: T, width: d)
        ConformerKernels.sigmoidGLU(g.base, rows: T, width: d, into: a.base)
        let y = Rows(base: e.normed, count: T, width: d)
        depthwiseKernel.withUnsafeBufferPointer { w in
            depthwiseBias.withUnsafeBufferPointer { b in
                ConformerKernels.depthwiseConvolutionOverTime(
                    a.base, rows: T, width: d, kernel: w.baseAddress!, kernelLength: kernelLength, bias: b.baseAddress!, into: y.base,
                    pool: e.pool)
            }
        }
        normScale.withUnsafeBufferPointer { s in
            normShift.withUnsafeBufferPointer { beta in
                e.inParallel(rows: T) { rows in
                    ConformerKernels.scaleShiftSiLU(
                        y[rows.lowerBound], rows: rows.count, width: d, scale: s.baseAddress!, shift: beta.baseAddress!)
                }
            }
        }
        return e.linear(pointwise2, y, into: e.mixed)
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
    let feedForward1: ConformerFeedForward
    let attentionNorm: LayerNorm
    let attention: RelativePositionSelfAttention
    let convolutionNorm: LayerNorm
    let convolution: ConformerConvolution
    let feedForward2: ConformerFeedForward
    let outputNorm: LayerNorm

    func callAsFunction(_ x: Rows, _ e: AudioEncoderPass) {
        e.add(feedForward1(x, e), scaledBy: 0.5, to: x)
        e.add(attention(attentionNorm(x, into: e.normed, e), e), to: x)
        e.add(convolution(convolutionNorm(x, into: e.normed, e), e), to: x)
        e.add(feedForward2(x, e), scaledBy: 0.5, to: x)
        _ = outputNorm(x, into: x.base, e)
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
    let norm: LayerNorm
    let up: EncoderLinear  // [projection_dim, d]
    let down: EncoderLinear  // [projection_dim, projection_dim]

    func callAsFunction(_ x: Rows, into out: UnsafeMutablePointer<Float>, _ e: AudioEncoderPass) -> Rows {
        let h = e.linear(up, norm(x, into: e.normed, e), into: e.hidden)
        e.inParallel(rows: h.count) { rows in
            ConformerKernels.geluErf(h[rows.lowerBound], count: rows.count * h.width)
        }
        return e.linear(down, h, into: out)
    }
}

/// LayerNorm (Ba et al., 2016) per row: `y = (x - mean) / sqrt(var + ε) ⊙ γ + β`.
struct LayerNorm: Sendable {
    let weight: [Float]  // γ
    let bias: [Float]  // β
    let epsilon: Float

    func callAsFunction(_ x: Rows, into y: UnsafeMutablePointer<Float>, _ e: AudioEncoderPass) -> Rows {
        let out = Rows(base: y, count: x.count, width: x.width)
        weight.withUnsafeBufferPointer { g in
            bias.withUnsafeBufferPointer { b in
                e.inParallel(rows: x.count) { rows in
                    ConformerKernels.layerNorm(
                        x[rows.lowerBound], rows: rows.count, width: x.width, weight: g.baseAddress!, bias: b.baseAddress!, eps: epsilon,
                        into: out[rows.lowerBound])
                }
            }
        }
        return out
    }
}

/// A weight matrix `W` (`rows x cols`, any stored type with kernels) and an optional bias:
/// `y = x Wᵀ + b` for rows of `x`.
struct EncoderLinear: Sendable {
    let name: String
    let matrix: WeightMatrix
    let bias: [Float]?

    var rows: Int { matrix.rows }
    var cols: Int { matrix.cols }
}
