import Foundation
import Models
import Tokenizers

/// Whether a speech-capable model (LFM2.5-Audio with its `vocoder-*` and `tokenizer-*`
/// files) speaks its reply.
public enum SpeechOutput: Sendable, Equatable {
    /// As the conversation's system prompt says: the prompts the model was trained on
    /// choose the mode (`Respond with interleaved text and audio.`: interleaved;
    /// `Perform TTS. Use the UK female voice.` and its three sisters: sequential); any
    /// other conversation gets text only. The default.
    case automatic
    /// Text only, whatever the system prompt says.
    case off
    /// Speech in this mode, whatever the system prompt says.
    case speak(SpeechMode)
}

/// How a completion speaks: its mode and how its audio codes are drawn.
public struct SpeechRequest: Sendable, Equatable {
    /// Interleaved or sequential.
    public var mode: SpeechMode
    /// The temperature of the audio codes (nil: the mode's `defaultAudioSampling`, or
    /// greedy when the text's temperature is 0); 0 is greedy.
    public var audioTemperature: Float?
    /// The most likely codes an audio code is drawn from (nil: the mode's default; 0: all).
    public var audioTopK: Int?

    /// A spoken reply in `mode`.
    public init(mode: SpeechMode, audioTemperature: Float? = nil, audioTopK: Int? = nil) {
        self.mode = mode
        self.audioTemperature = audioTemperature
        self.audioTopK = audioTopK
    }
}

/// One step of a spoken reply, as the reference's `outputs` list it: a text token, or an
/// audio frame's 8 codes (an end-of-audio frame is all 2048).
public enum SpeechStep: Sendable, Equatable {
    case text(Int)
    case frame([Int])
}

/// What a model needs to speak: the vocoder (depthformer, code embeddings), the audio
/// detokenizer (codes to a 24 kHz waveform) and the special tokens that steer a reply.
final class SpeechParts: Sendable {
    let vocoder: SpeechVocoder
    let detokenizer: AudioDetokenizer
    let tokens: SpeechTokens

    init(vocoder: SpeechVocoder, detokenizer: AudioDetokenizer, tokens: SpeechTokens) {
        self.vocoder = vocoder
        self.detokenizer = detokenizer
        self.tokens = tokens
    }

    /// The speech parts of the model at `modelPath`: the vocoder and audio tokenizer of
    /// `options`, else the `vocoder-*` and `tokenizer-*` files beside the model when its
    /// vocabulary has the speech tokens; nil when there are none. A file given without
    /// the other, a model without the speech tokens given speech files, a vocoder whose
    /// width does not fit the model, and any file the loaders refuse are errors naming the
    /// file.
    static func load(
        modelPath: String, options: LiquidInferenceEngineOptions, model: TransformerModel, tokenizer: Tokenizer
    ) throws(LeapError) -> SpeechParts? {
        func id(_ text: String) -> Int? { tokenizer.tokenID(forText: text).map(Int.init) }
        let tokens = id("<|im_end|>").flatMap { end in
            id("<|text_end|>").flatMap { textEnd in
                id("<|audio_start|>").map { SpeechTokens(endOfTurn: end, textEnd: textEnd, audioStart: $0) }
            }
        }
        let explicit = options.vocoderPath != nil || options.audioTokenizerPath != nil
        guard tokens != nil || explicit else { return nil }
        let vocoderPath = options.vocoderPath ?? CompanionFile.vocoder.companion(of: modelPath)
        let tokenizerPath = options.audioTokenizerPath ?? CompanionFile.audioTokenizer.companion(of: modelPath)
        guard let vocoderPath, let tokenizerPath else {
            guard explicit else { return nil }
            let missing =
                vocoderPath == nil
                ? "a vocoder (vocoderPath, or vocoder-*.gguf beside the model)"
                : "an audio tokenizer (audioTokenizerPath, or tokenizer-*.gguf beside the model)"
            throw .modelLoadingFailure("speech output needs \(missing) as well")
        }
        guard let tokens else {
            throw .modelLoadingFailure(
                "\(modelPath): the model's vocabulary has no <|im_end|>, <|text_end|> or <|audio_start|> token, so it cannot speak; "
                    + "load it without \(vocoderPath) and \(tokenizerPath)")
        }
        let vocoder: SpeechVocoder
        do {
            vocoder = try SpeechVocoder(path: vocoderPath, pool: model.pool, weights: options.vocoderWeights)
        } catch {
            throw .modelLoadingFailure("\(error)")
        }
        let width = model.hyperparameters.embeddingLength
        guard vocoder.shape.languageModelWidth == width else {
            throw .modelLoadingFailure(
                "\(vocoderPath): the vocoder takes a language model of width \(vocoder.shape.languageModelWidth) "
                    + "(depth_linear.weight), but \(modelPath) has width \(width)")
        }
        do {
            return SpeechParts(
                vocoder: vocoder,
                detokenizer: try AudioDetokenizer(path: tokenizerPath, vocoder: vocoder, maxFrames: options.maxAudioFramesPerReply),
                tokens: tokens)
        } catch {
            throw .modelLoadingFailure("\(error)")
        }
    }
}
