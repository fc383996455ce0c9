import Audio
import GGUF
import Kernels

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// LFM2.5-Audio's audio detokenizer: audio frames (8 codes each, 80 ms) to a 24 kHz
/// waveform. Its backbone is the `tokenizer-*.gguf` file, an LFM2 embedding model (llama.cpp's
/// converter of `LFM25AudioTokenizer`); its code embedding `emb.emb` is in the
/// `vocoder-*.gguf` file (`SpeechVocoder.detokenizerEmbedding`). For `T` frames:
///
/// ```
/// 1. e_t = (1/8) Σ_c emb.emb[code_c + 2048·c]              [T, d]      the mean of a frame's 8 rows
/// 2. x_i = e_⌊i/6⌋,  i < n = 6T                              [n, d]      upsampled ×6 by repetition
/// 3. h   = LFM2(x)                                           [n, d]      positions 0..<n, causal; attention
///                                                                        over rows i-30 < j <= i; token_embd_norm
/// 4. s   = dense_2 · h + b;  L, P = s[0..<641], s[641..<1282]  [n, 1282]
///    X   = exp(L) (cos P + i sin P)                          [n, 641]    bins 0...640 of a 1280-point spectrum
/// 5. y   = InverseSTFT(X)                                    [320 n]     N 1280, hop 320, periodic Hann, "same"
/// ```
///
/// 1920 samples a frame. End-of-audio frames (code 2048 in codebook 0) are skipped, as the
/// reference skips them (it decodes the other frames of a turn, in order, in one call):
/// callers pass a turn's frames as they were generated.
///
/// Streaming (`Stream`): the backbone is causal, so a frame's rows are final when it is
/// evaluated; only the inverse STFT's overlap holds samples back (480 at any time, which
/// `finish()` returns). The pieces concatenated equal the whole-turn `decode` up to the
/// float rounding of the backbone's products over chunks of other sizes (within 2.4e-7 on
/// the goldens, cut every 1 to 25 frames).
///
/// ```swift
/// let detokenizer = try AudioDetokenizer(path: tokenizerPath, vocoder: vocoder)
/// let stream = detokenizer.makeStream()
/// play(try stream.append([frame]))     // as frames are generated
/// play(stream.finish())                // at the end of the turn
/// ```
///
/// The model is read-only and shareable; each `Stream` holds its own caches.
public final class AudioDetokenizer: Sendable {
    /// Samples per second of the waveform.
    public static let sampleRate = 24_000
    /// Backbone rows per frame (the ×6 upsampling).
    public static let rowsPerFrame = 6
    /// The inverse STFT's length (and window).
    public static let fftSize = 1280
    /// The inverse STFT's hop: samples per backbone row.
    public static let hopLength = 320
    /// Samples per frame: 6 rows of 320 (80 ms).
    public static let samplesPerFrame = rowsPerFrame * hopLength
    /// Codes per codebook in `emb.emb` (the end-of-audio code has no row).
    public static let codesPerCodebook = 2048
    /// The backbone's output width: 641 log-magnitudes and 641 phases.
    public static let outputWidth = 2 * (fftSize / 2 + 1)
    /// Default `maxFrames`: 4096 frames, 5 min 28 s of audio in one turn.
    public static let defaultMaxFrames = 4096

    /// The tokenizer file's path, as errors name it.
    public let path: String
    /// The backbone: the tokenizer file's LFM2 blocks.
    public let backbone: TransformerModel
    /// The vocoder whose `emb.emb` is the code embedding (kept: the table is read in its file).
    public let vocoder: SpeechVocoder
    /// Most frames one stream (one turn) decodes: its caches' length.
    public let maxFrames: Int

    /// `emb.emb.weight`: `[8·2048, d]`, row `code + 2048·c` for codebook `c`, as stored.
    let codeEmbedding: WeightMatrix
    let codeEmbeddingName: String
    /// `dense_2` as an F32 copy `[1282, d]` (products through OpenBLAS sgemm) and its bias.
    let projection: WeightMatrix
    let projectionBias: [Float]
    private let projectionCopy: FloatBuffer
    let istft: InverseSTFT

