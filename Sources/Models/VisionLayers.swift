import GGUF
import Kernels

/// The weights of an LFM2-VL vision encoder, by llama.cpp's tensor names (ggml shapes,
/// row length first):
///
/// ```
/// v.patch_embd.weight        [p, p, 3, d]   conv kernel; as a matrix d x 3p² over (c, ky, kx)
/// v.patch_embd.bias          [d]
/// v.position_embd.weight     [d, g²]        g = image_size / p (16): row y·g + x
/// v.blk.i.ln1 / ln2          [d] weight, bias
/// v.blk.i.attn_q/k/v/out     [d, d] weight, [d] bias
/// v.blk.i.ffn_up             [d, ff], [ff];   v.blk.i.ffn_down  [ff, d], [d]
/// v.post_ln                  [d] weight, bias
/// mm.input_norm              [s²d] weight, bias (optional, both or neither)
/// mm.1                       [s²d, h], [h];   mm.2  [h, D], [D]
/// ```
///
/// Matrices may be of any type the kernels multiply; vectors and the position table F32,
/// F16 or BF16. Tensors that llama.cpp would apply on top of these (a pre-norm, fused qkv,
/// q/k norms, layer scales, a gated MLP) are refused: the encoder does not implement them.
struct VisionWeights: Sendable {
    let patchEmbedding: PatchEmbedding
    let positions: PositionEmbedding
    let blocks: [SigLIPBlock]
    let postNorm: EncoderLayerNorm
    let projector: LFM2VisionProjector

    init(_ r: ProjectorFileReader, _ hp: VisionHyperparameters, storage: MediaEncoder.WeightStorage) throws(ProjectorError) {
        let d = hp.width, eps = hp.layerNormEpsilon
        try Self.refuseUnsupported(r, hp)
        func linear(_ name: String, outputs: Int, inputs: Int, shape: [Int]? = nil) throws(ProjectorError) -> EncoderLinear {
            try EncoderLinear(r, name, outputs: outputs, inputs: inputs, shape: shape, storage: storage)
        }
        let p = hp.patchSize
        patchEmbedding = PatchEmbedding(
            projection: try linear("v.patch_embd", outputs: d, inputs: hp.patchValues, shape: [p, p, 3, d]), patchSize: p)
        let side = hp.positionGridSide
        positions = PositionEmbedding(table: try r.floats(tensor: "v.position_embd.weight", shape: [d, side * side]), side: side, width: d)
        var blocks: [SigLIPBlock] = []
        for i in 0..<hp.layerCount {
            let b = "v.blk.\(i)."
            blocks.append(
                SigLIPBlock(
                    norm1: try EncoderLayerNorm(r, b + "ln1", width: d, epsilon: eps),
                    query: try linear(b + "attn_q", outputs: d, inputs: d),
                    key: try linear(b + "attn_k", outputs: d, inputs: d),
                    value: try linear(b + "attn_v", outputs: d, inputs: d),
                    output: try linear(b + "attn_out", outputs: d, inputs: d),
                    norm2: try EncoderLayerNorm(r, b + "ln2", width: d, epsilon: eps),
                    up: try linear(b + "ffn_up", outputs: hp.feedForwardLength, inputs: d),
                    down: try linear(b + "ffn_down", outputs: d, inputs: hp.feedForwardLength),
                    heads: hp.headCount))
        }
        self.blocks = blocks
        postNorm = try EncoderLayerNorm(r, "v.post_ln", width: d, epsilon: eps)
        let merged = hp.mergedWidth
        projector = LFM2VisionProjector(
            inputNorm: hp.projectorInputNorm
                ? try EncoderLayerNorm(r, "mm.input_norm", width: merged, epsilon: VisionHyperparameters.projectorNormEpsilon) : nil,
            first: try linear("mm.1", outputs: hp.projectorHiddenWidth, inputs: merged),
            second: try linear("mm.2", outputs: hp.projectionDim, inputs: hp.projectorHiddenWidth))
    }

    /// Throws for the tensors llama.cpp's SigLIP graph would use that this encoder does not
    /// implement, and for a projector input norm with only one of its two tensors.
    static func refuseUnsupported(_ r: ProjectorFileReader, _ hp: VisionHyperparameters) throws(ProjectorError) {
        var names = ["v.pre_ln.weight", "v.pre_ln.bias", "v.class_embd", "v.norm_embd.weight", "v.patch_embd.weight.1"]
        for i in 0..<hp.layerCount {
            for t in [
                "attn_qkv.weight", "attn_q_norm.weight", "attn_k_norm.weight", "ffn_gate.weight", "ls1.weight", "ls2.weight",
                "out_scale.weight", "attn_post_norm.weight", "ffn_post_norm.weight", "ffn_gate_exps.weight", "attn_sinks"
            ] { names.append("v.blk.\(i).\(t)") }
        }
        for name in names where r.has(name) {
            throw .unsupportedTensor(
                path: r.path, name: name,
                reason: "llama.cpp would apply it; this SigLIP2 encoder has no such step (an unexpected conversion)")
        }
        if r.has("mm.input_norm.weight") != r.has("mm.input_norm.bias") {
            let present = r.has("mm.input_norm.weight") ? "mm.input_norm.weight" : "mm.input_norm.bias"
            throw .unsupportedTensor(path: r.path, name: present, reason: "the projector's input norm needs both its weight and its bias")
        }
    }
}

