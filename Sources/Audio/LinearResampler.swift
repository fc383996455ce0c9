import Foundation

/// The resampler of miniaudio 0.11 (`ma_linear_resampler`), which llama.cpp's libmtmd uses to
/// bring audio files to 16 kHz: linear interpolation between neighbouring samples, with
/// miniaudio's default low-pass filter, a 4th-order Butterworth filter made of two biquad
/// sections (`ma_lpf`), at the lower of the two Nyquist frequencies.
///
/// The arithmetic is miniaudio's, in the same `Float` operations in the same order, so the
/// output is bit for bit what llama.cpp decodes (`Tests/Fixtures/audio`: a 22.05 kHz clip and
/// the 16 kHz PCM libmtmd made of it). How it works, with the rates divided by their greatest
/// common divisor (22,050 -> 16,000 Hz becomes 441 -> 320):
///
/// - A timer counts input samples in whole steps and fractions of `targetRate`; it starts at
///   one whole step, and each output sample advances it by `sourceRate / targetRate`.
/// - Downsampling: every input sample goes through the low-pass filter as it is loaded. Each
///   output sample is `x0 + (x1 - x0) * a`, where `x1` is the latest filtered input, `x0` the
///   one before (0 before the first) and `a` the timer's fraction. The first output is
///   therefore 0, and the output lags the input by about one input sample plus the filter's delay.
/// - Upsampling: the output of the interpolation goes through the low-pass filter instead.
/// - Equal rates: the samples are returned unchanged (miniaudio does not resample then).
///
/// Output length: `outputCount(forInputCount:)`, miniaudio's
/// `ma_linear_resampler_get_expected_output_frame_count`: `n * targetRate / sourceRate`
/// rounded down, plus one when the input still covers that extra sample (33,075 samples at
/// 22.05 kHz give 24,000 at 16 kHz; 3 at 48 kHz give 1). Every output sample is computed from
/// real input, never from padding.
///
/// A linear interpolator with a 4th-order filter passes some aliasing (a 12 kHz tone
/// resampled from 48 to 16 kHz keeps about a ninth of its amplitude, folded to 4 kHz) and
/// delays the signal; `WAVAudio.resample(_:from:to:method:)` with `.bandLimitedSinc` is the
/// cleaner resampler when matching llama.cpp does not matter.
public struct LinearResampler: Sendable {
    /// The order of miniaudio's default low-pass filter (`MA_DEFAULT_RESAMPLER_LPF_ORDER`).
    public static let lowPassOrder = 4

    /// The input sample rate, in Hz.
    public let sourceRate: Int
    /// The output sample rate, in Hz.
    public let targetRate: Int

    /// The rates divided by their greatest common divisor, as miniaudio keeps them.
    private let reducedSourceRate: Int
    private let reducedTargetRate: Int
    /// The low-pass filter's sections, in the order they are applied.
    private let lowPass: [Biquad]

    /// A resampler from `sourceRate` to `targetRate` Hz.
    /// - Throws: `WAVError.unsupportedSampleRate` when either rate is outside
    ///   `WAVAudio.supportedSampleRates`.
    public init(from sourceRate: Int, to targetRate: Int) throws(WAVError) {
        guard WAVAudio.supportedSampleRates.contains(sourceRate) else { throw .unsupportedSampleRate(sourceRate) }
        guard WAVAudio.supportedSampleRates.contains(targetRate) else { throw .unsupportedSampleRate(targetRate) }
        self.sourceRate = sourceRate
        self.targetRate = targetRate
        let divisor = Self.greatestCommonDivisor(sourceRate, targetRate)
        reducedSourceRate = sourceRate / divisor
        reducedTargetRate = targetRate / divisor
        // ma_linear_resampler_set_rate_internal: the filter runs at the higher of the two
        // (reduced) rates, with its cut-off at the lower one's Nyquist frequency.
        lowPass = Biquad.butterworthLowPass(
            order: Self.lowPassOrder,
            sampleRate: Double(max(reducedSourceRate, reducedTargetRate)),
            cutoff: Double(min(reducedSourceRate, reducedTargetRate)) * 0.5)
    }

    /// How many samples `resample(_:)` makes of `inputCount` samples.
    public func outputCount(forInputCount inputCount: Int) -> Int {
        guard sourceRate != targetRate else { return inputCount }
        // ma_linear_resampler_get_expected_output_frame_count, from the initial timer (1, 0).
        var count = inputCount * reducedTargetRate / reducedSourceRate
        if inputConsumed(byOutputCount: count + 1) <= inputCount { count += 1 }
        return count
    }

