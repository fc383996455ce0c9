// The WAV decoder, encoder and resamplers live in the Audio module; its types (`WAVAudio`,
// `WAVError`, `WAVSampleFormat`, ...) are part of this module's API, as they were before the move.
@_exported import Audio
import Foundation

extension ChatMessageContent {
    /// Audio content made from raw Float samples in [-1, 1], encoded as a 32-bit float WAV
    /// (lossless for the given values).
    ///
    /// As in the LEAP SDK the samples are encoded as given: with `channelCount` > 1 they are
    /// taken as interleaved frames and written as a multi-channel WAV, which is **not**
    /// downmixed here. The inference engine accepts mono only, so such content is rejected
    /// when it is used (`monoSamples16kHz()` throws `WAVError.multiChannel`); call
    /// `WAVAudio.downmixToMono(interleaved:channelCount:)` first to send stereo audio.
    /// Keeping the encoding faithful means a caller never gets a silent conversion they did
    /// not ask for. Any sample rate is written; rates outside `WAVAudio.supportedSampleRates`
    /// are rejected at use, other rates are resampled to 16 kHz then.
    ///
    /// `channelCount` defaults to 1 (mono), as in LEAP SDK v0.10, whose examples write
    /// `ChatMessageContent.fromFloatSamples(samples, sampleRate: sampleRate)`.
    public static func fromFloatSamples(_ samples: [Float], sampleRate: Int, channelCount: Int = 1) -> ChatMessageContent {
        .audio(WAVAudio.encodeFloat32WAV(samples: samples, sampleRate: sampleRate, channelCount: channelCount))
    }

    /// Audio content from WAV file bytes, after checking that they are a WAV file the engine
    /// accepts (mono; Int16, Int24, Int32 or Float32; a supported sample rate). The bytes are
    /// kept unchanged: `.audio(data)`.
    ///
    /// The header is checked (`WAVAudio.header(of:)`); the samples are decoded when the
    /// message reaches a model.
    ///
    /// - Throws: the `WAVError` of `WAVAudio(data:)` (for example `.notWAV` for MP3 or M4A
    ///   bytes, `.multiChannel` for stereo). `WAVError` rather than
    ///   `LeapError.unsupportedContent` is thrown so callers can tell the problems apart;
    ///   its `description` is the message to show.
    public static func fromWAVData(_ data: Data) throws(WAVError) -> ChatMessageContent {
        _ = try WAVAudio.header(of: data)
        return .audio(data)
    }

    /// The samples of `.audio` content as the audio encoder takes them: mono Float in
    /// [-1, 1] at 16 kHz (`WAVAudio.modelSampleRate`), decoded and resampled as llama.cpp
    /// does (`WAVAudio.decodeMono16kHz(_:)`: miniaudio's conversions and linear resampler),
    /// the samples the log-mel spectrogram is computed from.
    ///
    /// - Throws: `WAVError.notAudioContent` for `.text` or `.image` content, otherwise the
    ///   `WAVError` of `WAVAudio(data:)`.
    public func monoSamples16kHz() throws(WAVError) -> [Float] {
        guard case .audio(let data) = self else { throw .notAudioContent }
        return try WAVAudio.decodeMono16kHz(data)
    }
}