    /// Opens the tokenizer file at `path` and loads it with the code embedding of `vocoder`,
    /// the backbone's products on `vocoder.pool` (the language model's).
    public convenience init(path: String, vocoder: SpeechVocoder, maxFrames: Int = defaultMaxFrames) throws(AudioDetokenizerError) {
        let file: GGUFFile
        do { file = try GGUFFile(path: path) } catch { throw .file(path: path, error) }
        try self.init(file: file, path: path, vocoder: vocoder, maxFrames: maxFrames)
    }

    /// Loads the tokenizer in `file` (`path` is what errors name it) with the code embedding
    /// of `vocoder` (`emb.emb.weight`, 8·2048 rows, as its loader checked), the backbone's
    /// products on `pool` (default: the vocoder's). Refuses a file that is not an LFM2
    /// embedding model with `attention.sliding_window` before any tensor is read, and one
    /// whose output is not 1282 wide or whose width is not the code embedding's.
    public init(
        file: GGUFFile, path: String, vocoder: SpeechVocoder, pool: ThreadPool? = nil, maxFrames: Int = defaultMaxFrames
    ) throws(AudioDetokenizerError) {
        let codeEmbedding = vocoder.detokenizerEmbedding
        let m = file.metadata
        let architecture: String
        do { architecture = try m.string("general.architecture") } catch { throw .file(path: path, error) }
        let outputKey = "\(LFM2.name).embedding_length_out", windowKey = "\(LFM2.name).attention.sliding_window"
        guard architecture == LFM2.name, m.contains(outputKey) else {
            throw .notAnEmbeddingModel(path: path, architecture: architecture, key: outputKey)
        }
        guard m.contains(windowKey) else { throw .missingKey(path: path, key: windowKey) }
        guard maxFrames >= 1, maxFrames <= 1 << 20 else {
            throw .invalidValue(path: path, key: "maxFrames", value: String(maxFrames), reason: "must be 1...1048576")
        }
        let model: TransformerModel
        do { model = try TransformerModel(file: file, pool: pool ?? vocoder.pool) } catch { throw .backbone(path: path, error) }
        guard let projection = model.weights.outputProjection else {
            throw .notAnEmbeddingModel(path: path, architecture: architecture, key: outputKey)
        }
        guard projection.weight.rows == Self.outputWidth else {
            throw .invalidValue(
                path: path, key: outputKey, value: String(projection.weight.rows),
                reason:
                    "must be \(Self.outputWidth): the log-magnitudes and phases of \(Self.outputWidth / 2) bins (a \(Self.fftSize)-point STFT)"
            )
        }
        let d = model.hyperparameters.embeddingLength
        guard codeEmbedding.cols == d else {
            throw .widthMismatch(
                path: vocoder.path, tensor: codeEmbedding.name, codeEmbeddingWidth: codeEmbedding.cols, detokenizer: path,
                detokenizerWidth: d)
        }
        // dense_2 in F32, once: the spectrum rows' product is one sgemm.
        let copy = FloatBuffer(count: Self.outputWidth * d)
        projection.weight.matrix.dequantize(rows: 0..<Self.outputWidth, into: copy.pointer)
        guard let f32 = try? WeightMatrix(type: .f32, rows: Self.outputWidth, cols: d, data: copy.pointer) else {
            throw .invalidValue(path: path, key: "dense_2.weight", value: "\(Self.outputWidth) x \(d)", reason: "no F32 view")
        }
        self.path = path
        self.vocoder = vocoder
        backbone = model
        self.codeEmbedding = codeEmbedding.matrix
        codeEmbeddingName = codeEmbedding.name
        self.projection = f32
        projectionBias = projection.bias
        projectionCopy = copy
        self.maxFrames = maxFrames
        istft = InverseSTFT(fftSize: Self.fftSize, hopLength: Self.hopLength)!
    }

