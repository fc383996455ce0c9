import Kernels
import Synchronization

/// Rotary position embedding (Su et al., 2021): the first `dimensions` dimensions of each
/// query and key head, taken in pairs, are rotated by `θ_i = position · base^(-2i/dims)`.
/// Which dimensions form a pair is the architecture's `style`.
struct RotaryEmbedding: Sendable, Equatable {
    let base: Float
    let dimensions: Int
    let style: Elementwise.RopeStyle

    /// `base^(-2/dims)`, the ratio between successive rotation frequencies.
    var thetaScale: Float { Elementwise.ropeThetaScale(base: base, dimensions: dimensions) }
}

/// Grouped-query causal self-attention with rotary positions (Vaswani et al., 2017;
/// GQA: Ainslie et al., 2023), each query head `h` reading the keys and values of KV head
/// `g = h / (heads / kvHeads)`:
///
/// ```
/// q, k, v = x W_qᵀ, x W_kᵀ, x W_vᵀ           [n, heads·hd], [n, kvHeads·hd] × 2
/// q, k    = RMSNorm(q_h), RMSNorm(k_g)       per head, when the architecture has q/k norms
/// q, k    = RoPE(q, p), RoPE(k, p)           p: the row's position
/// K, V   += k, v                             the cache of this layer
/// o_h     = softmax(q_h K_gᵀ · scale, causal) V_g          scale = 1/sqrt(hd) unless the architecture says
/// out     = o W_oᵀ                           [n, d]
/// ```
///
/// With a sliding `window` (Gemma 3's local layers), the query at position `p` sees
/// positions `p - window + 1 ... p` only, and the layer's cache keeps just those.
struct Attention: Sendable {
    let layer: Int  // index of this layer's cache
    let wq: Linear  // [heads·hd, d]    blk.i.attn_q
    let wk: Linear  // [kvHeads·hd, d]  blk.i.attn_k
    let wv: Linear  // [kvHeads·hd, d]  blk.i.attn_v
    let wo: Linear  // [d, heads·hd]    blk.i.attn_output
    /// Per-head RMSNorm of queries and keys (`blk.i.attn_q_norm`, `attn_k_norm`), or nil.
    let queryKeyNorm: (query: RMSNorm, key: RMSNorm)?
    let rope: RotaryEmbedding
    let heads: Int
    let kvHeads: Int
    let headDim: Int
    let scale: Float
    /// The sliding window in positions (each query sees its own and the `window - 1`
    /// before it), or nil: every earlier position.
    let window: Int?

    var linears: [Linear] { [wq, wk, wv, wo] }
    var cache: LayerCache {
        guard let window else { return .keysAndValues(kvHeads: kvHeads, headDim: headDim) }
        return .windowedKeysAndValues(kvHeads: kvHeads, headDim: headDim, window: window)
    }

    /// `Attention(x)` in the pass's `mixed` rows.
    func callAsFunction(_ x: Rows, _ f: ForwardPass) -> Rows {
        let n = x.count, hd = headDim, heads = heads, kvHeads = kvHeads
        let input = f.quantize(x, for: wq, wk, wv)
        let qkv = f.project([(wq, f.q), (wk, f.k), (wv, f.v)], input)
        let q = qkv[0], k = qkv[1], v = qkv[2]

        let rotations = f.rotations(for: rope), pairs = rope.dimensions / 2, style = rope.style
        let segments = f.segments, positions = f.positions, rowSegment = f.rowSegment, layer = layer, qkNorm = queryKeyNorm
        f.inParallel(rows: n) { rows in
            for i in rows {
                if let qkNorm {
                    qkNorm.query.normalize(heads: heads, at: q[i])
                    qkNorm.key.normalize(heads: kvHeads, at: k[i])
                }
                let angles = rotations + i * rope.dimensions
                Elementwise.rope(q[i], heads: heads, headDim: hd, cache: angles, pairs: pairs, style: style)
                Elementwise.rope(k[i], heads: kvHeads, headDim: hd, cache: angles, pairs: pairs, style: style)
                // Append k, v to the row's sequence's cache at the row's position.
                let cache = segments[rowSegment[i]].sequence.kv
                for g in 0..<kvHeads {
                    cache.store(layer: layer, head: g, position: positions[i], key: k[i] + g * hd, value: v[i] + g * hd)
                }
            }
        }

        // Each sequence's queries over its own cache.
        let o = Rows(base: f.attended, count: n, width: heads * hd)
        if f.singleRows > 0 { attendOne(q, into: o, f) }
        for segment in f.segments[f.singleRows...] { attendCausal(q, into: o, segment, f) }
        return f.project(wo, f.quantize(o, for: wo), into: f.mixed)
    }

