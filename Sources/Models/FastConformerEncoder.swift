import GGUF
import Kernels

/// LFM2-Audio's audio encoder, loaded from an mmproj file (`general.architecture` `clip`,
/// `clip.projector_type` `lfm2a`): a FastConformer (Rekesh et al., 2023; NeMo's
/// `ConformerEncoder` with `dw_striding` subsampling and `rel_pos` attention) and the MLP
/// adapter into the language model's embedding space. One call encodes a log-mel matrix of
/// `frames` frames (100 a second, plus one) into `⌈⌈⌈frames/2⌉/2⌉/2⌉` embeddings of the
/// language model's width, one per 80 ms of audio:
///
/// ```
/// X  = Subsample₈(mel)                    [T, d]     3x3 stride-2 convolutions, a.pre_encode.out
/// X  = X + ½ FFN₁(LN(X))                  }
/// X  = X + RelPosAttention(LN(X))         }          for each of the L Conformer blocks
/// X  = X + Convolution(LN(X))             }          (macaron FFNs, Transformer-XL relative
/// X  = LN(X + ½ FFN₂(LN(X)))              }          positions, GLU + depthwise conv)
/// E  = mm₃ GELU(mm₁ LN(X) + b₁) + b₃      [T, D]     D = projection_dim
/// ```
///
/// GELU is the erf form. The steps are llama.cpp's `models/conformer.cpp` for
/// `PROJECTOR_TYPE_LFM2A`, the layers in AudioLayers.swift; docs/media-encoders.md has the
/// equations, shapes and tensor names, and what llama.cpp fixes rather than reads.
///
/// **Weights** are held as `weights` says (`MediaEncoder.WeightStorage`; default in
/// the file as stored, each product dequantizing blocks of rows into small tiles);
/// convolution kernels, biases and norms are F32 copies. **Threads**: everything runs on
/// `pool` (pass the language model's, `TransformerModel.pool`). An encode allocates its
/// activation buffers once (`AudioWorkspace`); concurrent encodes are safe.
public final class FastConformerEncoder: MediaEncoderProtocol {
    /// The file's path, as errors name it.
    public let path: String
    /// The mmproj file (its tensors are read in place).
    public let file: GGUFFile
    /// The encoder's and adapter's shape, from the file's keys and tensors.
    public let hyperparameters: AudioHyperparameters
    /// The threads of the products, attention, convolutions and element-wise work.
    public let pool: ThreadPool
    /// How the weight matrices are held.
    public let weightStorage: MediaEncoder.WeightStorage
    /// Whether the first convolution rounds its input and kernel to IEEE half, as
    /// llama.cpp's does (its `conv_2d` goes through an F16 im2col). On by default, so that
    /// embeddings match llama.cpp's to float rounding; off computes the convolution in F32.
    public let roundsFirstConvolutionToHalf: Bool
    let weights: AudioWeights

    /// The projector types this encoder runs.
    public static let projectorTypes = ["lfm2a"]
    /// The modality whose key names the projector type in a file without
    /// `clip.projector_type` (`clip.audio.projector_type`).
    static let modality = "audio"

    /// The fewest mel frames the encoder takes: 3, the mel of 320 samples (20 ms at
    /// 16 kHz), llama.cpp's shortest clip (it aborts below, in the mel normalization).
    public static let minimumFrameCount = 3

    /// The most mel frames this file takes: llama.cpp requires the rows of
    /// `a.position_embd.weight` to be at least `frames / 2` (integer division).
    public var maximumFrameCount: Int { 2 * hyperparameters.positionRows + 1 }

    /// Mel bins per frame of the input.
    public var melBinCount: Int { hyperparameters.melBins }

    /// Width of the embeddings `encode` writes: `clip.audio.projection_dim`, the width the
    /// language model must have.
    public var outputWidth: Int { hyperparameters.projectionDim }