    /// The waveform of a turn's `frames` in one call (end-of-audio frames skipped): 1920
    /// samples per other frame, at 24 kHz. What the reference computes.
    public func decode(_ frames: [AudioFrame]) throws(AudioDetokenizerError) -> [Float] {
        let stream = makeStream()
        var samples = try stream.append(frames)
        samples += stream.finish()
        return samples
    }

    /// A stream for one turn: its own backbone caches (for `maxFrames` frames) and
    /// inverse STFT.
    public func makeStream() -> Stream { Stream(self) }

    /// Frames from lists of 8 codes (a golden file's `frames`, a CLI's input), each code
    /// in `0...2048`.
    public static func frames(fromCodes codes: [[Int]]) throws(AudioDetokenizerError) -> [AudioFrame] {
        var frames: [AudioFrame] = []
        for (t, frame) in codes.enumerated() {
            guard frame.count == AudioFrame.codebookCount else { throw .invalidFrame(frame: t, codes: frame.count) }
            for (c, code) in frame.enumerated() where code < 0 || code >= AudioFrame.codesPerCodebook {
                throw .codeOutOfRange(frame: t, codebook: c, code: code)
            }
            frames.append(AudioFrame(frame))
        }
        return frames
    }

    /// One turn being decoded: frames in, the samples that are final out. Not
    /// thread-safe: one per turn (or reused after `finish()`).
    public final class Stream {
        /// The detokenizer whose weights the stream runs.
        public let detokenizer: AudioDetokenizer
        /// Frames decoded so far in this turn (end-of-audio frames not counted).
        public private(set) var frameCount = 0
        let session: InferenceSession
        var istft: InverseSTFT

        init(_ detokenizer: AudioDetokenizer) {
            self.detokenizer = detokenizer
            session = InferenceSession(
                model: detokenizer.backbone, contextLength: detokenizer.maxFrames * AudioDetokenizer.rowsPerFrame, kvCacheType: .f32)
            // A frame's 6 rows through the matvec: float weights (the F16 of a converted
            // detokenizer) read once per frame rather than dequantized for OpenBLAS.
            if detokenizer.backbone.linears.allSatisfy({ !$0.type.usesQuantizedActivations }) {
                session.matvecRowLimit = AudioDetokenizer.rowsPerFrame
            }
            istft = detokenizer.istft
        }

        /// Decodes `frames` (end-of-audio frames skipped) after the turn's earlier ones and
        /// returns the samples that became final: 1920 per frame, 480 fewer for the turn's
        /// first. A refused call (a code without an embedding row, a turn over `maxFrames`)
        /// changes nothing.
        public func append(_ frames: [AudioFrame]) throws(AudioDetokenizerError) -> [Float] {
            let spoken = try detokenizer.spokenFrames(frames)
            guard !spoken.isEmpty else { return [] }
            guard frameCount + spoken.count <= detokenizer.maxFrames else {
                throw .tooManyFrames(frames: frameCount + spoken.count, maximum: detokenizer.maxFrames)
            }
            let rows = detokenizer.upsampled(try detokenizer.frameEmbeddings(spoken))
            let hidden: [Float]
            do { hidden = try session.evaluateHiddenStates(embeddings: rows) } catch { throw .backbone(path: detokenizer.path, error) }
            frameCount += spoken.count
            let (real, imaginary) = AudioDetokenizer.spectrum(detokenizer.project(hidden))
            var samples: [Float] = []
            samples.reserveCapacity(spoken.count * AudioDetokenizer.samplesPerFrame)
            real.withUnsafeBufferPointer { re in
                imaginary.withUnsafeBufferPointer { im in
                    istft.append(
                        real: re.baseAddress!, imaginary: im.baseAddress!, rows: spoken.count * AudioDetokenizer.rowsPerFrame,
                        into: &samples)
                }
            }
            return samples
        }

