import GGUF
import Kernels

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// LFM2.5-Audio's audio detokenizer written out plainly: Double, one thread, plain loops
/// over the tokenizer file's and the vocoder's tensors dequantized once with the scalar
/// reference dequantizers (`GGMLType.dequantizeRowReference`), read by their names and the
/// file's keys apart from the engine's loaders, and the inverse STFT as a direct inverse
/// DFT. The oracle of `AudioDetokenizer` (AudioDetokenizerTests), and a first read of the
/// math (shared/README.md, "LFM2.5-Audio speech-out fixture", "Waveform"):
///
/// ```
/// e_t = mean_c emb.emb[code_c + 2048 c]          per frame (end-of-audio frames skipped)
/// x_i = e_(i / 6)                                6 rows a frame
/// h   = LFM2 blocks (short conv | attention over rows i-30 < j <= i), token_embd_norm
/// s   = dense_2 h + b;  X = exp(s[..<641]) e^(i s[641...])
/// y   = sum_t irfft(X_t) w shifted by 320 t, / sum_t w^2 likewise, 480 dropped at each end
/// ```
///
/// Slow (the inverse DFT is 1280 x 641 terms a row): for tests and reading.
public final class ReferenceAudioDetokenizer {
    /// Every stage of one decode, for comparison stage by stage.
    public struct Trace {
        /// Step 1: per decoded frame, the mean of its code rows (`[T][d]`).
        public var embeddingMeans: [[Double]]
        /// Step 3: the backbone's output after the final norm (`[6T][d]`).
        public var hiddenStates: [[Double]]
        /// Step 4: `dense_2`'s output (`[6T][1282]`: log-magnitudes, then phases).
        public var spectrum: [[Double]]
        /// Step 5: the waveform (`1920 T` samples).
        public var samples: [Double]
    }

    let tokenizer: GGUFFile
    let vocoder: GGUFFile
    /// The backbone's shape, from the tokenizer file's keys.
    let width: Int
    let layers: Int
    let heads: Int
    let kvHeads: [Int]
    let headDim: Int
    let kernelLength: Int
    let window: Int
    let eps: Double
    let ropeBase: Double
    let outputWidth: Int
    static let codebooks = 8, codes = 2048, upsampling = 6, fftSize = 1280, hop = 320

    /// The tensors dequantized so far, by file and name.
    private var tensors: [String: [Double]] = [:]

    /// Reads the tokenizer file's `lfm2.*` keys (the backbone) and takes `emb.emb.weight`
    /// from `vocoder`.
    public init(tokenizer: GGUFFile, vocoder: GGUFFile) throws(GGUFError) {
        self.tokenizer = tokenizer
        self.vocoder = vocoder
        let m = tokenizer.metadata
        width = try m.int("lfm2.embedding_length")
        layers = try m.int("lfm2.block_count")
        heads = try m.int("lfm2.attention.head_count")
        kvHeads = try m.intArray("lfm2.attention.head_count_kv")
        headDim = width / heads
        kernelLength = try m.int("lfm2.shortconv.l_cache")
        window = try m.int("lfm2.attention.sliding_window")
        eps = Double(try m.float("lfm2.attention.layer_norm_rms_epsilon"))
        ropeBase = Double(try m.float("lfm2.rope.freq_base"))
        outputWidth = try m.int("lfm2.embedding_length_out")
    }

    /// The waveform of `frames` (lists of 8 codes; end-of-audio frames, code 2048 in
    /// codebook 0, skipped), and every stage before it.
    public func decode(_ frames: [[Int]]) throws(GGUFError) -> Trace {
        let spoken = frames.filter { $0[0] != Self.codes }
        // 1. The mean of each frame's 8 code rows.
        var means: [[Double]] = []
        for frame in spoken {
            var e = [Double](repeating: 0, count: width)
            for c in 0..<Self.codebooks {
                let row = try row(vocoder, "emb.emb.weight", frame[c] + Self.codes * c)
                for i in 0..<width { e[i] += row[i] }
            }
            means.append(e.map { $0 / Double(Self.codebooks) })
        }
        // 2. Each frame's row 6 times.
        var x = means.flatMap { Array(repeating: $0, count: Self.upsampling) }
        // 3. The LFM2 blocks over every row at once (causal), then the final norm.
        for l in 0..<layers {
            let normed = try x.map { row throws(GGUFError) in try rmsNorm(row, "blk.\(l).attn_norm.weight") }
            let mixed = kvHeads[l] == 0 ? try shortConvolution(normed, layer: l) : try attention(normed, layer: l)
            x = zip(x, mixed).map { zip($0, $1).map(+) }
            let ffnInput = try x.map { row throws(GGUFError) in try rmsNorm(row, "blk.\(l).ffn_norm.weight") }
            let ffnOut = try feedForward(ffnInput, layer: l)
            x = zip(x, ffnOut).map { zip($0, $1).map(+) }
        }
        let hidden = try x.map { row throws(GGUFError) in try rmsNorm(row, "token_embd_norm.weight") }
        // 4. dense_2 with its bias: 641 log-magnitudes, 641 phases.
        let spectrum = try linear(hidden, "dense_2.weight", bias: "dense_2.bias")
        // 5. The inverse STFT, term by term.
        return Trace(embeddingMeans: means, hiddenStates: hidden, spectrum: spectrum, samples: inverseSTFT(spectrum))
    }

