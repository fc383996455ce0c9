import GGUF
import Kernels
import Models

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// LFM2.5-Audio's depthformer step and frame embedding written out plainly: Double, one
/// thread, plain loops over the vocoder's tensors dequantized once with the scalar
/// reference dequantizers (`GGMLType.dequantizeRowReference`), read by their names and
/// the file's two keys apart from the engine's loader (`SpeechVocoder`). The oracle of
/// `Depthformer` and `SpeechVocoder.frameEmbedding` (DepthformerTests), and a first read of
/// the math (shared/README.md, "LFM2.5-Audio speech-out fixture"):
///
/// ```
/// z = depth_linear · h + bias, 8 chunks;  x_c = z_c + E_(c-1)[code_(c-1)]
/// x_c through every layer (positions 0...c of this frame);  logits_c = to_logits_c · (RMSNorm(x_c) ⊙ g_c)
/// ```
public final class ReferenceDepthformer {
    public let path: String
    public let file: GGUFFile
    /// `depthformer_n_layer`, `depthformer_n_embd`, the head size (width / 32), the
    /// language model's width (`depth_linear`'s row length).
    public let layers: Int
    public let width: Int
    let headDim: Int
    public let languageModelWidth: Int
    static let heads = 32, kvHeads = 8, codebooks = 8, codes = 2049, eps = 1e-5, ropeBase = 1e6

    /// The tensors dequantized so far, by name.
    private var tensors: [String: [Double]] = [:]

    /// Reads the two keys and checks the tensors' shapes this reference uses.
    public init(file: GGUFFile, path: String) throws(SpeechError) {
        self.path = path
        self.file = file
        func key(_ name: String) throws(SpeechError) -> Int {
            guard let value = file.metadata[name] else { throw .missingKey(path: path, key: name) }
            guard let v = value.intValue, (1...65_536).contains(v) else {
                throw .invalidValue(path: path, key: name, value: "\(value)", reason: "must be 1...65536")
            }
            return v
        }
        layers = try key("depthformer_n_layer")
        width = try key("depthformer_n_embd")
        guard width % (2 * Self.heads) == 0 else {
            throw .invalidValue(path: path, key: "depthformer_n_embd", value: "\(width)", reason: "must be a multiple of 64")
        }
        headDim = width / Self.heads
        guard let depth = file.tensor(named: "depth_linear.weight") else { throw .missingTensor(path: path, name: "depth_linear.weight") }
        guard depth.shape.count == 2, depth.shape[1] == Self.codebooks * width else {
            throw .tensorShape(
                path: path, name: "depth_linear.weight", expected: [depth.shape[0], Self.codebooks * width], found: depth.shape)
        }
        languageModelWidth = depth.shape[0]
    }

    /// One frame from the hidden state `h`: every codebook's logits, the greedy choice
    /// of each (the argmax, the lower code on a tie) and the codes fed on (`forced`'s when
    /// given, else the choices; after an end-of-audio code 0, the greedy choices).
    public func frame(hiddenState h: [Float], forcing forced: [Int]? = nil) throws(SpeechError) -> (
        choices: [Int], fed: [Int], logits: [[Double]]
    ) {
        let W = width, hd = headDim, kvWidth = Self.kvHeads * hd
        precondition(h.count == languageModelWidth, "a hidden state of the language model's width")
        let z = try affine("depth_linear.weight", h.map(Double.init), bias: "depth_linear.bias")
        // The frame's cache: per layer, the keys and values of positions 0...c.
        var keys = [[[Double]]](repeating: [], count: layers), values = keys
        var choices: [Int] = [], fed: [Int] = [], logits: [[Double]] = []
        var endOfAudio = false
        for c in 0..<Self.codebooks {
            // x_c = z_c + E_(c-1)[code_(c-1)]
            var x = Array(z[(c * W)..<((c + 1) * W)])
            if c > 0 {
                let e = try row("depth_embeddings.\(c - 1).embedding.weight", fed[c - 1], width: W)
                for i in 0..<W { x[i] += e[i] }
            }
            for l in 0..<layers {
                let p = "depthformer.layers.\(l)."
                // x += out_proj · attention(RMSNorm(x) ⊙ operator_norm)
                let y = try rmsNorm(x, p + "operator_norm.weight")
                let qkv = try affine(p + "operator.qkv_proj.weight", y)
                var q = Array(qkv[0..<W]), k = Array(qkv[W..<(W + kvWidth)])
                let v = Array(qkv[(W + kvWidth)..<(W + 2 * kvWidth)])
                for head in 0..<Self.heads {
                    try normalizeAndRotate(&q, head * hd, p + "operator.attention.q_layernorm.weight", position: c)
                }
                for head in 0..<Self.kvHeads {
                    try normalizeAndRotate(&k, head * hd, p + "operator.attention.k_layernorm.weight", position: c)
                }
                keys[l].append(k)
                values[l].append(v)
                var attended = [Double](repeating: 0, count: W)
                for head in 0..<Self.heads {
                    let kv = head / (Self.heads / Self.kvHeads) * hd
                    let scores = (0...c).map { j in
                        (0..<hd).reduce(0.0) { $0 + q[head * hd + $1] * keys[l][j][kv + $1] } / Double(hd).squareRoot()
                    }
                    let top = scores.max()!
                    let e = scores.map { exp($0 - top) }, total = e.reduce(0, +)
                    for j in 0...c {
                        for t in 0..<hd { attended[head * hd + t] += e[j] / total * values[l][j][kv + t] }
                    }
                }
                let out = try affine(p + "operator.out_proj.weight", attended)
                for i in 0..<W { x[i] += out[i] }
                // x += w2 · (silu(w1 · y) ⊙ (w3 · y)),  y = RMSNorm(x) ⊙ ffn_norm
                let y2 = try rmsNorm(x, p + "ffn_norm.weight")
                let gate = try affine(p + "feed_forward.w1.weight", y2), up = try affine(p + "feed_forward.w3.weight", y2)
                let hidden = zip(gate, up).map { g, u in g / (1 + exp(-g)) * u }
                let down = try affine(p + "feed_forward.w2.weight", hidden)
                for i in 0..<W { x[i] += down[i] }
            }
            // logits_c = to_logits_c · (RMSNorm(x_c) ⊙ embedding_norm_c)
            let o = try rmsNorm(x, "depth_embeddings.\(c).embedding_norm.weight")
            let l = try affine("depth_embeddings.\(c).to_logits.weight", o)
            logits.append(l)
            var best = 0
            for i in l.indices where l[i] > l[best] { best = i }
            choices.append(best)
            fed.append(endOfAudio ? best : forced?[c] ?? best)
            if c == 0 { endOfAudio = fed[0] == Self.codes - 1 }
        }
        return (choices, endOfAudio ? [Int](repeating: Self.codes - 1, count: Self.codebooks) : fed, logits)
    }

