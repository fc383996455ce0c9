import Foundation
import GGUF
import Models

/// Options for loading a model with `Leap.load`.
public struct LiquidInferenceEngineOptions: Sendable {
    /// Precision of the attention key/value cache.
    public enum KVCacheType: Sendable, Equatable {
        case f32
        /// Half the memory, within F16 rounding of F32 (see docs/numerics.md).
        case f16
    }

    /// Threads for the matrix kernels (default: the cores granted to the process, its
    /// affinity mask and CPU quota: `GrantedCores.count`).
    public var cpuThreads: Int?
    /// Context window in tokens (default: the model's trained context, capped at 4096).
    /// `GenerationOptions.sequenceLength` can lower it per request, not raise it.
    public var contextSize: Int?
    /// Precision of the key/value cache (default `.f32`).
    public var kvCacheType: KVCacheType
    /// The seed of every request that leaves `GenerationOptions.rngSeed` nil, so that a
    /// program (or a test) is reproducible without setting a seed per request (default
    /// nil: a new random seed per request). leap-ref's addition.
    public var defaultRNGSeed: UInt64?
    /// How many generations run at once (default 1: one at a time, the others wait their
    /// turn). With more, the runner's generations, from several `Conversation`s, share
    /// forward passes (continuous batching, `ServingEngine`): each step reads the weights
    /// once for every running conversation, so together they go much faster than one after
    /// another. Each of these sequences holds its own caches and prompt cache of
    /// `contextSize` tokens (allocated at the first generation; memory is touched as
    /// positions fill). leap-ref's addition.
    public var parallelSequences: Int
    /// The model's media encoder, an `mmproj-*.gguf` file (LFM2-VL's vision tower, or
    /// LFM2-Audio's audio encoder). Default nil: the `mmproj-*.gguf` beside the model file,
    /// if there is one (see `MultimodalProjectorFile.companion(of:)`); with none, the model
    /// reads text only.
    public var mmProjPath: String?
    /// Bounds on the images and audio a message may carry (leap-ref's addition).
    public var mediaLimits: MediaLimits
    /// A speech-capable model's audio-code decoder, a `vocoder-*.gguf` file (LFM2.5-Audio's
    /// depthformer and code embeddings). Default nil: the `vocoder-*.gguf` beside the model
    /// (`CompanionFile.vocoder`), looked for when the model's vocabulary has the speech
    /// tokens (`<|audio_start|>`, `<|text_end|>`). Speech needs it and `audioTokenizerPath`.
    public var vocoderPath: String?
    /// A speech-capable model's audio detokenizer, a `tokenizer-*.gguf` file (codes to a
    /// 24 kHz waveform). Default nil: the `tokenizer-*.gguf` beside the model, as
    /// `vocoderPath`.
    public var audioTokenizerPath: String?
    /// How the vocoder's depthformer holds its matrices (default `.asStored`: the file's
    /// size in memory, activations rounded to 8 bits as in the language model's decode;
    /// `.float32`: dequantized at load, the reference's numbers, about 7 times the memory).
    public var vocoderWeights: SpeechVocoder.WeightStorage
    /// The most audio frames one spoken reply may have (80 ms each; default 4096, 5 min 28 s):
    /// the detokenizer's context for a turn. A reply that fills it ends as one that fills
    /// the context does (`.exceedContext`; the server's `length`).
    public var maxAudioFramesPerReply: Int = AudioDetokenizer.defaultMaxFrames
    /// A chat template (Jinja source) used instead of the GGUF's `tokenizer.chat_template`
    /// (default nil: the GGUF's). A LEAP manifest's `chat_template` arrives here.
    public var chatTemplate: String?
    /// Sampling defaults over the GGUF's `general.sampling.*` ones (default nil: the GGUF's,
    /// else leap-ref's): a LEAP manifest's `sampling_parameters` arrive here. A request's
    /// own settings still win.
    public var samplingDefaults: SamplingOverrides?

    /// Options with the given fields; every argument has a default.
    public init(
        cpuThreads: Int? = nil, contextSize: Int? = nil, kvCacheType: KVCacheType = .f32, defaultRNGSeed: UInt64? = nil,
        parallelSequences: Int = 1, mmProjPath: String? = nil, mediaLimits: MediaLimits = MediaLimits(),
        vocoderPath: String? = nil, audioTokenizerPath: String? = nil, vocoderWeights: SpeechVocoder.WeightStorage = .asStored
    ) {
        self.vocoderPath = vocoderPath
        self.audioTokenizerPath = audioTokenizerPath
        self.vocoderWeights = vocoderWeights
        self.cpuThreads = cpuThreads
        self.contextSize = contextSize
        self.kvCacheType = kvCacheType
        self.defaultRNGSeed = defaultRNGSeed
        self.parallelSequences = parallelSequences
        self.mmProjPath = mmProjPath
        self.mediaLimits = mediaLimits
    }
}

/// Entry point: loads GGUF models into `ModelRunner`s.
public enum Leap {
    /// Loads a local GGUF model file.
    ///
    /// - Parameters:
    ///   - url: a `file://` URL of a `.gguf` file.
    ///   - options: threads, context size and cache precision.
    ///   - progress: called with the fraction loaded (0...1) while the weights are read
    ///     into memory; the file is memory-mapped and every page that is read in place is
    ///     touched once (not those of weights copied into the decode kernels' layout, which
    ///     are held once), so the first generation does not stall on disk reads.
    /// - Throws: `LeapError.modelLoadingFailure` saying what is wrong with the file.
    public static func load(
        url: URL, options: LiquidInferenceEngineOptions = LiquidInferenceEngineOptions(),
        progress: (@Sendable (Double) -> Void)? = nil
    ) async throws -> ModelRunner {
        guard url.isFileURL else {
            throw LeapError.modelLoadingFailure("\(url) is not a local file; download the .gguf first and pass its file URL")
        }
        return try await load(path: url.path, options: options, progress: progress)
    }

    /// Loads a local GGUF model file given by its path (see `load(url:options:progress:)`).
    public static func load(
        path: String, options: LiquidInferenceEngineOptions = LiquidInferenceEngineOptions(),
        progress: (@Sendable (Double) -> Void)? = nil
    ) async throws -> ModelRunner {
        guard options.parallelSequences >= 1 else {
            throw LeapError.modelLoadingFailure("parallelSequences must be at least 1, not \(options.parallelSequences)")
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue else {
            throw LeapError.modelLoadingFailure("no model file at \(path); check the path (scripts/setup.sh fetches the default model)")
        }
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global(qos: .userInitiated).async {
                do {
                    progress?(0)
                    let loaded = try LoadedModel(path: path, options: options)
                    loaded.model.file.touchPages { progress?($0) }
                    progress?(1)
                    continuation.resume(returning: LiquidInferenceEngineRunner(loaded: loaded, path: path, options: options))
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }
}
