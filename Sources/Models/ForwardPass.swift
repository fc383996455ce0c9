import Kernels

/// The fast forward pass: every buffer a pass of up to `maxRows` tokens needs (allocated
/// once), the operations the blocks call on them, and the layer loop.
///
/// ```
/// x      = embed(tokens)                 [n, d]
/// x      = layer(x) for every layer      (the architecture's DecoderLayer)
/// logits = output(RMSNorm(x_last))       [vocab]  (or every row's, when asked)
/// ```
///
/// The products pick their kernels by the number of rows (`project`): one row (decode)
/// runs the quantized matrix-vector kernels with 8-bit activations; several rows (prefill)
/// run the 8-bit integer matmul for the legacy quantized types on VNNI builds, else
/// OpenBLAS sgemm over the weights dequantized to F32.
///
/// Not thread-safe: one pass at a time (its owner serializes them).
final class ForwardPass {
    let model: TransformerModel
    let hp: Hyperparameters
    let pool: ThreadPool
    /// Most tokens in one pass.
    let maxRows: Int
    /// Positions the caches hold (sizes the attention scratch).
    let contextLength: Int

    // The pass being run.
    private var current: SequenceState?
    /// The sequence whose tokens the current pass evaluates.
    var sequence: SequenceState { current! }
    /// Position of the current pass's first row.
    private(set) var start = 0

    // Activations, `maxRows` rows each.
    let x: UnsafeMutablePointer<Float>  // the residual stream [n][d]
    let normed: UnsafeMutablePointer<Float>  // a block's normalized input [n][d]
    let mixed: UnsafeMutablePointer<Float>  // a block's output [n][d]
    let q: UnsafeMutablePointer<Float>  // [n][heads·hd]
    let k: UnsafeMutablePointer<Float>  // [n][kvHeads·hd]
    let v: UnsafeMutablePointer<Float>  // [n][kvHeads·hd]
    let attended: UnsafeMutablePointer<Float>  // attention's heads before W_o [n][heads·hd]
    let gate: UnsafeMutablePointer<Float>  // [n][ff]
    let up: UnsafeMutablePointer<Float>  // [n][ff]
    /// Per-row room for what a layer needs beyond the above (`DecoderLayer.scratchWidth`:
    /// LFM2's B, C, x̃).
    let scratch: UnsafeMutablePointer<Float>
    let logits: UnsafeMutablePointer<Float>  // [vocab]

    // Attention.
    /// Query rows per head in `scores`: a query block in a batch, one row in decode.
    let scoreRowsPerHead: Int
    let scores: UnsafeMutablePointer<Float>  // [heads][scoreRowsPerHead][context]
    /// F32 copies of cached keys and values when the cache stores F16: room for every KV
    /// head's keys and values over the whole context (decode converts them in parallel).
    let kvScratch: UnsafeMutablePointer<Float>
    /// The distinct rotary embeddings of the model's layers and their `(cos, sin)` tables
    /// for the rows of the current pass (`[n][dims]` each).
    private let rotaryEmbeddings: [RotaryEmbedding]
    private let rotationTables: [UnsafeMutablePointer<Float>]

    // Products.
    /// The 8-bit form of the input of the next products (`maxRows` rows of the widest).
    private let activations: QuantizedActivations
    /// Counts quantizations into `activations`, so that a `ProductInput` can check that it
    /// is still what the buffer holds.
    private var activationsStamp = 0
    /// Weights dequantized to F32 for the sgemm path: room for the largest matrix but the
    /// output head (at least 1M floats), so that each product is one sgemm call.
    private let floatTile: UnsafeMutablePointer<Float>?
    private let floatTileCapacity: Int
    /// Packed weights of the integer matmul (the largest matrix that uses it).
    private let packedWeights: UnsafeMutableRawPointer?
    private let packedWeightsBytes: Int

    init(model: TransformerModel, maxRows: Int, contextLength: Int, kvCacheType: KVCacheType) {
        let hp = model.hyperparameters, weights = model.weights
        self.model = model
        self.hp = hp
        self.pool = model.pool
        self.maxRows = maxRows
        self.contextLength = contextLength
        let n = maxRows, d = hp.embeddingLength, qw = hp.headCount * hp.headDim
        let kvWidth = hp.headCountKV.max()! * hp.headDim
        x = .allocate(capacity: n * d)
        normed = .allocate(capacity: n * d)
        mixed = .allocate(capacity: n * d)
        q = .allocate(capacity: n * qw)
        k = .allocate(capacity: n * max(1, kvWidth))
        v = .allocate(capacity: n * max(1, kvWidth))
        attended = .allocate(capacity: n * qw)
        gate = .allocate(capacity: n * hp.feedForwardLength)
        up = .allocate(capacity: n * hp.feedForwardLength)
        let scratchWidth = weights.layers.map(\.scratchWidth).max() ?? 0
        scratch = .allocate(capacity: max(1, n * scratchWidth))
        logits = .allocate(capacity: hp.vocabularySize)

        scoreRowsPerHead = max(1, min(n, CausalAttention.queryBlock))
        scores = .allocate(capacity: hp.headCount * scoreRowsPerHead * contextLength)
        kvScratch = .allocate(capacity: kvCacheType == .f32 ? 1 : 2 * max(1, hp.headCountKV.max()!) * contextLength * hp.headDim)
        var ropes: [RotaryEmbedding] = []
        for rope in weights.layers.compactMap(\.rope) where !ropes.contains(rope) { ropes.append(rope) }
        rotaryEmbeddings = ropes
        rotationTables = ropes.map { .allocate(capacity: n * $0.dimensions) }

        let heads = Set([weights.output.name, weights.tokenEmbedding.name])
        let products = model.linears.filter { !heads.contains($0.name) }
        let widest = products.map(\.cols).max() ?? d
        activations = QuantizedActivations(capacity: n * max(widest, d))
        let floatProducts = products.filter { !$0.hasIntegerMatmul }
        floatTileCapacity = floatProducts.isEmpty ? 0 : max(1 << 20, floatProducts.map(\.elementCount).max()!)
        floatTile = floatTileCapacity > 0 ? .allocate(capacity: floatTileCapacity) : nil
        packedWeightsBytes = products.filter(\.hasIntegerMatmul).map { $0.integerScratchBytes(rows: n) }.max() ?? 0
        packedWeights = packedWeightsBytes > 0 ? .allocate(byteCount: packedWeightsBytes, alignment: 64) : nil
    }

