import Kernels

/// RMSNorm (Zhang & Sennrich, 2019), per row:
///
/// ```
/// y = x / sqrt(mean(x²) + ε) ⊙ g          g: [width]
/// ```
struct RMSNorm: Sendable {
    let weight: [Float]  // g
    let epsilon: Float

    /// `RMSNorm(x_i)` for every row of `x`, in the pass's `normed` rows (a block's input,
    /// by the blocks' convention: norms write `normed`, blocks write `mixed`).
    func callAsFunction(_ x: Rows, _ f: ForwardPass) -> Rows { self(x, into: f.normed, f) }

    /// `y_i = RMSNorm(x_i)` for every row of `x`, into `y` (which may be `x`).
    func callAsFunction(_ x: Rows, into y: UnsafeMutablePointer<Float>, _ f: ForwardPass) -> Rows {
        let out = Rows(base: y, count: x.count, width: x.width)
        weight.withUnsafeBufferPointer { g in
            f.inParallel(rows: x.count) { rows in
                for i in rows { Elementwise.rmsNorm(x[i], weight: g.baseAddress!, out[i], count: x.width, eps: epsilon) }
            }
        }
        return out
    }

    /// Normalizes each of `heads` consecutive vectors of `weight.count` floats at `p` in
    /// place (the per-head q/k norm of LFM2 and Gemma 3).
    @inline(__always)
    func normalize(heads: Int, at p: UnsafeMutablePointer<Float>) {
        let hd = weight.count
        weight.withUnsafeBufferPointer { g in
            for h in 0..<heads { Elementwise.rmsNorm(p + h * hd, weight: g.baseAddress!, p + h * hd, count: hd, eps: epsilon) }
        }
    }
}

/// The SwiGLU feed-forward block (Shazeer, 2020), the FFN of Llama and LFM2:
///
/// ```
/// g, u = x W_gateᵀ, x W_upᵀ                 [n, ff]    blk.i.ffn_gate, blk.i.ffn_up
/// h    = SiLU(g) ⊙ u,  SiLU(g) = g σ(g)     [n, ff]
/// out  = h W_downᵀ                          [n, d]     blk.i.ffn_down
/// ```
struct SwiGLU: Sendable {
    let gate: Linear  // [ff, d]
    let up: Linear  // [ff, d]
    let down: Linear  // [d, ff]

    var linears: [Linear] { [gate, up, down] }

    /// `SwiGLU(x)` in the pass's `mixed` rows.
    func callAsFunction(_ x: Rows, _ f: ForwardPass) -> Rows {
        gatedFeedForward(x, gate: gate, up: up, down: down, f) { Elementwise.siluMultiply($0, $1, count: $2) }
    }
}

/// `out = (act(x W_gateᵀ) ⊙ x W_upᵀ) W_downᵀ` in the pass's `mixed` rows: the gated
/// feed-forward blocks (SwiGLU, Gemma's GEGLU), which differ only in
/// `activateAndMultiply(g, u, count)`, which leaves `act(g) ⊙ u` in `g`.
func gatedFeedForward(
    _ x: Rows, gate: Linear, up: Linear, down: Linear, _ f: ForwardPass,
    _ activateAndMultiply: (UnsafeMutablePointer<Float>, UnsafePointer<Float>, Int) -> Void
) -> Rows {
    let input = f.quantize(x, for: gate, up)
    let gu = f.project([(gate, f.gate), (up, f.up)], input)
    let g = gu[0], u = gu[1]
    f.inParallel(rows: x.count) { rows in
        for i in rows { activateAndMultiply(g[i], u[i], g.width) }
    }
    return f.project(down, f.quantize(g, for: down), into: f.mixed)
}
