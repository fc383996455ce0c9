import Kernels

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
/// o_h     = softmax(q_h K_gᵀ · scale, causal) V_g          scale = 1/sqrt(hd)
/// out     = o W_oᵀ                           [n, d]
/// ```
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

    var linears: [Linear] { [wq, wk, wv, wo] }
    var cache: LayerCache { .keysAndValues(kvHeads: kvHeads, headDim: headDim) }

    func callAsFunction(_ x: Rows, into out: UnsafeMutablePointer<Float>, _ f: ForwardPass) -> Rows {
        let n = x.count, hd = headDim, heads = heads, kvHeads = kvHeads
        let input = f.quantize(x, for: wq, wk, wv)
        let q = f.project(wq, input, into: f.q)
        let k = f.project(wk, input, into: f.k)
        let v = f.project(wv, input, into: f.v)

        let rotations = f.rotations(for: rope), pairs = rope.dimensions / 2, style = rope.style
        let cache = f.sequence.kv, start = f.start, layer = layer, qkNorm = queryKeyNorm
        f.inParallel(rows: n) { rows in
            for i in rows {
                if let qkNorm {
                    qkNorm.query.normalize(heads: heads, at: q[i])
                    qkNorm.key.normalize(heads: kvHeads, at: k[i])
                }
                let angles = rotations + i * rope.dimensions
                Elementwise.rope(q[i], heads: heads, headDim: hd, cache: angles, pairs: pairs, style: style)
                Elementwise.rope(k[i], heads: kvHeads, headDim: hd, cache: angles, pairs: pairs, style: style)
                for g in 0..<kvHeads {
                    cache.store(layer: layer, head: g, position: start + i, key: k[i] + g * hd, value: v[i] + g * hd)
                }
            }
        }

        let o = Rows(base: f.attended, count: n, width: heads * hd)
        if n == 1 {
            attendOne(q, into: o, f)
        } else {
            attendCausal(q, into: o, f)
        }
        return f.project(wo, f.quantize(o, for: wo), into: out)
    }

    /// One new token over the cache, one KV head (and the query heads of its group) per
    /// task on the pool.
    private func attendOne(_ q: Rows, into o: Rows, _ f: ForwardPass) {
        let hd = headDim, span = f.start + 1, group = heads / kvHeads, layer = layer, scale = scale
        let cache = f.sequence.kv, scratch = f.kvScratch, scores = f.scores, ctxFloats = f.contextLength * hd
        f.pool.parallelFor(count: kvHeads) { range in
            for g in range {
                let keys = cache.rows(keys: true, layer: layer, head: g, count: span, scratch: scratch + 2 * g * ctxFloats)
                let values = cache.rows(keys: false, layer: layer, head: g, count: span, scratch: scratch + (2 * g + 1) * ctxFloats)
                for h in (g * group)..<((g + 1) * group) {
                    CausalAttention.query(
                        q[0] + h * hd, keys: keys, values: values, span: span, headDim: hd, scale: scale,
                        scores: scores + h * span, out: o[0] + h * hd)
                }
            }
        }
    }

    /// A batch of queries over the cache, one query head per task on the pool, each head
    /// through single-threaded OpenBLAS in its own region of `scores`.
    private func attendCausal(_ q: Rows, into o: Rows, _ f: ForwardPass) {
        let n = q.count, hd = headDim, group = heads / kvHeads, layer = layer, scale = scale
        let start = f.start, total = start + n, ctxFloats = f.contextLength * hd
        let cache = f.sequence.kv, scratch = f.kvScratch, scores = f.scores, scoreStride = f.scoreRowsPerHead * f.contextLength
        // An F16 cache is converted once per KV head (the heads of a group share it).
        if cache.type == .f16 {
            f.pool.parallelFor(count: kvHeads) { range in
                for g in range {
                    _ = cache.rows(keys: true, layer: layer, head: g, count: total, scratch: scratch + 2 * g * ctxFloats)
                    _ = cache.rows(keys: false, layer: layer, head: g, count: total, scratch: scratch + (2 * g + 1) * ctxFloats)
                }
            }
        }
        // Our threads run one head each: OpenBLAS must not start its own threads inside.
        BLAS.withOneThread(when: f.pool.threads > 1) {
            f.pool.parallelFor(count: heads) { range in
                for h in range {
                    let g = h / group
                    let keys =
                        cache.type == .f32
                        ? cache.rows(keys: true, layer: layer, head: g, count: total, scratch: scratch)
                        : UnsafePointer(scratch + 2 * g * ctxFloats)
                    let values =
                        cache.type == .f32
                        ? cache.rows(keys: false, layer: layer, head: g, count: total, scratch: scratch)
                        : UnsafePointer(scratch + (2 * g + 1) * ctxFloats)
                    CausalAttention.causal(
                        queries: q[0] + h * hd, queryStride: q.width, count: n, start: start,
                        keys: keys, values: values, headDim: hd, scale: scale,
                        scores: scores + h * scoreStride, out: o[0] + h * hd, outStride: o.width)
                }
            }
        }
    }
}
