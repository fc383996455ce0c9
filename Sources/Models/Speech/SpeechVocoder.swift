import GGUF
import Kernels

/// LFM2.5-Audio's `vocoder-*.gguf`: what turns the language model's hidden state into
/// audio codes and audio codes back into the language model's input. It holds, in
/// llama.cpp's converter layout (tensors keep their PyTorch names):
///
/// | tensors | part |
/// |---|---|
/// | `depthformer.layers.N.*` | the depthformer, `depthformer_n_layer` layers of width `depthformer_n_embd` |
/// | `depth_linear.{weight,bias}` | `[8·width, d_LM]`: the hidden state to the 8 codebooks' inputs |
/// | `depth_embeddings.C.{embedding,to_logits,embedding_norm}` | per codebook `C < 8`: the code embedding (tied to the output head) and the head's norm |
/// | `audio_embedding.embedding.weight` | `[8·2049, d_LM]`: a frame's codes back to the language model (`frameEmbedding`) |
/// | `emb.emb.weight` | `[8·2048, d_detok]`: the detokenizer's code embedding (`detokenizerEmbedding`) |
///
/// The depthformer's width and depth come from the two keys (the real model's 1024 x 6,
/// the tiny fixture's 128 x 2); it has 32 query heads and 8 key/value heads, so the head
/// size is width / 32; its feed-forward width is `w1`'s. Every shape is checked at load,
/// so a hostile file is a `SpeechError` naming the file and the key or tensor, never a
/// crash. Run the depthformer through a `Depthformer` (one per generation).
///
/// ```swift
/// let vocoder = try SpeechVocoder(path: vocoderPath, pool: model.pool)
/// try vocoder.checkLanguageModelWidth(model.hyperparameters.embeddingLength, languageModel: modelPath)
/// let depthformer = Depthformer(vocoder: vocoder)
/// let step = try depthformer.step(hiddenState: session.hiddenState)   // greedy
/// try session.evaluate(embeddings: vocoder.frameEmbedding(step.frame))
/// ```
public final class SpeechVocoder: Sendable {
    /// How the depthformer's weight matrices (its layers, `depth_linear` and the output
    /// heads `to_logits`) are held and multiplied. The embedding tables are only read a
    /// row at a time and always stay in the file as stored.
    public enum WeightStorage: Sendable, Equatable {
        /// In their stored type (Q4_0 in the converter's files), copied once into the
        /// decode kernels' layout; each product rounds its input to 8 bits, as the
        /// language model's decode step does. The file's size in memory. On the tiny
        /// fixture's random weights logits move by up to 0.25 from an F32 computation on
        /// the goldens' hidden states (their spread is about 6), so compare such a path by
        /// feeding the reference's codes back (SpeechGoldenTests). The real depthformer's shape (1024 x 6, feed-forward
        /// 2816, a 2048-wide language model: 57 MB of Q4_0) took 27 ms a frame on 2 threads.
        case asStored
        /// Dequantized to F32 copies at load: products in F32 on the exact stored values
        /// (logits within about 1e-5 of the reference). About 7 times a Q4_0 file's memory:
        /// for the real depthformer 405 MB instead of 57 MB, and each frame reads its
        /// layers' 270 MB eight times: 71 ms a frame on 2 threads, most of the 80 ms a
        /// frame plays.
        case float32
    }

    /// The depthformer's shape, from the file's keys and tensors.
    public struct Shape: Sendable, Equatable {
        /// `depthformer_n_layer`.
        public let layers: Int
        /// `depthformer_n_embd`: the width of the depthformer's residual stream.
        public let width: Int
        /// Query heads (32) and key/value heads (8), fixed by the format.
        public let heads: Int
        public let kvHeads: Int
        /// The feed-forward width (`w1`'s rows).
        public let feedForwardWidth: Int
        /// The language model's width: `depth_linear`'s input, `audio_embedding`'s output.
        public let languageModelWidth: Int
        /// The detokenizer's width: `emb.emb`'s row length.
        public let detokenizerWidth: Int

        /// Width of a head: `width / heads`.
        public var headDim: Int { width / heads }
    }

    /// Query heads of the depthformer (fixed by the format).
    public static let heads = 32
    /// Key/value heads of the depthformer (fixed by the format).
    public static let kvHeads = 8
    /// Codes per codebook in the detokenizer's embedding (`emb.emb`): the end-of-audio
    /// code is never decoded.
    public static let detokenizerCodesPerCodebook = 2048
    /// The epsilon of every RMSNorm of the depthformer.
    public static let rmsEpsilon: Float = 1e-5
    /// The RoPE base of the depthformer's attention.
    public static let ropeBase: Float = 1e6

