import GGUF
import Kernels

/// LFM2-VL's vision encoder, loaded from an mmproj file (`general.architecture` `clip`,
/// `clip.projector_type` `lfm2`): a SigLIP2 NaFlex vision tower (Tschannen et al., 2025),
/// pixel unshuffle, and LFM2-VL's two-layer projector into the language model's embedding
/// space. One call encodes one preprocessed slice (an image, a tile or a thumbnail) of
/// `W x H` pixels, `W` and `H` multiples of `p·s` (32), into `(W/(p·s)) · (H/(p·s))`
/// embeddings of the language model's width:
///
/// ```
/// P  = patches(pixels)                    [n, 3p²]   n = (W/p)(H/p) patches, row-major
/// X  = P W_patchᵀ + b_patch               [n, d]     the conv patch embedding, as one product
/// X += resize(E_pos, W/p, H/p)                       16x16 table, antialiased bilinear
/// X  = X + Attention(LN₁(X))              }          for each of the L blocks (pre-norm,
/// X  = X + W₂ GELU(W₁ LN₂(X) + b₁) + b₂   }          every patch sees every patch)
/// X  = LN_post(X)
/// T  = unshuffle_s(X)                     [n/s², s²d] token (Y, X) = patches (sY+i, sX+j)
/// E  = mm₂ GELU(mm₁ LN(T) + b) + b        [n/s², D]  D = projection_dim
/// ```
///
/// Attention is multi-head with biases on q, k, v and the output (`1/sqrt(d/heads)` scale);
/// GELU is the tanh form throughout (the tower's `gelu_pytorch_tanh`; llama.cpp also uses it
/// in the projector, where LFM2-VL's configuration names the erf form). The steps are
/// llama.cpp's `clip_graph_siglip` for `PROJECTOR_TYPE_LFM2`; docs/media-encoders.md has the
/// shapes and the tensor names.
///
/// **Weights** stay in the mapped file in their stored type by default (F16 in an F16
/// conversion; F32, BF16 and the quantized types are accepted too): each product
/// dequantizes blocks of weight rows into small tiles and multiplies them with OpenBLAS
/// (`EncoderLinear`, `WeightMatrix.matmulByRowBlocks`). Dequantizing once at load instead
/// (`weights: .float32`) doubles the resident memory of an F16 file (LFM2-VL-450M's
/// 86M-parameter tower: 172 MB stored, 344 MB as F32; the 400M tower of the larger LFM2-VL
/// models 0.8 GB against 1.6 GB) to save one F16-to-F32 conversion per weight per slice: a
/// few percent of a slice's time, since every weight is used by `n` ≥ 64 patches. On-device
/// memory is the scarcer resource, so `.asStored` is the default.
///
/// **Threads**: everything runs on `pool` (pass the language model's,
/// `TransformerModel.pool`): the products by blocks of weight rows, attention one head per
/// task, the element-wise work (LayerNorm, GELU, bias and residual additions, im2col, the
/// position table) by rows. An encode allocates its activation buffers once
/// (`VisionWorkspace`), nothing inside its loops but the products' tiles; concurrent
/// encodes are safe (each has its own buffers; the pool runs one loop at a time).
public final class SigLIP2VisionEncoder: MediaEncoderProtocol {
    /// The file's path, as errors name it.
    public let path: String
    /// The mmproj file (its tensors are read in place).
    public let file: GGUFFile
    /// The tower's and projector's shape, from the file's keys and tensors.
    public let hyperparameters: VisionHyperparameters
    /// What the image preprocessing needs: patch size, merge factor, token limits, mean/std.
    public let preprocessing: ImagePreprocessing
    /// The threads of the products, attention and element-wise work.
    public let pool: ThreadPool
    /// How the weight matrices are held.
    public let weightStorage: MediaEncoder.WeightStorage
    let weights: VisionWeights