    deinit {
        for p in [x, normed, mixed, q, k, v, attended, gate, up, scratch, logits, scores, kvScratch] { p.deallocate() }
        for p in rotationTables { p.deallocate() }
        floatTile?.deallocate()
        packedWeights?.deallocate()
    }

    // MARK: - The layer loop

    /// Runs `tokens` (at most `maxRows`) at the sequence's next positions, appending them
    /// to its caches, and leaves the last row's logits in `logits` (and passes every
    /// row's to `allLogits` when given).
    func run(_ tokens: UnsafeBufferPointer<Int>, in sequence: SequenceState, allLogits: ((UnsafeBufferPointer<Float>) -> Void)?) {
        let n = tokens.count, d = hp.embeddingLength, w = model.weights
        precondition(n >= 1 && n <= maxRows && sequence.position + n <= contextLength)
        current = sequence
        start = sequence.position
        defer { current = nil }

        // x = embed(tokens)
        let x = Rows(base: self.x, count: n, width: d)
        for (i, t) in tokens.enumerated() { w.tokenEmbedding.row(t, into: x[i]) }
        for (rope, table) in zip(rotaryEmbeddings, rotationTables) {
            let scale = rope.thetaScale
            for i in 0..<n {
                Elementwise.ropeCache(position: start + i, thetaScale: scale, pairs: rope.dimensions / 2, into: table + i * rope.dimensions)
            }
        }

        for layer in w.layers { layer(x, self) }

        // logits = output(RMSNorm(x)) for the last row, or every row when asked
        let vocab = hp.vocabularySize
        for i in (allLogits == nil ? n - 1 : 0)..<n {
            let normedRow = w.outputNorm(Rows(base: x[i], count: 1, width: d), into: normed, self)
            _ = project(w.output, quantize(normedRow, for: w.output), into: logits)
            allLogits?(UnsafeBufferPointer(start: logits, count: vocab))
        }
        sequence.position += n
    }

    /// The `(cos, sin)` table of `rope` for the current pass's rows (`[n][dims]`).
    func rotations(for rope: RotaryEmbedding) -> UnsafePointer<Float> {
        let i = rotaryEmbeddings.firstIndex(of: rope)!
        return UnsafePointer(rotationTables[i])
    }

    // MARK: - Operations on rows

    /// Runs `body` over row ranges covering `0..<n`: on the pool for a batch, inline for
    /// one row (decode's elementwise work is too small to hand out).
    @inline(__always)
    func inParallel(rows n: Int, _ body: (Range<Int>) -> Void) {
        if n > 1 { pool.parallelFor(count: n, minChunk: 8, body) } else { body(0..<n) }
    }

    /// `x += y`, row by row (the residual connection).
    func add(_ y: Rows, to x: Rows) {
        let d = x.width
        inParallel(rows: x.count) { r in Elementwise.add(y[r.lowerBound], into: x[r.lowerBound], count: r.count * d) }
    }

    /// The input of one or more matrix products: the rows, and whether `activations`
    /// holds their 8-bit form (the products' choice of kernel decides which they read).
    struct ProductInput {
        let rows: Rows
        let quantized: Bool
        let stamp: Int
    }

    /// Prepares `x` as the input of products with `a` (and `b`, `c`, which read the same
    /// input): quantizes it to 8 bits when one of them will read it so (one row always:
    /// the matvec kernels read the activations' copy of the floats too; a batch when a
    /// matrix uses the integer matmul). The result is valid until the next `quantize`.
    func quantize(_ x: Rows, for a: Linear, _ b: Linear? = nil, _ c: Linear? = nil) -> ProductInput {
        let needed =
            x.count == 1 || a.hasIntegerMatmul || (b?.hasIntegerMatmul ?? false) || (c?.hasIntegerMatmul ?? false)
        guard needed else { return ProductInput(rows: x, quantized: false, stamp: 0) }
        activationsStamp += 1
        activations.quantizeRows(x.base, rows: x.count, cols: x.width, pool: pool)
        return ProductInput(rows: x, quantized: true, stamp: activationsStamp)
    }

    /// `out = input · Wᵀ` (`[n, w.cols]` to `[n, w.rows]`): one row through the quantized
    /// matvec, a batch through the integer matmul or OpenBLAS sgemm.
    @inline(__always)
    func project(_ w: Linear, _ input: ProductInput, into out: UnsafeMutablePointer<Float>) -> Rows {
        let n = input.rows.count
        if n == 1 || w.hasIntegerMatmul {
            precondition(input.quantized && input.stamp == activationsStamp, "product input was not quantized, or quantized over")
        }
        if n == 1 {
            w.apply(activations, out, pool: pool)
        } else if w.hasIntegerMatmul {
            w.apply(batch: activations, count: n, out, scratch: packedWeights!, scratchBytes: packedWeightsBytes, pool: pool)
        } else {
            w.apply(batch: input.rows.base, count: n, out, tile: floatTile!, tileCapacity: floatTileCapacity, pool: pool)
        }
        return Rows(base: out, count: n, width: w.rows)
    }
}
