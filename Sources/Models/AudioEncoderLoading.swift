import GGUF
import Kernels

/// Reads an audio projector GGUF by llama.cpp's key and tensor names (`clip-impl.h`), with
/// every key's type and range and every tensor's shape and type checked, errors naming the
/// file. Shapes are in ggml order (`[cols, rows]` for a matrix, the reverse of PyTorch's).
struct ProjectorReader {
    let file: GGUFFile
    let name: String

    var metadata: GGUFMetadata { file.metadata }

    // MARK: - Keys

    func string(_ key: String) throws(AudioEncoderError) -> String {
        guard let value = metadata[key] else { throw .missingKey(file: name, key: key) }
        guard case .string(let s) = value else {
            throw .invalidValue(file: name, key: key, value: value.typeDescription, reason: "must be a string")
        }
        return s
    }

    /// An integer key within `range`.
    func int(_ key: String, in range: ClosedRange<Int>) throws(AudioEncoderError) -> Int {
        guard let value = metadata[key] else { throw .missingKey(file: name, key: key) }
        guard let i = value.intValue else {
            throw .invalidValue(file: name, key: key, value: value.typeDescription, reason: "must be an integer in \(range)")
        }
        guard range.contains(i) else { throw .invalidValue(file: name, key: key, value: String(i), reason: "must be in \(range)") }
        return i
    }

    // MARK: - Hyper-parameters

    /// The `clip.*` keys of an `lfm2a` audio projector, checked against the tensors that
    /// carry the rest of the shape.
    func audioHyperparameters() throws(AudioEncoderError) -> AudioEncoderHyperparameters {
        let architecture = try string("general.architecture")
        guard architecture == "clip" else { throw .notAProjector(file: name, architecture: architecture) }
        // llama.cpp reads clip.projector_type, and clip.audio.projector_type in files with
        // several modalities that lack the first.
        let typeKey = metadata.contains("clip.projector_type") ? "clip.projector_type" : "clip.audio.projector_type"
        let projector = try string(typeKey)
        guard AudioEncoder.projectorTypes.contains(projector) else {
            throw .unsupportedProjectorType(file: name, found: projector, supported: AudioEncoder.projectorTypes)
        }
        guard case .bool(true) = metadata["clip.has_audio_encoder"] else { throw .noAudioEncoder(file: name) }

        let melBins = try int("clip.audio.num_mel_bins", in: 1...4096)
        let width = try int("clip.audio.embedding_length", in: 1...65536)
        // Required by llama.cpp, but it holds d for LFM2-Audio: the width comes from ffn_up.
        _ = try int("clip.audio.feed_forward_length", in: 1...(1 << 20))
        let blocks = try int("clip.audio.block_count", in: 1...1024)
        let heads = try int("clip.audio.attention.head_count", in: 1...width)
        guard width % heads == 0 else {
            throw .invalidValue(
                file: name, key: "clip.audio.attention.head_count", value: String(heads),
                reason: "must divide clip.audio.embedding_length (\(width))")
        }
        let epsKey = "clip.audio.attention.layer_norm_epsilon"
        guard let epsValue = metadata[epsKey] else { throw .missingKey(file: name, key: epsKey) }
        guard let eps = epsValue.doubleValue, eps.isFinite, eps > 0, eps < 1 else {
            throw .invalidValue(
                file: name, key: epsKey, value: epsValue.doubleValue.map { String($0) } ?? epsValue.typeDescription,
                reason: "must be a number in (0, 1)")
        }
        let projection = try int("clip.audio.projection_dim", in: 1...65536)

        let first = try tensor("a.conv1d.0.weight")
        guard first.shape.count == 4, first.shape[0] == 3, first.shape[1] == 3, first.shape[2] == 1, (1...4096).contains(first.shape[3])
        else {
            throw .tensorShapeMismatch(file: name, name: first.name, expected: [3, 3, 1, first.shape.last ?? 1], found: first.shape)
        }
        let ffn = try tensor("a.blk.0.ffn_up.weight")
        guard ffn.shape.count == 2, ffn.shape[0] == width, ffn.shape[1] <= (1 << 20) else {
            throw .tensorShapeMismatch(file: name, name: ffn.name, expected: [width, ffn.shape.last ?? 1], found: ffn.shape)
        }
        let dw = try tensor("a.blk.0.conv_dw.weight")
        guard dw.shape.count == 2, dw.shape[1] == width, dw.shape[0] % 2 == 1, dw.shape[0] <= 255 else {
            throw .tensorShapeMismatch(file: name, name: dw.name, expected: [9, width], found: dw.shape)
        }
        let pos = try tensor("a.blk.0.linear_pos.weight")
        guard pos.shape.count == 2, pos.shape[1] == width, pos.shape[0] % 2 == 0, pos.shape[0] <= 65536 else {
            throw .tensorShapeMismatch(file: name, name: pos.name, expected: [512, width], found: pos.shape)
        }
        // llama.cpp takes the output width from the audio-code table and asserts it holds
        // at least frames / 2 rows.
        let table = try tensor("a.position_embd.weight")
        guard table.shape.count == 2, table.shape[0] == projection, table.shape[1] <= (1 << 24) else {
            throw .tensorShapeMismatch(file: name, name: table.name, expected: [projection, table.shape.last ?? 1], found: table.shape)
        }
        return AudioEncoderHyperparameters(
            melBins: melBins, width: width, feedForwardLength: ffn.shape[1], blockCount: blocks, headCount: heads,
            layerNormEpsilon: Float(eps), projectionDim: projection, subsamplingChannels: first.shape[3],
            convolutionKernelLength: dw.shape[0], positionTableWidth: pos.shape[0], positionRows: table.shape[1])
    }

