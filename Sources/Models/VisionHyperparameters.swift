import GGUF

/// The shape of an LFM2-VL vision encoder (a SigLIP2 NaFlex tower, pixel unshuffle and the
/// LFM2-VL projector), read from an mmproj file's `clip.vision.*` keys and its projector
/// tensors, and validated.
public struct VisionHyperparameters: Sendable, Equatable {
    /// `clip.vision.image_size`: the side, in pixels, of the square the position table was
    /// trained for (`positionGridSide · patchSize`).
    public var imageSize: Int
    /// `clip.vision.patch_size`: the side of a patch in pixels (16).
    public var patchSize: Int
    /// `clip.vision.embedding_length`: the tower's width `d`.
    public var width: Int
    /// `clip.vision.feed_forward_length`: the hidden width of each block's MLP.
    public var feedForwardLength: Int
    /// `clip.vision.block_count`: the number of encoder blocks.
    public var layerCount: Int
    /// `clip.vision.attention.head_count`.
    public var headCount: Int
    /// `clip.vision.attention.layer_norm_epsilon`: the tower's LayerNorm epsilon.
    public var layerNormEpsilon: Float
    /// `clip.vision.image_mean`: per RGB channel, the `mean` of the normalization
    /// `(u8 / 255 - mean) / std` the preprocessing applies.
    public var imageMean: [Float]
    /// `clip.vision.image_std`: per RGB channel, the `std` of that normalization (never 0).
    public var imageStd: [Float]
    /// `clip.vision.projector.scale_factor`: the pixel unshuffle factor `s` (2): `s x s`
    /// patches become one token of `s² d` values.
    public var mergeFactor: Int
    /// The projector's hidden width (`mm.1`'s outputs).
    public var projectorHiddenWidth: Int
    /// `clip.vision.projection_dim`: the projector's output width (`mm.2`'s outputs), which
    /// must be the language model's embedding width.
    public var projectionDim: Int
    /// Whether the projector normalizes its input (`mm.input_norm`; optional in LFM2-VL).
    public var projectorInputNorm: Bool

    /// Width of one attention head.
    public var headDim: Int { width / headCount }
    /// Side of the position table's square grid (`image_size / patch_size`: 16).
    public var positionGridSide: Int { imageSize / patchSize }
    /// Width of a token after pixel unshuffle (`s² d`).
    public var mergedWidth: Int { width * mergeFactor * mergeFactor }
    /// Values in one patch: 3 channels of `patchSize²` pixels.
    public var patchValues: Int { 3 * patchSize * patchSize }

    /// The LayerNorm epsilon of the projector's input norm: PyTorch's `nn.LayerNorm`
    /// default, which llama.cpp hard-codes for `lfm2`.
    public static let projectorNormEpsilon: Float = 1e-5