    /// The one-token sequences of the pass (rows `0..<singleRows`), each over its cache.
    /// A task on the pool is one KV head (and the query heads of its group) and one block of
    /// `CausalAttention.decodeKeyBlock` keys of one sequence: a long
    /// cache is split over the threads even when the model has fewer KV heads than threads
    /// (Gemma 3 270M has one). The keys and values are read where the cache stores them, F32
    /// or F16 (widened in registers: an F16 cache reads half the bytes). When that gives
    /// fewer tasks than threads (Gemma's one group over a short cache), the query heads of a
    /// group are split into parts, one task each: a head's arithmetic does not depend on
    /// which heads it runs with, so the results are the same bits. (Splitting SmolLM2's three
    /// groups for two threads measured slower: each part reads the group's keys again.) A
    /// query whose keys fill one block writes its output directly; one of several blocks
    /// writes its part to `f.decodePartials`, and the parts are merged after the loop
    /// (`CausalAttention.mergeBlocks`).
    private func attendOne(_ q: Rows, into o: Rows, _ f: ForwardPass) {
        let hd = headDim, heads = heads, group = heads / kvHeads, layer = layer, scale = scale, window = window
        let context = f.contextLength, segments = f.segments, sequences = f.singleRows
        let scores = f.scores, blockKeys = CausalAttention.decodeKeyBlock
        let partials = f.decodePartials, contextBlocks = f.decodeBlocksPerQuery
        func span(_ s: Int) -> (first: Int, count: Int) {
            let position = segments[s].start, first = CausalAttention.firstVisible(position, window)
            return (first, position + 1 - first)
        }
        var blocks = 1
        for s in 0..<sequences { blocks = max(blocks, CausalAttention.decodeBlocks(span: span(s).count)) }
        // Query head h of sequence s: block b's output, then every block's maximum and sum.
        func part(_ s: Int, _ h: Int) -> UnsafeMutablePointer<Float> { partials + (s * heads + h) * contextBlocks * (hd + 2) }
        // Each sequence is a task of its own (SmolLM2's 3 groups are 12 tasks for 4
        // sequences, where whole groups ran 2 against 1 on two threads), its scores in row s
        // of each head's `scoreRowsPerHead` (one per sequence the pass can hold).
        let scoreRows = f.scoreRowsPerHead
        precondition(sequences <= scoreRows, "\(sequences) sequences, \(scoreRows) score rows")
        let threads = f.pool.threads, wholeTasks = kvHeads * blocks * sequences
        let parts = wholeTasks < threads ? min(group, (threads + wholeTasks - 1) / wholeTasks) : 1
        f.pool.parallelFor(count: wholeTasks * parts) { range in
            for task in range {
                let s = task % sequences, groupTask = task / sequences
                let g = groupTask / (blocks * parts), b = groupTask / parts % blocks, p = groupTask % parts
                // Query heads lower..<upper of the group.
                let lower = p * group / parts, upper = (p + 1) * group / parts
                let (first, count) = span(s), n = CausalAttention.decodeBlocks(span: count)
                guard b < n else { continue }
                let from = b * blockKeys, length = min(blockKeys, count - from)
                let cache = segments[s].sequence.kv
                let keys = cache.storedRows(keys: true, layer: layer, head: g, from: first + from, count: length)
                let values = cache.storedRows(keys: false, layer: layer, head: g, from: first + from, count: length)
                // The group's query heads together: each key and value row read once.
                let h0 = g * group + lower, groupHeads = upper - lower, split = n > 1
                let scoreBase = scores + (h0 * scoreRows + s) * context
                let target = split ? part(s, h0) + b * hd : o[s] + h0 * hd, stride = split ? contextBlocks * (hd + 2) : hd
                let record = { (h: Int, top: Float, sum: Float) in
                    let p = part(s, h0 + h)
                    p[contextBlocks * hd + b] = top
                    p[contextBlocks * hd + contextBlocks + b] = sum
                }
                switch cache.type {
                case .f32:
                    CausalAttention.queryGroup(
                        q[s] + h0 * hd, heads: groupHeads, keys: FloatRows(keys.assumingMemoryBound(to: Float.self), width: hd),
                        values: FloatRows(values.assumingMemoryBound(to: Float.self), width: hd), span: length, headDim: hd,
                        scale: scale, scores: scoreBase + from, scoreStride: scoreRows * context, out: target,
                        outStride: stride, record: record)
                case .f16:
                    CausalAttention.queryGroup(
                        q[s] + h0 * hd, heads: groupHeads, keys: HalfRows(keys, width: hd), values: HalfRows(values, width: hd),
                        span: length, headDim: hd, scale: scale, scores: scoreBase + from, scoreStride: scoreRows * context,
                        out: target, outStride: stride, record: record)
                }
            }
        }
        guard blocks > 1 else { return }
        for s in 0..<sequences {
            let n = CausalAttention.decodeBlocks(span: span(s).count)
            guard n > 1 else { continue }
            for h in 0..<heads {
                let p = part(s, h)
                CausalAttention.mergeBlocks(
                    p, maxima: p + contextBlocks * hd, sums: p + contextBlocks * hd + contextBlocks, count: n, headDim: hd,
                    out: o[s] + h * hd)
            }
        }
    }