    /// Loads the encoder in `file` (read from `path`, which errors name), checking the
    /// projector type, every key it reads and every tensor's presence, shape and type; it
    /// runs on `pool` and holds its matrices as `weights` says.
    public init(
        file: GGUFFile, path: String, pool: ThreadPool, weights storage: MediaEncoder.WeightStorage = .asStored,
        roundsFirstConvolutionToHalf: Bool = true
    ) throws(ProjectorError) {
        let reader = try ProjectorFileReader(file: file, path: path, types: Self.projectorTypes, modality: Self.modality)
        let hp = try AudioHyperparameters.reading(reader)
        (self.path, self.file, self.pool, self.weightStorage, self.hyperparameters) = (path, file, pool, storage, hp)
        weights = try AudioWeights(reader, hp, storage: storage)
        self.roundsFirstConvolutionToHalf = roundsFirstConvolutionToHalf
    }

    /// Opens and loads the mmproj file at `path` (see
    /// ``init(file:path:pool:weights:roundsFirstConvolutionToHalf:)``).
    public convenience init(
        path: String, pool: ThreadPool, weights storage: MediaEncoder.WeightStorage = .asStored,
        roundsFirstConvolutionToHalf: Bool = true
    ) throws(ProjectorError) {
        try self.init(
            file: ProjectorFileReader.open(path), path: path, pool: pool, weights: storage,
            roundsFirstConvolutionToHalf: roundsFirstConvolutionToHalf)
    }

    /// The number of embeddings (audio tokens) a log-mel matrix of `frames` frames encodes
    /// to, `⌈⌈⌈frames/2⌉/2⌉/2⌉` (101 frames, one second, give 13), after checking that the
    /// encoder accepts that length (``minimumFrameCount``...``maximumFrameCount``).
    public func tokenCount(frames: Int) throws(ProjectorError) -> Int {
        let what = "the frame count of the log-mel input"
        guard frames >= Self.minimumFrameCount else { throw .inputTooSmall(what: what, value: frames, minimum: Self.minimumFrameCount) }
        guard frames <= maximumFrameCount else { throw .inputTooLarge(what: what, value: frames, maximum: maximumFrameCount) }
        return ConvolutionSubsampling.subsampled(frames)
    }

    /// Encodes a log-mel matrix: `mel` holds `melBinCount · frames` finite floats, bin-major
    /// (`mel[bin · frames + frame]`, as the log-mel front end stores it). Returns
    /// `tokenCount(frames:) · outputWidth` floats, one embedding per row, in time order.
    public func encode(mel: [Float], frames: Int) throws(ProjectorError) -> [Float] {
        let count = try tokenCount(frames: frames) * outputWidth
        var out = [Float](repeating: 0, count: count)
        try mel.withUnsafeBufferPointer { (m) throws(ProjectorError) in
            try out.withUnsafeMutableBufferPointer { (o) throws(ProjectorError) in try encode(mel: m, frames: frames, into: o) }
        }
        return out
    }

    /// ``encode(mel:frames:)`` into `output`, which must hold at least
    /// `tokenCount(frames:) · outputWidth` floats (for example the language model's input
    /// rows of the audio's positions).
    public func encode(mel: UnsafeBufferPointer<Float>, frames: Int, into output: UnsafeMutableBufferPointer<Float>)
        throws(ProjectorError)
    {
        let tokens = try tokenCount(frames: frames), hp = hyperparameters
        guard mel.count == hp.melBins * frames else {
            throw .invalidInput(
                "a log-mel input of \(frames) frames has \(hp.melBins * frames) values (\(hp.melBins) bins x \(frames)), got \(mel.count)")
        }
        guard output.count >= tokens * outputWidth else {
            throw .invalidInput(
                "the output holds \(output.count) floats, \(tokens) embeddings of \(outputWidth) need \(tokens * outputWidth)")
        }
        try ProjectorError.checkFinite(mel, "the log-mel input")
        let w = AudioWorkspace(hp, frames: frames)
        // X = Subsample₈(mel)
        let x = weights.subsampling(mel: mel.baseAddress!, frames: frames, roundingToHalf: roundsFirstConvolutionToHalf, w, pool)
        // X = Block_L(... Block_1(X))
        for block in weights.blocks { block(x, w, pool) }
        // E = mm₃ GELU(mm₁ LN(X))
        weights.adapter(x, into: output.baseAddress!, w, pool)
    }
}
