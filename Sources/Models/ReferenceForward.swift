import GGUF
import Kernels

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The forward pass written out plainly, in the spirit of llama2.c's `forward`: one token
/// at a time, F32, one thread, plain loops (no SIMD kernels, no BLAS, no thread pool),
/// every weight row dequantized when it is used with the scalar reference dequantizers
/// (`GGMLType.dequantizeRowReference`), and the attention keys and values and LFM2's
/// convolution inputs kept in plain arrays.
///
/// It reads the tensors by their GGUF names itself, apart from the engine's weight
/// mapping, so that it is an oracle for the fast engine (`ReferenceTests`) and a first
/// read of how a model computes (docs/walkthrough.md). About 100 times slower than
/// `InferenceSession`: for tests and reading.
///
/// ```swift
/// let reference = ReferenceForward(model: model)
/// for t in tokens { logits = reference.next(t) }
/// ```
public final class ReferenceForward {
    public let model: TransformerModel
    let hp: Hyperparameters

    // What the architectures do differently (one switch, in `init`).
    /// RoPE rotates dimension `i` with `i + half` (NeoX) rather than `2i` with `2i+1`.
    let ropeRotatesHalves: Bool
    /// Attention RMS-normalizes each query and key head (`attn_q_norm`, `attn_k_norm`).
    let normalizesQueryKey: Bool
    /// The final norm's tensor.
    let finalNorm: String
    /// LFM2's short-convolution length `L` (0 without convolution layers).
    let convolutionLength: Int

    // The state: per layer, one row per position.
    var keys: [[[Float]]]  // [layer][position][kvHeads·hd]
    var values: [[[Float]]]  // [layer][position][kvHeads·hd]
    var convolutionInputs: [[[Float]]]  // [layer][position][d], LFM2's B ⊙ x̃
    /// Tokens seen; the next token is evaluated at this position.
    public private(set) var position = 0

    /// A reference forward pass over the weights of `model` (llama or lfm2).
    public init(model: TransformerModel) {
        self.model = model
        hp = model.hyperparameters
        switch hp.architecture {
        case Llama.name:
            (ropeRotatesHalves, normalizesQueryKey, finalNorm, convolutionLength) = (false, false, "output_norm.weight", 0)
        case LFM2.name:
            let L = hp.headCountKV.contains(0) ? try! LFM2.convolutionLength(model.file.metadata) : 0
            (ropeRotatesHalves, normalizesQueryKey, finalNorm, convolutionLength) = (true, true, "token_embd_norm.weight", L)
        // gemma3: query scale, sliding windows, the post-norms and GELU go here and below.
        default:
            preconditionFailure("ReferenceForward has no \(hp.architecture)")
        }
        keys = Array(repeating: [], count: hp.layerCount)
        values = keys
        convolutionInputs = keys
    }

    /// Evaluates `token` at the next position and returns the logits (`vocabularySize`).
    public func next(_ token: Int) -> [Float] {
        let d = hp.embeddingLength
        var x = row("token_embd.weight", token)  // [d]
        for l in 0..<hp.layerCount {
            // h = x + Mixer(RMSNorm(x))
            let input = rmsNorm(x, "blk.\(l).attn_norm.weight")
            let mixed = hp.headCountKV[l] == 0 ? shortConvolution(input, layer: l) : attention(input, layer: l)
            for i in 0..<d { x[i] += mixed[i] }
            // out = h + SwiGLU(RMSNorm(h))
            let ffnOut = swiGLU(rmsNorm(x, "blk.\(l).ffn_norm.weight"), layer: l)
            for i in 0..<d { x[i] += ffnOut[i] }
        }
        position += 1
        // logits = output(RMSNorm(x)), the head tied to the embedding without output.weight
        let head = model.file.tensor(named: "output.weight") == nil ? "token_embd.weight" : "output.weight"
        return matmul(head, rmsNorm(x, finalNorm))
    }

    /// Forgets every token.
    public func reset() {
        position = 0
        keys = Array(repeating: [], count: hp.layerCount)
        values = keys
        convolutionInputs = keys
    }

    // MARK: - The blocks

    /// Grouped-query causal self-attention with RoPE; appends this position's key and value.
    func attention(_ x: [Float], layer l: Int) -> [Float] {
        let hd = hp.headDim, heads = hp.headCount, kvHeads = hp.headCountKV[l], group = heads / kvHeads
        var q = matmul("blk.\(l).attn_q.weight", x)  // [heads·hd]
        var k = matmul("blk.\(l).attn_k.weight", x)  // [kvHeads·hd]
        let v = matmul("blk.\(l).attn_v.weight", x)  // [kvHeads·hd]
        if normalizesQueryKey {
            for h in 0..<heads { normalizeHead(&q, h * hd, "blk.\(l).attn_q_norm.weight") }
            for h in 0..<kvHeads { normalizeHead(&k, h * hd, "blk.\(l).attn_k_norm.weight") }
        }
        rope(&q, heads: heads)
        rope(&k, heads: kvHeads)
        keys[l].append(k)
        values[l].append(v)

        var out = [Float](repeating: 0, count: heads * hd)
        let scale = 1 / Float(hd).squareRoot()
        for h in 0..<heads {
            let g = h / group  // the KV head this query head reads
            // scores_t = q_h · k_t / sqrt(hd) for every position t up to this one
            var scores = keys[l].map { key in
                var s: Float = 0
                for i in 0..<hd { s += q[h * hd + i] * key[g * hd + i] }
                return s * scale
            }
            softmax(&scores)
            // out_h = Σ_t softmax(scores)_t v_t
            for (t, value) in values[l].enumerated() {
                for i in 0..<hd { out[h * hd + i] += scores[t] * value[g * hd + i] }
            }
        }
        return matmul("blk.\(l).attn_output.weight", out)
    }

