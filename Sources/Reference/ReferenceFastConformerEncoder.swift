import GGUF
import Kernels
import Models

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// LFM2-Audio's audio encoder written out plainly, the oracle `FastConformerEncoder` is tested
/// against: the FastConformer and its adapter in Double, plain loops over rows (no BLAS,
/// no SIMD kernels, no threads), every tensor dequantized once with the scalar reference
/// dequantizers, the convolutions as the convolutions themselves, the relative shift as
/// the score matrix against every table row and then the pick. It reads the keys and
/// tensors itself (`ReferenceProjectorFile`), apart from the encoder's loader
/// (docs/media-encoders.md reads it step by step).
///
/// It follows llama.cpp where llama.cpp departs from plain arithmetic on the stored
/// weights: the first convolution's input and kernel rounded to IEEE half (unless
/// `roundsFirstConvolutionToHalf` is false) and the sinusoid table's angles rounded to Float.
///
/// ```swift
/// let reference = try ReferenceFastConformerEncoder(file: mmproj, path: path)
/// let embeddings = try reference.encode(mel: mel, frames: frames)   // [tokens · D]
/// ```
public struct ReferenceFastConformerEncoder: Sendable {
    let path: String
    let roundsFirstConvolutionToHalf: Bool
    let melBins: Int, d: Int, layers: Int, heads: Int, outputs: Int
    /// Subsampling channels, FFN width, depthwise kernel length, sinusoid width.
    let channels: Int, ff: Int, kernel: Int, tableWidth: Int
    let eps: Double
    /// Every tensor the encoder reads, dequantized, by name.
    let tensors: [String: [Double]]

    /// Reads `clip.audio.*` and every tensor of an `lfm2a` mmproj file.
    public init(file: GGUFFile, path: String, roundsFirstConvolutionToHalf: Bool = true) throws(ProjectorError) {
        let f = try ReferenceProjectorFile(file: file, path: path, projectorType: "lfm2a")
        self.path = path
        self.roundsFirstConvolutionToHalf = roundsFirstConvolutionToHalf
        (d, heads, layers, outputs, eps) = try f.encoderShape("clip.audio.")
        melBins = try f.int("clip.audio.num_mel_bins")
        // What llama.cpp takes from the tensors rather than the keys.
        channels = try f.count("a.conv1d.0.weight") / 9
        ff = try f.count("a.blk.0.ffn_up.weight") / d
        kernel = try f.count("a.blk.0.conv_dw.weight") / d
        tableWidth = try f.count("a.blk.0.linear_pos.weight") / d

        // Every tensor, with the element count the keys imply.
        let C = channels, bins = (((melBins + 1) / 2 + 1) / 2 + 1) / 2
        var expected: [(String, Int)] = [("a.conv1d.0.weight", 9 * C), ("a.conv1d.0.bias", C)]
        for (dw, pw) in [(2, 3), (5, 6)] {
            expected += [("a.conv1d.\(dw).weight", 9 * C), ("a.conv1d.\(dw).bias", C)]
            expected += [("a.conv1d.\(pw).weight", C * C), ("a.conv1d.\(pw).bias", C)]
        }
        expected += [("a.pre_encode.out.weight", d * C * bins), ("a.pre_encode.out.bias", d)]
        for l in 0..<layers {
            let b = "a.blk.\(l)."
            for (name, outs, ins) in [
                ("ffn_norm", d, 1), ("ffn_up", ff, d), ("ffn_down", d, ff), ("ln1", d, 1), ("attn_q", d, d), ("attn_k", d, d),
                ("attn_v", d, d), ("attn_out", d, d), ("norm_conv", d, 1), ("conv_pw1", 2 * d, d), ("conv_dw", d, kernel),
                ("conv_norm", d, 1), ("conv_pw2", d, d), ("ffn_norm_1", d, 1), ("ffn_up_1", ff, d), ("ffn_down_1", d, ff), ("ln2", d, 1)
            ] {
                expected += [(b + name + ".weight", outs * ins), (b + name + ".bias", outs)]
            }
            expected += [(b + "linear_pos.weight", d * tableWidth), (b + "pos_bias_u", d), (b + "pos_bias_v", d)]
        }
        expected += [
            ("mm.a.mlp.0.weight", d), ("mm.a.mlp.0.bias", d), ("mm.a.mlp.1.weight", outputs * d), ("mm.a.mlp.1.bias", outputs),
            ("mm.a.mlp.3.weight", outputs * outputs), ("mm.a.mlp.3.bias", outputs)
        ]
        var tensors: [String: [Double]] = [:]
        for (name, count) in expected { tensors[name] = try f.tensor(name, count: count) }
        self.tensors = tensors
    }

