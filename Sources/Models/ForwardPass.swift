import Dispatch
import Kernels

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One sequence's rows for a pass: token ids, or embeddings given directly (an image's
/// or an audio clip's encoder output, already in the model's input space).
struct PassInput {
    let sequence: SequenceState
    /// The token ids (empty for an input of embeddings).
    let tokens: UnsafeBufferPointer<Int>
    /// `count` rows of `embeddingLength` floats (nil for an input of tokens).
    let embeddings: UnsafePointer<Float>?
    /// Rows of the input.
    let count: Int
    /// Whether the pass computes this input's logits (its last row through the output
    /// head). A pass all of whose inputs say no computes none: the hidden states are all
    /// that a spoken reply's audio step reads.
    var needsLogits = true

    init(sequence: SequenceState, tokens: UnsafeBufferPointer<Int>) {
        self.sequence = sequence
        self.tokens = tokens
        embeddings = nil
        count = tokens.count
    }

    init(sequence: SequenceState, embeddings: UnsafePointer<Float>, rows: Int) {
        self.sequence = sequence
        tokens = UnsafeBufferPointer(start: nil, count: 0)
        self.embeddings = embeddings
        count = rows
    }
}

/// The fast forward pass: every buffer a pass of up to `maxRows` tokens needs (allocated
/// once), the operations the blocks call on them, and the layer loop.
///
/// ```
/// x      = embed(tokens)                 [n, d]  (or the rows given: media embeddings)
/// x      = layer(x) for every layer      (the architecture's DecoderLayer)
/// logits = output(RMSNorm(x_last))       [vocab] per sequence (or every row's, when asked)
/// ```
///
/// A pass evaluates tokens of one or more sequences (`PassInput`s): each sequence's rows
/// are a `Segment` with its own caches and positions. The sequences of one token (decode)
/// come first, then those of several (prompt chunks). Attention and the convolution run
/// per segment over its own caches; element-wise work is per row. The products
/// (`project`) read each weight once per pass:
///
/// - the one-token rows go together through the multi-row matvec (8-bit activations;
///   the weights read once for all of them, each weight block unpacked once for up to
///   four rows);
/// - each chunk goes through the prefill product on its own rows: the 8-bit integer
///   matmul where the matrix has it (`Linear.hasIntegerMatmul`: Q4_0, Q5_0 and the
///   K-quants on AVX2 builds), the matmul with 16-bit activations for Q8_0 on AVX2 builds
///   (`Linear.hasWideIntegerMatmul`), else OpenBLAS sgemm over the weights
///   dequantized to F32: the whole matrix at once, or, for a chunk of at most
///   `Linear.shortChunkRows` rows, tile by tile in each thread's cache.
///
/// The rule is the same for one sequence (`InferenceSession`) and several
/// (`BatchedSession`): that is what makes a sequence's results independent of the other
/// sequences of a pass (docs/architecture.md, "Several sequences at once", states the
/// rule and why one-token rows never take the integer matmul).
///
/// Not thread-safe: one pass at a time (its owner serializes them).
final class ForwardPass {
    let model: TransformerModel
    let hp: Hyperparameters
    /// The threads of the current pass: the model's pool, or for a decode step that
    /// `decodeThreading` runs alone, a pool of the calling thread only.
    private(set) var pool: ThreadPool
    /// Whether decode steps choose between the model's threads and the calling thread
    /// alone by their measured times (`DecodeThreading`); when false, every pass runs on
    /// the model's pool.
    var adaptsDecodeThreads = true
    private let soloPool = ThreadPool(threads: 1)
    private var decodeThreading = DecodeThreading()
    /// Most tokens in one pass.
    let maxRows: Int
    /// Positions the caches hold (sizes the attention scratch).
    let contextLength: Int

    /// Most sequences whose logits one pass computes.
    let maxSequences: Int