    // MARK: - Tensors

    func tensor(_ tensorName: String) throws(AudioEncoderError) -> GGUFTensorInfo {
        guard let t = file.tensor(named: tensorName) else { throw .missingTensor(file: name, name: tensorName) }
        return t
    }

    /// Formats small tensors (biases, norms, kernels) may be stored in: copied out as F32.
    static let floatTypes: [GGMLType] = [.f32, .f16, .bf16]

    /// A float tensor of exactly `shape` (ggml order), as F32 values in file order.
    func floats(_ tensorName: String, shape: [Int]) throws(AudioEncoderError) -> [Float] {
        let t = try tensor(tensorName)
        guard t.shape == shape else { throw .tensorShapeMismatch(file: name, name: tensorName, expected: shape, found: t.shape) }
        guard Self.floatTypes.contains(t.type) else {
            throw .unsupportedTensorType(file: name, name: tensorName, type: t.type, allowed: "F32, F16 or BF16")
        }
        var out = [Float](repeating: 0, count: t.elementCount)
        let src = file.data(for: t).baseAddress!
        let rowBytes = t.type.typeSize * t.rowLength
        out.withUnsafeMutableBufferPointer { buf in
            for r in 0..<t.rowCount {
                t.type.dequantizeRow(src + r * rowBytes, into: buf.baseAddress! + r * t.rowLength, count: t.rowLength)
            }
        }
        return out
    }

    /// A vector of `count` floats: a tensor whose dimensions are all 1 but one of `count`
    /// (a bias may be stored `[count]` or, for a convolution, `[1, 1, count]`).
    func vector(_ tensorName: String, count: Int) throws(AudioEncoderError) -> [Float] {
        let t = try tensor(tensorName)
        guard t.shape.filter({ $0 != 1 }) == (count == 1 ? [] : [count]) else {
            throw .tensorShapeMismatch(file: name, name: tensorName, expected: [count], found: t.shape)
        }
        return try floats(tensorName, shape: t.shape)
    }

    /// `W` of `rows x cols` (`base.weight`, any type with kernels) and, when `bias`, the
    /// vector `base.bias`.
    func linear(_ base: String, rows: Int, cols: Int, bias: Bool = true) throws(AudioEncoderError) -> EncoderLinear {
        let weightName = base + ".weight"
        let t = try tensor(weightName)
        guard t.shape == [cols, rows] else {
            throw .tensorShapeMismatch(file: name, name: weightName, expected: [cols, rows], found: t.shape)
        }
        let matrix: WeightMatrix
        do {
            matrix = try WeightMatrix(type: t.type, rows: rows, cols: cols, data: file.data(for: t).baseAddress!)
        } catch {
            throw .unsupportedTensorType(
                file: name, name: weightName, type: t.type, allowed: GGMLType.kernelTypes.map(\.description).joined(separator: ", "))
        }
        return EncoderLinear(name: weightName, matrix: matrix, bias: bias ? try vector(base + ".bias", count: rows) : nil)
    }

