import Foundation

/// Why samples could not be turned into a log-mel spectrogram.
public enum LogMelError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Fewer samples than the per-bin normalisation needs: two full hops (320 samples,
    /// 20 ms at 16 kHz). llama.cpp aborts on such input.
    case tooShort(sampleCount: Int, minimum: Int)
    /// More samples than the extractor's `maximumSampleCount`.
    case tooLong(sampleCount: Int, maximum: Int)
    /// A sample is NaN or infinite (the one at `index`), which would make whole mel bins NaN.
    case nonFiniteSample(index: Int)

    /// What is wrong, in samples and seconds.
    public var description: String {
        let rate = Double(LogMelExtractor.sampleRate)
        switch self {
        case .tooShort(let count, let minimum):
            return "the audio is too short: \(count) samples at 16 kHz (\(seconds(count, rate)) s); "
                + "at least \(minimum) samples (\(seconds(minimum, rate)) s) are needed"
        case .tooLong(let count, let maximum):
            return "the audio is too long: \(count) samples at 16 kHz (\(seconds(count, rate)) s); "
                + "at most \(maximum) samples (\(seconds(maximum, rate)) s) are accepted"
        case .nonFiniteSample(let index):
            return "audio sample \(index) is not a finite number (NaN or infinity)"
        }
    }

    private func seconds(_ count: Int, _ rate: Double) -> String {
        String(format: "%.3f", Double(count) / rate)
    }
}

/// A log-mel spectrogram: `melCount` rows (mel bins, lowest frequency first) of `frameCount`
/// frames, normalised per bin.
public struct LogMelSpectrogram: Sendable, Equatable {
    /// The number of mel bins (rows).
    public let melCount: Int
    /// The number of frames (columns): `sampleCount / 160 + 1`.
    public let frameCount: Int
    /// The frames the per-bin normalisation covered, `sampleCount / 160`; the frames after
    /// them (the last one) are 0.
    public let validFrameCount: Int
    /// The values, bin after bin: `values[mel * frameCount + frame]` (llama.cpp's
    /// `[n_mels][n_frames]` layout).
    public let values: [Float]

    /// The value of mel bin `mel` in frame `frame`.
    public subscript(mel: Int, frame: Int) -> Float { values[mel * frameCount + frame] }
}

/// LFM2-Audio's log-mel front end (NeMo's FastConformer preprocessor), computed as llama.cpp's
/// libmtmd does for the `lfm2a` audio projector (`mtmd_audio_preprocessor_conformer`), from
/// mono samples at 16 kHz:
///
/// 1. Zero-pad 256 samples on each side (half an FFT).
/// 2. Pre-emphasis over the signal: `y[i] = x[i] - 0.97 x[i-1]`, the first sample kept.
/// 3. Frames of 512 samples every 160; `frameCount = n / 160 + 1` (integer division).
/// 4. Each frame times a symmetric Hann window of 400 samples,
///    `0.5 - 0.5 cos(2 pi i / 399)`, centred in the 512 (56 zeros each side).
/// 5. Power spectrum `|rFFT|^2`, 257 bins (`RealFFT`).
/// 6. 128 mel filters, Slaney scale with Slaney area normalisation, 0-8000 Hz (`MelFilterbank`).
/// 7. `ln(energy + 2^-24)`.
/// 8. Per mel bin, over the first `n / 160` frames: mean and unbiased standard deviation in
///    `Double`, `v = (v - mean) / (std + 1e-5)`; the remaining (last) frame is set to 0.
///
/// No dither. `Float` arithmetic where llama.cpp uses `Float` (pre-emphasis, window, FFT,
/// power, the filter products), `Double` where it does (the filter sums, the logarithm, the
/// normalisation), in the same order, so the values match llama.cpp's to the last bits (the
/// committed goldens agree to within their 6 significant digits).
///
/// Limits: at least `minimumSampleCount` samples (320: the normalisation's unbiased standard
/// deviation needs two frames; llama.cpp aborts below that) and at most `maximumSampleCount`
/// (by default 10 minutes, 9,600,000 samples: a 60,001-frame spectrogram of 29 MiB). Memory is
/// the padded signal plus the spectrogram, `4 (n + 512) + 4 x 128 x frameCount` bytes; time
/// is linear in `n`.
public struct LogMelExtractor: Sendable {
    /// The sample rate the front end takes, in Hz.
    public static let sampleRate = 16_000
    /// FFT points per frame.
    public static let fftSize = 512
    /// Length of the Hann window inside each frame.
    public static let windowLength = 400
    /// Samples between the starts of consecutive frames.
    public static let hopLength = 160
    /// Mel bins.
    public static let melCount = 128
    /// The pre-emphasis coefficient.
    public static let preEmphasis: Float = 0.97
    /// Added to each filter energy before the logarithm: 2^-24.
    public static let logFloor = 0x1p-24
    /// Added to each bin's standard deviation before dividing by it.
    public static let normalizationEpsilon = 1e-5
    /// The fewest samples accepted: 320 (two hops, 20 ms).
    public static let minimumSampleCount = 2 * hopLength
    /// The default `maximumSampleCount`: 10 minutes at 16 kHz.
    public static let defaultMaximumSampleCount = 10 * 60 * sampleRate