    /// One sequence's rows in the current pass.
    struct Segment {
        let sequence: SequenceState
        /// Its rows in the pass.
        let rows: Range<Int>
        /// The position of its first row.
        let start: Int
        /// Which `PassInput` it is (its logits are row `input` of `logits`).
        let input: Int
    }

    // The pass being run.
    /// Its segments: first the one-token ones (rows `0..<singleRows`, segment `i` is row
    /// `i`), then those of several rows.
    private(set) var segments: [Segment] = []
    /// Rows of one-token segments.
    private(set) var singleRows = 0
    /// A pass of at most this many rows multiplies all of them through the multi-row
    /// matvec (`WeightMatrix.matvec(_:rows:into:pool:)`: the weights read once for every
    /// row, float weights against float activations) instead of the chunk products, which
    /// dequantize float weights for OpenBLAS. 0 (the default) leaves only one-token rows to
    /// the matvec. `InferenceSession.matvecRowLimit` sets it.
    var matvecRowLimit = 0
    /// Rows in the pass.
    private(set) var rowCount = 0
    /// Per row of the pass: its position and its segment.
    let positions: UnsafeMutablePointer<Int>
    let rowSegment: UnsafeMutablePointer<Int>
    private let tokens: UnsafeMutablePointer<Int>
    /// Per row of the pass: its given embedding, or nil for a token row.
    private let rowEmbedding: UnsafeMutablePointer<UnsafePointer<Float>?>

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
    let logits: UnsafeMutablePointer<Float>  // [maxSequences][vocab]

    // Attention.
    /// Query rows per head in `scores`: a query block of a prompt chunk, or in decode one
    /// row per sequence (each sequence's attention is a task of its own).
    let scoreRowsPerHead: Int
    let scores: UnsafeMutablePointer<Float>  // [heads][scoreRowsPerHead][context]
    /// F32 copies of cached keys and values when the cache stores F16: room for every KV
    /// head's keys and values over the whole context (decode converts them in parallel).
    let kvScratch: UnsafeMutablePointer<Float>
    /// Blocks of keys a decoded query over the whole context takes.
    let decodeBlocksPerQuery: Int
    /// The parts of decoded queries split into blocks (`Attention.attendOne`): per sequence
    /// and query head, `decodeBlocksPerQuery` outputs of `headDim`, then their maxima and sums.
    let decodePartials: UnsafeMutablePointer<Float>
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
    let floatTile: UnsafeMutablePointer<Float>?
    let floatTileCapacity: Int
    /// One tile per thread for short chunks' F32 products (`Linear.apply(shortBatch:...)`).
    let cachedTiles: UnsafeMutablePointer<Float>?
    /// Packed weights of the integer matmuls (the largest matrix that uses one).
    let packedWeights: UnsafeMutableRawPointer?
    let packedWeightsBytes: Int
    /// The 16-bit form of the input of chunks' products with `Linear.hasWideIntegerMatmul`
    /// matrices (nil when the model has none or a pass has one row).
    let wideActivations: WideActivations?
    /// Counts `quantize` calls; `wideInput` is the call whose rows `wideActivations` holds
    /// (-1 after other rows were put there).
    private var inputSerial = 0
    var wideInput = -1
    /// The buffers of the mixture-of-experts products (nil for a model without experts).
    let experts: ExpertBuffers?