        /// The turn's last samples (the inverse STFT's 480, none when no frame was decoded);
        /// the stream is then empty, ready for another turn.
        public func finish() -> [Float] {
            let samples = istft.finish()
            session.reset()
            frameCount = 0
            return samples
        }
    }

    // MARK: - The steps

    /// The frames that are decoded: all but the end-of-audio ones (code 2048 in codebook 0),
    /// each of whose codes must have a row in `emb.emb` (below 2048).
    func spokenFrames(_ frames: [AudioFrame]) throws(AudioDetokenizerError) -> [AudioFrame] {
        var spoken: [AudioFrame] = []
        spoken.reserveCapacity(frames.count)
        for (t, frame) in frames.enumerated() where !frame.isEndOfAudio {
            for c in 0..<AudioFrame.codebookCount where frame[c] >= Self.codesPerCodebook {
                throw .codeOutOfRange(frame: t, codebook: c, code: frame[c])
            }
            spoken.append(frame)
        }
        return spoken
    }

    /// Step 1: per frame, the mean of its codebooks' rows of `emb.emb` (`[T, d]`): the
    /// rows summed in codebook order, then divided by 8. A row holding a value that is not
    /// finite (a damaged file) is refused, naming the row.
    func frameEmbeddings(_ frames: [AudioFrame]) throws(AudioDetokenizerError) -> [Float] {
        let d = backbone.hyperparameters.embeddingLength, count = Float(AudioFrame.codebookCount)
        var out = [Float](repeating: 0, count: frames.count * d)
        var badRow: Int?
        withUnsafeTemporaryAllocation(of: Float.self, capacity: d) { row in
            out.withUnsafeMutableBufferPointer { out in
                for (t, frame) in frames.enumerated() {
                    let e = out.baseAddress! + t * d
                    for c in 0..<AudioFrame.codebookCount {
                        let r = frame[c] + Self.codesPerCodebook * c
                        codeEmbedding.dequantize(rows: r..<(r + 1), into: row.baseAddress!)
                        if badRow == nil, !row.allSatisfy(\.isFinite) { badRow = r }
                        for i in 0..<d { e[i] += row[i] }
                    }
                    for i in 0..<d { e[i] /= count }
                }
            }
        }
        if let badRow {
            throw .invalidValue(
                path: vocoder.path, key: codeEmbeddingName, value: "row \(badRow)", reason: "holds a NaN or infinite value")
        }
        return out
    }

    /// Step 2: each row of `embeddings` (`[T, d]`) 6 times (`[6T, d]`).
    func upsampled(_ embeddings: [Float]) -> [Float] {
        let d = backbone.hyperparameters.embeddingLength
        var out: [Float] = []
        out.reserveCapacity(embeddings.count * Self.rowsPerFrame)
        for t in 0..<(embeddings.count / d) {
            for _ in 0..<Self.rowsPerFrame { out.append(contentsOf: embeddings[(t * d)..<((t + 1) * d)]) }
        }
        return out
    }

    /// Step 4's product: `dense_2 · h + b` for each row of `hidden` (`[n, d]` to
    /// `[n, 1282]`: 641 log-magnitudes, then 641 phases).
    func project(_ hidden: [Float]) -> [Float] {
        let d = backbone.hyperparameters.embeddingLength, n = hidden.count / d, width = Self.outputWidth
        var out = [Float](repeating: 0, count: n * width)
        hidden.withUnsafeBufferPointer { h in
            out.withUnsafeMutableBufferPointer { y in
                projection.matmul(h.baseAddress!, count: n, into: y.baseAddress!, pool: backbone.pool)
                projectionBias.withUnsafeBufferPointer { b in
                    for i in 0..<n { Elementwise.add(b.baseAddress!, into: y.baseAddress! + i * width, count: width) }
                }
            }
        }
        return out
    }

