#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Log-probabilities of tokens under the model's distribution: the log-softmax of the raw
/// logits, before penalties, masks, truncation or temperature (what OpenAI's `logprobs`
/// and llama-server report by default).
public struct TokenLogprobs: Sendable, Equatable {
    /// The log-probability of the chosen token.
    public var chosen: Float
    /// The most likely tokens and their log-probabilities, best first (ties by id).
    public var top: [(id: Int, logprob: Float)]

    /// Equal chosen and top entries.
    public static func == (a: TokenLogprobs, b: TokenLogprobs) -> Bool {
        a.chosen == b.chosen && a.top.map(\.id) == b.top.map(\.id) && a.top.map(\.logprob) == b.top.map(\.logprob)
    }

    /// The log-probability of `chosen` and of the `top` most likely tokens of `logits`.
    /// NaN logits count as impossible. One pass for the normalizer and a bounded
    /// insertion list for the top entries: O(vocabulary · top).
    public init(logits: UnsafeBufferPointer<Float>, chosen: Int, top: Int) {
        var maxLogit = -Float.infinity
        for l in logits where !l.isNaN && l > maxLogit { maxLogit = l }
        var sum: Double = 0
        for l in logits where !l.isNaN { sum += Double(expf(l - maxLogit)) }
        let logNormalizer = maxLogit + Float(log(sum))
        func logprob(_ l: Float) -> Float { l.isNaN ? -.infinity : l - logNormalizer }

        self.chosen = chosen >= 0 && chosen < logits.count ? logprob(logits[chosen]) : -.infinity
        var best: [(id: Int, logprob: Float)] = []
        let k = max(0, min(top, logits.count))
        if k > 0 {
            best.reserveCapacity(k + 1)
            for i in 0..<logits.count where !logits[i].isNaN {
                let l = logits[i]
                if best.count == k, let last = best.last, l <= last.logprob { continue }
                var at = best.count
                while at > 0, best[at - 1].logprob < l { at -= 1 }
                best.insert((i, l), at: at)
                if best.count > k { best.removeLast() }
            }
        }
        self.top = best.map { ($0.id, logprob($0.logprob)) }
    }
}
