import Foundation

/// How `WAVAudio.resample(_:from:to:method:)` changes a sample rate.
public enum ResamplingMethod: Sendable, Equatable, CaseIterable {
    /// miniaudio 0.11's linear interpolation after a 4th-order Butterworth low-pass
    /// (`LinearResampler`): what llama.cpp's libmtmd does to audio files, bit for bit. Use it
    /// to feed a model the samples llama.cpp would.
    case linear
    /// Band-limited interpolation with a Kaiser-windowed sinc (about 70 dB of stop-band
    /// attenuation, pass band to 90 % of the lower Nyquist frequency): the cleaner
    /// conversion, with no aliasing to speak of and no delay, but not llama.cpp's samples.
    case bandLimitedSinc
}

extension WAVAudio {
    /// Resamples mono `samples` from `sourceRate` to `targetRate` Hz with `method`, which has
    /// no default: the two give different samples, and only `.linear` gives the audio
    /// encoder what llama.cpp gives it.
    ///
    /// - `.linear`: `LinearResampler`, miniaudio's resampler as llama.cpp runs it (and so what
    ///   the audio encoder is fed: `decodeMono16kHz`); its output length is
    ///   `LinearResampler.outputCount(forInputCount:)`.
    /// - `.bandLimitedSinc`: the output has `round(samples.count * targetRate / sourceRate)`
    ///   samples, each a Kaiser-windowed sinc interpolation clamped to [-1, 1].
    ///
    /// Equal rates return `samples` unchanged with either method.
    /// - Throws: `WAVError.unsupportedSampleRate` when either rate is outside
    ///   `supportedSampleRates`.
    public static func resample(
        _ samples: [Float], from sourceRate: Int, to targetRate: Int, method: ResamplingMethod
    ) throws(WAVError) -> [Float] {
        guard supportedSampleRates.contains(sourceRate) else { throw .unsupportedSampleRate(sourceRate) }
        guard supportedSampleRates.contains(targetRate) else { throw .unsupportedSampleRate(targetRate) }
        if sourceRate == targetRate || samples.isEmpty { return samples }
        switch method {
        case .linear: return try LinearResampler(from: sourceRate, to: targetRate).resample(samples)
        case .bandLimitedSinc: return SincKernel.shared.resample(samples, from: sourceRate, to: targetRate)
        }
    }

    /// This audio at `targetRate` Hz (the same value when the rate already matches), resampled
    /// with `method` (see `resample(_:from:to:method:)`; no default either).
    public func resampled(to targetRate: Int, method: ResamplingMethod) throws(WAVError) -> WAVAudio {
        let converted = try Self.resample(samples, from: sampleRate, to: targetRate, method: method)
        return try WAVAudio(samples: converted, sampleRate: targetRate)
    }

    /// Decodes WAV bytes to the mono 16 kHz `Float` samples an audio model takes, as
    /// llama.cpp's libmtmd does (`mtmd_helper_bitmap_init_from_buf`, miniaudio 0.11): the
    /// samples of `init(data:)` (Int16 / 32768, Int24 / 2^23, Int32 / 2^31, Float32 as
    /// stored), resampled with `.linear` when the file's rate is not 16 kHz.
    ///
    /// The one difference from miniaudio: Float32 samples outside [-1, 1] are clamped and NaN
    /// becomes 0 (miniaudio passes them through), so what reaches the model is always in range.
    ///
    /// A clip longer than `maximumSeconds` is refused from its header, before a sample is
    /// decoded or resampled (`WAVError.tooLong`): a forged or hour-long file at a low rate
    /// would otherwise grow 16-fold in memory before any later length check saw it.
    /// - Throws: the `WAVError` of `init(data:)`: not a WAV file, truncated, an unsupported
    ///   encoding, bit depth or sample rate, more than one channel; `.tooLong` for a clip
    ///   over `maximumSeconds`.
    public static func decodeMono16kHz(_ data: Data, maximumSeconds: Double = .infinity) throws(WAVError) -> [Float] {
        let audio = try WAVAudio(bytes: [UInt8](data), maximumSeconds: maximumSeconds)
        return try resample(audio.samples, from: audio.sampleRate, to: modelSampleRate, method: .linear)
    }
}
