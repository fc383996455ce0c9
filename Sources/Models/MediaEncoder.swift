import GGUF
import Kernels

/// What every media encoder offers (`SigLIP2VisionEncoder`, `FastConformerEncoder`; the
/// cases of ``MediaEncoder``): where it was loaded from, the threads it runs on, how it
/// holds its weights, and the width of the embeddings it writes, which must be the
/// language model's.
public protocol MediaEncoderProtocol: Sendable {
    /// The projector types (`clip.projector_type`) the encoder runs.
    static var projectorTypes: [String] { get }
    /// The file's path, as errors name it.
    var path: String { get }
    /// The mmproj file (tensors are read in place, unless converted at load).
    var file: GGUFFile { get }
    /// The threads of the products, attention and element-wise work.
    var pool: ThreadPool { get }
    /// How the weight matrices are held.
    var weightStorage: MediaEncoder.WeightStorage { get }
    /// Width of the embeddings the encoder writes: the language model's embedding width.
    var outputWidth: Int { get }
}

extension MediaEncoderProtocol {
    /// Throws `widthMismatch`, naming both files and both widths, unless the language
    /// model's embedding width `width` (the model at `languageModel`) is ``outputWidth``.
    public func checkLanguageModelWidth(_ width: Int, languageModel: String) throws(ProjectorError) {
        guard width == outputWidth else {
            throw .widthMismatch(path: path, projectorWidth: outputWidth, languageModel: languageModel, languageModelWidth: width)
        }
    }
}

/// The media encoder of a multimodal projector file (llama.cpp's `mmproj-*.gguf`,
/// `general.architecture` `clip`): the whole encoder its `clip.projector_type` names, from
/// pixels or a log-mel matrix to rows of the language model's width (the projector proper is
/// only its last layers):
///
/// | type | encoder | input → output |
/// |---|---|---|
/// | `lfm2` | `SigLIP2VisionEncoder` (LFM2-VL) | a preprocessed image slice → `(W/32)(H/32)` embeddings |
/// | `lfm2a` | `FastConformerEncoder` (LFM2-Audio) | a log-mel matrix → one embedding per 80 ms |
///
/// ```swift
/// let encoder = try MediaEncoder.load(path: mmprojPath, pool: model.pool)
/// try encoder.checkLanguageModelWidth(model.hyperparameters.embeddingLength, languageModel: modelPath)
/// let rows: [Float]  // tokens x encoder.outputWidth
/// switch encoder {
/// case .vision(let vision): rows = try vision.encode(pixels: slice, width: 512, height: 512)
/// case .audio(let audio): rows = try audio.encode(mel: mel, frames: frames)
/// }
/// ```
///
/// Both encoders run on the pool they are given (pass the language model's,
/// `TransformerModel.pool`, so that the two share threads) and hold their weight matrices
/// as ``WeightStorage`` says. docs/media-encoders.md describes both.
public enum MediaEncoder: Sendable {
    /// LFM2-VL's vision encoder (`lfm2`).
    case vision(SigLIP2VisionEncoder)
    /// LFM2-Audio's audio encoder (`lfm2a`).
    case audio(FastConformerEncoder)

    /// How an encoder holds its weight matrices (vectors and small tables are always F32
    /// copies).
    public enum WeightStorage: Sendable, Equatable {
        /// In the mapped file in their stored type (F16 in an F16 conversion; F32, BF16 and
        /// the quantized types too), each product dequantizing blocks of rows into a small
        /// tile (`WeightMatrix.matmulByRowBlocks`): the file's size in memory.
        case asStored
        /// Converted to F32 copies once at load, the file's pages of them released: twice
        /// an F16 file's memory, no conversion per product.
        case float32
    }

    /// The projector types ``load(path:pool:weights:)`` runs: the vision encoder's, then
    /// the audio encoder's.
    public static var supportedTypes: [String] { SigLIP2VisionEncoder.projectorTypes + FastConformerEncoder.projectorTypes }

    /// The modalities of the encoders, in the order ``load(file:path:pool:weights:)`` tries
    /// them: `clip.<modality>.projector_type` names the type in a file without
    /// `clip.projector_type`.
    static let modalities = [SigLIP2VisionEncoder.modality, FastConformerEncoder.modality]

    /// The projector type of an mmproj file, after checking that `general.architecture` is
    /// `clip`: `clip.projector_type`, or in a file without it the first of
    /// `clip.vision.projector_type` and `clip.audio.projector_type` present (files of
    /// several modalities); `missingKey` naming `clip.projector_type` when there is none.
    /// The encoders read it by the same rule, each for its own modality.
    public static func type(of file: GGUFFile, path: String) throws(ProjectorError) -> String {
        try ProjectorFileReader(path: path, file: file).projectorType(modalities: modalities)
    }

    /// Opens the mmproj file at `path` and loads the encoder its projector type names,
    /// running on `pool`. A type neither encoder runs is `unsupportedProjectorType`
    /// naming it and ``supportedTypes``; every key and tensor is checked as the encoder's
    /// own initializer checks them.
    public static func load(path: String, pool: ThreadPool, weights: WeightStorage = .asStored) throws(ProjectorError)
        -> MediaEncoder
    {
        try load(file: ProjectorFileReader.open(path), path: path, pool: pool, weights: weights)
    }

    /// ``load(path:pool:weights:)`` for an opened file (`path` is what errors name it).
    public static func load(file: GGUFFile, path: String, pool: ThreadPool, weights: WeightStorage = .asStored)
        throws(ProjectorError) -> MediaEncoder
    {
        let type = try Self.type(of: file, path: path)
        if SigLIP2VisionEncoder.projectorTypes.contains(type) {
            return .vision(try SigLIP2VisionEncoder(file: file, path: path, pool: pool, weights: weights))
        }
        if FastConformerEncoder.projectorTypes.contains(type) {
            return .audio(try FastConformerEncoder(file: file, path: path, pool: pool, weights: weights))
        }
        throw .unsupportedProjectorType(path: path, type: type, expected: supportedTypes)
    }

    /// The loaded encoder.
    public var encoder: any MediaEncoderProtocol {
        switch self {
        case .vision(let e): return e
        case .audio(let e): return e
        }
    }

    /// The file's path, as errors name it.
    public var path: String { encoder.path }

    /// Width of the embeddings the encoder writes (`clip.vision.projection_dim` /
    /// `clip.audio.projection_dim`): the language model's embedding width.
    public var outputWidth: Int { encoder.outputWidth }

    /// Throws `widthMismatch`, naming both files and both widths, unless the language
    /// model's embedding width `width` (the model at `languageModel`) is ``outputWidth``.
    public func checkLanguageModelWidth(_ width: Int, languageModel: String) throws(ProjectorError) {
        try encoder.checkLanguageModelWidth(width, languageModel: languageModel)
    }
}