    /// LFM2's gated short convolution; appends this position's convolution input.
    func shortConvolution(_ x: [Float], layer l: Int) -> [Float] {
        let d = hp.embeddingLength, L = convolutionLength
        let bcx = matmul("blk.\(l).shortconv.in_proj.weight", x)  // [3d]: B, C, x̃
        convolutionInputs[l].append((0..<d).map { bcx[$0] * bcx[2 * d + $0] })  // B ⊙ x̃
        let kernel = vector("blk.\(l).shortconv.conv.weight")  // [d][L]
        var y = [Float](repeating: 0, count: d)
        for tap in 0..<L {
            // tap L-1 weighs this position, tap 0 the position L-1 before it
            let p = position - (L - 1) + tap
            guard p >= 0 else { continue }
            for c in 0..<d { y[c] += kernel[c * L + tap] * convolutionInputs[l][p][c] }
        }
        for c in 0..<d { y[c] *= bcx[d + c] }  // C ⊙ conv
        return matmul("blk.\(l).shortconv.out_proj.weight", y)
    }

    /// `down(SiLU(gate x) ⊙ up x)`.
    func swiGLU(_ x: [Float], layer l: Int) -> [Float] {
        let gate = matmul("blk.\(l).ffn_gate.weight", x), up = matmul("blk.\(l).ffn_up.weight", x)
        let hidden = zip(gate, up).map { g, u in g / (1 + exp(-g)) * u }
        return matmul("blk.\(l).ffn_down.weight", hidden)
    }

    // MARK: - The operations

    /// `x / sqrt(mean(x²) + ε) ⊙ weight`.
    func rmsNorm(_ x: [Float], _ weight: String) -> [Float] {
        let w = vector(weight)
        var sum: Float = 0
        for v in x { sum += v * v }
        let scale = 1 / (sum / Float(x.count) + hp.rmsEpsilon).squareRoot()
        return (0..<x.count).map { x[$0] * scale * w[$0] }
    }

    /// RMSNorm of the head at `v[start ..< start + hd]`, in place.
    func normalizeHead(_ v: inout [Float], _ start: Int, _ weight: String) {
        let head = rmsNorm(Array(v[start..<(start + hp.headDim)]), weight)
        v.replaceSubrange(start..<(start + hp.headDim), with: head)
    }

    /// Rotates the first `ropeDimensions` dimensions of each head, in pairs, by
    /// `θ_i = position · base^(-2i/dims)`.
    func rope(_ v: inout [Float], heads: Int) {
        let hd = hp.headDim, dims = hp.ropeDimensions, half = dims / 2
        for h in 0..<heads {
            for i in 0..<half {
                let theta = Float(position) * powf(hp.ropeFreqBase, -2 * Float(i) / Float(dims))
                let (a, b) = ropeRotatesHalves ? (h * hd + i, h * hd + i + half) : (h * hd + 2 * i, h * hd + 2 * i + 1)
                let (x0, x1) = (v[a], v[b])
                v[a] = x0 * cos(theta) - x1 * sin(theta)
                v[b] = x0 * sin(theta) + x1 * cos(theta)
            }
        }
    }

    /// `e^(x - max) / Σ e^(x - max)`, in place.
    func softmax(_ x: inout [Float]) {
        let top = x.max()!
        var sum: Float = 0
        for i in x.indices {
            x[i] = exp(x[i] - top)
            sum += x[i]
        }
        for i in x.indices { x[i] /= sum }
    }

    /// `W x` for the weight matrix `name` (`[rows, cols]`), one dequantized row at a time.
    func matmul(_ name: String, _ x: [Float]) -> [Float] {
        let t = tensor(name)
        precondition(x.count == t.rowLength, "\(name): \(x.count) inputs for rows of \(t.rowLength)")
        return (0..<t.rowCount).map { r in
            let w = row(name, r)
            var sum: Float = 0
            for i in 0..<x.count { sum += w[i] * x[i] }
            return sum
        }
    }

    /// Row `r` of tensor `name`, dequantized.
    func row(_ name: String, _ r: Int) -> [Float] {
        let t = tensor(name)
        let bytes = model.file.data(for: t).baseAddress! + r * t.type.rowBytes(count: t.rowLength)!
        var out = [Float](repeating: 0, count: t.rowLength)
        out.withUnsafeMutableBufferPointer { t.type.dequantizeRowReference(bytes, into: $0.baseAddress!, count: t.rowLength) }
        return out
    }

    /// A whole tensor, dequantized (norm weights, the convolution kernel).
    func vector(_ name: String) -> [Float] {
        (0..<tensor(name).rowCount).flatMap { row(name, $0) }
    }

    func tensor(_ name: String) -> GGUFTensorInfo {
        guard let t = model.file.tensor(named: name) else { preconditionFailure("\(name) is missing (the model loaded, so it checked)") }
        return t
    }
}