    // MARK: - The backbone

    /// LFM2's gated short convolution over all rows: `B, C, x̃ = in_proj x`;
    /// `y_i = C_i ⊙ Σ_k w_k ⊙ (B ⊙ x̃)_(i-L+1+k)` (rows before 0 are zero); `out_proj y`.
    func shortConvolution(_ x: [[Double]], layer l: Int) throws(GGUFError) -> [[Double]] {
        let d = width, L = kernelLength
        let bcx = try linear(x, "blk.\(l).shortconv.in_proj.weight")
        let kernel = try tensor(tokenizer, "blk.\(l).shortconv.conv.weight")  // [d][L]
        let z = bcx.map { r in (0..<d).map { r[$0] * r[2 * d + $0] } }  // B ⊙ x̃
        var y: [[Double]] = []
        for i in x.indices {
            var out = [Double](repeating: 0, count: d)
            for tap in 0..<L where i - (L - 1) + tap >= 0 {
                let past = z[i - (L - 1) + tap]
                for c in 0..<d { out[c] += kernel[c * L + tap] * past[c] }
            }
            y.append((0..<d).map { out[$0] * bcx[i][d + $0] })  // C ⊙ conv
        }
        return try linear(y, "blk.\(l).shortconv.out_proj.weight")
    }

    /// Grouped-query attention over the sliding window: q and k RMS-normalized per head,
    /// NeoX RoPE (dimension `j` with `j + hd/2`, `θ_j = i · base^(-2j/hd)`), row `i` seeing rows
    /// `i - window < j <= i`, softmax of `q·k / sqrt(hd)`.
    func attention(_ x: [[Double]], layer l: Int) throws(GGUFError) -> [[Double]] {
        let hd = headDim, group = heads / kvHeads[l]
        var q = try linear(x, "blk.\(l).attn_q.weight"), k = try linear(x, "blk.\(l).attn_k.weight")
        let v = try linear(x, "blk.\(l).attn_v.weight")
        for i in x.indices {
            for h in 0..<heads { try normalizeAndRotate(&q[i], h * hd, "blk.\(l).attn_q_norm.weight", position: i) }
            for g in 0..<kvHeads[l] { try normalizeAndRotate(&k[i], g * hd, "blk.\(l).attn_k_norm.weight", position: i) }
        }
        var out: [[Double]] = []
        for i in x.indices {
            let seen = max(0, i - window + 1)...i
            var o = [Double](repeating: 0, count: heads * hd)
            for h in 0..<heads {
                let g = h / group
                let scores = seen.map { j in (0..<hd).reduce(0.0) { $0 + q[i][h * hd + $1] * k[j][g * hd + $1] } / Double(hd).squareRoot() }
                let top = scores.max()!, e = scores.map { exp($0 - top) }, total = e.reduce(0, +)
                for (n, j) in seen.enumerated() {
                    for t in 0..<hd { o[h * hd + t] += e[n] / total * v[j][g * hd + t] }
                }
            }
            out.append(o)
        }
        return try linear(out, "blk.\(l).attn_output.weight")
    }

    /// SwiGLU: `down(SiLU(gate x) ⊙ up x)`.
    func feedForward(_ x: [[Double]], layer l: Int) throws(GGUFError) -> [[Double]] {
        let gate = try linear(x, "blk.\(l).ffn_gate.weight"), up = try linear(x, "blk.\(l).ffn_up.weight")
        let hidden = zip(gate, up).map { zip($0, $1).map { g, u in g / (1 + exp(-g)) * u } }
        return try linear(hidden, "blk.\(l).ffn_down.weight")
    }

