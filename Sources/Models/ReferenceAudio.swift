import GGUF
import Kernels

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// LFM2-Audio's audio encoder written out plainly: the FastConformer and its adapter from a
/// log-mel matrix to embeddings, in Double, one thread, plain loops (no BLAS, no SIMD
/// kernels, no thread pool), every weight dequantized with the scalar reference
/// dequantizers (`GGMLType.dequantizeRowReference`) and the keys read from the file's raw
/// metadata, apart from `AudioEncoder`'s loader. It is the oracle `AudioEncoderTests` holds
/// the engine to, and a first read of the encoder (docs/audio-encoder.md).
///
/// It follows llama.cpp where llama.cpp departs from plain arithmetic on the stored
/// weights: the first convolution's input and kernel rounded to IEEE half (unless
/// `roundsFirstConvolutionToHalf` is false) and the sinusoid table's angles rounded to Float.
///
/// ```swift
/// let reference = try ReferenceAudioEncoder(file: mmproj)
/// let embeddings = try reference.encode(mel: mel, frames: frames)   // [tokens x width]
/// ```
public final class ReferenceAudioEncoder {
    /// The projector file it reads.
    public let file: GGUFFile
    let name: String
    let roundsFirstConvolutionToHalf: Bool
    let melBins: Int, width: Int, blockCount: Int, heads: Int, projectionDim: Int
    let epsilon: Double
    /// Tensors dequantized so far, as Double.
    var tensors: [String: [Double]] = [:]

    /// Reads the hyper-parameters of the `lfm2a` projector in `file`; tensors are read when
    /// `encode` first needs them.
    public init(file: GGUFFile, name: String = "mmproj", roundsFirstConvolutionToHalf: Bool = true) throws(AudioEncoderError) {
        self.file = file
        self.name = name
        self.roundsFirstConvolutionToHalf = roundsFirstConvolutionToHalf
        func value(_ key: String) throws(AudioEncoderError) -> GGUFValue {
            guard let v = file.metadata[key] else { throw .missingKey(file: name, key: key) }
            return v
        }
        func positive(_ key: String) throws(AudioEncoderError) -> Int {
            let v = try value(key)
            guard let i = v.intValue, i > 0 else {
                throw .invalidValue(file: name, key: key, value: "\(v)", reason: "must be a positive integer")
            }
            return i
        }
        guard case .string(let projector) = try value("clip.projector_type"), projector == "lfm2a" else {
            throw .unsupportedProjectorType(file: name, found: "\(try value("clip.projector_type"))", supported: ["lfm2a"])
        }
        melBins = try positive("clip.audio.num_mel_bins")
        width = try positive("clip.audio.embedding_length")
        blockCount = try positive("clip.audio.block_count")
        heads = try positive("clip.audio.attention.head_count")
        projectionDim = try positive("clip.audio.projection_dim")
        let epsKey = "clip.audio.attention.layer_norm_epsilon"
        guard let eps = try value(epsKey).doubleValue, eps > 0 else {
            throw .invalidValue(file: name, key: epsKey, value: "\(try value(epsKey))", reason: "must be positive")
        }
        // The engine stores ε as a Float; so does llama.cpp.
        epsilon = Double(Float(eps))
        guard width % heads == 0 else {
            throw .invalidValue(file: name, key: "clip.audio.attention.head_count", value: String(heads), reason: "must divide the width")
        }
    }

    /// The embeddings of `mel` (`melBins x frames`, bin-major): `tokens x projectionDim`
    /// values, row by row.
    public func encode(mel: [Float], frames: Int) throws(AudioEncoderError) -> [Float] {
        guard frames >= 1 else { throw .inputTooShort(frames: frames, minimum: 1) }
        guard mel.count == melBins * frames else { throw .melShapeMismatch(values: mel.count, melBins: melBins, frames: frames) }
        var x = try subsample(mel, frames: frames)
        for l in 0..<blockCount { x = try block(x, layer: l) }
        // Adapter: GELU(LN(x) W₁ᵀ + b₁) W₃ᵀ + b₃, GELU(v) = v/2 · (1 + erf(v/√2)).
        var h = try linear(try layerNorm(x, "mm.a.mlp.0"), "mm.a.mlp.1")
        h = h.map { row in row.map { 0.5 * $0 * (1 + erf($0 / 2.0.squareRoot())) } }
        return try linear(h, "mm.a.mlp.3").flatMap { $0.map(Float.init) }
    }

    // MARK: - Subsampling

