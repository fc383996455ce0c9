import Foundation

/// How `WAVAudio.resample(_:from:to:method:)` changes a sample rate.
public enum ResamplingMethod: Sendable, Equatable, CaseIterable {
    /// Band-limited interpolation with a Kaiser-windowed sinc (about 70 dB of stop-band
    /// attenuation, pass band to 90 % of the lower Nyquist frequency): the cleaner
    /// conversion, with no aliasing to speak of and no delay, but not llama.cpp's samples.
    case bandLimitedSinc
}

extension WAVAudio {
    /// Resamples mono `samples` from `sourceRate` to `targetRate` Hz.
    ///
    /// - `.bandLimitedSinc` (the default, and what `ChatMessageContent.monoSamples16kHz()`
    ///   uses): the output has `round(samples.count * targetRate / sourceRate)` samples, each
    ///   a Kaiser-windowed sinc interpolation clamped to [-1, 1].
    ///
    /// Equal rates return `samples` unchanged.
    /// - Throws: `WAVError.unsupportedSampleRate` when either rate is outside
    ///   `supportedSampleRates`.
    public static func resample(
        _ samples: [Float], from sourceRate: Int, to targetRate: Int, method: ResamplingMethod = .bandLimitedSinc
    ) throws(WAVError) -> [Float] {
        guard supportedSampleRates.contains(sourceRate) else { throw .unsupportedSampleRate(sourceRate) }
        guard supportedSampleRates.contains(targetRate) else { throw .unsupportedSampleRate(targetRate) }
        if sourceRate == targetRate || samples.isEmpty { return samples }
        switch method {
        case .bandLimitedSinc: return SincKernel.shared.resample(samples, from: sourceRate, to: targetRate)
        }
    }

    /// This audio at `targetRate` Hz (the same value when the rate already matches), resampled
    /// with `method` (see `resample(_:from:to:method:)`).
    public func resampled(to targetRate: Int, method: ResamplingMethod = .bandLimitedSinc) throws(WAVError) -> WAVAudio {
        let converted = try Self.resample(samples, from: sampleRate, to: targetRate, method: method)
        return try WAVAudio(samples: converted, sampleRate: targetRate)
    }
}
