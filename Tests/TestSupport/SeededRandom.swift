import Sampling

/// A small deterministic generator (the engine's SplitMix64), so that randomized tests
/// repeat exactly and do not depend on the platform's random number generator; with the
/// tests' helpers on top.
public struct SeededRandom: RandomNumberGenerator {
    private var generator: SplitMix64

    public init(seed: UInt64) { generator = SplitMix64(seed: seed) }

    public mutating func next() -> UInt64 { generator.next() }

    /// Roughly normal values (sum of uniforms), scaled.
    public mutating func normal(_ count: Int, scale: Float = 1) -> [Float] {
        (0..<count).map { _ in
            var s: Float = 0
            for _ in 0..<4 { s += Float.random(in: -1...1, using: &self) }
            return s * 0.866 * scale
        }
    }
}
