import TestSupport

/// Seeded random inputs for the media encoders' tests (`SeededRandom`, so that they do not
/// depend on the platform's generator).
enum EncoderRandom {
    /// A slice of normalized pixel values in [-1, 1] (what `(u8/255 - 0.5)/0.5` gives).
    static func slice(width: Int, height: Int, seed: UInt64) -> [Float] {
        var rng = SeededRandom(seed: seed)
        return (0..<(width * height * 3)).map { _ in Float(Int.random(in: 0...255, using: &rng)) / 255 * 2 - 1 }
    }

    /// A log-mel-like input of `bins x frames` values: uniform in [-1.7, 1.7] (a normalized
    /// log-mel has mean 0 and std about 1).
    static func mel(bins: Int, frames: Int, seed: UInt64) -> [Float] {
        var rng = SeededRandom(seed: seed)
        return (0..<(bins * frames)).map { _ in Float.random(in: -1.7...1.7, using: &rng) }
    }
}

/// Max and mean |a - b| (infinite when the counts differ).
func maxAndMeanDifference<B: BinaryFloatingPoint>(_ a: [Float], _ b: [B]) -> (max: Double, mean: Double) {
    guard a.count == b.count, !a.isEmpty else { return (.infinity, .infinity) }
    let d = zip(a, b).map { abs(Double($0) - Double($1)) }
    return (d.max()!, d.reduce(0, +) / Double(d.count))
}