    init(model: TransformerModel, maxRows: Int, maxSequences: Int, contextLength: Int, kvCacheType: KVCacheType) {
        let hp = model.hyperparameters, weights = model.weights
        self.model = model
        self.hp = hp
        self.pool = model.pool
        self.maxRows = maxRows
        self.maxSequences = maxSequences
        self.contextLength = contextLength
        segments.reserveCapacity(maxSequences)
        positions = .allocate(capacity: maxRows)
        rowSegment = .allocate(capacity: maxRows)
        tokens = .allocate(capacity: maxRows)
        rowEmbedding = .allocate(capacity: maxRows)
        let n = maxRows, d = hp.embeddingLength, qw = hp.headCount * hp.headDim
        let kvWidth = hp.headCountKV.max()! * hp.headDim
        x = .allocate(capacity: n * d)
        normed = .allocate(capacity: max(n, maxSequences) * d)  // also the head's rows, one per sequence
        mixed = .allocate(capacity: n * d)
        q = .allocate(capacity: n * qw)
        k = .allocate(capacity: n * max(1, kvWidth))
        v = .allocate(capacity: n * max(1, kvWidth))
        attended = .allocate(capacity: n * qw)
        gate = .allocate(capacity: n * hp.feedForwardLength)
        up = .allocate(capacity: n * hp.feedForwardLength)
        let scratchWidth = weights.layers.map(\.scratchWidth).max() ?? 0
        scratch = .allocate(capacity: max(1, n * scratchWidth))
        logits = .allocate(capacity: maxSequences * hp.vocabularySize)

        scoreRowsPerHead = max(1, min(n, max(CausalAttention.queryBlock, maxSequences)))
        scores = .allocate(capacity: hp.headCount * scoreRowsPerHead * contextLength)
        kvScratch = .allocate(capacity: kvCacheType == .f32 ? 1 : 2 * max(1, hp.headCountKV.max()!) * contextLength * hp.headDim)
        decodeBlocksPerQuery = CausalAttention.decodeBlocks(span: contextLength)
        decodePartials = .allocate(capacity: maxSequences * hp.headCount * decodeBlocksPerQuery * (hp.headDim + 2))
        var ropes: [RotaryEmbedding] = []
        for rope in weights.layers.compactMap(\.rope) where !ropes.contains(rope) { ropes.append(rope) }
        rotaryEmbeddings = ropes
        rotationTables = ropes.map { .allocate(capacity: n * $0.dimensions) }

        let heads = Set([weights.output.name, weights.tokenEmbedding.name])
        let products = model.linears.filter { !heads.contains($0.name) }
        let widest = products.map(\.cols).max() ?? d
        activations = QuantizedActivations(capacity: max(n, maxSequences) * max(widest, d))
        let floatProducts = products.filter { !$0.hasIntegerMatmul && !$0.hasWideIntegerMatmul }
        floatTileCapacity = floatProducts.isEmpty ? 0 : max(1 << 20, floatProducts.map(\.elementCount).max()!)
        floatTile = floatTileCapacity > 0 ? .allocate(capacity: floatTileCapacity) : nil
        let tilesCount = floatProducts.map { WeightMatrix.cachedTilesScratchCount(cols: $0.cols, threads: model.pool.threads) }.max() ?? 0
        cachedTiles = tilesCount > 0 ? .allocate(capacity: tilesCount) : nil
        let wideProducts = n > 1 ? products.filter(\.hasWideIntegerMatmul) : []
        wideActivations = wideProducts.isEmpty ? nil : WideActivations(capacity: n * (wideProducts.map(\.cols).max() ?? d))
        packedWeightsBytes = max(
            products.filter(\.hasIntegerMatmul).map { $0.integerScratchBytes(rows: n) }.max() ?? 0,
            wideProducts.map(\.matrix.wideMatmulScratchBytes).max() ?? 0)
        packedWeights = packedWeightsBytes > 0 ? .allocate(byteCount: packedWeightsBytes, alignment: 64) : nil
        // An expert's rows in a pass are at most the pass's rows (a row picks an expert
        // once), so the scratch above serves the expert products too.
        let mixtures = weights.layers.compactMap(\.mixtureOfExperts)
        experts = mixtures.isEmpty ? nil : ExpertBuffers(maxRows: n, width: d, mixtures: mixtures)
    }

    deinit {
        for p in [x, normed, mixed, q, k, v, attended, gate, up, scratch, logits, scores, kvScratch, decodePartials] { p.deallocate() }
        for p in rotationTables { p.deallocate() }
        positions.deallocate()
        rowSegment.deallocate()
        tokens.deallocate()
        rowEmbedding.deallocate()
        floatTile?.deallocate()
        cachedTiles?.deallocate()
        packedWeights?.deallocate()
    }

