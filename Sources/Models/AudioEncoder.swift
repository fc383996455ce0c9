import GGUF
import Kernels

/// The shape of an audio projector, read from its `clip.audio.*` keys and its tensors.
public struct AudioEncoderHyperparameters: Sendable, Equatable {
    /// Mel bins per frame of the input (`clip.audio.num_mel_bins`).
    public let melBins: Int
    /// The encoder's width d (`clip.audio.embedding_length`).
    public let width: Int
    /// The width of the feed-forward modules: the rows of `a.blk.0.ffn_up.weight`
    /// (`clip.audio.feed_forward_length` holds d for LFM2-Audio, as its converter writes it).
    public let feedForwardLength: Int
    /// Conformer blocks (`clip.audio.block_count`).
    public let blockCount: Int
    /// Attention heads (`clip.audio.attention.head_count`); each is `width / headCount` wide.
    public let headCount: Int
    /// The LayerNorms' ε (`clip.audio.attention.layer_norm_epsilon`).
    public let layerNormEpsilon: Float
    /// The width of the output embeddings (`clip.audio.projection_dim`): the language model's.
    public let projectionDim: Int
    /// Channels of the subsampling convolutions (from `a.conv1d.0.weight`).
    public let subsamplingChannels: Int
    /// The depthwise convolution's kernel length over time (from `a.blk.0.conv_dw.weight`).
    public let convolutionKernelLength: Int
    /// The width of the relative-position sinusoid table (the columns of `linear_pos`;
    /// 512 in llama.cpp, fixed).
    public let positionTableWidth: Int
    /// Rows of `a.position_embd.weight`, which bound the input length (see
    /// `AudioEncoder.maximumFrameCount`).
    public let positionRows: Int

    /// The width of one attention head.
    public var headDim: Int { width / headCount }
}

/// LFM2-Audio's audio encoder, loaded from its multimodal projector GGUF (llama.cpp's
/// `mmproj`, `clip.projector_type` `lfm2a`): a FastConformer and the MLP adapter, from a
/// log-mel matrix to one embedding per audio token, ready to take positions in the
/// language model's prompt (FastConformer.swift; docs/audio-encoder.md).
///
/// ```swift
/// let encoder = try AudioEncoder(path: "mmproj-LFM2-Audio-1.5B-F16.gguf")
/// let embeddings = try encoder.encode(mel: mel, frames: frames)  // [tokens x outputWidth]
/// ```
///
/// Read-only after loading and `Sendable`; `encode` may run on several threads at once
/// (each call allocates its own activations; the threads of the pool are shared).
public final class AudioEncoder: Sendable {
    /// The projector file (the weights are views into it).
    public let file: GGUFFile
    /// The name errors give the file (its path, or what the caller passed).
    public let name: String
    /// The shape read from the file's keys and tensors.
    public let hyperparameters: AudioEncoderHyperparameters
    /// The threads that run the encoder's products.
    public let pool: ThreadPool
    /// Whether the first convolution rounds its input and kernel to IEEE half, as
    /// llama.cpp's does (its `conv_2d` goes through an F16 im2col). On by default, so that
    /// embeddings match llama.cpp's to float rounding; off computes the convolution in F32.
    public let roundsFirstConvolutionToHalf: Bool

    let subsampling: ConvolutionSubsampling
    let blocks: [ConformerBlock]
    let adapter: LFM2AudioAdapter

    /// The projector types this encoder runs.
    public static let projectorTypes = ["lfm2a"]

    /// The fewest mel frames the encoder takes: 3, the mel of 320 samples (20 ms at
    /// 16 kHz), llama.cpp's shortest clip (it aborts below, in the mel normalization).
    public static let minimumFrameCount = 3

    /// The most mel frames this file takes: llama.cpp requires the rows of
    /// `a.position_embd.weight` to be at least `frames / 2` (integer division).
    public var maximumFrameCount: Int { 2 * hyperparameters.positionRows + 1 }

    /// Mel bins per frame of the input.
    public var melBinCount: Int { hyperparameters.melBins }

    /// The width of each output embedding (the language model's embedding width).
    public var outputWidth: Int { hyperparameters.projectionDim }