    /// The projector types this encoder runs.
    public static let projectorTypes = ["lfm2"]
    /// The modality whose key names the projector type in a file without
    /// `clip.projector_type` (`clip.vision.projector_type`).
    static let modality = "vision"
    /// The largest slice, in patches, an encode accepts: 4 times the 1,024 patches of the
    /// largest slice llama.cpp's `lfm2` preprocessing makes (256 tokens of 2x2 patches).
    public static let maximumPatches = 4096

    /// Width of the embeddings `encode` writes: `clip.vision.projection_dim`, the width the
    /// language model must have.
    public var outputWidth: Int { hyperparameters.projectionDim }

    /// Loads the encoder in `file` (read from `path`, which errors name), checking the
    /// projector type, every key it reads and every tensor's shape and type; it runs on
    /// `pool` and holds its matrices as `weights` says.
    public init(file: GGUFFile, path: String, pool: ThreadPool, weights storage: MediaEncoder.WeightStorage = .asStored)
        throws(ProjectorError)
    {
        let reader = try ProjectorFileReader(file: file, path: path, types: Self.projectorTypes, modality: Self.modality)
        let hp = try VisionHyperparameters.reading(reader)
        (self.path, self.file, self.pool, self.weightStorage, self.hyperparameters) = (path, file, pool, storage, hp)
        weights = try VisionWeights(reader, hp, storage: storage)
        preprocessing = ImagePreprocessing(
            patchSize: hp.patchSize, mergeFactor: hp.mergeFactor, minImageTokens: 64, maxImageTokens: 256,
            imageMean: hp.imageMean, imageStd: hp.imageStd)
    }

    /// Opens and loads the mmproj file at `path` (see ``init(file:path:pool:weights:)``).
    public convenience init(path: String, pool: ThreadPool, weights storage: MediaEncoder.WeightStorage = .asStored)
        throws(ProjectorError)
    {
        try self.init(file: ProjectorFileReader.open(path), path: path, pool: pool, weights: storage)
    }

    /// The number of embeddings a slice of `width x height` pixels encodes to, after
    /// checking that the encoder accepts that size (sides multiples of
    /// `preprocessing.alignment`, at most ``maximumPatches`` patches).
    public func tokenCount(width: Int, height: Int) throws(ProjectorError) -> Int {
        let grid = try patchGrid(width: width, height: height)
        return grid.width * grid.height / (hyperparameters.mergeFactor * hyperparameters.mergeFactor)
    }

    /// Encodes one preprocessed slice: `pixels` holds `width · height · 3` floats, row-major,
    /// RGB interleaved, already normalized (`(u8/255 - mean) / std`, finite). Returns
    /// `tokenCount(width:height:) · outputWidth` floats, one embedding per row, tokens in
    /// row-major order over the `(W/32) x (H/32)` grid.
    public func encode(pixels: [Float], width: Int, height: Int) throws(ProjectorError) -> [Float] {
        let count = try tokenCount(width: width, height: height) * outputWidth
        var out = [Float](repeating: 0, count: count)
        try pixels.withUnsafeBufferPointer { (p) throws(ProjectorError) in
            try out.withUnsafeMutableBufferPointer { (o) throws(ProjectorError) in
                try encode(pixels: p, width: width, height: height, into: o)
            }
        }
        return out
    }