/// The conv patch embedding (kernel and stride `p`, 3 → d channels) as one matrix product:
/// each patch's 3p² values laid out in the kernel's (channel, row, column) order (im2col),
/// then `X = P Wᵀ + b`.
struct PatchEmbedding: Sendable {
    let projection: EncoderLinear
    let patchSize: Int

    /// The embeddings of the patches of a `width x height` slice (`pixels`: row-major, RGB
    /// interleaved) into `x`: one row per patch, row-major over the patch grid.
    func callAsFunction(
        _ pixels: UnsafePointer<Float>, width: Int, height: Int, into x: UnsafeMutablePointer<Float>, _ w: VisionWorkspace,
        _ pool: ThreadPool
    ) -> Rows {
        let p = patchSize, gw = width / p, gh = height / p, values = 3 * p * p
        let patches = w.patchRows
        // P[py·gw + px][c·p² + ky·p + kx] = pixel (px·p + kx, py·p + ky), channel c
        EncoderKernels.parallel(gh, minChunk: 1, pool) { rows in
            for py in rows {
                for px in 0..<gw {
                    let dst = patches + (py * gw + px) * values
                    for ky in 0..<p {
                        let src = pixels + ((py * p + ky) * width + px * p) * 3
                        for kx in 0..<p {
                            for c in 0..<3 { dst[(c * p + ky) * p + kx] = src[kx * 3 + c] }
                        }
                    }
                }
            }
        }
        return projection(Rows(base: patches, count: gw * gh, width: values), into: x, pool, tiles: w.tiles)
    }
}

/// SigLIP2's learned position embeddings: a table for a `side x side` grid, resized to each
/// slice's patch grid (antialiased bilinear) and added to the patch embeddings.
struct PositionEmbedding: Sendable {
    let table: [Float]
    let side: Int
    let width: Int

    /// Adds the table, resized to the `gridWidth x gridHeight` patch grid of the rows `x`
    /// (`VisionGeometry`), to `x`.
    func add(to x: Rows, gridWidth: Int, gridHeight: Int, _ w: VisionWorkspace, _ pool: ThreadPool) {
        precondition(x.count == gridWidth * gridHeight && x.width == width)
        table.withUnsafeBufferPointer { t in
            VisionGeometry.resize(
                t.baseAddress!, side: side, channels: width, gridWidth: gridWidth, gridHeight: gridHeight,
                scratch: w.positionScratch, into: w.positions, pool: pool)
        }
        EncoderKernels.add(w.positions, into: x.base, count: x.count * x.width, pool: pool)
    }
}

/// One pre-norm SigLIP encoder block, every patch attending to every patch:
///
/// ```
/// h   = x + Attention(LN₁(x))             q, k, v, out: affine; heads of d / heads
/// out = h + W_down GELU(W_up LN₂(h) + b_up) + b_down
/// ```
///
/// Four products per block over the rows (`[q | k | v]` as one, the output projection,
/// the MLP's two), the two that end a residual branch adding into `x` themselves.
struct SigLIPBlock: Sendable {
    let norm1: EncoderLayerNorm
    /// The queries, keys and values as one product (`[q | k | v]` rows of `3d`).
    let qkv: FusedEncoderLinear
    let output: EncoderLinear
    let norm2: EncoderLayerNorm
    let up, down: EncoderLinear
    let heads: Int

    init(
        norm1: EncoderLayerNorm, query: EncoderLinear, key: EncoderLinear, value: EncoderLinear, output: EncoderLinear,
        norm2: EncoderLayerNorm, up: EncoderLinear, down: EncoderLinear, heads: Int
    ) {
        (self.norm1, self.output, self.norm2, self.up, self.down, self.heads) = (norm1, output, norm2, up, down, heads)
        qkv = FusedEncoderLinear([query, key, value])
    }