    /// The file's path, as errors name it.
    public let path: String
    /// The vocoder file (embedding tables are read in place).
    public let file: GGUFFile
    /// The threads of the depthformer's products.
    public let pool: ThreadPool
    /// How the depthformer's matrices are held.
    public let weightStorage: WeightStorage
    public let shape: Shape

    let layers: [DepthformerLayerWeights]
    /// `depth_linear`: `[8·width, d_LM]` and its bias.
    let depthLinear: Linear
    let depthLinearBias: [Float]
    /// Per codebook: `depth_embeddings.C`.
    let codebooks: [CodebookWeights]
    /// `audio_embedding.embedding.weight`, `[8·2049, d_LM]`, as stored.
    let audioEmbedding: WeightMatrix
    /// The detokenizer's code embedding `emb.emb.weight`, `[8·2048, detokenizerWidth]`
    /// (row `code + 2048·c` for codebook `c`), as stored: it belongs to the detokenizer,
    /// which averages a frame's 8 rows.
    public let detokenizerEmbedding: Linear
    /// The F32 copies the matrices view with `.float32` storage.
    private let converted: [FloatBuffer]

    /// Opens and loads the vocoder file at `path`, its depthformer products running on
    /// `pool` (pass the language model's, `TransformerModel.pool`).
    public convenience init(path: String, pool: ThreadPool, weights: WeightStorage = .asStored) throws(SpeechError) {
        let file: GGUFFile
        do { file = try GGUFFile(path: path) } catch { throw .file(path: path, error) }
        try self.init(file: file, path: path, pool: pool, weights: weights)
    }

    /// Loads the vocoder in `file` (`path` is what errors name it), checking every key,
    /// tensor, shape and type.
    public init(file: GGUFFile, path: String, pool: ThreadPool, weights storage: WeightStorage = .asStored) throws(SpeechError) {
        var r = VocoderFileReader(path: path, file: file, storage: storage)
        let layerCount = try r.int("depthformer_n_layer", in: 1...256)
        let widthKey = "depthformer_n_embd"
        let width = try r.int(widthKey, in: 1...65_536)
        guard width % (2 * Self.heads) == 0 else {
            throw .invalidValue(
                path: path, key: widthKey, value: String(width),
                reason: "must be a multiple of \(2 * Self.heads): \(Self.heads) heads of an even size")
        }
        let hd = width / Self.heads, kvWidth = Self.kvHeads * hd

        // The codebooks: depth_embeddings.0, .1, ... must be exactly 8.
        var codebookCount = 0
        while codebookCount <= AudioFrame.codebookCount, r.has("depth_embeddings.\(codebookCount).embedding.weight") {
            codebookCount += 1
        }
        guard codebookCount == AudioFrame.codebookCount else {
            throw .codebookCount(path: path, found: codebookCount, expected: AudioFrame.codebookCount)
        }

        // depth_linear: [8·width, d_LM]; the language model's width is its row length.
        let depthName = "depth_linear.weight"
        let depthTensor = try r.tensor(depthName)
        guard depthTensor.shape.count == 2, depthTensor.shape[0] > 0, depthTensor.shape[0] <= 1 << 20,
            depthTensor.shape[1] == AudioFrame.codebookCount * width
        else {
            let found = depthTensor.shape
            throw .tensorShape(
                path: path, name: depthName, expected: [found.first ?? 0, AudioFrame.codebookCount * width], found: found)
        }
        let lmWidth = depthTensor.shape[0]

        // The feed-forward width, from the first layer's w1 (every layer's is checked).
        let w1Name = "depthformer.layers.0.feed_forward.w1.weight"
        let w1 = try r.tensor(w1Name)
        guard w1.shape.count == 2, w1.shape[0] == width, w1.shape[1] > 0, w1.shape[1] <= 1 << 20 else {
            throw .tensorShape(path: path, name: w1Name, expected: [width, w1.shape.count == 2 ? w1.shape[1] : 0], found: w1.shape)
        }
        let ff = w1.shape[1]

        // emb.emb: [8·2048, d_detok].
        let embName = "emb.emb.weight", embRows = AudioFrame.codebookCount * Self.detokenizerCodesPerCodebook
        let emb = try r.tensor(embName)
        guard emb.shape.count == 2, emb.shape[0] > 0, emb.shape[0] <= 1 << 16, emb.shape[1] == embRows else {
            throw .tensorShape(path: path, name: embName, expected: [emb.shape.first ?? 0, embRows], found: emb.shape)
        }

        shape = Shape(
            layers: layerCount, width: width, heads: Self.heads, kvHeads: Self.kvHeads, feedForwardWidth: ff,
            languageModelWidth: lmWidth, detokenizerWidth: emb.shape[0])

        var layers: [DepthformerLayerWeights] = []
        for l in 0..<layerCount {
            let p = "depthformer.layers.\(l)."
            layers.append(
                DepthformerLayerWeights(
                    operatorNorm: try r.norm(p + "operator_norm.weight", count: width),
                    qkv: try r.matrix(p + "operator.qkv_proj.weight", rows: width + 2 * kvWidth, cols: width),
                    queryNorm: try r.norm(p + "operator.attention.q_layernorm.weight", count: hd),
                    keyNorm: try r.norm(p + "operator.attention.k_layernorm.weight", count: hd),
                    output: try r.matrix(p + "operator.out_proj.weight", rows: width, cols: width),
                    ffnNorm: try r.norm(p + "ffn_norm.weight", count: width),
                    w1: try r.matrix(p + "feed_forward.w1.weight", rows: ff, cols: width),
                    w3: try r.matrix(p + "feed_forward.w3.weight", rows: ff, cols: width),
                    w2: try r.matrix(p + "feed_forward.w2.weight", rows: width, cols: ff)))
        }
        self.layers = layers
        depthLinear = try r.matrix(depthName, rows: AudioFrame.codebookCount * width, cols: lmWidth)
        depthLinearBias = try r.vector("depth_linear.bias", count: AudioFrame.codebookCount * width)
        var codebooks: [CodebookWeights] = []
        for c in 0..<AudioFrame.codebookCount {
            let p = "depth_embeddings.\(c)."
            codebooks.append(
                CodebookWeights(
                    embedding: try r.matrix(p + "embedding.weight", rows: AudioFrame.codesPerCodebook, cols: width, asStored: true).matrix,
                    norm: try r.norm(p + "embedding_norm.weight", count: width),
                    toLogits: try r.matrix(p + "to_logits.weight", rows: AudioFrame.codesPerCodebook, cols: width)))
        }
        self.codebooks = codebooks
        audioEmbedding =
            try r.matrix(
                "audio_embedding.embedding.weight", rows: AudioFrame.codebookCount * AudioFrame.codesPerCodebook, cols: lmWidth,
                asStored: true
            ).matrix
        detokenizerEmbedding = try r.matrix(embName, rows: embRows, cols: emb.shape[0], asStored: true)
        converted = r.converted
        self.path = path
        self.file = file
        self.pool = pool
        weightStorage = storage
    }

