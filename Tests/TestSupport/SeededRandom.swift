/// A small deterministic generator (SplitMix64), so that randomized tests repeat exactly
/// and do not depend on the platform's random number generator.
public struct SeededRandom: RandomNumberGenerator {
    public var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Roughly normal values (sum of uniforms), scaled.
    public mutating func normal(_ count: Int, scale: Float = 1) -> [Float] {
        (0..<count).map { _ in
            var s: Float = 0
            for _ in 0..<4 { s += Float.random(in: -1...1, using: &self) }
            return s * 0.866 * scale
        }
    }
}