    /// The embeddings of `mel` (`melBins · frames` floats, bin-major): `⌈⌈⌈frames/2⌉/2⌉/2⌉`
    /// rows of `projection_dim`.
    public func encode(mel: [Float], frames: Int) throws(ProjectorError) -> [Float] {
        guard frames >= 1, mel.count == melBins * frames else {
            throw .invalidInput("a log-mel input of \(frames) frames with \(mel.count) values (\(melBins) bins a frame)")
        }
        var x = subsample(mel, frames: frames)
        for l in 0..<layers { x = block(x, prefix: "a.blk.\(l).") }
        // Adapter: GELU(LN(x) W₁ᵀ + b₁) W₃ᵀ + b₃, GELU in its erf form
        let h = linear(layerNorm(x, "mm.a.mlp.0"), "mm.a.mlp.1").map { $0.map(ReferenceMath.geluErf) }
        return linear(h, "mm.a.mlp.3").flatMap { $0.map(Float.init) }
    }

    // MARK: - Subsampling

    /// The three stride-2 convolutions and `pre_encode.out`: `[T][d]`.
    func subsample(_ mel: [Float], frames: Int) -> [[Double]] {
        func half(_ v: Float) -> Double {
            Double(roundsFirstConvolutionToHalf ? FloatBits.halfToFloatReference(FloatBits.floatToHalfReference(v)) : v)
        }
        // The image [frame][bin], as llama.cpp transposes the stored [bin][frame] matrix.
        let image = [(0..<frames).map { t in (0..<melBins).map { f in half(mel[f * frames + t]) } }]  // one channel
        let C = channels
        let first = tensors["a.conv1d.0.weight"]!.map { half(Float($0)) }
        var h = convolve(image, kernels: first, bias: tensors["a.conv1d.0.bias"]!, depthwise: false).map {
            $0.map { $0.map { max(0, $0) } }
        }
        for (dw, pw) in [(2, 3), (5, 6)] {
            h = convolve(h, kernels: tensors["a.conv1d.\(dw).weight"]!, bias: tensors["a.conv1d.\(dw).bias"]!, depthwise: true)
            // Pointwise: out[o] = ReLU(b[o] + Σ_i W[o][i] in[i]) at every pixel.
            let w = tensors["a.conv1d.\(pw).weight"]!, b = tensors["a.conv1d.\(pw).bias"]!
            var out = h
            for o in 0..<C {
                for r in h[0].indices {
                    for c in h[0][r].indices {
                        var s = b[o]
                        for i in 0..<C { s += w[o * C + i] * h[i][r][c] }
                        out[o][r][c] = max(0, s)
                    }
                }
            }
            h = out
        }
        // Row t: the channels' frequency rows at time t, one after the other.
        let flat = h[0].indices.map { t in h.flatMap { $0[t] } }
        return linear(flat, "a.pre_encode.out")
    }

    /// A 3x3 convolution of stride 2 and zero padding 1 of `input` (`[channel][row][col]`),
    /// one input channel (then `kernels` is `[C][3][3]`, any number of output channels) or
    /// depthwise (`[C][3][3]`, channel by channel), plus a bias per output channel.
    func convolve(_ input: [[[Double]]], kernels: [Double], bias: [Double], depthwise: Bool) -> [[[Double]]] {
        let H = input[0].count, W = input[0][0].count, oh = (H + 1) / 2, ow = (W + 1) / 2
        return (0..<bias.count).map { c in
            let plane = input[depthwise ? c : 0]
            return (0..<oh).map { i in
                (0..<ow).map { j in
                    var s = bias[c]
                    for a in 0..<3 {
                        for b in 0..<3 {
                            let y = 2 * i - 1 + a, x = 2 * j - 1 + b
                            if y >= 0, y < H, x >= 0, x < W { s += kernels[c * 9 + a * 3 + b] * plane[y][x] }
                        }
                    }
                    return s
                }
            }
        }
    }

    // MARK: - A Conformer block

