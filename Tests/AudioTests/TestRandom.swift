import Sampling

extension SplitMix64 {
    /// A uniform integer in 0..<n (tests only).
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }

    /// A uniform Float in [-1, 1) (tests only).
    mutating func signedUnit() -> Float { Float(next() >> 40) / Float(1 << 23) - 1 }
}