    /// Runs the block on the rows `x` (the patches), in place.
    func callAsFunction(_ x: Rows, _ w: VisionWorkspace, _ pool: ThreadPool) {
        let n = x.count, d = x.width, hd = d / heads
        // h = x + Attention(LN₁(x)): q, k, v in one product; the output projection and its
        // bias added into x by the product itself
        let qkv = qkv(norm1(x, into: w.normed, pool), into: w.qkv, pool, tiles: w.tiles)
        BidirectionalAttention.attendDeferringNormalization(
            queries: qkv.base, keys: qkv.base + d, values: qkv.base + 2 * d, stride: qkv.width, tokens: n, heads: heads, headDim: hd,
            scale: 1 / Float(hd).squareRoot(), scores: w.scores, out: w.attended, outStride: d, pool: pool)
        output.accumulate(Rows(base: w.attended, count: n, width: d), into: x.base, pool, tiles: w.tiles)
        // out = h + MLP(LN₂(h)), the down projection added into h the same way
        let hidden = up(norm2(x, into: w.normed, pool), into: w.hidden, pool, tiles: w.tiles)
        EncoderKernels.geluTanh(hidden.base, count: hidden.count * hidden.width, pool: pool)
        down.accumulate(hidden, into: x.base, pool, tiles: w.tiles)
    }
}

/// LFM2-VL's projector from the unshuffled tokens to the language model's width:
/// `E = mm₂ GELU(mm₁ LN(T) + b₁) + b₂`, the LayerNorm optional (ε 1e-5), GELU in its tanh
/// form as llama.cpp computes it.
struct LFM2VisionProjector: Sendable {
    let inputNorm: EncoderLayerNorm?
    let first: EncoderLinear
    let second: EncoderLinear

    /// The embeddings of the unshuffled tokens `t` (normalized in place when the projector
    /// has its input norm) into `out`.
    func callAsFunction(_ t: Rows, into out: UnsafeMutablePointer<Float>, _ w: VisionWorkspace, _ pool: ThreadPool) {
        if let inputNorm { inputNorm(t, into: t.base, pool) }
        let hidden = first(t, into: w.projected, pool, tiles: w.tiles)
        EncoderKernels.geluTanh(hidden.base, count: hidden.count * hidden.width, pool: pool)
        _ = second(hidden, into: out, pool, tiles: w.tiles)
    }
}

/// The activation buffers of one encode, sized for its patch grid and allocated once.
/// (In large pages, `LargePages`, each encode's tens of MB were mapped and cleared again by
/// the kernel, 1.4% of an encode's profile; the C allocator reuses the freed buffers of
/// the previous encode.)
final class VisionWorkspace {
    /// The residual stream `[n][d]`.
    let x: UnsafeMutablePointer<Float>
    /// A normalized copy of `x` (a block's attention or MLP input) `[n][d]`.
    let normed: UnsafeMutablePointer<Float>
    /// Queries, keys and values side by side `[n][3d]`.
    let qkv: UnsafeMutablePointer<Float>
    /// The attention heads' concatenated outputs `[n][d]`.
    let attended: UnsafeMutablePointer<Float>
    /// The MLP's hidden rows `[n][ff]`.
    let hidden: UnsafeMutablePointer<Float>
    /// im2col rows (`patches x 3p²`), attention scores (a block of queries per thread), the
    /// position table resized and its scratch, the unshuffled tokens, the projector's hidden
    /// rows, and the products' weight tiles (`WeightMatrix.encoderTilesCount` of the largest
    /// product).
    let patchRows, scores, positions, positionScratch, merged, projected, tiles: UnsafeMutablePointer<Float>
    private let buffers: [FloatBuffer]

    init(_ hp: VisionHyperparameters, gridWidth: Int, gridHeight: Int, threads: Int) {
        let n = gridWidth * gridHeight, d = hp.width, tokens = n / (hp.mergeFactor * hp.mergeFactor)
        let d3 = 3 * d, ff = hp.feedForwardLength, h = hp.projectorHiddenWidth
        let products = [(d3, d), (d, d), (ff, d), (d, ff), (d, hp.patchValues), (h, hp.mergedWidth), (hp.projectionDim, h)]
        var arena = FloatArena()
        x = arena.allocate(n * d)
        normed = arena.allocate(n * d)
        qkv = arena.allocate(n * d3)
        attended = arena.allocate(n * d)
        hidden = arena.allocate(n * ff)
        patchRows = arena.allocate(n * hp.patchValues)
        scores = arena.allocate(BidirectionalAttention.deferredScratchCount(tokens: n, threads: threads))
        positions = arena.allocate(n * d)
        positionScratch = arena.allocate(hp.positionGridSide * gridWidth * d)
        merged = arena.allocate(tokens * hp.mergedWidth)
        projected = arena.allocate(tokens * h)
        tiles = arena.allocate(products.map { WeightMatrix.encoderTilesCount(rows: $0.0, cols: $0.1, threads: threads) }.max()!)
        buffers = arena.buffers
    }
}