    func layerNorm(_ base: String, width: Int, epsilon: Float) throws(AudioEncoderError) -> LayerNorm {
        LayerNorm(weight: try vector(base + ".weight", count: width), bias: try vector(base + ".bias", count: width), epsilon: epsilon)
    }

    // MARK: - Modules

    func subsampling(_ hp: AudioEncoderHyperparameters) throws(AudioEncoderError) -> ConvolutionSubsampling {
        let C = hp.subsamplingChannels
        let F3 = ConvolutionSubsampling.subsampled(hp.melBins)
        return ConvolutionSubsampling(
            channels: C, melBins: hp.melBins,
            firstKernel: try floats("a.conv1d.0.weight", shape: [3, 3, 1, C]),
            firstBias: try vector("a.conv1d.0.bias", count: C),
            depthwiseKernels: [try floats("a.conv1d.2.weight", shape: [3, 3, 1, C]), try floats("a.conv1d.5.weight", shape: [3, 3, 1, C])],
            depthwiseBiases: [try vector("a.conv1d.2.bias", count: C), try vector("a.conv1d.5.bias", count: C)],
            pointwiseWeights: [try floats("a.conv1d.3.weight", shape: [1, 1, C, C]), try floats("a.conv1d.6.weight", shape: [1, 1, C, C])],
            pointwiseBiases: [try vector("a.conv1d.3.bias", count: C), try vector("a.conv1d.6.bias", count: C)],
            out: try linear("a.pre_encode.out", rows: hp.width, cols: C * F3))
    }

    func block(_ i: Int, _ hp: AudioEncoderHyperparameters) throws(AudioEncoderError) -> ConformerBlock {
        let b = "a.blk.\(i).", d = hp.width, ff = hp.feedForwardLength, eps = hp.layerNormEpsilon
        let H = hp.headCount, hd = hp.headDim, K = hp.convolutionKernelLength
        func feedForward(_ suffix: String) throws(AudioEncoderError) -> ConformerFeedForward {
            ConformerFeedForward(
                norm: try layerNorm(b + "ffn_norm" + suffix, width: d, epsilon: eps),
                up: try linear(b + "ffn_up" + suffix, rows: ff, cols: d),
                down: try linear(b + "ffn_down" + suffix, rows: d, cols: ff))
        }
        return ConformerBlock(
            feedForward1: try feedForward(""),
            attentionNorm: try layerNorm(b + "ln1", width: d, epsilon: eps),
            attention: RelativePositionSelfAttention(
                wq: try linear(b + "attn_q", rows: d, cols: d), wk: try linear(b + "attn_k", rows: d, cols: d),
                wv: try linear(b + "attn_v", rows: d, cols: d), wo: try linear(b + "attn_out", rows: d, cols: d),
                positionProjection: try linear(b + "linear_pos", rows: d, cols: hp.positionTableWidth, bias: false),
                biasU: try floats(b + "pos_bias_u", shape: [hd, H]), biasV: try floats(b + "pos_bias_v", shape: [hd, H]),
                heads: H, headDim: hd),
            convolutionNorm: try layerNorm(b + "norm_conv", width: d, epsilon: eps),
            convolution: ConformerConvolution(
                pointwise1: try linear(b + "conv_pw1", rows: 2 * d, cols: d),
                depthwiseKernel: try floats(b + "conv_dw.weight", shape: [K, d]),
                depthwiseBias: try vector(b + "conv_dw.bias", count: d),
                kernelLength: K,
                normScale: try vector(b + "conv_norm.weight", count: d),
                normShift: try vector(b + "conv_norm.bias", count: d),
                pointwise2: try linear(b + "conv_pw2", rows: d, cols: d)),
            feedForward2: try feedForward("_1"),
            outputNorm: try layerNorm(b + "ln2", width: d, epsilon: eps))
    }

    func adapter(_ hp: AudioEncoderHyperparameters) throws(AudioEncoderError) -> LFM2AudioAdapter {
        LFM2AudioAdapter(
            norm: try layerNorm("mm.a.mlp.0", width: hp.width, epsilon: hp.layerNormEpsilon),
            up: try linear("mm.a.mlp.1", rows: hp.projectionDim, cols: hp.width),
            down: try linear("mm.a.mlp.3", rows: hp.projectionDim, cols: hp.projectionDim))
    }
}