    /// Audio tokens (output embeddings) for `frames` mel frames: the subsampling halves
    /// the length three times, rounding up: `⌈⌈⌈frames/2⌉/2⌉/2⌉` (101 frames, one second, give 13).
    public static func tokenCount(frames: Int) -> Int {
        frames <= 0 ? 0 : ConvolutionSubsampling.subsampled(frames)
    }

    /// Loads the audio encoder of `file`, checking the projector type, every
    /// hyper-parameter and every tensor's presence, shape and type. `name` is what errors
    /// call the file (a path); `threads` defaults to the number of cores.
    public convenience init(
        file: GGUFFile, name: String = "mmproj", threads: Int? = nil, roundsFirstConvolutionToHalf: Bool = true
    ) throws(AudioEncoderError) {
        try self.init(
            file: file, name: name, pool: ThreadPool(threads: threads ?? ThreadPool.defaultThreads),
            roundsFirstConvolutionToHalf: roundsFirstConvolutionToHalf)
    }

    /// Loads the audio encoder of `file`, running its products on `pool` (for example the
    /// language model's, `TransformerModel.pool`).
    public init(file: GGUFFile, name: String = "mmproj", pool: ThreadPool, roundsFirstConvolutionToHalf: Bool = true)
        throws(AudioEncoderError)
    {
        let reader = ProjectorReader(file: file, name: name)
        let hp = try reader.audioHyperparameters()
        self.file = file
        self.name = name
        self.hyperparameters = hp
        self.pool = pool
        self.roundsFirstConvolutionToHalf = roundsFirstConvolutionToHalf
        subsampling = try reader.subsampling(hp)
        blocks = try (0..<hp.blockCount).map { i throws(AudioEncoderError) in try reader.block(i, hp) }
        adapter = try reader.adapter(hp)
    }

    /// Opens and loads the projector GGUF at `path`.
    public convenience init(path: String, threads: Int? = nil, roundsFirstConvolutionToHalf: Bool = true) throws(AudioEncoderError) {
        let file: GGUFFile
        do { file = try GGUFFile(path: path) } catch { throw .unreadableFile(file: path, error) }
        try self.init(file: file, name: path, threads: threads, roundsFirstConvolutionToHalf: roundsFirstConvolutionToHalf)
    }

    /// Audio tokens for `frames` mel frames (``tokenCount(frames:)``).
    public func tokenCount(frames: Int) -> Int { Self.tokenCount(frames: frames) }

    /// The embeddings of a log-mel matrix: `mel` holds `melBinCount x frames` values,
    /// bin-major (`mel[bin * frames + frame]`, as the log-mel front end stores it); the
    /// result holds `tokenCount(frames:) x outputWidth` values, one embedding per row.
    /// Throws when the count does not match, when `frames` is outside
    /// ``minimumFrameCount``...``maximumFrameCount``, or when a value is not finite.
    public func encode(mel: [Float], frames: Int) throws(AudioEncoderError) -> [Float] {
        try mel.withUnsafeBufferPointer { (m) throws(AudioEncoderError) -> [Float] in try encode(mel: m, frames: frames) }
    }

    /// ``encode(mel:frames:)`` over a buffer.
    public func encode(mel: UnsafeBufferPointer<Float>, frames: Int) throws(AudioEncoderError) -> [Float] {
        let hp = hyperparameters
        guard frames >= Self.minimumFrameCount else { throw .inputTooShort(frames: frames, minimum: Self.minimumFrameCount) }
        guard frames <= maximumFrameCount else { throw .inputTooLong(frames: frames, maximum: maximumFrameCount) }
        guard mel.count == hp.melBins * frames else { throw .melShapeMismatch(values: mel.count, melBins: hp.melBins, frames: frames) }
        if let bad = mel.firstIndex(where: { !$0.isFinite }) { throw .nonFiniteInput(index: bad) }

        let e = AudioEncoderPass(encoder: self, frames: frames)
        let x = subsampling(mel: mel.baseAddress!, frames: frames, roundingToHalf: roundsFirstConvolutionToHalf, e)
        for block in blocks { block(x, e) }
        var out = [Float](repeating: 0, count: e.tokens * hp.projectionDim)
        out.withUnsafeMutableBufferPointer { out in _ = adapter(x, into: out.baseAddress!, e) }
        return out
    }
}
