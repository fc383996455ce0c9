import Kernels

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// LFM2.5-Audio's depthformer step: one frame of 8 audio codes from the language model's
/// last hidden state `h` (after its final norm). A small transformer runs over the frame's
/// 8 codebooks as 8 positions of a cache that starts empty for every frame:
///
/// ```
/// z          = depth_linear · h + bias                      [8·W], chunks z_0 ... z_7 of W
/// for c in 0..<8 (c is also the position):
///   x_c      = z_c + E_(c-1)[code_(c-1)]                    (E_(-1) = 0; E_c = depth_embeddings.c.embedding)
///   x_c      = layer(x_c) for every layer                   (attending to positions 0...c; no final norm)
///   logits_c = to_logits_c · (RMSNorm(x_c) ⊙ embedding_norm_c)     [2049]
///   code_c   = the sampler's choice from logits_c
///
/// layer(x):  y = RMSNorm(x) ⊙ operator_norm
///            q | k | v = qkv_proj · y                       (32 | 8 | 8 heads of W/32)
///            q, k per head: RMSNorm ⊙ q_layernorm / k_layernorm, then RoPE at position c
///                 (adjacent pairs (2j, 2j+1), θ_j = c · 1e6^(-2j/hd))
///            x += out_proj · softmax(q_i · k_j / √hd) v_j   (query head i reads key/value head i/4)
///            y = RMSNorm(x) ⊙ ffn_norm
///            x += w2 · (silu(w1 · y) ⊙ (w3 · y))
/// ```
///
/// Every RMSNorm is `v / sqrt(mean(v²) + 1e-5)`. When code 0 is the end-of-audio code
/// (2048), codebooks 1-7 still run, each greedily after the previous one's greedy code
/// (their logits and margins are reported), and the frame is ``AudioFrame/endOfAudio``.
///
/// Holds the per-frame workspace (the cache of 8 positions, the activations, every
/// codebook's logits), allocated once: a step allocates nothing. Not thread-safe: one per
/// generation. The weights are the shared `SpeechVocoder`'s.
public final class Depthformer {
    public let vocoder: SpeechVocoder

    private let width: Int
    private let headDim: Int
    private let kvWidth: Int
    private let ropePairs: Int
    private let scale: Float
    /// `z`: the 8 codebooks' inputs `[8][W]`.
    private let inputs: UnsafeMutablePointer<Float>
    /// The residual stream `x`, a block's normalized input `y`, a product's output.
    private let x: UnsafeMutablePointer<Float>
    private let y: UnsafeMutablePointer<Float>
    private let product: UnsafeMutablePointer<Float>
    /// `qkv_proj`'s output `[W + 2·kvWidth]` and the attention's heads `[W]`.
    private let qkv: UnsafeMutablePointer<Float>
    private let attended: UnsafeMutablePointer<Float>
    /// The feed-forward block's `w1 · y` and `w3 · y` `[ff]`.
    private let gate: UnsafeMutablePointer<Float>
    private let up: UnsafeMutablePointer<Float>
    /// The frame's cache: per layer, 8 positions of keys and of values `[layers][8][kvWidth]`.
    private let keys: UnsafeMutablePointer<Float>
    private let values: UnsafeMutablePointer<Float>
    /// One head's attention scores over positions `0...c`.
    private let scores: UnsafeMutablePointer<Float>
    /// The RoPE `(cos, sin)` tables of positions 0..<8 `[8][hd]`.
    private let rotations: UnsafeMutablePointer<Float>
    /// Every codebook's logits of the last step `[8][2049]`.
    private let allLogits: UnsafeMutablePointer<Float>
    /// The 8-bit (and float) form of the next product's input.
    private let activations: QuantizedActivations

