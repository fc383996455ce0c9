import CBLAS
import Kernels

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One sequence being evaluated by a model: the attention and convolution caches for a
/// context window, and every buffer the forward pass needs, allocated once. Evaluating
/// tokens allocates nothing.
///
/// Not thread-safe: one evaluation at a time (the SDK layer serializes work per model).
public final class InferenceSession: @unchecked Sendable {
    public let model: TransformerModel
    /// Capacity of the caches in tokens.
    public let contextLength: Int
    /// Most tokens evaluated in one forward batch; longer inputs are split.
    public let maxBatch: Int
    /// Tokens currently in the caches; the next token is evaluated at this position.
    public private(set) var position = 0

    let hp: Hyperparameters
    let kv: KVCache
    let conv: ConvCache
    let pool: ThreadPool
    /// Dequantized weights for the prefill matmuls: room for the largest matrix but the
    /// output head (at least 1M floats), so each product is one sgemm call.
    let tile: UnsafeMutablePointer<Float>
    let tileCapacity: Int
    /// The same memory as `tile`, in bytes, for the integer matmul's packed weights
    /// (large enough for either use).
    let tileBytes: Int
    /// 8-bit activations of a whole batch for the integer prefill matmuls
    /// (`maxBatch` rows of the widest matrix input), and which buffer they were quantized
    /// from (nil when unknown), so that q/k/v and gate/up quantize their input once.
    let actsBatch: QuantizedActivations
    var actsBatchSource: UnsafeMutablePointer<Float>?
    /// 8-bit activations for the decode matvecs: the model width, the attention width and
    /// the feed-forward width.
    let actsModel: QuantizedActivations
    let actsAttention: QuantizedActivations
    let actsHidden: QuantizedActivations

    // Activations, `maxBatch` rows each.
    let x: UnsafeMutablePointer<Float>  // residual stream [n][d]
    let xb: UnsafeMutablePointer<Float>  // normalized input to a block [n][d]
    let xb2: UnsafeMutablePointer<Float>  // block output [n][d]
    let q: UnsafeMutablePointer<Float>  // [n][heads·hd]
    let k: UnsafeMutablePointer<Float>  // [n][kvHeads·hd]
    let v: UnsafeMutablePointer<Float>  // [n][kvHeads·hd]
    let attnOut: UnsafeMutablePointer<Float>  // [n][heads·hd]
    let bcx: UnsafeMutablePointer<Float>  // [n][3d]
    let gate: UnsafeMutablePointer<Float>  // [n][ff]
    let up: UnsafeMutablePointer<Float>  // [n][ff]
    let scores: UnsafeMutablePointer<Float>  // [heads][queryBlock][context]
    let ropeCache: UnsafeMutablePointer<Float>  // [n][ropeDims] (cos, sin) pairs
    let lastLogits: UnsafeMutablePointer<Float>  // [vocab]
    let ropeThetaScale: Float
    static let queryBlock = 64

    /// F32 copies of cached keys and values when the cache stores F16: room for every KV
    /// head's keys and values over the whole context (decode converts them in parallel).
    let kvScratch: UnsafeMutablePointer<Float>