    func block(_ input: [[Double]], prefix b: String) -> [[Double]] {
        let T = input.count
        var x = input
        // x += ½ FFN₁(LN(x)): Linear, SiLU, Linear
        x = ReferenceMath.add(x, feedForward(layerNorm(x, b + "ffn_norm"), b + "ffn_up", b + "ffn_down"), scale: 0.5)
        // x += MHSA(LN(x))
        x = ReferenceMath.add(x, attention(layerNorm(x, b + "ln1"), prefix: b))
        // x += Conv(LN(x)): pointwise, GLU, depthwise over time, folded batch norm, SiLU, pointwise
        let g = linear(layerNorm(x, b + "norm_conv"), b + "conv_pw1")
        let a = g.map { row in (0..<d).map { c in row[c] / (1 + exp(-row[d + c])) } }
        let K = kernel, pad = (K - 1) / 2
        let w = tensors[b + "conv_dw.weight"]!, dwBias = tensors[b + "conv_dw.bias"]!
        let scale = tensors[b + "conv_norm.weight"]!, shift = tensors[b + "conv_norm.bias"]!
        let y = (0..<T).map { t in
            (0..<d).map { c in
                var s = dwBias[c]
                for k in 0..<K where t + k - pad >= 0 && t + k - pad < T { s += w[c * K + k] * a[t + k - pad][c] }
                return ReferenceMath.silu(s * scale[c] + shift[c])
            }
        }
        x = ReferenceMath.add(x, linear(y, b + "conv_pw2"))
        // x += ½ FFN₂(LN(x)); x = LN(x)
        x = ReferenceMath.add(x, feedForward(layerNorm(x, b + "ffn_norm_1"), b + "ffn_up_1", b + "ffn_down_1"), scale: 0.5)
        return layerNorm(x, b + "ln2")
    }

    func feedForward(_ x: [[Double]], _ up: String, _ down: String) -> [[Double]] {
        linear(linear(x, up).map { $0.map(ReferenceMath.silu) }, down)
    }

    /// Transformer-XL relative attention: `((q_i + u) · k_j + (q_i + v) · p_(T-1-i+j)) / √d_h`.
    func attention(_ x: [[Double]], prefix b: String) -> [[Double]] {
        let T = x.count, hd = d / heads
        let q = linear(x, b + "attn_q"), k = linear(x, b + "attn_k"), v = linear(x, b + "attn_v")
        let p = ReferenceMath.linear(Self.sinusoids(tokens: T, width: tableWidth), tensors[b + "linear_pos.weight"]!, nil, outputs: d)
        let u = tensors[b + "pos_bias_u"]!, bv = tensors[b + "pos_bias_v"]!
        var out = [[Double]](repeating: [Double](repeating: 0, count: d), count: T)
        for h in 0..<heads {
            let cols = (h * hd)..<((h + 1) * hd)
            for i in 0..<T {
                // Position scores against every table row, then the relative shift: key j
                // reads row T-1-i+j.
                let bd = (0..<(2 * T - 1)).map { r in cols.reduce(0.0) { $0 + (q[i][$1] + bv[$1]) * p[r][$1] } }
                let weights = ReferenceMath.softmax(
                    (0..<T).map { j in
                        (cols.reduce(0.0) { $0 + (q[i][$1] + u[$1]) * k[j][$1] } + bd[T - 1 - i + j]) / Double(hd).squareRoot()
                    })
                for c in cols { out[i][c] = (0..<T).reduce(0.0) { $0 + weights[$1] * v[$1][c] } }
            }
        }
        return linear(out, b + "attn_out")
    }

    /// The sinusoids of the distances `T-1 … -(T-1)`, `width` wide, formed as llama.cpp
    /// forms them: frequencies `exp(-ln(10000)/width · 2i)` in Double, the angle rounded to
    /// Float, `sinf` and `cosf`.
    static func sinusoids(tokens T: Int, width: Int) -> [[Double]] {
        (0..<(2 * T - 1)).map { r in
            (0..<width).map { c in
                let frequency = exp(-(log(10000.0) / Double(width)) * Double(2 * (c / 2)))
                let angle = Float(Double(T - 1 - r) * frequency)
                return Double(c % 2 == 0 ? sinf(angle) : cosf(angle))
            }
        }
    }

    // MARK: - The pieces

    func layerNorm(_ x: [[Double]], _ name: String) -> [[Double]] {
        ReferenceMath.layerNorm(x, tensors[name + ".weight"]!, tensors[name + ".bias"]!, eps: eps)
    }

    func linear(_ x: [[Double]], _ name: String) -> [[Double]] {
        let b = tensors[name + ".bias"]!
        return ReferenceMath.linear(x, tensors[name + ".weight"]!, b, outputs: b.count)
    }
}