    // MARK: - The layer loop

    /// Runs every input's tokens at its sequence's next positions (at most `maxRows` tokens
    /// in all, at most `maxSequences` inputs, each sequence once), appending them to its
    /// caches, and leaves the logits of each input's last token in row `i` of `logits`.
    /// With `allLogits` (one input only), passes every row's logits to it instead, in order.
    /// With `allHiddenStates` (one input only), passes every row's hidden state after the
    /// final norm to it (`n x d` floats, in order; an embedding model's output) and
    /// computes no logits; row 0 of `normed` is then the last row's, as after any pass.
    func run(
        _ inputs: [PassInput], allLogits: ((UnsafeBufferPointer<Float>) -> Void)? = nil,
        allHiddenStates: ((UnsafeBufferPointer<Float>) -> Void)? = nil
    ) {
        let d = hp.embeddingLength, w = model.weights, vocab = hp.vocabularySize
        layOut(inputs)
        precondition(allLogits == nil || inputs.count == 1, "every row's logits: one sequence per pass")
        precondition(allHiddenStates == nil || (inputs.count == 1 && allLogits == nil), "every row's hidden state: one sequence, no logits")
        let n = rowCount
        // A decode step (one row per sequence) on the threads DecodeThreading chooses, timed.
        let decodeStep = adaptsDecodeThreads && model.pool.threads > 1 && n == inputs.count
        pool = decodeStep && decodeThreading.alone ? soloPool : model.pool
        // Alone, the workers must not spin beside the calling thread for its share of the CPU.
        if pool !== model.pool { model.pool.sleepWorkers() }
        let started = decodeStep ? DispatchTime.now().uptimeNanoseconds : 0
        defer {
            if decodeStep {
                decodeThreading.record(seconds: Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9, rows: n)
            }
            pool = model.pool
        }

        // x = embed(tokens) · embeddingScale
        // (a given embedding is taken as it is: the projector already maps into this space)
        let x = Rows(base: self.x, count: n, width: d)
        for i in 0..<n {
            if let given = rowEmbedding[i] {
                x[i].update(from: given, count: d)
            } else {
                w.tokenEmbedding.row(tokens[i], into: x[i])
                if w.embeddingScale != 1 { scale(x[i], by: w.embeddingScale, count: d) }
            }
        }
        for (rope, table) in zip(rotaryEmbeddings, rotationTables) {
            let scale = rope.thetaScale
            for i in 0..<n {
                Elementwise.ropeCache(
                    position: positions[i], thetaScale: scale, pairs: rope.dimensions / 2, into: table + i * rope.dimensions)
            }
        }

        for layer in w.layers { layer(x, self) }

        // logits = output(RMSNorm(x)) for the last row of each input, or every row when asked;
        // or, asked for every row's RMSNorm(x), no logits
        if let allHiddenStates {
            _ = w.outputNorm(x, self)
            allHiddenStates(UnsafeBufferPointer(start: normed, count: n * d))
            if n > 1 { normed.update(from: normed + (n - 1) * d, count: d) }
        } else if let allLogits {
            for i in 0..<n {
                let normedRow = w.outputNorm(Rows(base: x[i], count: 1, width: d), into: normed, self)
                _ = project(w.output, quantize(normedRow, eachRowAlone: true, for: w.output), into: logits)
                if let cap = w.finalLogitSoftcap { softcap(logits, cap: cap, count: vocab) }
                allLogits(UnsafeBufferPointer(start: logits, count: vocab))
            }
        } else {
            // Row j of `normed` is the last row of input j.
            for segment in segments {
                let last = Rows(base: x[segment.rows.upperBound - 1], count: 1, width: d)
                _ = w.outputNorm(last, into: normed + segment.input * d, self)
            }
            if inputs.contains(where: \.needsLogits) {
                let lastRows = Rows(base: normed, count: inputs.count, width: d)
                _ = project(w.output, quantize(lastRows, eachRowAlone: true, for: w.output), into: logits)
                if let cap = w.finalLogitSoftcap { softcap(logits, cap: cap, count: inputs.count * vocab) }
            }
        }
        for segment in segments { segment.sequence.advance(by: segment.rows.count) }
        segments.removeAll(keepingCapacity: true)
    }

