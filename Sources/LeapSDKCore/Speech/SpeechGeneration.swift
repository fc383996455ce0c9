import Models
import Sampling

/// A spoken reply's state beside its text, one per sequence: the schedule of text and
/// audio steps, the depthformer (its workspace: the per-frame cache), the sampler of the
/// audio codes, and the detokenizer's stream, which turns frames into samples as they
/// come. `SequenceGeneration` drives it: an audio step is
///
/// ```
/// frame     = depthformer(h)                 h: the backbone's last hidden state; 8 codes
/// samples   = detokenizer.append(frame)      the samples that are final (none for end of audio)
/// next      = Σ_c audio_embedding[code_c + 2049 c]    fed back to the backbone as one position
/// ```
struct SpeechGeneration {
    var schedule: SpeechSchedule
    let parts: SpeechParts
    private let depthformer: Depthformer
    private var codes: Sampler
    private let stream: AudioDetokenizer.Stream
    /// Frames generated (end-of-audio frames included).
    private(set) var frames = 0

    /// The state of a reply as `request` asks, its codes drawn with `seed` (greedy when
    /// the text is greedy and the request sets no audio temperature).
    init(parts: SpeechParts, request: SpeechRequest, textTemperature: Float, seed: UInt64) {
        self.parts = parts
        schedule = SpeechSchedule(mode: request.mode, tokens: parts.tokens)
        depthformer = Depthformer(vocoder: parts.vocoder)
        let defaults = request.mode.defaultAudioSampling
        let temperature = request.audioTemperature ?? (textTemperature == 0 ? 0 : defaults.temperature)
        codes = Sampler(.audioCodes(temperature: temperature, topK: request.audioTopK ?? defaults.topK, seed: seed ^ 0x5EEC_A0D1))
        stream = parts.detokenizer.makeStream()
    }

    /// Whether `token` steers the reply (`<|text_end|>`, `<|audio_start|>`, `<|im_end|>`):
    /// such a token is a step of the reply but not part of its text.
    func steers(_ token: Int) -> Bool {
        let t = parts.tokens
        return token == t.textEnd || token == t.audioStart || token == t.endOfTurn
    }

    /// One audio step from the backbone's hidden state: the frame, the samples it made
    /// final, and the embedding the backbone takes next.
    mutating func frame(from hiddenState: UnsafeBufferPointer<Float>) throws(ServingError) -> (
        frame: AudioFrame, samples: [Float], embedding: [Float]
    ) {
        let step: DepthformerStep
        do {
            step = try depthformer.step(hiddenState: hiddenState, sampler: &codes)
        } catch {
            throw .engineFailure("the depthformer failed: \(error)")
        }
        frames += 1
        schedule.recordFrame(endOfAudio: step.isEndOfAudio)
        var samples: [Float] = []
        if !step.isEndOfAudio {
            do {
                samples = try stream.append([step.frame])
            } catch {
                throw .engineFailure("the audio detokenizer failed: \(error)")
            }
        }
        return (step.frame, samples, parts.vocoder.frameEmbedding(step.frame))
    }

    /// Whether the detokenizer's stream holds as many frames as one turn may have
    /// (`AudioDetokenizer.maxFrames`): the reply then ends as at its token limit.
    var isFull: Bool { stream.frameCount >= parts.detokenizer.maxFrames }

    /// The reply's last samples (the inverse STFT's overlap).
    func finish() -> [Float] { stream.finish() }

    /// The prompt-cache key of a frame's position: negative, so never a token id, and the
    /// same for the same codes.
    static func key(_ frame: AudioFrame) -> Int {
        // A one-position media chunk of this hash keys its position the same way
        // (`MediaChunk.key(0)`), so a reply read back in the next turn's prompt matches it.
        -1 - Int(contentHash(frame) & 0x3FFF_FFFF_FFFF_FFFF)
    }

    /// FNV-1a over a frame's codes.
    static func contentHash(_ frame: AudioFrame) -> UInt64 {
        var h: UInt64 = 0xCBF2_9CE4_8422_2325
        for c in frame.codes {
            h ^= UInt64(truncatingIfNeeded: c)
            h = h &* 0x0000_0100_0000_01B3
        }
        return h
    }
}