    /// Creates the caches and buffers. `contextLength` defaults to the model's trained
    /// context, capped at 4096 tokens to bound memory (pass more if you need it).
    /// `kvCacheType` `.f16` halves the attention cache (llama.cpp's default type).
    public init(model: TransformerModel, contextLength: Int? = nil, maxBatch: Int = 512, kvCacheType: KVCacheType = .f32) {
        let hp = model.hyperparameters
        self.model = model
        self.hp = hp
        self.contextLength = max(1, contextLength ?? min(hp.trainedContextLength, 4096))
        self.maxBatch = max(1, maxBatch)
        let n = self.maxBatch
        let d = hp.embeddingLength, qw = hp.headCount * hp.headDim
        let kvMax = hp.layers.map { if case .attention(let kv) = $0 { return kv } else { return 0 } }.max() ?? 0
        kv = KVCache(layers: hp.layers, contextLength: self.contextLength, headDim: hp.headDim, type: kvCacheType)
        kvScratch = .allocate(capacity: kvCacheType == .f32 ? 1 : 2 * max(1, kvMax) * self.contextLength * hp.headDim)
        conv = ConvCache(layers: hp.layers, width: d, contextLength: self.contextLength)
        pool = model.pool
        let heads = Set([model.weights.output.name, model.weights.tokenEmbedding.name])
        tileCapacity = max(1 << 20, model.linears.filter { !heads.contains($0.name) }.map(\.elementCount).max() ?? 0)
        let integerBytes =
            model.linears.filter { !heads.contains($0.name) && $0.hasIntegerMatmul }
            .map { $0.integerScratchBytes(rows: n) }.max() ?? 0
        tileBytes = max(tileCapacity * MemoryLayout<Float>.stride, integerBytes)
        tile = UnsafeMutableRawPointer.allocate(byteCount: tileBytes, alignment: 64)
            .bindMemory(to: Float.self, capacity: tileBytes / MemoryLayout<Float>.stride)
        let batchWidth =
            model.linears.contains { !heads.contains($0.name) && $0.hasIntegerMatmul }
            ? max(d, qw, hp.feedForwardLength) : 0
        actsBatch = QuantizedActivations(capacity: n > 1 ? n * batchWidth : 0)
        actsModel = QuantizedActivations(capacity: d)
        actsAttention = QuantizedActivations(capacity: qw)
        actsHidden = QuantizedActivations(capacity: hp.feedForwardLength)
        x = .allocate(capacity: n * d)
        xb = .allocate(capacity: n * d)
        xb2 = .allocate(capacity: n * d)
        q = .allocate(capacity: n * qw)
        k = .allocate(capacity: n * max(1, kvMax * hp.headDim))
        v = .allocate(capacity: n * max(1, kvMax * hp.headDim))
        attnOut = .allocate(capacity: n * qw)
        bcx = .allocate(capacity: n * 3 * d)
        gate = .allocate(capacity: n * hp.feedForwardLength)
        up = .allocate(capacity: n * hp.feedForwardLength)
        // Decode: one row per head; prefill: a query block per head (heads run in parallel).
        scores = .allocate(capacity: hp.headCount * max(1, min(n, Self.queryBlock)) * self.contextLength)
        ropeCache = .allocate(capacity: n * hp.ropeDimensions)
        lastLogits = .allocate(capacity: hp.vocabularySize)
        ropeThetaScale = Elementwise.ropeThetaScale(base: hp.ropeFreqBase, dimensions: hp.ropeDimensions)
    }

    deinit {
        for p in [x, xb, xb2, q, k, v, attnOut, bcx, gate, up, scores, ropeCache, lastLogits, kvScratch] { p.deallocate() }
        UnsafeMutableRawPointer(tile).deallocate()
    }

    /// The logits of the last evaluated token (`vocabularySize` floats). Valid until the
    /// next evaluation.
    public var logits: UnsafeBufferPointer<Float> { UnsafeBufferPointer(start: lastLogits, count: hp.vocabularySize) }

    /// Bytes held by the attention and convolution caches (their capacity; pages are
    /// touched only as positions fill).
    public var cacheByteCount: Int { kv.byteCount + conv.byteCount }

    /// Forgets every token (an empty sequence).
    public func reset() { position = 0 }

    /// Forgets the tokens from `newPosition` on, keeping the caches of the prefix: the next
    /// evaluation continues from there exactly as if the later tokens were never seen.
    public func truncate(to newPosition: Int) {
        position = max(0, min(position, newPosition))
    }

    /// Evaluates `tokens` at the current position, appending them to the caches, and
    /// leaves the last token's logits in `logits`.
    public func evaluate(_ tokens: [Int]) throws(ModelError) {
        try evaluate(tokens, allLogits: nil)
    }

    /// Evaluates `tokens` and returns the logits of every one of them (`tokens.count`
    /// rows of `vocabularySize`). For tests and tools; allocates the result.
    public func evaluateAllLogits(_ tokens: [Int]) throws(ModelError) -> [[Float]] {
        var rows: [[Float]] = []
        try evaluate(tokens, allLogits: { rows.append(Array($0)) })
        return rows
    }

    private func evaluate(_ tokens: [Int], allLogits: ((UnsafeBufferPointer<Float>) -> Void)?) throws(ModelError) {
        guard !tokens.isEmpty else { throw .invalidBatch(count: 0, maximum: maxBatch) }
        guard position + tokens.count <= contextLength else {
            throw .contextOverflow(position: position, tokens: tokens.count, contextLength: contextLength)
        }
        for t in tokens where t < 0 || t >= hp.vocabularySize {
            throw .invalidToken(id: t, vocabularySize: hp.vocabularySize)
        }
        var start = 0
        while start < tokens.count {
            let end = min(tokens.count, start + maxBatch)
            tokens.withUnsafeBufferPointer { buf in
                forward(UnsafeBufferPointer(rebasing: buf[start..<end]), allLogits: allLogits)
            }
            start = end
        }
    }

