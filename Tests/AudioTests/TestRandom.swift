import Sampling

extension SplitMix64 {
    /// A uniform integer in 0..<n (tests only).
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
}
