import Foundation

/// How a speech-capable model's reply alternates between text tokens and audio frames
/// (LFM2.5-Audio; liquid-audio's `generate_interleaved` and `generate_sequential`).
public enum SpeechMode: String, Sendable, Equatable, CaseIterable {
    /// Text and audio in turns: up to 6 text tokens, then 12 audio frames, and so on, until
    /// the text is done (`<|text_end|>`); then audio until its end. The mode of
    /// `Respond with interleaved text and audio.`
    case interleaved
    /// Text until `<|audio_start|>`, then audio until its end-of-audio frame, then text
    /// again: text-to-speech (`Perform TTS. Use the UK female voice.`).
    case sequential
}

extension SpeechMode {
    /// The system prompt of interleaved replies, as LFM2.5-Audio was trained on it.
    public static let interleavedSystemPrompt = "Respond with interleaved text and audio."
    /// The system prompts of text-to-speech, one per voice, as the model was trained on them.
    public static let speechSystemPrompts = SpeechVoice.allCases.map(\.systemPrompt)

    /// The mode a conversation's system prompt asks for, when it is one the model was trained
    /// on (surrounding white space ignored); nil for any other prompt (text only).
    public init?(systemPrompt: String) {
        let prompt = systemPrompt.trimmingCharacters(in: .whitespacesAndNewlines)
        if prompt == Self.interleavedSystemPrompt {
            self = .interleaved
        } else if Self.speechSystemPrompts.contains(prompt) {
            self = .sequential
        } else {
            return nil
        }
    }

    /// The reference's sampling of audio codes in this mode, when a request does not set
    /// its own: liquid-audio's examples use temperature 1.0 and top-k 4 for interleaved
    /// replies, 0.8 and 64 for text-to-speech.
    public var defaultAudioSampling: (temperature: Float, topK: Int) {
        switch self {
        case .interleaved: return (1.0, 4)
        case .sequential: return (0.8, 64)
        }
    }
}

/// The four voices of LFM2.5-Audio's text-to-speech, each chosen by its system prompt.
public enum SpeechVoice: String, Sendable, CaseIterable {
    case usFemale = "US female"
    case usMale = "US male"
    case ukFemale = "UK female"
    case ukMale = "UK male"

    /// `Perform TTS. Use the UK female voice.` and its sisters.
    public var systemPrompt: String { "Perform TTS. Use the \(rawValue) voice." }
}

/// The special tokens that steer a spoken reply, looked up by name in the model's
/// vocabulary (the real LFM2.5-Audio and the tiny fixture number them differently).
public struct SpeechTokens: Sendable, Equatable {
    /// `<|im_end|>`: the end of the turn.
    public var endOfTurn: Int
    /// `<|text_end|>`: the interleaved reply's text is done.
    public var textEnd: Int
    /// `<|audio_start|>`: a sequential reply switches to audio.
    public var audioStart: Int

    /// The three tokens by id.
    public init(endOfTurn: Int, textEnd: Int, audioStart: Int) {
        self.endOfTurn = endOfTurn
        self.textEnd = textEnd
        self.audioStart = audioStart
    }
}

/// What the next step of a spoken reply produces, and when the reply ends: the mode rules
/// of liquid-audio 1.3.0, one step (a text token or an audio frame of 8 codes) at a time.
///
/// Interleaved: the reply starts in text with `left = 6`, and every step first takes one
/// from `left`. A text step that samples `<|im_end|>` ends the reply without emitting it;
/// any other token is emitted, `<|text_end|>` marks the text done, and when `left` reaches
/// 0 or the text is done the reply turns to audio with `left = 12`. An audio step emits its
/// frame; when `left` reaches 0 and the text is not done, the reply turns to text with
/// `left = 6`; an end-of-audio frame turns it to text with `left` as it is (after an early
/// end of audio the text run lasts only the frames that were left).
///
/// Sequential: text first; every token is emitted; `<|audio_start|>` turns to audio and
/// `<|im_end|>` ends the reply (emitted). An audio step emits its frame, and an
/// end-of-audio frame turns back to text.
///
/// In both modes a token the rules do not name (`<|text_end|>` in sequential mode,
/// `<|audio_start|>` in interleaved mode) is plain text.
public struct SpeechSchedule: Sendable, Equatable {
    /// What a step samples.
    public enum Kind: Sendable, Equatable {
        case text
        case audio
    }

    /// What a text step's token did.
    public enum TextOutcome: Sendable, Equatable {
        /// The token is part of the reply; generation goes on.
        case emitted
        /// The token is part of the reply, and the reply ends with it (sequential
        /// `<|im_end|>`).
        case emittedAndEnded
        /// The reply ends before the token, which is not part of it (interleaved
        /// `<|im_end|>`).
        case ended
    }

    /// Text tokens per interleaved text run.
    public static let textRun = 6
    /// Audio frames per interleaved audio run.
    public static let audioRun = 12

    public let mode: SpeechMode
    public let tokens: SpeechTokens
    /// What the next step samples.
    public private(set) var next: Kind = .text
    /// Steps left in the current interleaved run (may go below 0 once the text is done).
    public private(set) var left: Int
    /// Whether the interleaved reply's text is done.
    public private(set) var textDone = false

    /// The schedule of a reply in `mode`, with the model's steering `tokens`.
    public init(mode: SpeechMode, tokens: SpeechTokens) {
        self.mode = mode
        self.tokens = tokens
        left = Self.textRun
    }

    /// Call at the top of every step, before sampling: what the step samples.
    public mutating func beginStep() -> Kind {
        if mode == .interleaved { left -= 1 }
        return next
    }

    /// Records the token a text step sampled.
    public mutating func recordText(_ token: Int) -> TextOutcome {
        precondition(next == .text, "a text token in an audio step")
        switch mode {
        case .interleaved:
            if token == tokens.endOfTurn { return .ended }
            if token == tokens.textEnd { textDone = true }
            if left == 0 || textDone {
                next = .audio
                left = Self.audioRun
            }
            return .emitted
        case .sequential:
            if token == tokens.endOfTurn { return .emittedAndEnded }
            if token == tokens.audioStart { next = .audio }
            return .emitted
        }
    }

    /// Records the frame an audio step made (`endOfAudio`: its first code is the
    /// end-of-audio code).
    public mutating func recordFrame(endOfAudio: Bool) {
        precondition(next == .audio, "an audio frame in a text step")
        switch mode {
        case .interleaved:
            if left == 0 && !textDone {
                next = .text
                left = Self.textRun
            }
            if endOfAudio { next = .text }
        case .sequential:
            if endOfAudio { next = .text }
        }
    }
}