    /// Step 4's spectrum: `X = exp(L) (cos P + i sin P)` for each row of `s` (`[n, 1282]`),
    /// as rows of 641 real parts and 641 imaginary parts.
    static func spectrum(_ s: [Float]) -> (real: [Float], imaginary: [Float]) {
        let bins = outputWidth / 2, n = s.count / outputWidth
        var real = [Float](repeating: 0, count: n * bins), imaginary = real
        for i in 0..<n {
            for k in 0..<bins {
                let magnitude = expf(s[i * outputWidth + k]), phase = s[i * outputWidth + bins + k]
                real[i * bins + k] = magnitude * cosf(phase)
                imaginary[i * bins + k] = magnitude * sinf(phase)
            }
        }
        return (real, imaginary)
    }
}

/// Why an audio detokenizer (`tokenizer-*.gguf` with the vocoder's code embedding) could
/// not be loaded, or why frames were refused. Every file case names the file and the key or
/// tensor involved.
public enum AudioDetokenizerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file could not be opened, or is not a valid GGUF container.
    case file(path: String, GGUFError)
    /// The backbone could not be loaded (the model error names the key or tensor: a
    /// missing or misshapen `dense_2`, a bad hyper-parameter), or refused its input.
    case backbone(path: String, ModelError)
    /// The file is not an LFM2 embedding model (`key`, `<arch>.embedding_length_out`, and
    /// `dense_2` absent): perhaps a language model.
    case notAnEmbeddingModel(path: String, architecture: String, key: String)
    /// A metadata key the detokenizer needs is absent.
    case missingKey(path: String, key: String)
    /// A key (or a setting) has a value the detokenizer cannot use.
    case invalidValue(path: String, key: String, value: String, reason: String)
    /// The code embedding's rows are not as wide as the backbone's.
    case widthMismatch(path: String, tensor: String, codeEmbeddingWidth: Int, detokenizer: String, detokenizerWidth: Int)
    /// A frame holds a code the detokenizer has no embedding row for (2048, the end-of-audio
    /// code, outside codebook 0 of an end-of-audio frame; anything outside 0...2048).
    case codeOutOfRange(frame: Int, codebook: Int, code: Int)
    /// A frame has another number of codes than 8.
    case invalidFrame(frame: Int, codes: Int)
    /// A turn longer than the stream's caches hold.
    case tooManyFrames(frames: Int, maximum: Int)

    public var description: String {
        switch self {
        case .file(let path, let e):
            return "\(path): \(e.description)"
        case .backbone(let path, let e):
            return "\(path): \(e.description)"
        case .notAnEmbeddingModel(let path, let architecture, let key):
            return
                "\(path): a '\(architecture)' model without \(key) and dense_2: not an audio detokenizer (an LFM2 embedding model, tokenizer-*.gguf)."
        case .missingKey(let path, let key):
            return "\(path): the metadata key \(key) is missing; the file is not a complete audio detokenizer conversion."
        case .invalidValue(let path, let key, let value, let reason):
            return "\(path): \(key) = \(value): \(reason)."
        case .widthMismatch(let path, let tensor, let codeEmbeddingWidth, let detokenizer, let detokenizerWidth):
            return
                "\(path): '\(tensor)' has rows of \(codeEmbeddingWidth) but the detokenizer \(detokenizer) is \(detokenizerWidth) wide; use the vocoder and tokenizer files of one model."
        case .codeOutOfRange(let frame, let codebook, let code):
            return
                "frame \(frame): code \(code) in codebook \(codebook) has no embedding row (codes are 0...2047; 2048 ends the audio in codebook 0)."
        case .invalidFrame(let frame, let codes):
            return "frame \(frame) has \(codes) codes; a frame has \(AudioFrame.codebookCount)."
        case .tooManyFrames(let frames, let maximum):
            return "\(frames) frames in one turn exceed the detokenizer's \(maximum); create it with a larger maxFrames."
        }
    }
}