    /// Throws `widthMismatch`, naming both files and both widths, unless the language
    /// model's embedding width `width` (the model at `languageModel`) is the one the
    /// vocoder reads (`depth_linear`) and writes (`audio_embedding`).
    public func checkLanguageModelWidth(_ width: Int, languageModel: String) throws(SpeechError) {
        guard width == shape.languageModelWidth else {
            throw .widthMismatch(
                path: path, tensor: "depth_linear.weight", vocoderWidth: shape.languageModelWidth, languageModel: languageModel,
                languageModelWidth: width)
        }
    }

    /// Bytes of the depthformer's matrices as held (`weightStorage`): what one frame reads
    /// `8` times (its layers and one output head per codebook) plus `depth_linear` once.
    public var depthformerByteCount: Int {
        let matrices = layers.flatMap(\.linears) + [depthLinear] + codebooks.map(\.toLogits)
        return matrices.reduce(0) { $0 + $1.byteCount }
    }

    /// Bytes of weights one frame reads: the layers once per codebook (8 passes),
    /// `depth_linear` once, and each codebook's output head once.
    public var depthformerFrameByteCount: Int {
        let layerBytes = layers.flatMap(\.linears).reduce(0) { $0 + $1.byteCount }
        return layerBytes * AudioFrame.codebookCount + depthLinear.byteCount + codebooks.reduce(0) { $0 + $1.toLogits.byteCount }
    }
}

/// One depthformer layer's weights (`depthformer.layers.N.*`).
struct DepthformerLayerWeights: Sendable {
    let operatorNorm: RMSNorm
    /// `qkv_proj`: `[width + 2·kvWidth, width]`, the queries, then the keys, then the values.
    let qkv: Linear
    /// Per-head RMSNorm of the queries and keys (`q_layernorm`, `k_layernorm`).
    let queryNorm: RMSNorm
    let keyNorm: RMSNorm
    /// `out_proj`.
    let output: Linear
    let ffnNorm: RMSNorm
    /// SwiGLU: `w2 · (silu(w1 · y) ⊙ (w3 · y))`.
    let w1: Linear
    let w3: Linear
    let w2: Linear

    var linears: [Linear] { [qkv, output, w1, w3, w2] }
}

