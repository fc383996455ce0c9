import Sampling
import Testing

@Suite struct SamplerTests {
    func sample(_ logits: [Float], _ p: SamplingParameters, allowed: ((Int) -> Bool)? = nil, times: Int = 1) -> [Int] {
        var s = Sampler(p)
        return (0..<times).map { _ in logits.withUnsafeBufferPointer { s.sample($0, allowed: allowed)! } }
    }

    @Test func greedyTakesTheArgmax() {
        #expect(sample([0.1, 3, -2, 2.9], .greedy) == [1])
        #expect(sample([0.1, 3, -2, 2.9], .greedy, allowed: { $0 != 1 }) == [3])
    }

    @Test func sameSeedSameTokensOtherSeedOtherTokens() {
        let logits = (0..<100).map { Float($0 % 7) }
        let p = SamplingParameters(temperature: 1, topK: 0, topP: 1, minP: 0, seed: 7)
        let a = sample(logits, p, times: 50), b = sample(logits, p, times: 50)
        var q = p
        q.seed = 8
        #expect(a == b)
        #expect(a != sample(logits, q, times: 50))
    }

    @Test func topKAndTopPAndMinPKeepOnlyLikelyTokens() {
        let logits: [Float] = [5, 4, 3, 0, -1, -5]
        let k = sample(logits, SamplingParameters(temperature: 1, topK: 2, topP: 1, minP: 0, seed: 1), times: 200)
        #expect(Set(k).isSubset(of: [0, 1]) && Set(k).count == 2)
        // p(0) ≈ 0.66, p(1) ≈ 0.24: top-p 0.5 keeps token 0 alone.
        #expect(Set(sample(logits, SamplingParameters(temperature: 1, topK: 0, topP: 0.5, minP: 0, seed: 1), times: 100)) == [0])
        // min-p 0.3 keeps tokens at least 0.3 × p(0): 0 and 1 (e^-1 ≈ 0.37), not 2 (e^-2).
        #expect(Set(sample(logits, SamplingParameters(temperature: 1, topK: 0, topP: 1, minP: 0.3, seed: 1), times: 300)) == [0, 1])
    }

    @Test func maskAllowsNothingGivesNil() {
        var s = Sampler(.greedy)
        #expect([Float(1), 2].withUnsafeBufferPointer { s.sample($0, allowed: { _ in false }) } == nil)
    }

    @Test func repetitionPenaltyDemotesSeenTokens() {
        var p = SamplingParameters.greedy
        p.repetitionPenalty = 2
        var s = Sampler(p)
        s.accept(0)
        #expect([Float(3), 2, 1].withUnsafeBufferPointer { s.sample($0) } == 1)
    }

    @Test func temperatureChangesTheSpread() {
        let logits: [Float] = [2, 1]
        let cold = sample(logits, SamplingParameters(temperature: 0.1, topK: 0, topP: 1, minP: 0, seed: 3), times: 400)
        let hot = sample(logits, SamplingParameters(temperature: 5, topK: 0, topP: 1, minP: 0, seed: 3), times: 400)
        #expect(cold.filter { $0 == 1 }.count < 5)
        #expect(hot.filter { $0 == 1 }.count > 120)
    }
}