    /// Reads and checks the keys (the file must already be known to be a `clip` file of
    /// projector type `lfm2`).
    static func reading(_ r: ProjectorFileReader) throws(ProjectorError) -> VisionHyperparameters {
        let p = "clip.vision."
        try r.requireEncoder("vision")
        // The tower's activation: llama.cpp takes GELU (tanh) from clip.use_gelu, SiLU from
        // clip.use_silu, and quick GELU when neither is set; LFM2-VL conversions set use_gelu.
        guard try r.optionalBool("clip.use_gelu") == true, try r.optionalBool("clip.use_silu") != true else {
            let value = r.metadata.contains("clip.use_gelu") ? "false (or clip.use_silu true)" : "absent"
            throw .invalidValue(
                path: r.path, key: "clip.use_gelu", value: value,
                reason: "LFM2-VL's SigLIP2 tower uses GELU in its tanh form (clip.use_gelu true); other activations are not implemented")
        }
        let width = try r.int(p + "embedding_length", in: 1...8192)
        let heads = try r.int(p + "attention.head_count", in: 1...256)
        guard width % heads == 0 else {
            throw .invalidValue(
                path: r.path, key: p + "attention.head_count", value: String(heads), reason: "must divide the width \(width)")
        }
        if let kv = try r.optionalInt(p + "attention.head_count_kv", in: 0...Int.max), kv != heads {
            throw .invalidValue(
                path: r.path, key: p + "attention.head_count_kv", value: String(kv), reason: "must equal the head count \(heads)")
        }
        if let key = try r.optionalInt(p + "attention.key_length", in: 0...Int.max), key != width / heads {
            throw .invalidValue(
                path: r.path, key: p + "attention.key_length", value: String(key), reason: "must be width / heads = \(width / heads)")
        }
        let patch = try r.int(p + "patch_size", in: 1...64)
        let imageSize = try r.int(p + "image_size", in: 1...(64 * 256))
        guard imageSize % patch == 0, imageSize / patch <= 256 else {
            throw .invalidValue(
                path: r.path, key: p + "image_size", value: String(imageSize),
                reason: "must be a multiple of the patch size \(patch), at most 256 patches per side")
        }
        let merge = try r.int(p + "projector.scale_factor", in: 2...8)
        let std = try r.floats(p + "image_std", count: 3)
        guard std.allSatisfy({ $0 != 0 }) else {
            throw .invalidValue(path: r.path, key: p + "image_std", value: "\(std)", reason: "must not be 0")
        }
        var hp = VisionHyperparameters(
            imageSize: imageSize, patchSize: patch, width: width,
            feedForwardLength: try r.int(p + "feed_forward_length", in: 1...65_536),
            layerCount: try r.int(p + "block_count", in: 1...256),
            headCount: heads,
            layerNormEpsilon: try r.float(p + "attention.layer_norm_epsilon", in: Double(Float.leastNormalMagnitude)...0.1),
            imageMean: try r.floats(p + "image_mean", count: 3), imageStd: std,
            mergeFactor: merge, projectorHiddenWidth: 0,
            projectionDim: try r.int(p + "projection_dim", in: 1...65_536),
            projectorInputNorm: r.has("mm.input_norm.weight") || r.has("mm.input_norm.bias"))
        // The projector's hidden width is what mm.1 says (checked with its tensor).
        guard let mm1 = r.file.tensor(named: "mm.1.weight") else { throw .missingTensor(path: r.path, name: "mm.1.weight") }
        guard mm1.shape.count == 2, (1...65_536).contains(mm1.shape[1]) else {
            throw .tensorShape(path: r.path, name: "mm.1.weight", expected: [hp.mergedWidth, hp.projectionDim], found: mm1.shape)
        }
        hp.projectorHiddenWidth = mm1.shape[1]
        return hp
    }
}

/// What the image preprocessing of an LFM2-VL encoder needs from the mmproj file, with the
/// limits llama.cpp fixes for the `lfm2` projector (`set_limit_image_tokens(64, 256)`).
/// A slice handed to the encoder has sides that are multiples of ``alignment`` and holds
/// `(width / alignment) · (height / alignment)` image tokens.
public struct ImagePreprocessing: Sendable, Equatable {
    /// Side of a patch in pixels (16).
    public var patchSize: Int
    /// The pixel unshuffle factor (2): one image token covers `mergeFactor²` patches.
    public var mergeFactor: Int
    /// Fewest image tokens a slice is resized to (llama.cpp: 64 for `lfm2`).
    public var minImageTokens: Int
    /// Most image tokens a slice is resized to (llama.cpp: 256 for `lfm2`).
    public var maxImageTokens: Int
    /// Per RGB channel, the `mean` of the normalization `(u8 / 255 - mean) / std`.
    public var imageMean: [Float]
    /// Per RGB channel, the `std` of that normalization.
    public var imageStd: [Float]

    /// Pixels per side of one image token: `patchSize · mergeFactor` (32).
    public var alignment: Int { patchSize * mergeFactor }
    /// The smallest pixel count of a resized slice: `minImageTokens · alignment²` (65,536).
    public var minPixels: Int { minImageTokens * alignment * alignment }
    /// The largest pixel count of a resized slice: `maxImageTokens · alignment²` (262,144).
    public var maxPixels: Int { maxImageTokens * alignment * alignment }
}