    /// A chunk of one sequence's queries over its cache, one query head per task on the
    /// pool, each head through single-threaded OpenBLAS in its own region of `scores`.
    private func attendCausal(_ q: Rows, into o: Rows, _ segment: ForwardPass.Segment, _ f: ForwardPass) {
        let n = segment.rows.count, first = segment.rows.lowerBound
        let hd = headDim, group = heads / kvHeads, layer = layer, scale = scale, window = window
        let start = segment.start, ctxFloats = f.contextLength * hd
        // The keys some query of the chunk sees.
        let keyStart = CausalAttention.firstVisible(start, window), keyCount = start + n - keyStart
        let cache = segment.sequence.kv, scratch = f.kvScratch, scores = f.scores, scoreStride = f.scoreRowsPerHead * f.contextLength
        // An F16 cache is converted once per KV head (the heads of a group share it).
        if cache.type == .f16 {
            f.pool.parallelFor(count: kvHeads) { range in
                for g in range {
                    _ = cache.rows(keys: true, layer: layer, head: g, from: keyStart, count: keyCount, scratch: scratch + 2 * g * ctxFloats)
                    _ = cache.rows(
                        keys: false, layer: layer, head: g, from: keyStart, count: keyCount, scratch: scratch + (2 * g + 1) * ctxFloats)
                }
            }
        }
        // Tasks of one head and one block of `queryBlock` queries, handed out one at a
        // time: 9 heads of 8 blocks balance over 2 threads where 9 whole heads would not
        // (one thread running 5, the other 4). Each thread keeps one region of `scores`
        // (a head's region: there are at least as many as threads here), and the blocks
        // run exactly as `causal` runs them for a whole head, so the results do not
        // depend on who ran what.
        let blockQueries = CausalAttention.queryBlock, blocks = (n + blockQueries - 1) / blockQueries, tasks = heads * blocks
        let regions = Swift.min(f.pool.threads, heads, tasks)
        let nextTask = Atomic<Int>(0)
        // Our threads run one task each: OpenBLAS must not start its own threads inside.
        BLAS.withOneThread(when: f.pool.threads > 1) {
            f.pool.parallelFor(count: regions) { range in
                for region in range {
                    while true {
                        let task = nextTask.add(1, ordering: .relaxed).oldValue
                        guard task < tasks else { break }
                        let h = task / blocks, i0 = task % blocks * blockQueries, m = Swift.min(blockQueries, n - i0)
                        let g = h / group
                        let keys =
                            cache.type == .f32
                            ? cache.rows(keys: true, layer: layer, head: g, from: keyStart, count: keyCount, scratch: scratch)
                            : UnsafePointer(scratch + 2 * g * ctxFloats)
                        let values =
                            cache.type == .f32
                            ? cache.rows(keys: false, layer: layer, head: g, from: keyStart, count: keyCount, scratch: scratch)
                            : UnsafePointer(scratch + (2 * g + 1) * ctxFloats)
                        CausalAttention.causal(
                            queries: q[first + i0] + h * hd, queryStride: q.width, count: m, start: start + i0,
                            keys: keys, values: values, keyStart: keyStart, window: window, headDim: hd, scale: scale,
                            scores: scores + region * scoreStride, out: o[first + i0] + h * hd, outStride: o.width)
                    }
                }
            }
        }
    }
}