    // MARK: - The forward pass

    /// Runs a batch of `n` tokens at positions `position ..< position+n`.
    private func forward(_ tokens: UnsafeBufferPointer<Int>, allLogits: ((UnsafeBufferPointer<Float>) -> Void)?) {
        let n = tokens.count, d = hp.embeddingLength, w = model.weights

        // x = embed(tokens)
        for (i, t) in tokens.enumerated() { w.tokenEmbedding.row(t, into: x + i * d) }
        for i in 0..<n {
            Elementwise.ropeCache(
                position: position + i, thetaScale: ropeThetaScale, pairs: hp.ropeDimensions / 2,
                into: ropeCache + i * hp.ropeDimensions)
        }

        for (l, layer) in w.layers.enumerated() {
            // h = x + mixer(norm(x))
            rmsNormRows(x, layer.mixerNorm, xb, n)
            switch layer.mixer {
            case .attention(let a): attention(a, layer: l, n: n)
            case .shortConv(let c): shortConv(c, layer: l, n: n)
            }
            addRows(xb2, into: x, n)
            // out = h + ffn(norm(h))
            rmsNormRows(x, layer.ffnNorm, xb, n)
            feedForward(layer.ffn, n: n)
            addRows(xb2, into: x, n)
        }

        // logits = output(norm(x)) for the last row, or every row when asked
        let vocab = hp.vocabularySize
        if let allLogits {
            for i in 0..<n {
                rmsNormRows(x + i * d, w.outputNorm, xb, 1)
                project(w.output, xb, 1, lastLogits, actsModel)
                allLogits(UnsafeBufferPointer(start: lastLogits, count: vocab))
            }
        } else {
            rmsNormRows(x + (n - 1) * d, w.outputNorm, xb, 1)
            project(w.output, xb, 1, lastLogits, actsModel)
        }
        position += n
    }

    private func rmsNormRows(_ src: UnsafeMutablePointer<Float>, _ weight: [Float], _ dst: UnsafeMutablePointer<Float>, _ n: Int) {
        let d = hp.embeddingLength, eps = hp.rmsEpsilon
        weight.withUnsafeBufferPointer { wb in
            inParallel(rows: n) { rows in
                for i in rows { Elementwise.rmsNorm(src + i * d, weight: wb.baseAddress!, dst + i * d, count: d, eps: eps) }
            }
        }
    }

    /// Runs `body` over row ranges covering `0..<n`: on the pool for a batch, inline for
    /// one row (decode's elementwise work is too small to hand out).
    @inline(__always)
    private func inParallel(rows n: Int, _ body: (Range<Int>) -> Void) {
        if n > 1 { pool.parallelFor(count: n, minChunk: 8, body) } else { body(0..<n) }
    }

    /// `y += x` over `n` rows of `d`.
    private func addRows(_ x: UnsafeMutablePointer<Float>, into y: UnsafeMutablePointer<Float>, _ n: Int) {
        let d = hp.embeddingLength
        inParallel(rows: n) { r in Elementwise.add(x + r.lowerBound * d, into: y + r.lowerBound * d, count: r.count * d) }
    }

    /// `out = input · Wᵀ` for `n` rows: one quantized matvec when `n == 1` (the input is
    /// quantized into `acts` unless `quantized` says it already is), else a BLAS matmul.
    @inline(__always)
    private func project(
        _ w: Linear, _ input: UnsafeMutablePointer<Float>, _ n: Int, _ out: UnsafeMutablePointer<Float>,
        _ acts: QuantizedActivations, quantized: Bool = false
    ) {
        if !quantized { actsBatchSource = nil }
        if n == 1 {
            if !quantized { acts.quantize(input, count: w.cols) }
            w.apply(acts, out, pool: pool)
        } else if w.hasIntegerMatmul {
            // A batch input is quantized once and shared by the matrices that read it.
            if actsBatchSource != input {
                actsBatch.quantizeRows(input, rows: n, cols: w.cols, pool: pool)
                actsBatchSource = input
            }
            w.apply(batch: actsBatch, count: n, out, scratch: UnsafeMutableRawPointer(tile), scratchBytes: tileBytes, pool: pool)
        } else {
            w.apply(batch: input, count: n, out, tile: tile, tileCapacity: tileCapacity, pool: pool)
        }
    }

