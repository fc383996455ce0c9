import Foundation
import Sampling
import Testing

@Suite struct PenaltyAndLogprobTests {
    /// The greedy choice over `logits` after `history` was accepted.
    func greedy(_ logits: [Float], history: [Int], _ configure: (inout SamplingParameters) -> Void) -> Int {
        var p = SamplingParameters.greedy
        configure(&p)
        var s = Sampler(p)
        for t in history { s.accept(t) }
        return logits.withUnsafeBufferPointer { s.sample($0)! }
    }

    @Test func frequencyPenaltyScalesWithTheCount() {
        // Token 0 leads by 1.5. Seen twice at 0.5 per occurrence it drops by 1.0 (still
        // first); seen four times it drops by 2.0 (token 1 wins).
        let logits: [Float] = [3.5, 2, 0]
        #expect(greedy(logits, history: [0, 0]) { $0.frequencyPenalty = 0.5 } == 0)
        #expect(greedy(logits, history: [0, 0, 0, 0]) { $0.frequencyPenalty = 0.5 } == 1)
    }

    @Test func presencePenaltyIsOncePerToken() {
        let logits: [Float] = [3.5, 2, 0]
        // 1.0 once, however often the token was seen.
        #expect(greedy(logits, history: [0, 0, 0, 0, 0]) { $0.presencePenalty = 1 } == 0)
        #expect(greedy(logits, history: [0]) { $0.presencePenalty = 2 } == 1)
        // A negative penalty promotes seen tokens.
        #expect(greedy(logits, history: [2]) { $0.presencePenalty = -4 } == 2)
    }

    @Test func penaltiesForgetTokensThatLeftTheWindow() {
        let logits: [Float] = [3, 2.5, 0]
        // Window 2: after [0, 1, 1] token 0 is no longer penalized, token 1 is (twice).
        #expect(
            greedy(logits, history: [0]) {
                $0.frequencyPenalty = 1
                $0.penaltyWindow = 2
            } == 1)
        #expect(
            greedy(logits, history: [0, 1, 1]) {
                $0.frequencyPenalty = 1
                $0.penaltyWindow = 2
            } == 0)
    }

    @Test func repetitionThenFrequencyAsLlamaCpp() {
        // llama.cpp: logit 4 / 2 = 2, minus 1 × 0.6 = 1.4 < 1.5.
        #expect(
            greedy([4, 1.5], history: [0]) {
                $0.repetitionPenalty = 2
                $0.frequencyPenalty = 0.6
            } == 1)
        // Negative logits are multiplied: -1 × 2 = -2, minus 0.6 = -2.6 < -2.5.
        #expect(
            greedy([-1, -2.5], history: [0]) {
                $0.repetitionPenalty = 2
                $0.frequencyPenalty = 0.6
            } == 1)
    }

    @Test func logprobsAreTheLogSoftmaxOfTheRawLogits() {
        let logits: [Float] = [1, 3, 2, .nan, -1]
        let lp = logits.withUnsafeBufferPointer { TokenLogprobs(logits: $0, chosen: 2, top: 3) }
        let finite = logits.filter { !$0.isNaN }
        let z = log(finite.map { exp(Double($0)) }.reduce(0, +))
        #expect(abs(Double(lp.chosen) - (2 - z)) < 1e-5)
        #expect(lp.top.map(\.id) == [1, 2, 0])
        for (id, value) in lp.top { #expect(abs(Double(value) - (Double(logits[id]) - z)) < 1e-5) }
        let total = finite.map { exp(Double($0) - z) }.reduce(0, +)
        #expect(abs(total - 1) < 1e-6)
        // The NaN token is impossible; asking for more alternatives than tokens gives them all.
        let all = logits.withUnsafeBufferPointer { TokenLogprobs(logits: $0, chosen: 3, top: 10) }
        #expect(all.chosen == -.infinity)
        #expect(all.top.map(\.id) == [1, 2, 0, 4])
    }

    @Test func logprobTiesAreBrokenByID() {
        let lp = [Float](repeating: 0, count: 6).withUnsafeBufferPointer { TokenLogprobs(logits: $0, chosen: 5, top: 3) }
        #expect(lp.top.map(\.id) == [0, 1, 2])
        #expect(abs(Double(lp.chosen) + log(6)) < 1e-6)
    }
}