    /// The three stride-2 convolutions and `pre_encode.out`: `[T][d]`.
    func subsample(_ mel: [Float], frames: Int) throws(AudioEncoderError) -> [[Double]] {
        func half(_ v: Float) -> Double {
            Double(roundsFirstConvolutionToHalf ? FloatBits.halfToFloatReference(FloatBits.floatToHalfReference(v)) : v)
        }
        // The image [frame][bin], as llama.cpp transposes the stored [bin][frame] matrix.
        let image = [(0..<frames).map { t in (0..<melBins).map { f in half(mel[f * frames + t]) } }]  // one channel
        let C = try floats("a.conv1d.0.weight").count / 9
        let first = try weights("a.conv1d.0.weight", count: 9 * C).map { half(Float($0)) }
        var h = relu(convolve(image, kernels: first, bias: try weights("a.conv1d.0.bias", count: C), depthwise: false))
        for (dw, pw) in [(2, 3), (5, 6)] {
            h = convolve(
                h, kernels: try weights("a.conv1d.\(dw).weight", count: 9 * C), bias: try weights("a.conv1d.\(dw).bias", count: C),
                depthwise: true)
            // Pointwise: out[o] = b[o] + Σ_i W[o][i] in[i] at every pixel.
            let w = try weights("a.conv1d.\(pw).weight", count: C * C), b = try weights("a.conv1d.\(pw).bias", count: C)
            var out = h
            for o in 0..<C {
                for r in 0..<h[0].count {
                    for c in 0..<h[0][0].count {
                        var s = b[o]
                        for i in 0..<C { s += w[o * C + i] * h[i][r][c] }
                        out[o][r][c] = max(0, s)
                    }
                }
            }
            h = out
        }
        // Row t: the channels' frequency rows at time t, one after the other.
        let flat = (0..<h[0].count).map { t in h.flatMap { $0[t] } }
        return try linear(flat, "a.pre_encode.out")
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

    func relu(_ x: [[[Double]]]) -> [[[Double]]] { x.map { $0.map { $0.map { max(0, $0) } } } }

    // MARK: - A Conformer block

    func block(_ input: [[Double]], layer l: Int) throws(AudioEncoderError) -> [[Double]] {
        let b = "blk.\(l).", T = input.count
        var x = input
        // x += ½ FFN₁(LN(x)): Linear, SiLU, Linear
        x = add(x, try feedForward(try layerNorm(x, "a." + b + "ffn_norm"), "a." + b + "ffn_up", "a." + b + "ffn_down"), scale: 0.5)
        // x += MHSA(LN(x))
        x = add(x, try attention(try layerNorm(x, "a." + b + "ln1"), prefix: "a." + b))
        // x += Conv(LN(x))
        let g = try linear(try layerNorm(x, "a." + b + "norm_conv"), "a." + b + "conv_pw1")
        let a = g.map { row in (0..<width).map { c in row[c] / (1 + exp(-row[width + c])) } }  // GLU
        let kernel = try floats("a." + b + "conv_dw.weight")
        let K = kernel.count / width, pad = (K - 1) / 2
        let w = try weights("a." + b + "conv_dw.weight", count: K * width), dwBias = try weights("a." + b + "conv_dw.bias", count: width)
        let scale = try weights("a." + b + "conv_norm.weight", count: width), shift = try weights("a." + b + "conv_norm.bias", count: width)
        let y = (0..<T).map { t in
            (0..<width).map { c in
                var s = dwBias[c]
                for k in 0..<K where t + k - pad >= 0 && t + k - pad < T { s += w[c * K + k] * a[t + k - pad][c] }
                let v = s * scale[c] + shift[c]
                return v / (1 + exp(-v))  // SiLU
            }
        }
        x = add(x, try linear(y, "a." + b + "conv_pw2"))
        // x += ½ FFN₂(LN(x)); x = LN(x)
        x = add(x, try feedForward(try layerNorm(x, "a." + b + "ffn_norm_1"), "a." + b + "ffn_up_1", "a." + b + "ffn_down_1"), scale: 0.5)
        return try layerNorm(x, "a." + b + "ln2")
    }

    func feedForward(_ x: [[Double]], _ up: String, _ down: String) throws(AudioEncoderError) -> [[Double]] {
        try linear(try linear(x, up).map { $0.map { $0 / (1 + exp(-$0)) } }, down)
    }

    /// Transformer-XL relative attention: `((q_i + u) · k_j + (q_i + v) · p_(T-1-i+j)) / √d_h`.
    func attention(_ x: [[Double]], prefix: String) throws(AudioEncoderError) -> [[Double]] {
        let T = x.count, hd = width / heads
        let q = try linear(x, prefix + "attn_q"), k = try linear(x, prefix + "attn_k"), v = try linear(x, prefix + "attn_v")
        let p = try linear(
            try sinusoids(tokens: T, width: try floats(prefix + "linear_pos.weight").count / width), prefix + "linear_pos", bias: false)
        let u = try weights(prefix + "pos_bias_u", count: width), bv = try weights(prefix + "pos_bias_v", count: width)
        var out = [[Double]](repeating: [Double](repeating: 0, count: width), count: T)
        for h in 0..<heads {
            let cols = (h * hd)..<((h + 1) * hd)
            for i in 0..<T {
                // Position scores against every table row, then the relative shift: key j
                // reads row T-1-i+j.
                let bd = (0..<(2 * T - 1)).map { r in cols.reduce(0.0) { $0 + (q[i][$1] + bv[$1]) * p[r][$1] } }
                let scores = (0..<T).map { j in
                    (cols.reduce(0.0) { $0 + (q[i][$1] + u[$1]) * k[j][$1] } + bd[T - 1 - i + j]) / Double(hd).squareRoot()
                }
                let top = scores.max()!
                let e = scores.map { exp($0 - top) }
                let sum = e.reduce(0, +)
                for c in cols { out[i][c] = (0..<T).reduce(0.0) { $0 + e[$1] / sum * v[$1][c] } }
            }
        }
        return try linear(out, prefix + "attn_out")
    }

    /// The sinusoids of the distances `T-1 … -(T-1)`, `width` wide, formed as llama.cpp
    /// forms them: frequencies `exp(-ln(10000)/width · 2i)` in Double, the angle rounded to
    /// Float, `sinf` and `cosf`.
    func sinusoids(tokens T: Int, width: Int) throws(AudioEncoderError) -> [[Double]] {
        (0..<(2 * T - 1)).map { r in
            (0..<width).map { c in
                let i = c / 2
                let frequency = exp(-(log(10000.0) / Double(width)) * Double(2 * i))
                let angle = Float(Double(T - 1 - r) * frequency)
                return Double(c % 2 == 0 ? sinf(angle) : cosf(angle))
            }
        }
    }

    // MARK: - Plain operations

    /// `x Wᵀ + b` with `W` = `base.weight` (`rows x cols`) and `b` = `base.bias`.
    func linear(_ x: [[Double]], _ base: String, bias: Bool = true) throws(AudioEncoderError) -> [[Double]] {
        let t = try info(base + ".weight")
        let cols = t.shape[0], rows = t.elementCount / cols
        let w = try weights(base + ".weight", count: rows * cols)
        let b = bias ? try weights(base + ".bias", count: rows) : [Double](repeating: 0, count: rows)
        return try x.map { (row) throws(AudioEncoderError) -> [Double] in
            guard row.count == cols else {
                throw .tensorShapeMismatch(file: name, name: t.name, expected: [row.count, rows], found: t.shape)
            }
            return (0..<rows).map { r in (0..<cols).reduce(b[r]) { $0 + w[r * cols + $1] * row[$1] } }
        }
    }

    /// `(x - mean) / sqrt(var + ε) · γ + β` per row (`base.weight`, `base.bias`).
    func layerNorm(_ x: [[Double]], _ base: String) throws(AudioEncoderError) -> [[Double]] {
        let n = x[0].count
        let g = try weights(base + ".weight", count: n), b = try weights(base + ".bias", count: n)
        return x.map { row in
            let mean = row.reduce(0, +) / Double(n)
            let variance = row.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / Double(n)
            return (0..<n).map { (row[$0] - mean) / (variance + epsilon).squareRoot() * g[$0] + b[$0] }
        }
    }

    func add(_ x: [[Double]], _ y: [[Double]], scale: Double = 1) -> [[Double]] {
        zip(x, y).map { zip($0, $1).map { $0 + scale * $1 } }
    }

    func info(_ tensorName: String) throws(AudioEncoderError) -> GGUFTensorInfo {
        guard let t = file.tensor(named: tensorName) else { throw .missingTensor(file: name, name: tensorName) }
        return t
    }

    /// A tensor's values in file order, dequantized by the scalar reference dequantizers.
    func floats(_ tensorName: String) throws(AudioEncoderError) -> [Double] {
        if let cached = tensors[tensorName] { return cached }
        let t = try info(tensorName)
        guard t.type.hasKernels else {
            throw .unsupportedTensorType(file: name, name: tensorName, type: t.type, allowed: "a type with kernels")
        }
        let src = file.data(for: t).baseAddress!
        let rowBytes = t.elementCount == 0 ? 0 : t.byteCount / t.rowCount
        var row = [Float](repeating: 0, count: t.rowLength)
        var out: [Double] = []
        out.reserveCapacity(t.elementCount)
        for r in 0..<t.rowCount {
            row.withUnsafeMutableBufferPointer {
                t.type.dequantizeRowReference(src + r * rowBytes, into: $0.baseAddress!, count: t.rowLength)
            }
            out += row.map(Double.init)
        }
        tensors[tensorName] = out
        return out
    }

    /// `floats`, checked to hold `count` values.
    func weights(_ tensorName: String, count: Int) throws(AudioEncoderError) -> [Double] {
        let values = try floats(tensorName)
        guard values.count == count else {
            throw .tensorShapeMismatch(file: name, name: tensorName, expected: [count], found: try info(tensorName).shape)
        }
        return values
    }
}