    /// SwiGLU: xb2 = down(silu(gate·xb) * (up·xb)).
    private func feedForward(_ f: FeedForwardWeights, n: Int) {
        let ff = hp.feedForwardLength
        project(f.gate, xb, n, gate, actsModel)
        project(f.up, xb, n, up, actsModel, quantized: true)
        let gate = self.gate, up = self.up
        inParallel(rows: n) { r in
            Elementwise.siluMultiply(gate + r.lowerBound * ff, up + r.lowerBound * ff, count: r.count * ff)
        }
        project(f.down, gate, n, xb2, actsHidden)
    }

    /// Grouped-query causal self-attention over the cache: xb2 = wo · attention(xb).
    private func attention(_ a: AttentionWeights, layer l: Int, n: Int) {
        let hd = hp.headDim, heads = hp.headCount, kvHeads = a.kvHeads
        let qw = heads * hd, kw = kvHeads * hd
        project(a.wq, xb, n, q, actsModel)
        project(a.wk, xb, n, k, actsModel, quantized: true)
        project(a.wv, xb, n, v, actsModel, quantized: true)

        inParallel(rows: n) { rows in
            for i in rows {
                let qi = q + i * qw, ki = k + i * kw
                if let qn = a.qNorm, let kn = a.kNorm {
                    qn.withUnsafeBufferPointer { w in
                        for h in 0..<heads {
                            Elementwise.rmsNorm(qi + h * hd, weight: w.baseAddress!, qi + h * hd, count: hd, eps: hp.rmsEpsilon)
                        }
                    }
                    kn.withUnsafeBufferPointer { w in
                        for h in 0..<kvHeads {
                            Elementwise.rmsNorm(ki + h * hd, weight: w.baseAddress!, ki + h * hd, count: hd, eps: hp.rmsEpsilon)
                        }
                    }
                }
                let rc = ropeCache + i * hp.ropeDimensions
                Elementwise.rope(qi, heads: heads, headDim: hd, cache: rc, pairs: hp.ropeDimensions / 2, style: hp.ropeStyle)
                Elementwise.rope(ki, heads: kvHeads, headDim: hd, cache: rc, pairs: hp.ropeDimensions / 2, style: hp.ropeStyle)
                // Append k, v to the cache at this token's position.
                for h in 0..<kvHeads {
                    kv.store(layer: l, head: h, position: position + i, key: ki + h * hd, value: v + i * kw + h * hd)
                }
            }
        }

        // softmax(q kᵀ / sqrt(hd)) v per head, causal: query i sees positions 0 ... position+i.
        let scale = 1 / Float(hd).squareRoot()
        let group = heads / kvHeads
        if n == 1 {
            decodeAttention(layer: l, scale: scale, group: group)
            project(a.wo, attnOut, n, xb2, actsAttention)
            return
        }
        prefillAttention(layer: l, n: n, scale: scale, group: group, kvHeads: kvHeads)
        project(a.wo, attnOut, n, xb2, actsAttention)
    }