    /// RMSNorm of the head at `v[start ..< start + hd]`, then NeoX RoPE at `position`, in place.
    func normalizeAndRotate(_ v: inout [Double], _ start: Int, _ weight: String, position: Int) throws(GGUFError) {
        let hd = headDim, half = hd / 2
        var head = try rmsNorm(Array(v[start..<(start + hd)]), weight)
        for j in 0..<half {
            let theta = Double(position) * pow(ropeBase, -2 * Double(j) / Double(hd))
            let (a, b) = (head[j], head[j + half])
            head[j] = a * cos(theta) - b * sin(theta)
            head[j + half] = a * sin(theta) + b * cos(theta)
        }
        v.replaceSubrange(start..<(start + hd), with: head)
    }

    /// `x / sqrt(mean(x²) + ε) ⊙ weight`.
    func rmsNorm(_ x: [Double], _ weight: String) throws(GGUFError) -> [Double] {
        let w = try tensor(tokenizer, weight)
        let scale = 1 / (x.reduce(0) { $0 + $1 * $1 } / Double(x.count) + eps).squareRoot()
        return x.indices.map { x[$0] * scale * w[$0] }
    }

    /// `W x (+ b)` for every row, `W` the tokenizer file's matrix `name` (`[rows, cols]`).
    func linear(_ x: [[Double]], _ name: String, bias: String? = nil) throws(GGUFError) -> [[Double]] {
        let w = try tensor(tokenizer, name), b = try bias.map { name throws(GGUFError) in try tensor(tokenizer, name) }
        let cols = x.first?.count ?? 1, rows = w.count / cols
        return x.map { row in
            (0..<rows).map { r in
                var sum = b?[r] ?? 0
                for i in 0..<cols { sum += w[r * cols + i] * row[i] }
                return sum
            }
        }
    }

    // MARK: - The inverse STFT

    /// Each row's `X = exp(L) e^(iP)` through the direct inverse DFT
    /// `x[n] = (1/N) (Re X_0 + (-1)^n Re X_(N/2) + 2 Σ_(0<k<N/2) Re(X_k e^(2πikn/N)))`, times the
    /// periodic Hann window, overlap-added with hop 320 and divided by the overlap-added
    /// squared window; 480 samples dropped at each end.
    func inverseSTFT(_ spectrum: [[Double]]) -> [Double] {
        let n = Self.fftSize, hop = Self.hop, bins = n / 2 + 1, rows = spectrum.count
        guard rows > 0 else { return [] }
        let cosines = (0..<n).map { cos(2 * Double.pi * Double($0) / Double(n)) }
        let sines = (0..<n).map { sin(2 * Double.pi * Double($0) / Double(n)) }
        let window = (0..<n).map { 0.5 - 0.5 * cosines[$0] }
        let length = (rows - 1) * hop + n
        var y = [Double](repeating: 0, count: length), envelope = [Double](repeating: 0, count: length)
        for (t, s) in spectrum.enumerated() {
            let re = (0..<bins).map { exp(s[$0]) * cos(s[bins + $0]) }, im = (0..<bins).map { exp(s[$0]) * sin(s[bins + $0]) }
            for j in 0..<n {
                var sum = re[0] + (j % 2 == 0 ? re[bins - 1] : -re[bins - 1])
                for k in 1..<(bins - 1) {
                    let a = k * j % n
                    sum += 2 * (re[k] * cosines[a] - im[k] * sines[a])
                }
                y[t * hop + j] += sum / Double(n) * window[j]
                envelope[t * hop + j] += window[j] * window[j]
            }
        }
        let pad = (n - hop) / 2
        return (pad..<(length - pad)).map { y[$0] / envelope[$0] }
    }

    // MARK: - The tensors

    /// Row `r` of the table `name` of `file`.
    func row(_ file: GGUFFile, _ name: String, _ r: Int) throws(GGUFError) -> [Double] {
        let t = try tensor(file, name), cols = try file.requireTensor(name).rowLength
        return Array(t[(r * cols)..<((r + 1) * cols)])
    }

    /// Tensor `name` of `file` dequantized to Double in file order, once.
    func tensor(_ file: GGUFFile, _ name: String) throws(GGUFError) -> [Double] {
        let key = (file === vocoder ? "vocoder:" : "tokenizer:") + name
        if let t = tensors[key] { return t }
        let t = try file.requireTensor(name)
        let result = ReferenceMath.dequantized(t, of: file)
        tensors[key] = result
        return result
    }
}