    /// The most samples `spectrogram(of:)` accepts.
    public let maximumSampleCount: Int
    /// The mel filters (128 over 257 bins, 0-8000 Hz).
    public var filterbank: MelFilterbank { Self.sharedFilterbank }
    /// The analysis window: 512 values, the 400-sample symmetric Hann window at 56..<456 and
    /// zeros around it.
    public var window: [Float] { Self.sharedWindow }

    private static let sharedFilterbank = MelFilterbank(
        melCount: melCount, fftSize: fftSize, sampleRate: sampleRate, minFrequency: 0,
        maxFrequency: Double(sampleRate) / 2)
    private static let sharedWindow: [Float] = {
        var window = [Float](repeating: 0, count: fftSize)
        let offset = (fftSize - windowLength) / 2
        for i in 0..<windowLength {
            // llama.cpp: 0.5 * (1.0 - cosf((2.0 * M_PI * i) / (length - 1))), the angle rounded
            // to Float for cosf, the rest in Double.
            let angle = Float(2.0 * Double.pi * Double(i) / Double(windowLength - 1))
            window[offset + i] = Float(0.5 * (1.0 - Double(cosf(angle))))
        }
        return window
    }()
    private static let fft = RealFFT(size: fftSize)!

    /// An extractor that accepts up to `maximumSampleCount` samples.
    public init(maximumSampleCount: Int = defaultMaximumSampleCount) {
        self.maximumSampleCount = maximumSampleCount
    }

    /// The frames a spectrogram of `sampleCount` samples has: `sampleCount / 160 + 1`.
    public static func frameCount(forSampleCount sampleCount: Int) -> Int {
        sampleCount / hopLength + 1
    }

    /// The normalised log-mel spectrogram of mono `samples` at 16 kHz (see the type's
    /// description for the steps).
    /// - Throws: `LogMelError.tooShort` below `minimumSampleCount` samples, `.tooLong` above
    ///   `maximumSampleCount`, `.nonFiniteSample` for a NaN or infinite sample.
    public func spectrogram(of samples: [Float]) throws(LogMelError) -> LogMelSpectrogram {
        let n = samples.count
        guard n >= Self.minimumSampleCount else { throw .tooShort(sampleCount: n, minimum: Self.minimumSampleCount) }
        guard n <= maximumSampleCount else { throw .tooLong(sampleCount: n, maximum: maximumSampleCount) }
        if let index = samples.firstIndex(where: { !$0.isFinite }) { throw .nonFiniteSample(index: index) }

        let padding = Self.fftSize / 2
        let frameCount = Self.frameCount(forSampleCount: n)
        let validFrameCount = n / Self.hopLength
        var padded = [Float](repeating: 0, count: n + 2 * padding)
        padded[padding] = samples[0]
        for i in 1..<n { padded[padding + i] = samples[i] - Self.preEmphasis * samples[i - 1] }

        var values = [Float](repeating: 0, count: Self.melCount * frameCount)
        var frame = [Float](repeating: 0, count: Self.fftSize)
        var power = [Float](repeating: 0, count: Self.fft.binCount)
        var energies = [Double](repeating: 0, count: Self.melCount)
        var workspace = RealFFT.Workspace(size: Self.fftSize)
        let window = Self.sharedWindow
        for t in 0..<validFrameCount {
            let start = t * Self.hopLength
            for j in 0..<Self.fftSize { frame[j] = window[j] * padded[start + j] }
            frame.withUnsafeBufferPointer { Self.fft.transform($0, into: &workspace) }
            for k in 0..<power.count {
                power[k] = workspace.real[k] * workspace.real[k] + workspace.imaginary[k] * workspace.imaginary[k]
            }
            power.withUnsafeBufferPointer { power in
                energies.withUnsafeMutableBufferPointer { Self.sharedFilterbank.energies(of: power, into: $0) }
            }
            for m in 0..<Self.melCount {
                values[m * frameCount + t] = Float(log(energies[m] + Self.logFloor))
            }
        }
        // The last frame (t = validFrameCount) is computed by llama.cpp and then overwritten
        // with 0 by the normalisation, so it is left at 0 here.
        Self.normalizeEachBin(&values, frameCount: frameCount, over: validFrameCount)
        return LogMelSpectrogram(
            melCount: Self.melCount, frameCount: frameCount, validFrameCount: validFrameCount, values: values)
    }

    /// Per mel bin (row): mean and unbiased standard deviation of the first `validFrameCount`
    /// values in `Double`, then `(v - mean) / (std + 1e-5)` rounded to `Float`.
    private static func normalizeEachBin(_ values: inout [Float], frameCount: Int, over validFrameCount: Int) {
        for m in 0..<melCount {
            let row = m * frameCount
            var mean = 0.0
            for t in 0..<validFrameCount { mean += Double(values[row + t]) }
            mean /= Double(validFrameCount)
            var variance = 0.0
            for t in 0..<validFrameCount {
                let deviation = Double(values[row + t]) - mean
                variance += deviation * deviation
            }
            variance /= Double(validFrameCount - 1)
            let scale = variance.squareRoot() + normalizationEpsilon
            for t in 0..<validFrameCount {
                values[row + t] = Float((Double(values[row + t]) - mean) / scale)
            }
        }
    }
}
