import Models

/// One sequence's caches over a model, and its prompt cache: the tokens whose state the
/// session holds, and the logits at the end of the last prompt. A new prompt keeps the
/// longest common prefix and evaluates the rest. Not thread-safe (its owner serializes
/// work on it). `InferenceEngine` keeps its single sequence in one; each slot of a
/// `ServingEngine` owns one.
final class CachedSequence {
    let session: InferenceSession
    /// The tokens whose state is in `session`.
    private(set) var cachedTokens: [Int] = []
    /// The logits at the end of the last prompt and that prompt's length: the same prompt
    /// again samples its first token from these, so that a seed gives the same text whether
    /// or not the prompt was cached (re-evaluating the last prompt token alone would take
    /// the decode path, whose 8-bit activations differ slightly from the batch prefill).
    private var promptEndLogits: [Float] = []
    private var promptEndLength = 0
    private var sampleFromSnapshot = false

    init(session: InferenceSession) {
        self.session = session
    }

    /// How many leading tokens of `tokens` are cached.
    func sharedPrefix(with tokens: [Int]) -> Int {
        var n = 0
        let limit = min(tokens.count, cachedTokens.count)
        while n < limit, tokens[n] == cachedTokens[n] { n += 1 }
        return n
    }

    /// Brings the session to the state after `tokens`, reusing the cached prefix when
    /// `reuseCache`; returns the number of prompt tokens taken from the cache. At least two
    /// tokens are evaluated unless the whole prompt and its logits are cached, so that the
    /// prompt's last token always goes through the batch path, as in a cold run.
    func evaluatePrompt(_ tokens: [Int], reuseCache: Bool) throws(ModelError) -> Int {
        var reused = reuseCache ? sharedPrefix(with: tokens) : 0
        if reused == tokens.count, promptEndLength == tokens.count, !promptEndLogits.isEmpty {
            session.truncate(to: reused)
            cachedTokens.removeSubrange(reused...)
            sampleFromSnapshot = true
            return reused
        }
        reused = max(0, min(reused, tokens.count - 2))
        session.truncate(to: reused)
        cachedTokens.removeSubrange(reused...)
        do {
            try session.evaluate(Array(tokens[reused...]))
        } catch {
            session.truncate(to: 0)
            cachedTokens = []
            promptEndLength = 0
            throw error
        }
        cachedTokens = tokens
        promptEndLogits.removeAll(keepingCapacity: true)
        promptEndLogits.append(contentsOf: session.logits)
        promptEndLength = tokens.count
        sampleFromSnapshot = false
        return reused
    }

    /// Appends one generated token.
    func evaluate(_ token: Int) throws(ModelError) {
        sampleFromSnapshot = false
        do {
            try session.evaluate([token])
        } catch {
            session.truncate(to: 0)
            cachedTokens = []
            promptEndLength = 0
            throw error
        }
        cachedTokens.append(token)
    }

    /// The logits the next token is sampled from.
    func withNextLogits<R>(_ body: (UnsafeBufferPointer<Float>) -> R) -> R {
        if sampleFromSnapshot { return promptEndLogits.withUnsafeBufferPointer(body) }
        return body(session.logits)
    }
}