    /// Causal attention of a batch of `n` queries over the cache, one query head per task
    /// on the pool; each head runs its query blocks through single-threaded OpenBLAS
    /// sgemm (`scores = Q Kᵀ`, softmax, `out = scores V`) in its own `scores` region.
    private func prefillAttention(layer l: Int, n: Int, scale: Float, group: Int, kvHeads: Int) {
        let hd = hp.headDim, heads = hp.headCount, qw = heads * hd
        let total = position + n, ctxFloats = contextLength * hd, start = position
        let kv = self.kv, kvScratch = self.kvScratch, q = self.q, attnOut = self.attnOut, scores = self.scores
        let queryBlock = Self.queryBlock, scoreStride = max(1, min(maxBatch, Self.queryBlock)) * contextLength
        // An F16 cache is converted once per KV head (heads of a group share it).
        if kv.type == .f16 {
            pool.parallelFor(count: kvHeads) { range in
                for g in range {
                    _ = kv.rows(keys: true, layer: l, head: g, count: total, scratch: kvScratch + 2 * g * ctxFloats)
                    _ = kv.rows(keys: false, layer: l, head: g, count: total, scratch: kvScratch + (2 * g + 1) * ctxFloats)
                }
            }
        }
        // Our threads run one head each: OpenBLAS must not start its own threads inside.
        let blasThreads = openblas_get_num_threads()
        if pool.threads > 1 && blasThreads > 1 { openblas_set_num_threads(1) }
        pool.parallelFor(count: heads) { range in
            for h in range {
                let g = h / group
                let keys =
                    kv.type == .f32
                    ? kv.rows(keys: true, layer: l, head: g, count: total, scratch: kvScratch)
                    : UnsafePointer(kvScratch + 2 * g * ctxFloats)
                let values =
                    kv.type == .f32
                    ? kv.rows(keys: false, layer: l, head: g, count: total, scratch: kvScratch)
                    : UnsafePointer(kvScratch + (2 * g + 1) * ctxFloats)
                let sc = scores + h * scoreStride
                var i0 = 0
                while i0 < n {
                    let m = min(queryBlock, n - i0)
                    let span = start + i0 + m  // keys visible to the last query of the block
                    // sc[m][span] = scale · Q_h[i0..<i0+m] · K[0..<span]ᵀ
                    cblas_sgemm(
                        CblasRowMajor, CblasNoTrans, CblasTrans, Int32(m), Int32(span), Int32(hd),
                        scale, q + i0 * qw + h * hd, Int32(qw), keys, Int32(hd), 0, sc, Int32(span))
                    for r in 0..<m {
                        let visible = start + i0 + r + 1
                        let row = sc + r * span
                        Elementwise.softmax(row, count: visible)
                        for j in visible..<span { row[j] = 0 }
                    }
                    // attnOut[i0..<i0+m, head h] = sc · V[0..<span]
                    cblas_sgemm(
                        CblasRowMajor, CblasNoTrans, CblasNoTrans, Int32(m), Int32(hd), Int32(span),
                        1, sc, Int32(span), values, Int32(hd), 0, attnOut + i0 * qw + h * hd, Int32(qw))
                    i0 += m
                }
            }
        }
        if pool.threads > 1 && blasThreads > 1 { openblas_set_num_threads(blasThreads) }
    }

    /// Attention of one new token over the cache, one KV head (and the query heads of
    /// its group) per task on the pool:
    /// `out_h = Σ_j softmax_j(q_h·k_j · scale) v_j` for j in 0 ... position.
    private func decodeAttention(layer l: Int, scale: Float, group: Int) {
        let hd = hp.headDim, span = position + 1, ctxFloats = contextLength * hd
        let q = self.q, attnOut = self.attnOut, scores = self.scores, kv = self.kv, kvScratch = self.kvScratch
        pool.parallelFor(count: hp.headCount / group) { kvHeads in
            for g in kvHeads {
                let keys = kv.rows(keys: true, layer: l, head: g, count: span, scratch: kvScratch + 2 * g * ctxFloats)
                let values = kv.rows(keys: false, layer: l, head: g, count: span, scratch: kvScratch + (2 * g + 1) * ctxFloats)
                for h in (g * group)..<((g + 1) * group) {
                    let qh = q + h * hd, out = attnOut + h * hd, row = scores + h * span
                    for j in 0..<span { row[j] = Elementwise.dot(qh, keys + j * hd, count: hd) * scale }
                    Elementwise.softmax(row, count: span)
                    out.update(repeating: 0, count: hd)
                    for j in 0..<span { Elementwise.axpy(row[j], values + j * hd, out, count: hd) }
                }
            }
        }
    }

    /// LFM2's gated short convolution: xb2 = out_proj(C * conv(B * x)).
    private func shortConv(_ c: ShortConvWeights, layer l: Int, n: Int) {
        let d = hp.embeddingLength, L = hp.convKernelLength
        project(c.inProj, xb, n, bcx, actsModel)
        c.kernel.withUnsafeBufferPointer { kernel in
            for i in 0..<n {
                let row = bcx + i * 3 * d
                let b = row, cGate = row + d, xIn = row + 2 * d
                let p = position + i
                // Store B * x as this position's convolution input.
                let input = conv.row(layer: l, position: p)
                for ch in 0..<d { input[ch] = b[ch] * xIn[ch] }
                // y[ch] = C[ch] * Σ_k kernel[ch][k] · input[p - (L-1) + k][ch]
                let y = xb + i * d  // xb's row i is no longer needed: reuse it for y
                for ch in 0..<d { y[ch] = 0 }
                for tap in 0..<L {
                    let src = p - (L - 1) + tap
                    guard src >= 0 else { continue }
                    let past = conv.row(layer: l, position: src)
                    for ch in 0..<d { y[ch] += kernel[ch * L + tap] * past[ch] }
                }
                for ch in 0..<d { y[ch] *= cGate[ch] }
            }
        }
        project(c.outProj, xb, n, xb2, actsModel)
    }
}
