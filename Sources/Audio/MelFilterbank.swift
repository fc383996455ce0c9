import Foundation

/// Triangular mel filters over the bins of a power spectrum: the Slaney mel scale with
/// Slaney's area normalisation, librosa's defaults (`librosa.filters.mel(htk=False,
/// norm="slaney")`), computed as llama.cpp's libmtmd does (`fill_mel_filterbank_matrix`:
/// `Double` arithmetic, each weight rounded to `Float`).
///
/// - The Slaney scale is linear below 1 kHz (`mel = 3 f / 200`) and logarithmic above
///   (`mel = 15 + ln(f / 1000) / (ln 6.4 / 27)`).
/// - `melCount + 2` edges are spaced evenly in mel from `minFrequency` to `maxFrequency`;
///   filter `m` rises linearly from edge `m` to 1 at edge `m + 1` and falls to 0 at edge `m + 2`.
/// - Each filter is scaled by `2 / (edge[m + 2] - edge[m])` (in Hz), so every filter has the
///   same area rather than the same peak.
/// - Bin `k` is at `k * sampleRate / fftSize` Hz.
public struct MelFilterbank: Sendable {
    /// The number of filters.
    public let melCount: Int
    /// The number of power-spectrum bins each filter spans, `fftSize / 2 + 1`.
    public let binCount: Int
    /// The filter weights, `melCount` rows of `binCount`: `weights[m * binCount + k]`.
    public let weights: [Float]
    /// Filter `m`'s non-zero bins lie in `supports[m]` (empty for a filter narrower than a bin).
    public let supports: [Range<Int>]

    /// The filters for a power spectrum of an `fftSize`-point transform of audio at
    /// `sampleRate` Hz, covering `minFrequency` to `maxFrequency` Hz. Internal: the parameters
    /// are the front end's constants (`LogMelExtractor.filterbank`), never user input.
    init(melCount: Int, fftSize: Int, sampleRate: Int, minFrequency: Double, maxFrequency: Double) {
        precondition(melCount > 0 && fftSize >= 2, "a mel filterbank needs filters and at least two FFT points")
        precondition(minFrequency >= 0 && minFrequency < maxFrequency, "the mel filterbank's band is empty")
        self.melCount = melCount
        binCount = fftSize / 2 + 1
        let lowMel = Self.mel(hertz: minFrequency)
        let highMel = Self.mel(hertz: maxFrequency)
        let edges = (0..<(melCount + 2)).map { i in
            Self.hertz(mel: lowMel + (highMel - lowMel) * (Double(i) / Double(melCount + 1)))
        }
        let binWidth = Double(sampleRate) / Double(fftSize)
        var weights = [Float](repeating: 0, count: melCount * binCount)
        var supports: [Range<Int>] = []
        for m in 0..<melCount {
            let (left, center, right) = (edges[m], edges[m + 1], edges[m + 2])
            let rise = max(1e-30, center - left)
            let fall = max(1e-30, right - center)
            let areaNormalization = 2 / max(1e-30, right - left)
            var first = binCount
            var last = -1
            for k in 0..<binCount {
                let frequency = Double(k) * binWidth
                var weight = 0.0
                if frequency >= left && frequency <= center {
                    weight = (frequency - left) / rise
                } else if frequency > center && frequency <= right {
                    weight = (right - frequency) / fall
                }
                let value = Float(weight * areaNormalization)
                weights[m * binCount + k] = value
                if value != 0 {
                    first = min(first, k)
                    last = k
                }
            }
            supports.append(last >= first ? first..<(last + 1) : 0..<0)
        }
        self.weights = weights
        self.supports = supports
    }

    /// Hz to Slaney mel.
    public static func mel(hertz: Double) -> Double {
        hertz < slaneyBreakHertz
            ? hertz * slaneyLinearSlope : slaneyBreakMel + log(hertz / slaneyBreakHertz) / slaneyLogStep
    }

    /// Slaney mel to Hz.
    public static func hertz(mel: Double) -> Double {
        mel < slaneyBreakMel ? mel / slaneyLinearSlope : slaneyBreakHertz * exp((mel - slaneyBreakMel) * slaneyLogStep)
    }

    private static let slaneyBreakHertz = 1000.0
    private static let slaneyLinearSlope = 3 / 200.0
    private static let slaneyBreakMel = slaneyBreakHertz * slaneyLinearSlope
    private static let slaneyLogStep = log(6.4) / 27

    /// The filter energies `sum_k power[k] * weights[m][k]` of one power spectrum, summed as
    /// llama.cpp sums them: in groups of four bins from bin 0, each group's four `Float`
    /// products added in `Float` (left to right), the groups and the leftover bins added in
    /// `Double`. Bins outside a filter's support contribute exact zeros, so only the groups
    /// that meet the support are visited.
    /// - Precondition: `power.count == binCount`, `energies.count == melCount`.
    func energies(of power: UnsafeBufferPointer<Float>, into energies: UnsafeMutableBufferPointer<Double>) {
        let groupedBins = binCount - binCount % 4
        weights.withUnsafeBufferPointer { weights in
            for m in 0..<melCount {
                let support = supports[m]
                let row = m * binCount
                var sum = 0.0
                var k = support.lowerBound - support.lowerBound % 4
                while k < min(support.upperBound, groupedBins) {
                    let group =
                        power[k] * weights[row + k] + power[k + 1] * weights[row + k + 1]
                        + power[k + 2] * weights[row + k + 2] + power[k + 3] * weights[row + k + 3]
                    sum += Double(group)
                    k += 4
                }
                for k in max(groupedBins, support.lowerBound)..<max(groupedBins, support.upperBound) {
                    sum += Double(power[k] * weights[row + k])
                }
                energies[m] = sum
            }
        }
    }
}