    /// `samples` at `targetRate`.
    public func resample(_ samples: [Float]) -> [Float] {
        guard sourceRate != targetRate else { return samples }
        let outputCount = outputCount(forInputCount: samples.count)
        var output = [Float](repeating: 0, count: outputCount)
        var filter = lowPass
        let downsampling = reducedSourceRate > reducedTargetRate
        let advanceWhole = reducedSourceRate / reducedTargetRate
        let advanceFraction = reducedSourceRate % reducedTargetRate
        let fractionDenominator = Float(reducedTargetRate)
        // The timer: input samples still to load before the next output, and the fraction
        // (in units of 1 / reducedTargetRate) between the two loaded samples.
        var timeWhole = 1
        var timeFraction = 0
        var x0: Float = 0
        var x1: Float = 0
        var nextInput = 0
        for i in 0..<outputCount {
            while timeWhole > 0 && nextInput < samples.count {
                x0 = x1
                x1 = downsampling ? Biquad.run(&filter, samples[nextInput]) : samples[nextInput]
                nextInput += 1
                timeWhole -= 1
            }
            // outputCount(forInputCount:) counts only outputs whose input is all there.
            assert(timeWhole == 0, "the output count exceeds what the input covers")
            let a = Float(timeFraction) / fractionDenominator
            let interpolated = x0 + (x1 - x0) * a
            output[i] = downsampling ? interpolated : Biquad.run(&filter, interpolated)
            timeWhole += advanceWhole
            timeFraction += advanceFraction
            if timeFraction >= reducedTargetRate {
                timeFraction -= reducedTargetRate
                timeWhole += 1
            }
        }
        return output
    }

    /// Input samples loaded before output sample `outputCount - 1` is made (the first output
    /// loads one; each next one advances the timer by the rate ratio).
    private func inputConsumed(byOutputCount outputCount: Int) -> Int {
        let steps = outputCount - 1
        return 1 + steps * (reducedSourceRate / reducedTargetRate)
            + steps * (reducedSourceRate % reducedTargetRate) / reducedTargetRate
    }

    private static func greatestCommonDivisor(_ a: Int, _ b: Int) -> Int {
        var (a, b) = (a, b)
        while b != 0 { (a, b) = (b, a % b) }
        return a
    }
}

/// A second-order IIR section in miniaudio's `Float` arithmetic (`ma_biquad`, transposed
/// direct form II), with its two state values.
struct Biquad: Sendable, Equatable {
    var b0: Float, b1: Float, b2: Float, a1: Float, a2: Float
    var r1: Float = 0, r2: Float = 0

    /// The coefficients divided by `a0` and rounded to `Float`, as `ma_biquad_reinit` does.
    init(b0: Double, b1: Double, b2: Double, a0: Double, a1: Double, a2: Double) {
        self.b0 = Float(b0 / a0)
        self.b1 = Float(b1 / a0)
        self.b2 = Float(b2 / a0)
        self.a1 = Float(a1 / a0)
        self.a2 = Float(a2 / a0)
    }

    /// Filters one sample.
    mutating func callAsFunction(_ x: Float) -> Float {
        let y = b0 * x + r1
        r1 = b1 * x - a1 * y + r2
        r2 = b2 * x - a2 * y
        return y
    }

    /// Runs `x` through the sections in order.
    static func run(_ sections: inout [Biquad], _ x: Float) -> Float {
        var y = x
        for i in sections.indices { y = sections[i](y) }
        return y
    }

    /// miniaudio's Butterworth low-pass of an even `order` (`ma_lpf` with `order / 2`
    /// `ma_lpf2` sections): section `i` has Q = 1 / (2 cos((2i + 1) pi / (2 order))), and the
    /// RBJ cookbook low-pass coefficients at `cutoff` Hz. miniaudio's cosine is
    /// `sin(pi/2 - x)`, kept here so the coefficients round the same way.
    static func butterworthLowPass(order: Int, sampleRate: Double, cutoff: Double) -> [Biquad] {
        precondition(order > 0 && order % 2 == 0, "only even orders are built from biquad sections alone")
        func miniaudioCosine(_ x: Double) -> Double { sin(Double.pi * 0.5 - x) }
        return (0..<(order / 2)).map { section in
            let angle = Double(1 + section * 2) * (Double.pi / Double(order * 2))
            let q = 1 / (2 * miniaudioCosine(angle))
            let w = 2 * Double.pi * cutoff / sampleRate
            let s = sin(w)
            let c = miniaudioCosine(w)
            let alpha = s / (2 * q)
            return Biquad(b0: (1 - c) / 2, b1: 1 - c, b2: (1 - c) / 2, a0: 1 + alpha, a1: -2 * c, a2: 1 - alpha)
        }
    }
}