    /// ``encode(pixels:width:height:)`` into `output`, which must hold at least
    /// `tokenCount(width:height:) · outputWidth` floats (for example the language model's
    /// input rows of the image's positions).
    public func encode(
        pixels: UnsafeBufferPointer<Float>, width: Int, height: Int, into output: UnsafeMutableBufferPointer<Float>
    ) throws(ProjectorError) {
        let grid = try patchGrid(width: width, height: height)
        let hp = hyperparameters, s = hp.mergeFactor
        guard pixels.count == width * height * 3 else {
            throw .invalidInput("a \(width)x\(height) slice has \(width * height * 3) RGB values, got \(pixels.count)")
        }
        let tokens = grid.width * grid.height / (s * s)
        guard output.count >= tokens * outputWidth else {
            throw .invalidInput(
                "the output holds \(output.count) floats, \(tokens) embeddings of \(outputWidth) need \(tokens * outputWidth)")
        }
        try ProjectorError.checkFinite(pixels, "the slice")
        let w = VisionWorkspace(hp, gridWidth: grid.width, gridHeight: grid.height, threads: pool.threads)
        // X = patches(pixels) W_patchᵀ + b_patch
        let x = weights.patchEmbedding(pixels.baseAddress!, width: width, height: height, into: w.x, w, pool)
        // X += E_pos resized to the patch grid
        weights.positions.add(to: x, gridWidth: grid.width, gridHeight: grid.height, w, pool)
        // X = Block_L(... Block_1(X))
        for block in weights.blocks { block(x, w, pool) }
        // X = LN_post(X)
        weights.postNorm(x, into: x.base, pool)
        // T = unshuffle_s(X); E = mm₂ GELU(mm₁ LN(T))
        VisionGeometry.pixelUnshuffle(x.base, gridWidth: grid.width, gridHeight: grid.height, channels: hp.width, factor: s, into: w.merged)
        weights.projector(Rows(base: w.merged, count: tokens, width: hp.mergedWidth), into: output.baseAddress!, w, pool)
    }

    /// One matrix product of an encode: `C[m][n] = A[m][k] Bᵀ`, made `calls` times.
    public struct ProductShape: Sendable, Equatable {
        public var m, n, k, calls: Int
        /// Floating-point operations: `2 m n k` a call.
        public var flops: Double { 2 * Double(m) * Double(n) * Double(k) * Double(calls) }
    }

    /// The matrix products an encode of a `width x height` slice makes, by shape: the patch
    /// embedding, per block `[q | k | v]`, the output projection, the MLP's two and each
    /// head's `Q Kᵀ` and `S V`, and the projector's two. Everything else an encode does is
    /// element-wise; `leap-ref bench --image` times these shapes alone as the F32 roof.
    public func productShapes(width: Int, height: Int) throws(ProjectorError) -> [ProductShape] {
        let grid = try patchGrid(width: width, height: height)
        let hp = hyperparameters, n = grid.width * grid.height, d = hp.width, L = hp.layerCount
        let tokens = n / (hp.mergeFactor * hp.mergeFactor)
        return [
            ProductShape(m: n, n: d, k: hp.patchValues, calls: 1),
            ProductShape(m: n, n: 3 * d, k: d, calls: L),
            ProductShape(m: n, n: d, k: d, calls: L),
            ProductShape(m: n, n: hp.feedForwardLength, k: d, calls: L),
            ProductShape(m: n, n: d, k: hp.feedForwardLength, calls: L),
            ProductShape(m: n, n: n, k: hp.headDim, calls: L * hp.headCount),
            ProductShape(m: n, n: hp.headDim, k: n, calls: L * hp.headCount),
            ProductShape(m: tokens, n: hp.projectorHiddenWidth, k: hp.mergedWidth, calls: 1),
            ProductShape(m: tokens, n: hp.projectionDim, k: hp.projectorHiddenWidth, calls: 1)
        ]
    }

    /// The patch grid of a `width x height` slice, checked.
    func patchGrid(width: Int, height: Int) throws(ProjectorError) -> (width: Int, height: Int) {
        let align = preprocessing.alignment, p = hyperparameters.patchSize
        for (what, side) in [("the slice width", width), ("the slice height", height)] {
            guard side >= align else { throw .inputTooSmall(what: what, value: side, minimum: align) }
            guard side <= Self.maximumPatches * p else { throw .inputTooLarge(what: what, value: side, maximum: Self.maximumPatches * p) }
            guard side % align == 0 else { throw .invalidInput("\(what) \(side) is not a multiple of \(align) (patch \(p) x merge)") }
        }
        let patches = (width / p) * (height / p)
        guard patches <= Self.maximumPatches else {
            throw .inputTooLarge(what: "the patches of a \(width)x\(height) slice", value: patches, maximum: Self.maximumPatches)
        }
        return (width / p, height / p)
    }
}