    /// A workspace for the depthformer of `vocoder`.
    public init(vocoder: SpeechVocoder) {
        self.vocoder = vocoder
        let s = vocoder.shape, positions = AudioFrame.codebookCount
        width = s.width
        headDim = s.headDim
        kvWidth = s.kvHeads * s.headDim
        ropePairs = s.headDim / 2
        scale = 1 / Float(s.headDim).squareRoot()
        inputs = .allocate(capacity: positions * s.width)
        x = .allocate(capacity: s.width)
        y = .allocate(capacity: s.width)
        product = .allocate(capacity: s.width)
        qkv = .allocate(capacity: s.width + 2 * kvWidth)
        attended = .allocate(capacity: s.width)
        gate = .allocate(capacity: s.feedForwardWidth)
        up = .allocate(capacity: s.feedForwardWidth)
        keys = .allocate(capacity: s.layers * positions * kvWidth)
        values = .allocate(capacity: s.layers * positions * kvWidth)
        scores = .allocate(capacity: positions)
        rotations = .allocate(capacity: positions * s.headDim)
        allLogits = .allocate(capacity: positions * AudioFrame.codesPerCodebook)
        allLogits.initialize(repeating: 0, count: positions * AudioFrame.codesPerCodebook)
        activations = QuantizedActivations(capacity: max(s.languageModelWidth, s.width, s.feedForwardWidth))
        let thetaScale = Elementwise.ropeThetaScale(base: SpeechVocoder.ropeBase, dimensions: s.headDim)
        for c in 0..<positions {
            Elementwise.ropeCache(position: c, thetaScale: thetaScale, pairs: ropePairs, into: rotations + c * s.headDim)
        }
    }

    deinit {
        for p in [inputs, x, y, product, qkv, attended, gate, up, keys, values, scores, rotations, allLogits] { p.deallocate() }
    }

    /// The logits of codebook `c` (`AudioFrame.codesPerCodebook` floats) at the last step:
    /// valid until the next step (zeros before the first).
    public func logits(codebook c: Int) -> UnsafeBufferPointer<Float> {
        precondition((0..<AudioFrame.codebookCount).contains(c), "codebook \(c) outside 0..<\(AudioFrame.codebookCount)")
        return UnsafeBufferPointer(start: allLogits + c * AudioFrame.codesPerCodebook, count: AudioFrame.codesPerCodebook)
    }

    /// One frame, greedy: ``step(hiddenState:sampler:forcing:)`` with `GreedyAudioCodes`.
    public func step(hiddenState h: UnsafeBufferPointer<Float>, forcing forced: AudioFrame? = nil) throws(SpeechError) -> DepthformerStep {
        var greedy = GreedyAudioCodes()
        return try step(hiddenState: h, sampler: &greedy, forcing: forced)
    }

