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
/// Matrices may be of any type the kernels multiply; vectors and the position table F32
/// or F16. Tensors that llama.cpp would apply on top of these (a pre-norm, fused qkv,
/// q/k norms, layer scales, a gated MLP) are refused: the encoder does not implement them.
struct VisionWeights: Sendable {
    let patchEmbedding: PatchEmbedding
    let positions: PositionEmbedding
    let blocks: [SigLIPBlock]
    let postNorm: VisionLayerNorm
    let projector: LFM2VisionProjector
    /// Floats of the dequantization tile: the largest non-F32 matrix, capped at 4M floats
    /// (16 MiB; a larger matrix is multiplied tile by tile).
    let tileCount: Int

    init(_ r: ProjectorFileReader, _ hp: VisionHyperparameters, storage: SigLIP2VisionEncoder.WeightStorage) throws(ProjectorError) {
        let d = hp.width, eps = hp.layerNormEpsilon
        let f32 = storage == .float32
        try Self.refuseUnsupported(r, hp)
        func norm(_ name: String, _ count: Int, eps: Float) throws(ProjectorError) -> VisionLayerNorm {
            VisionLayerNorm(
                weight: try r.floats(tensor: name + ".weight", shape: [count]), bias: try r.floats(tensor: name + ".bias", shape: [count]),
                epsilon: eps)
        }
        let p = hp.patchSize
        let patchEmbedding = PatchEmbedding(
            projection: try VisionLinear(r, "v.patch_embd", outputs: d, inputs: hp.patchValues, shape: [p, p, 3, d], f32: f32), patchSize: p
        )
        self.patchEmbedding = patchEmbedding
        let side = hp.positionGridSide
        positions = PositionEmbedding(table: try r.floats(tensor: "v.position_embd.weight", shape: [d, side * side]), side: side, width: d)
        var blocks: [SigLIPBlock] = []
        for i in 0..<hp.layerCount {
            let b = "v.blk.\(i)."
            blocks.append(
                SigLIPBlock(
                    norm1: try norm(b + "ln1", d, eps: eps),
                    query: try VisionLinear(r, b + "attn_q", outputs: d, inputs: d, f32: f32),
                    key: try VisionLinear(r, b + "attn_k", outputs: d, inputs: d, f32: f32),
                    value: try VisionLinear(r, b + "attn_v", outputs: d, inputs: d, f32: f32),
                    output: try VisionLinear(r, b + "attn_out", outputs: d, inputs: d, f32: f32),
                    norm2: try norm(b + "ln2", d, eps: eps),
                    up: try VisionLinear(r, b + "ffn_up", outputs: hp.feedForwardLength, inputs: d, f32: f32),
                    down: try VisionLinear(r, b + "ffn_down", outputs: d, inputs: hp.feedForwardLength, f32: f32),
                    heads: hp.headCount))
        }
        self.blocks = blocks
        postNorm = try norm("v.post_ln", d, eps: eps)
        let merged = hp.mergedWidth
        let projector = LFM2VisionProjector(
            inputNorm: hp.projectorInputNorm ? try norm("mm.input_norm", merged, eps: VisionHyperparameters.projectorNormEpsilon) : nil,
            first: try VisionLinear(r, "mm.1", outputs: hp.projectorHiddenWidth, inputs: merged, f32: f32),
            second: try VisionLinear(r, "mm.2", outputs: hp.projectionDim, inputs: hp.projectorHiddenWidth, f32: f32))
        self.projector = projector
        let matrices = [patchEmbedding.projection, projector.first, projector.second] + blocks.flatMap(\.linears)
        let largest = matrices.filter { $0.weight.type != .f32 }.map { $0.weight.rows * $0.weight.cols }.max() ?? 0
        let widest = matrices.map(\.weight.cols).max() ?? 1
        tileCount = max(widest, min(largest, 1 << 22))
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

/// LayerNorm over rows of `weight.count`: `(x - μ) / sqrt(σ² + ε) ⊙ weight + bias`.
struct VisionLayerNorm: Sendable {
    let weight: [Float]
    let bias: [Float]
    let epsilon: Float

    func callAsFunction(_ x: UnsafePointer<Float>, rows: Int, into y: UnsafeMutablePointer<Float>, _ pool: ThreadPool) {
        weight.withUnsafeBufferPointer { w in
            bias.withUnsafeBufferPointer { b in
                EncoderKernels.layerNorm(
                    x, rows: rows, width: w.count, weight: w.baseAddress!, bias: b.baseAddress!, eps: epsilon, into: y, pool: pool)
            }
        }
    }
}

/// An affine map `y = W x + b` (`W` of `outputs x inputs`, in its stored type or converted
/// to F32 at load) applied to rows: `Y = X Wᵀ + b`.
struct VisionLinear: Sendable {
    let name: String
    let weight: WeightMatrix
    let bias: [Float]
    /// The F32 copy `weight` views, when the weights were converted at load.
    let converted: FloatBuffer?

    /// `name.weight` (ggml shape `[inputs, outputs]`, or `shape`) and `name.bias` (`[outputs]`);
    /// with `f32`, a matrix of another type is dequantized once into an F32 copy and the
    /// file's pages of it leave resident memory.
    init(_ r: ProjectorFileReader, _ name: String, outputs: Int, inputs: Int, shape: [Int]? = nil, f32: Bool = false) throws(ProjectorError)
    {
        let t = try r.tensor(name + ".weight", shape: shape ?? [inputs, outputs], accepted: GGMLType.kernelTypes)
        let stored: WeightMatrix
        do {
            stored = try WeightMatrix(type: t.type, rows: outputs, cols: inputs, data: r.file.data(for: t).baseAddress!)
        } catch {
            throw .tensorType(path: r.path, name: name + ".weight", type: t.type, accepted: GGMLType.kernelTypes)
        }
        if f32 && t.type != .f32 {
            let copy = FloatBuffer(count: outputs * inputs)
            stored.dequantize(rows: 0..<outputs, into: copy.pointer)
            // An F32 view of a buffer of the right size cannot fail to describe.
            weight = (try? WeightMatrix(type: .f32, rows: outputs, cols: inputs, data: copy.pointer)) ?? stored
            converted = copy
            r.file.releaseResidentPages(of: t)
        } else {
            weight = stored
            converted = nil
        }
        bias = try r.floats(tensor: name + ".bias", shape: [outputs])
        self.name = name
    }

    var outputs: Int { weight.rows }

    /// `Y = X Wᵀ + b` for `n` rows: the weights dequantized into the workspace's tile and
    /// multiplied with OpenBLAS sgemm, then the bias added to every row.
    func callAsFunction(
        _ x: UnsafePointer<Float>, rows n: Int, into y: UnsafeMutablePointer<Float>, _ w: VisionWorkspace, _ pool: ThreadPool
    ) {
        weight.matmul(x, count: n, into: y, scratch: w.tile, scratchCount: w.tileCount, pool: pool)
        bias.withUnsafeBufferPointer { EncoderKernels.addBias($0.baseAddress!, to: y, rows: n, width: outputs, pool: pool) }
    }
}

/// The conv patch embedding (kernel and stride `p`, 3 → d channels) as one matrix product:
/// each patch's 3p² values laid out in the kernel's (channel, row, column) order (im2col),
/// then `X = P Wᵀ + b`.
struct PatchEmbedding: Sendable {
    let projection: VisionLinear
    let patchSize: Int

    func callAsFunction(
        _ pixels: UnsafePointer<Float>, width: Int, height: Int, into x: UnsafeMutablePointer<Float>, _ w: VisionWorkspace,
        _ pool: ThreadPool
    ) {
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
        projection(patches, rows: gw * gh, into: x, w, pool)
    }
}

/// SigLIP2's learned position embeddings: a table for a `side x side` grid, resized to each
/// slice's patch grid (antialiased bilinear) and added to the patch embeddings.
struct PositionEmbedding: Sendable {
    let table: [Float]
    let side: Int
    let width: Int

    func add(to x: UnsafeMutablePointer<Float>, gridWidth: Int, gridHeight: Int, _ w: VisionWorkspace, _ pool: ThreadPool) {
        table.withUnsafeBufferPointer { t in
            SigLIP2VisionEncoder.resize(
                t.baseAddress!, side: side, channels: width, gridWidth: gridWidth, gridHeight: gridHeight,
                scratch: w.positionScratch, into: w.positions, pool: pool)
        }
        EncoderKernels.add(w.positions, into: x, count: gridWidth * gridHeight * width, pool: pool)
    }
}

/// One pre-norm SigLIP encoder block, every patch attending to every patch:
///
/// ```
/// h   = x + Attention(LN₁(x))             q, k, v, out: affine; heads of d / heads
/// out = h + W_down GELU(W_up LN₂(h) + b_up) + b_down
/// ```
struct SigLIPBlock: Sendable {
    let norm1: VisionLayerNorm
    let query: VisionLinear
    let key: VisionLinear
    let value: VisionLinear
    let output: VisionLinear
    let norm2: VisionLayerNorm
    let up: VisionLinear
    let down: VisionLinear
    let heads: Int

    var linears: [VisionLinear] { [query, key, value, output, up, down] }

    /// Runs the block on the workspace's `n` rows at `x`, in place.
    func callAsFunction(_ x: UnsafeMutablePointer<Float>, _ w: VisionWorkspace, _ pool: ThreadPool) {
        let n = w.patches, d = output.outputs, hd = d / heads
        // h = x + Attention(LN₁(x))
        norm1(x, rows: n, into: w.normed, pool)
        query(w.normed, rows: n, into: w.q, w, pool)
        key(w.normed, rows: n, into: w.k, w, pool)
        value(w.normed, rows: n, into: w.v, w, pool)
        BidirectionalAttention.attend(
            queries: w.q, keys: w.k, values: w.v, stride: d, tokens: n, heads: heads, headDim: hd,
            scale: 1 / Float(hd).squareRoot(), scores: w.scores, out: w.mixed, outStride: d, pool: pool)
        output(w.mixed, rows: n, into: w.normed, w, pool)
        EncoderKernels.add(w.normed, into: x, count: n * d, pool: pool)
        // out = h + MLP(LN₂(h))
        norm2(x, rows: n, into: w.normed, pool)
        up(w.normed, rows: n, into: w.hidden, w, pool)
        EncoderKernels.geluTanh(w.hidden, count: n * up.outputs, pool: pool)
        down(w.hidden, rows: n, into: w.mixed, w, pool)
        EncoderKernels.add(w.mixed, into: x, count: n * d, pool: pool)
    }
}

/// LFM2-VL's projector from the unshuffled tokens to the language model's width:
/// `E = mm₂ GELU(mm₁ LN(T) + b₁) + b₂`, the LayerNorm optional (ε 1e-5), GELU in its tanh
/// form as llama.cpp computes it.
struct LFM2VisionProjector: Sendable {
    let inputNorm: VisionLayerNorm?
    let first: VisionLinear
    let second: VisionLinear

    func callAsFunction(
        _ t: UnsafeMutablePointer<Float>, rows m: Int, into out: UnsafeMutablePointer<Float>, _ w: VisionWorkspace, _ pool: ThreadPool
    ) {
        if let inputNorm { inputNorm(t, rows: m, into: t, pool) }
        first(t, rows: m, into: w.projected, w, pool)
        EncoderKernels.geluTanh(w.projected, count: m * first.outputs, pool: pool)
        second(w.projected, rows: m, into: out, w, pool)
    }
}

/// Floats owned for the lifetime of the weights (an F32 copy of a matrix).
final class FloatBuffer: @unchecked Sendable {
    // @unchecked: written once while loading, read-only afterwards.
    let pointer: UnsafeMutablePointer<Float>

    init(count: Int) {
        pointer = UnsafeMutableRawPointer.allocate(byteCount: max(1, count) * 4, alignment: 64)
            .bindMemory(to: Float.self, capacity: max(1, count))
    }

    deinit { pointer.deallocate() }
}

/// The activation buffers of one encode, sized for its patch grid and allocated once.
final class VisionWorkspace {
    /// Patches of the slice (rows of the tower's activations).
    let patches: Int
    let x, normed, q, k, v, mixed, hidden: UnsafeMutablePointer<Float>
    /// im2col rows (`patches x 3p²`), attention scores, the position table resized and its
    /// scratch, the unshuffled tokens, the projector's hidden rows.
    let patchRows, scores, positions, positionScratch, merged, projected: UnsafeMutablePointer<Float>
    /// The dequantization tile of the weight products.
    let tile: UnsafeMutablePointer<Float>
    let tileCount: Int
    private var buffers: [UnsafeMutablePointer<Float>] = []

    init(_ hp: VisionHyperparameters, gridWidth: Int, gridHeight: Int, tileCount: Int, pool: ThreadPool) {
        let n = gridWidth * gridHeight, d = hp.width, tokens = n / (hp.mergeFactor * hp.mergeFactor)
        var all: [UnsafeMutablePointer<Float>] = []
        func buffer(_ count: Int) -> UnsafeMutablePointer<Float> {
            let b = UnsafeMutableRawPointer.allocate(byteCount: max(1, count) * 4, alignment: 64).bindMemory(
                to: Float.self, capacity: max(1, count))
            all.append(b)
            return b
        }
        patches = n
        x = buffer(n * d)
        normed = buffer(n * d)
        q = buffer(n * d)
        k = buffer(n * d)
        v = buffer(n * d)
        mixed = buffer(n * d)
        hidden = buffer(n * hp.feedForwardLength)
        patchRows = buffer(n * hp.patchValues)
        scores = buffer(BidirectionalAttention.scratchCount(tokens: n, heads: hp.headCount))
        positions = buffer(n * d)
        positionScratch = buffer(hp.positionGridSide * gridWidth * d)
        merged = buffer(tokens * hp.mergedWidth)
        projected = buffer(tokens * hp.projectorHiddenWidth)
        tile = buffer(tileCount)
        self.tileCount = tileCount
        buffers = all
    }

    deinit { for b in buffers { b.deallocate() } }
}
