import Foundation

/// The band-limited resampler of `WAVAudio.resample(_:from:to:method:)` with
/// `.bandLimitedSinc`: a tabulated Kaiser-windowed sinc.
///
/// Each output sample at time `t` (in input samples) is
/// `sum_j x[j] * c * sinc(c * (t - j)) * w((t - j) * c / Z)`, where the cut-off `c` is
/// `rolloff * min(1, targetRate / sourceRate)` of the input Nyquist frequency, `Z` = 24 zero
/// crossings on each side, and `w` a Kaiser window with beta 7 (about 70 dB stop-band
/// attenuation): J. O. Smith's "Digital Audio Resampling". When downsampling, the cut-off
/// follows the output rate, so content above the new Nyquist frequency is filtered out rather
/// than aliased; when upsampling it stays at the input's Nyquist frequency. `rolloff` = 0.9
/// leaves room for the filter's transition band, so the pass band ends at 90 % of the lower
/// Nyquist frequency (7.2 kHz for a 16 kHz output). The filter kernel is tabulated at 512
/// points per zero crossing and linearly interpolated. Samples outside the input are taken as
/// zero, and the output is clamped to [-1, 1] (the filter can overshoot slightly next to
/// full-scale steps). The output has `round(samples.count * targetRate / sourceRate)` samples.
struct SincKernel: Sendable {
    static let shared = SincKernel()

    /// Zero crossings of the sinc on each side of the centre.
    static let zeroCrossings = 24
    /// Table points per zero crossing.
    static let resolution = 512
    /// Kaiser window shape; 7 gives about 70 dB of stop-band attenuation.
    static let kaiserBeta = 7.0
    /// Fraction of the lower Nyquist frequency kept as pass band.
    static let rolloff = 0.9

    /// `sinc(u) * kaiser(u / zeroCrossings)` for `u = k / resolution`, `k = 0 ... zeroCrossings * resolution`,
    /// followed by one zero so interpolation at the last point stays in bounds.
    let table: [Float]

    init() {
        let count = Self.zeroCrossings * Self.resolution
        let normalization = Self.besselI0(Self.kaiserBeta)
        var table = [Float](repeating: 0, count: count + 2)
        for k in 0...count {
            let u = Double(k) / Double(Self.resolution)
            let sinc = k == 0 ? 1 : sin(Double.pi * u) / (Double.pi * u)
            let r = u / Double(Self.zeroCrossings)
            let window = Self.besselI0(Self.kaiserBeta * (max(0, 1 - r * r)).squareRoot()) / normalization
            table[k] = Float(sinc * window)
        }
        self.table = table
    }

    /// The modified Bessel function of the first kind, order 0, by its power series.
    static func besselI0(_ x: Double) -> Double {
        var sum = 1.0
        var term = 1.0
        let quarterSquare = x * x / 4
        var k = 1.0
        while term > sum * 1e-17 {
            term *= quarterSquare / (k * k)
            sum += term
            k += 1
        }
        return sum
    }

    func resample(_ input: [Float], from sourceRate: Int, to targetRate: Int) -> [Float] {
        let outputCount = (input.count * targetRate + sourceRate / 2) / sourceRate
        let step = Double(sourceRate) / Double(targetRate)
        let cutoff = Self.rolloff * min(1, Double(targetRate) / Double(sourceRate))
        // Half-width of the filter in input samples.
        let halfWidth = Double(Self.zeroCrossings) / cutoff
        let tablePerInputSample = cutoff * Double(Self.resolution)
        let lastTableIndex = Self.zeroCrossings * Self.resolution
        let gain = Float(cutoff)
        var output = [Float](repeating: 0, count: outputCount)
        table.withUnsafeBufferPointer { table in
            input.withUnsafeBufferPointer { x in
                for i in 0..<outputCount {
                    let t = Double(i) * step
                    let first = max(0, Int((t - halfWidth).rounded(.up)))
                    let last = min(x.count - 1, Int((t + halfWidth).rounded(.down)))
                    guard first <= last else { continue }
                    var acc: Float = 0
                    for j in first...last {
                        let position = abs(t - Double(j)) * tablePerInputSample
                        let k = Int(position)
                        guard k < lastTableIndex else { continue }
                        let frac = Float(position - Double(k))
                        let h = table[k] + frac * (table[k + 1] - table[k])
                        acc += x[j] * h
                    }
                    output[i] = min(max(acc * gain, -1), 1)
                }
            }
        }
        return output
    }
}