/// One codebook's tables (`depth_embeddings.C.*`).
struct CodebookWeights: Sendable {
    /// `embedding`: a code's row is the next codebook's input (as stored, read by rows).
    let embedding: WeightMatrix
    /// `embedding_norm`: the output head's RMSNorm weight.
    let norm: RMSNorm
    /// `to_logits`: `[2049, width]` (the same values as `embedding`: tied).
    let toLogits: Linear
}

/// A vocoder file being read by `SpeechVocoder`'s loader: typed accessors for its keys
/// and tensors whose errors are `SpeechError`s naming the file and the key or tensor.
/// Shapes are in ggml order (`[cols, rows]` for a matrix).
private struct VocoderFileReader {
    let path: String
    let file: GGUFFile
    let storage: SpeechVocoder.WeightStorage
    /// The F32 copies made so far.
    var converted: [FloatBuffer] = []

    init(path: String, file: GGUFFile, storage: SpeechVocoder.WeightStorage) {
        self.path = path
        self.file = file
        self.storage = storage
    }

    /// Types a vector (a norm weight, a bias) may be stored in; copied out as F32.
    static let floatTypes: [GGMLType] = [.f32, .f16, .bf16]

    /// An integer key in `range`.
    func int(_ key: String, in range: ClosedRange<Int>) throws(SpeechError) -> Int {
        let v: Int
        do { v = try file.metadata.int(key) } catch {
            switch error {
            case .missingKey: throw .missingKey(path: path, key: key)
            case .typeMismatch(_, let expected, let found):
                throw .invalidValue(path: path, key: key, value: found, reason: "expected \(expected)")
            case .valueOutOfRange(_, let value): throw .invalidValue(path: path, key: key, value: value, reason: "out of range")
            default: throw .file(path: path, error)
            }
        }
        guard range.contains(v) else {
            throw .invalidValue(path: path, key: key, value: String(v), reason: "must be \(range.lowerBound)...\(range.upperBound)")
        }
        return v
    }

    func has(_ name: String) -> Bool { file.tensor(named: name) != nil }

    func tensor(_ name: String) throws(SpeechError) -> GGUFTensorInfo {
        guard let t = file.tensor(named: name) else { throw .missingTensor(path: path, name: name) }
        return t
    }

    /// A vector of `count` floats (any shape whose dimensions are 1 but one of `count`).
    func vector(_ name: String, count: Int) throws(SpeechError) -> [Float] {
        let t = try tensor(name)
        guard t.shape.filter({ $0 != 1 }) == (count == 1 ? [] : [count]) else {
            throw .tensorShape(path: path, name: name, expected: [count], found: t.shape)
        }
        guard Self.floatTypes.contains(t.type) else { throw .tensorType(path: path, name: name, type: t.type, accepted: Self.floatTypes) }
        var out = [Float](repeating: 0, count: count)
        let src = file.data(for: t).baseAddress!
        out.withUnsafeMutableBufferPointer { t.type.dequantizeRow(src, into: $0.baseAddress!, count: count) }
        return out
    }

    /// An RMSNorm weight of `count` values.
    func norm(_ name: String, count: Int) throws(SpeechError) -> RMSNorm {
        RMSNorm(weight: try vector(name, count: count), epsilon: SpeechVocoder.rmsEpsilon)
    }

    /// The matrix `name` of `rows x cols` (ggml shape `[cols, rows]`, any type with
    /// kernels). A product's matrix is held as `storage` says (copied for decode, or
    /// converted to F32); `asStored` keeps a table read by rows in place.
    mutating func matrix(_ name: String, rows: Int, cols: Int, asStored: Bool = false) throws(SpeechError) -> Linear {
        let t = try tensor(name)
        guard t.shape == [cols, rows] else { throw .tensorShape(path: path, name: name, expected: [cols, rows], found: t.shape) }
        let stored: WeightMatrix
        do {
            stored = try WeightMatrix(type: t.type, rows: rows, cols: cols, data: file.data(for: t).baseAddress!)
        } catch {
            throw .tensorType(path: path, name: name, type: t.type, accepted: GGMLType.kernelTypes)
        }
        if asStored { return Linear(name: name, matrix: stored) }
        switch storage {
        case .asStored:
            let copy = stored.copiedForDecode()
            if copy.decodeCopyByteCount > 0 { file.releaseResidentPages(of: t) }
            return Linear(name: name, matrix: copy)
        case .float32:
            guard t.type != .f32 else { return Linear(name: name, matrix: stored) }
            let copy = FloatBuffer(count: rows * cols)
            stored.dequantize(rows: 0..<rows, into: copy.pointer)
            converted.append(copy)
            file.releaseResidentPages(of: t)
            // An F32 view of a buffer of the right size cannot fail to describe.
            return Linear(name: name, matrix: (try? WeightMatrix(type: .f32, rows: rows, cols: cols, data: copy.pointer)) ?? stored)
        }
    }
}