    /// One frame from the language model's hidden state `h` (`languageModelWidth` finite
    /// floats): each codebook's code chosen by `sampler` from its logits, given the codes
    /// chosen before it. With `forced`, codebook `c`'s input takes `forced[c - 1]` instead
    /// of the choice (teacher forcing: `choices` still says what was chosen), and the frame
    /// is `forced`; when the code that decides the frame (`forced[0]`, else the choice) is
    /// the end-of-audio code, codebooks 1-7 follow their own greedy choices and the frame
    /// is ``AudioFrame/endOfAudio``. Each codebook's logits stay in ``logits(codebook:)``
    /// until the next step.
    public func step<CodeSampler: AudioCodeSampler>(
        hiddenState h: UnsafeBufferPointer<Float>, sampler: inout CodeSampler, forcing forced: AudioFrame? = nil
    ) throws(SpeechError) -> DepthformerStep {
        let s = vocoder.shape
        guard h.count == s.languageModelWidth else {
            throw .invalidInput(
                "a depthformer step takes the language model's hidden state of \(s.languageModelWidth) values, got \(h.count)")
        }
        if let bad = h.firstIndex(where: { !$0.isFinite }) {
            throw .invalidInput("the hidden state holds a NaN or infinite value at index \(bad) (\(h[bad]))")
        }

        // z = depth_linear · h + bias, 8 chunks of W
        project(vocoder.depthLinear, h.baseAddress!, into: inputs)
        vocoder.depthLinearBias.withUnsafeBufferPointer { Elementwise.add($0.baseAddress!, into: inputs, count: $0.count) }

        var choices = AudioFrame(repeating: 0), fed = AudioFrame(repeating: 0)
        var margins = SIMD8<Float>()
        var endOfAudio = false
        for c in 0..<AudioFrame.codebookCount {
            // x_c = z_c + E_(c-1)[code_(c-1)]
            x.update(from: inputs + c * width, count: width)
            if c > 0 {
                vocoder.codebooks[c - 1].embedding.dequantize(rows: fed[c - 1]..<(fed[c - 1] + 1), into: y)
                Elementwise.add(y, into: x, count: width)
            }
            for l in vocoder.layers.indices { layer(l, position: c) }

            // logits_c = to_logits_c · (RMSNorm(x_c) ⊙ embedding_norm_c)
            let head = vocoder.codebooks[c]
            normalize(x, head.norm, into: y)
            let logits = allLogits + c * AudioFrame.codesPerCodebook
            project(head.toLogits, y, into: logits)
            let row = UnsafeBufferPointer(start: logits, count: AudioFrame.codesPerCodebook)
            margins[c] = Self.margin(row)
            let unmasked = logits[AudioFrame.endOfAudioCode]

            // code_c: the sampler's, greedy after an end of audio; the forced code goes on.
            var code = endOfAudio ? GreedyAudioCodes.argmax(row) : sampler.code(codebook: c, logits: row)
            if c > 0, !endOfAudio, code == AudioFrame.endOfAudioCode {
                // Only codebook 0's 2048 means something (the end of audio); in codebooks
                // 1-7 it has no row in the detokenizer (which would refuse the frame, where
                // the reference decodes codebook c + 1's row or fails). A spoken frame takes
                // the sampler's choice among the other codes; the logits stay as computed.
                logits[code] = -.infinity
                code = sampler.code(codebook: c, logits: row)
                logits[AudioFrame.endOfAudioCode] = unmasked
            }
            guard (0..<AudioFrame.codesPerCodebook).contains(code) else {
                throw .invalidInput("the sampler chose code \(code) for codebook \(c), outside 0..<\(AudioFrame.codesPerCodebook)")
            }
            choices[c] = code
            fed[c] = endOfAudio ? code : forced?[c] ?? code
            if c == 0 { endOfAudio = fed[0] == AudioFrame.endOfAudioCode }
        }
        return DepthformerStep(frame: endOfAudio ? .endOfAudio : fed, choices: choices, margins: margins)
    }

