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
        let reader = try ProjectorFileReader(file: file, path: path, types: Self.projectorTypes, modality: "vision")
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
        let w = VisionWorkspace(hp, gridWidth: grid.width, gridHeight: grid.height)
        let n = w.patches, x = w.x
        // X = patches(pixels) W_patchᵀ + b_patch
        weights.patchEmbedding(pixels.baseAddress!, width: width, height: height, into: x, w, pool)
        // X += E_pos resized to the patch grid
        weights.positions.add(to: x, gridWidth: grid.width, gridHeight: grid.height, w, pool)
        // X = Block_L(... Block_1(X))
        for block in weights.blocks { block(x, w, pool) }
        // X = LN_post(X)
        weights.postNorm(x, rows: n, into: x, pool)
        // T = unshuffle_s(X); E = mm₂ GELU(mm₁ LN(T))
        Self.pixelUnshuffle(x, gridWidth: grid.width, gridHeight: grid.height, channels: hp.width, factor: s, into: w.merged)
        weights.projector(w.merged, rows: tokens, into: output.baseAddress!, w, pool)
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

    // MARK: - The geometry: position table resize and pixel unshuffle

    /// The taps of a 1-D antialiased bilinear resize from `input` to `output` samples, as
    /// torch's `interpolate(mode="bilinear", antialias=True, align_corners=False)` and
    /// ggml's `upscale` compute them (in Float): output `i` is centred at
    /// `c = (i + 0.5) · input / output` in input coordinates, and input `j` weighs
    /// `max(0, 1 - |j + 0.5 - c| / support)` with `support = max(1, input / output)`, the
    /// weights normalized to sum 1. Each entry: the first input index and the weights.
    public static func antialiasedBilinearTaps(from input: Int, to output: Int) -> [(first: Int, weights: [Float])] {
        precondition(input > 0 && output > 0)
        let sf = Float(output) / Float(input)
        let support = max(1, 1 / sf), invscale = 1 / support
        return (0..<output).map { i in
            let center = (Float(i) + 0.5) / sf
            let lo = max(Int(center - support + 0.5), 0), hi = min(Int(center + support + 0.5), input)
            var w = (lo..<max(lo, hi)).map { j in max(0, 1 - abs((Float(j) - center + 0.5) * invscale)) }
            let total = w.reduce(0, +)
            if total > 0 { w = w.map { $0 / total } }
            return (lo, w)
        }
    }

    /// The position table (`side x side` rows of `channels`, row-major: row `y·side + x`)
    /// resized to `gridWidth x gridHeight` rows with the antialiased bilinear filter (first
    /// along x, then along y). A table already of the grid's size is returned unchanged.
    public static func resizedPositionTable(
        _ table: [Float], side: Int, channels: Int, gridWidth: Int, gridHeight: Int
    ) -> [Float] {
        precondition(table.count == side * side * channels)
        var out = [Float](repeating: 0, count: gridWidth * gridHeight * channels)
        var scratch = [Float](repeating: 0, count: side * gridWidth * channels)
        table.withUnsafeBufferPointer { t in
            out.withUnsafeMutableBufferPointer { o in
                scratch.withUnsafeMutableBufferPointer { s in
                    resize(
                        t.baseAddress!, side: side, channels: channels, gridWidth: gridWidth, gridHeight: gridHeight,
                        scratch: s.baseAddress!, into: o.baseAddress!, pool: nil)
                }
            }
        }
        return out
    }

    /// ``resizedPositionTable(_:side:channels:gridWidth:gridHeight:)`` into `out`, with
    /// `scratch` of `side · gridWidth · channels` floats, split over `pool`.
    static func resize(
        _ table: UnsafePointer<Float>, side: Int, channels d: Int, gridWidth gw: Int, gridHeight gh: Int,
        scratch: UnsafeMutablePointer<Float>, into out: UnsafeMutablePointer<Float>, pool: ThreadPool?
    ) {
        if gw == side && gh == side {
            out.update(from: table, count: side * side * d)
            return
        }
        // Along x: scratch[y][X] = Σ_j tx[X]_j · table[y][first + j]; then along y:
        // out[Y][X] = Σ_j ty[Y]_j · scratch[first + j][X].
        resample(
            table, length: side, taps: antialiasedBilinearTaps(from: side, to: gw), outer: side, inner: 1, channels: d, into: scratch,
            pool: pool)
        resample(
            scratch, length: side, taps: antialiasedBilinearTaps(from: side, to: gh), outer: 1, inner: gw, channels: d, into: out,
            pool: pool)
    }

    /// One axis of a separable resize, over rows of `d` floats indexed `[a][i][b]`:
    /// `out[a][o][b] = Σ_j taps[o].weights[j] · source[a][taps[o].first + j][b]`, with
    /// `outer` values of `a`, `length` of `i` and `inner` of `b`. Split over `pool`.
    static func resample(
        _ source: UnsafePointer<Float>, length n: Int, taps: [(first: Int, weights: [Float])], outer: Int, inner: Int, channels d: Int,
        into out: UnsafeMutablePointer<Float>, pool: ThreadPool?
    ) {
        let m = taps.count
        EncoderKernels.parallel(outer * m, minChunk: 1, pool) { range in
            for index in range {
                let a = index / m, o = index % m
                for b in 0..<inner {
                    let row = out + ((a * m + o) * inner + b) * d
                    row.update(repeating: 0, count: d)
                    for (j, weight) in taps[o].weights.enumerated() where weight > 0 {
                        Elementwise.axpy(weight, source + ((a * n + taps[o].first + j) * inner + b) * d, row, count: d)
                    }
                }
            }
        }
    }

    /// Pixel unshuffle by `factor` `s` (LFM2-VL's "downsample"): the `gridWidth x gridHeight`
    /// patch rows of `channels` become `(gridWidth/s) x (gridHeight/s)` tokens of `s² ·
    /// channels`, token `(Y, X)` (row-major) the concatenation of patches `(sY + i, sX + j)`
    /// for `i` then `j` in `0..<s`: for `s` = 2, patches (2Y, 2X), (2Y, 2X+1), (2Y+1, 2X),
    /// (2Y+1, 2X+1). Both sides must be multiples of `s`.
    public static func pixelUnshuffle(_ x: [Float], gridWidth: Int, gridHeight: Int, channels: Int, factor: Int) -> [Float] {
        precondition(x.count == gridWidth * gridHeight * channels && gridWidth % factor == 0 && gridHeight % factor == 0)
        var out = [Float](repeating: 0, count: x.count)
        x.withUnsafeBufferPointer { xs in
            out.withUnsafeMutableBufferPointer { o in
                pixelUnshuffle(
                    xs.baseAddress!, gridWidth: gridWidth, gridHeight: gridHeight, channels: channels, factor: factor, into: o.baseAddress!)
            }
        }
        return out
    }

    static func pixelUnshuffle(
        _ x: UnsafePointer<Float>, gridWidth gw: Int, gridHeight gh: Int, channels d: Int, factor s: Int,
        into out: UnsafeMutablePointer<Float>
    ) {
        let tw = gw / s, th = gh / s
        for Y in 0..<th {
            for X in 0..<tw {
                var dst = out + (Y * tw + X) * s * s * d
                for i in 0..<s {
                    for j in 0..<s {
                        dst.update(from: x + ((s * Y + i) * gw + s * X + j) * d, count: d)
                        dst += d
                    }
                }
            }
        }
    }
}