    /// Orders the inputs' rows (the one-token inputs first, each group in input order) and
    /// fills `segments`, `tokens`, `positions` and `rowSegment`.
    private func layOut(_ inputs: [PassInput]) {
        precondition(!inputs.isEmpty && inputs.count <= maxSequences, "\(inputs.count) sequences in a pass of at most \(maxSequences)")
        segments.removeAll(keepingCapacity: true)
        var row = 0
        let d = hp.embeddingLength
        func add(_ index: Int) {
            let input = inputs[index], count = input.count, start = input.sequence.position
            precondition(row + count <= maxRows && start + count <= contextLength, "a pass beyond its rows or the context")
            for i in 0..<count {
                if let given = input.embeddings {
                    tokens[row + i] = -1
                    rowEmbedding[row + i] = given + i * d
                } else {
                    tokens[row + i] = input.tokens[i]
                    rowEmbedding[row + i] = nil
                }
                positions[row + i] = start + i
                rowSegment[row + i] = segments.count
            }
            segments.append(Segment(sequence: input.sequence, rows: row..<(row + count), start: start, input: index))
            row += count
        }
        for i in inputs.indices where inputs[i].count == 1 { add(i) }
        singleRows = row
        for i in inputs.indices where inputs[i].count > 1 { add(i) }
        rowCount = row
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

    /// `x *= factor` over `count` floats (the embedding scale).
    private func scale(_ x: UnsafeMutablePointer<Float>, by factor: Float, count: Int) {
        for i in 0..<count { x[i] *= factor }
    }

    /// `x = cap · tanh(x / cap)` over `count` floats (a final logit soft cap).
    private func softcap(_ x: UnsafeMutablePointer<Float>, cap: Float, count: Int) {
        for i in 0..<count { x[i] = cap * tanhf(x[i] / cap) }
    }

    /// The input of one or more matrix products: the rows, which of them go through the
    /// multi-row matvec (the first `matvecRows`; the others are the pass's segments of
    /// several rows), and how many rows `activations` holds in 8 bits.
    struct ProductInput {
        let rows: Rows
        let matvecRows: Int
        let quantizedRows: Int
        let stamp: Int
        /// Which `quantize` call made this input (for the 16-bit rows made from it).
        let serial: Int
    }

    /// Prepares `x` as the input of products with `a` (and `b`, `c`, which read the same
    /// input): quantizes to 8 bits the rows the products will read so. `x` is a pass's
    /// rows (its one-token rows go through the matvec, its chunks through the prefill
    /// product), or, with `eachRowAlone`, rows that each go through the matvec (the
    /// output head's). The result is valid until the next `quantize`.
    func quantize(_ x: Rows, eachRowAlone: Bool = false, for a: Linear, _ b: Linear? = nil, _ c: Linear? = nil) -> ProductInput {
        precondition(eachRowAlone || x.count == rowCount, "a product input of the pass's rows")
        let k = eachRowAlone || rowCount <= matvecRowLimit ? x.count : singleRows
        let integerMatrix = a.hasIntegerMatmul || b?.hasIntegerMatmul == true || c?.hasIntegerMatmul == true
        // The matvec reads the 8-bit rows (and, for F32/F16/BF16 weights, the floats kept
        // beside them); the chunks read them only through the integer matmul.
        let integerRows = k < x.count && integerMatrix
        let floats =
            !a.type.usesQuantizedActivations || b?.type.usesQuantizedActivations == false || c?.type.usesQuantizedActivations == false
        let count = integerRows ? x.count : k
        inputSerial += 1
        guard count > 0 else { return ProductInput(rows: x, matvecRows: 0, quantizedRows: 0, stamp: 0, serial: inputSerial) }
        activationsStamp += 1
        activations.quantizeRows(x.base, rows: count, cols: x.width, keepingFloats: floats && k > 0, pool: pool)
        return ProductInput(rows: x, matvecRows: k, quantizedRows: count, stamp: activationsStamp, serial: inputSerial)
    }

    /// `out = input · Wᵀ` (`[n, w.cols]` to `[n, w.rows]`): the one-token rows through the
    /// multi-row matvec, each chunk through the integer matmul or OpenBLAS sgemm.
    @inline(__always)
    func project(_ w: Linear, _ input: ProductInput, into out: UnsafeMutablePointer<Float>) -> Rows {
        checkCurrent(input, for: w)
        if input.matvecRows > 0 { w.apply(activations, rows: 0..<input.matvecRows, out, pool: pool) }
        projectChunks(w, input, into: out)
        return Rows(base: out, count: input.rows.count, width: w.rows)
    }

    /// ``project(_:_:into:)`` of each matrix of `products` (matrices that read the same
    /// `input`: q/k/v, gate/up), their one-token rows in one parallel loop
    /// (`Linear.apply(_:_:rows:pool:)`): a decode step's threads meet once for the lot.
    /// The results are those of `project` one matrix at a time.
    func project(_ products: [(Linear, UnsafeMutablePointer<Float>)], _ input: ProductInput) -> [Rows] {
        for (w, _) in products { checkCurrent(input, for: w) }
        if input.matvecRows > 0 { Linear.apply(products, activations, rows: 0..<input.matvecRows, pool: pool) }
        return products.map { w, out in
            projectChunks(w, input, into: out)
            return Rows(base: out, count: input.rows.count, width: w.rows)
        }
    }

    /// Checks that `input`'s 8-bit rows are still those `quantize` made for it.
    @inline(__always)
    private func checkCurrent(_ input: ProductInput, for w: Linear) {
        let n = input.rows.count, k = input.matvecRows
        if k > 0 || (k < n && w.hasIntegerMatmul) {
            precondition(input.stamp == activationsStamp, "product input quantized over")
        }
    }

    /// The chunks' part of `project`: each segment of several rows through the integer
    /// matmul, the short-chunk tiles or OpenBLAS sgemm.
    @inline(__always)
    private func projectChunks(_ w: Linear, _ input: ProductInput, into out: UnsafeMutablePointer<Float>) {
        guard input.matvecRows < input.rows.count else { return }
        for segment in segments[singleRows...] {
            let rows = segment.rows
            if w.hasIntegerMatmul {
                precondition(input.quantizedRows >= rows.upperBound)
                w.apply(batch: activations, rows: rows, out, scratch: packedWeights!, scratchBytes: packedWeightsBytes, pool: pool)
            } else if w.hasWideIntegerMatmul, let wide = wideActivations {
                // The pass's rows in 16 bits, once per input (q/k/v and gate/up share it).
                if wideInput != input.serial {
                    wide.quantizeRows(input.rows.base, rows: input.rows.count, cols: input.rows.width, pool: pool)
                    wideInput = input.serial
                }
                w.apply(wideBatch: wide, rows: rows, out, scratch: packedWeights!, scratchBytes: packedWeightsBytes, pool: pool)
            } else if rows.count <= Linear.shortChunkRows {
                w.apply(
                    shortBatch: input.rows[rows.lowerBound], count: rows.count, out + rows.lowerBound * w.rows, tiles: cachedTiles!,
                    pool: pool)
            } else {
                w.apply(
                    batch: input.rows[rows.lowerBound], count: rows.count, out + rows.lowerBound * w.rows,
                    tile: floatTile!, tileCapacity: floatTileCapacity, pool: pool)
            }
        }
    }
}