    /// Layer `l` on `x` at `position`: attention over the frame's positions `0...position`
    /// (this one's key and value appended to the cache), then the feed-forward block.
    private func layer(_ l: Int, position c: Int) {
        let w = vocoder.layers[l], s = vocoder.shape
        // y = RMSNorm(x) ⊙ operator_norm;  q | k | v = qkv_proj · y
        normalize(x, w.operatorNorm, into: y)
        project(w.qkv, y, into: qkv)
        let q = qkv, k = qkv + width, v = qkv + width + kvWidth
        // q, k: per-head RMSNorm, then RoPE at position c (adjacent pairs)
        w.queryNorm.normalize(heads: s.heads, at: q)
        w.keyNorm.normalize(heads: s.kvHeads, at: k)
        let table = UnsafePointer(rotations + c * headDim)
        Elementwise.rope(q, heads: s.heads, headDim: headDim, cache: table, pairs: ropePairs, style: .adjacentPairs)
        Elementwise.rope(k, heads: s.kvHeads, headDim: headDim, cache: table, pairs: ropePairs, style: .adjacentPairs)
        let layerKeys = keys + l * AudioFrame.codebookCount * kvWidth
        let layerValues = values + l * AudioFrame.codebookCount * kvWidth
        (layerKeys + c * kvWidth).update(from: k, count: kvWidth)
        (layerValues + c * kvWidth).update(from: v, count: kvWidth)

        // attended_i = Σ_j softmax_j(q_i · k_j / √hd) v_j, key/value head i / (heads / kvHeads)
        let group = s.heads / s.kvHeads
        for i in 0..<s.heads {
            let qi = q + i * headDim, kv = (i / group) * headDim
            var top = -Float.infinity
            for j in 0...c {
                let kj = layerKeys + j * kvWidth + kv
                var dot: Float = 0
                for t in 0..<headDim { dot += qi[t] * kj[t] }
                scores[j] = dot * scale
                top = max(top, scores[j])
            }
            var sum: Float = 0
            for j in 0...c {
                scores[j] = expf(scores[j] - top)
                sum += scores[j]
            }
            let out = attended + i * headDim
            out.update(repeating: 0, count: headDim)
            for j in 0...c {
                let p = scores[j] / sum, vj = layerValues + j * kvWidth + kv
                for t in 0..<headDim { out[t] += p * vj[t] }
            }
        }
        // x += out_proj · attended
        project(w.output, attended, into: product)
        Elementwise.add(product, into: x, count: width)

        // y = RMSNorm(x) ⊙ ffn_norm;  x += w2 · (silu(w1 · y) ⊙ (w3 · y))
        normalize(x, w.ffnNorm, into: y)
        activations.quantize(y, count: width)
        w.w1.matrix.matvec(activations, into: gate, pool: vocoder.pool)
        w.w3.matrix.matvec(activations, into: up, pool: vocoder.pool)
        Elementwise.siluMultiply(gate, up, count: s.feedForwardWidth)
        project(w.w2, gate, into: product)
        Elementwise.add(product, into: x, count: width)
    }

    /// `out = w · input` (`w.cols` inputs): the input rounded to 8 bits for quantized
    /// weights, as floats for F32 ones (`SpeechVocoder.WeightStorage`).
    @inline(__always)
    private func project(_ w: Linear, _ input: UnsafePointer<Float>, into out: UnsafeMutablePointer<Float>) {
        activations.quantize(input, count: w.cols)
        w.matrix.matvec(activations, into: out, pool: vocoder.pool)
    }

    /// `out = RMSNorm(v) ⊙ norm.weight` over the width.
    @inline(__always)
    private func normalize(_ v: UnsafePointer<Float>, _ norm: RMSNorm, into out: UnsafeMutablePointer<Float>) {
        norm.weight.withUnsafeBufferPointer { g in
            Elementwise.rmsNorm(v, weight: g.baseAddress!, out, count: width, eps: norm.epsilon)
        }
    }

    /// The top logit minus the second (0 when two are equal).
    static func margin(_ logits: UnsafeBufferPointer<Float>) -> Float {
        var first = -Float.infinity, second = -Float.infinity
        for v in logits {
            if v > first {
                second = first
                first = v
            } else if v > second {
                second = v
            }
        }
        return first - second
    }
}

/// What a depthformer step produced.
public struct DepthformerStep: Sendable, Equatable {
    /// The frame to emit and feed back to the language model: the codes chosen (or
    /// forced), or ``AudioFrame/endOfAudio`` when code 0 is the end-of-audio code.
    public let frame: AudioFrame
    /// The code each codebook's sampler chose, given the codes fed before it (in an
    /// end-of-audio frame, codebooks 1-7 greedy, each after the previous one's choice).
    public let choices: AudioFrame
    /// Per codebook: its top logit minus its second (how close the choice was).
    public let margins: SIMD8<Float>

    /// Whether the frame ends the audio segment.
    public var isEndOfAudio: Bool { frame.isEndOfAudio }
}