    /// The backbone's input after a frame: `Σ_c audio_embedding[code_c + 2049·c]`.
    public func frameEmbedding(_ codes: [Int]) throws(SpeechError) -> [Double] {
        var sum = [Double](repeating: 0, count: languageModelWidth)
        for (c, code) in codes.enumerated() {
            let e = try row("audio_embedding.embedding.weight", code + Self.codes * c, width: languageModelWidth)
            for i in sum.indices { sum[i] += e[i] }
        }
        return sum
    }

    // MARK: - The operations

    /// `W x (+ b)` for the matrix `name` (`[rows, cols]`).
    func affine(_ name: String, _ x: [Double], bias: String? = nil) throws(SpeechError) -> [Double] {
        let w = try tensor(name), cols = x.count, rows = w.count / cols
        guard rows * cols == w.count else { throw .tensorShape(path: path, name: name, expected: [cols], found: [w.count]) }
        var b: [Double]?
        if let bias { b = try tensor(bias) }
        return (0..<rows).map { r in
            var sum = b?[r] ?? 0
            for i in 0..<cols { sum += w[r * cols + i] * x[i] }
            return sum
        }
    }

    /// `x / sqrt(mean(x²) + 1e-5) ⊙ weight`.
    func rmsNorm(_ x: [Double], _ weight: String) throws(SpeechError) -> [Double] {
        let g = try tensor(weight)
        guard g.count == x.count else { throw .tensorShape(path: path, name: weight, expected: [x.count], found: [g.count]) }
        let scale = 1 / (x.reduce(0) { $0 + $1 * $1 } / Double(x.count) + Self.eps).squareRoot()
        return x.indices.map { x[$0] * scale * g[$0] }
    }

    /// The head at `v[start ..< start + hd]`: RMSNorm ⊙ `weight`, then RoPE at `position`
    /// on adjacent pairs `(2j, 2j+1)` by `θ_j = position · 1e6^(-2j/hd)`.
    func normalizeAndRotate(_ v: inout [Double], _ start: Int, _ weight: String, position: Int) throws(SpeechError) {
        let hd = headDim
        var head = try rmsNorm(Array(v[start..<(start + hd)]), weight)
        for j in 0..<(hd / 2) {
            let theta = Double(position) * pow(Self.ropeBase, -2 * Double(j) / Double(hd))
            let (a, b) = (head[2 * j], head[2 * j + 1])
            head[2 * j] = a * cos(theta) - b * sin(theta)
            head[2 * j + 1] = a * sin(theta) + b * cos(theta)
        }
        v.replaceSubrange(start..<(start + hd), with: head)
    }

    /// Row `r` of the table `name` (rows of `width`).
    func row(_ name: String, _ r: Int, width: Int) throws(SpeechError) -> [Double] {
        let t = try tensor(name)
        guard (r + 1) * width <= t.count else { throw .invalidInput("\(name) has no row \(r)") }
        return Array(t[(r * width)..<((r + 1) * width)])
    }

    /// Tensor `name` dequantized to Double in file order, once.
    func tensor(_ name: String) throws(SpeechError) -> [Double] {
        if let t = tensors[name] { return t }
        guard let t = file.tensor(named: name) else { throw .missingTensor(path: path, name: name) }
        guard t.type.hasKernels, t.type.rowBytes(count: t.rowLength) != nil else {
            throw .tensorType(path: path, name: name, type: t.type, accepted: GGMLType.kernelTypes)
        }
        let result = ReferenceMath.dequantized(t, of: file)
        tensors[name] = result
        return result
    }
}
