import Models

/// The caches of one sequence as `CachedSequence` drives them: a single `InferenceSession`,
/// or one sequence of a `BatchedSession` (`BatchedSequenceCaches`).
protocol SequenceCaches: AnyObject {
    /// Forgets the tokens from `newPosition` on; returns the position kept (see
    /// `InferenceSession.truncate(to:)`).
    @discardableResult func truncate(to newPosition: Int) -> Int
    /// Evaluates `tokens` at the current position.
    func evaluate(_ tokens: [Int]) throws(ModelError)
    /// The logits of the last evaluated token.
    var logits: UnsafeBufferPointer<Float> { get }
    /// The last evaluated position's hidden state, after the final norm (what a speech
    /// model's depthformer reads).
    var hiddenState: UnsafeBufferPointer<Float> { get }
}

extension InferenceSession: SequenceCaches {}

/// One sequence of a `BatchedSession`, kept open for as long as this object lives (its
/// caches are a serving slot's prompt cache). `evaluate` steps it alone; a scheduler
/// steps it together with others through the session and tells the `CachedSequence`.
final class BatchedSequenceCaches: SequenceCaches {
    let batch: BatchedSession
    let sequence: BatchedSession.Sequence

    init(batch: BatchedSession) throws(ModelError) {
        self.batch = batch
        sequence = try batch.open()
    }

    deinit { try? batch.close(sequence) }

    @discardableResult func truncate(to newPosition: Int) -> Int {
        (try? batch.truncate(sequence, to: newPosition)) ?? 0
    }

    func evaluate(_ tokens: [Int]) throws(ModelError) {
        var start = 0
        while start < tokens.count {
            let end = min(tokens.count, start + batch.maxStepTokens)
            try batch.step([.init(sequence, Array(tokens[start..<end]))])
            start = end
        }
    }

    var logits: UnsafeBufferPointer<Float> {
        (try? batch.logits(of: sequence)) ?? UnsafeBufferPointer(start: nil, count: 0)
    }

    var hiddenState: UnsafeBufferPointer<Float> {
        (try? batch.hiddenState(of: sequence)) ?? UnsafeBufferPointer(start: nil, count: 0)
    }
}

/// One sequence's caches over a model, and its prompt cache: the tokens whose state the
/// caches hold, and the logits at the end of the last prompt. A new prompt keeps the
/// longest common prefix and evaluates the rest. Not thread-safe (its owner serializes
/// work on it). Each slot of a `ServingEngine` owns one over a sequence of the engine's
/// `BatchedSession`.
///
/// A prompt is evaluated in one call (`evaluatePrompt`), or in three steps when a
/// scheduler evaluates it in shared passes: `startPrompt` (which keeps the reusable
/// prefix and says what is left to evaluate), the caller's evaluation of those tokens,
/// then `promptEvaluated`.
final class CachedSequence {
    let caches: any SequenceCaches
    /// The tokens whose state is in `caches`.
    private(set) var cachedTokens: [Int] = []
    /// The logits at the end of the last prompt and that prompt's length: the same prompt
    /// again samples its first token from these, so that a seed gives the same text whether
    /// or not the prompt was cached (re-evaluating the last prompt token alone would take
    /// the decode path, whose 8-bit activations differ slightly from the batch prefill).
    private var promptEndLogits: [Float] = []
    private var promptEndLength = 0
    private var sampleFromSnapshot = false

    init(caches: any SequenceCaches) {
        self.caches = caches
    }

    /// How many leading tokens of `tokens` are cached.
    func sharedPrefix(with tokens: [Int]) -> Int {
        var n = 0
        let limit = min(tokens.count, cachedTokens.count)
        while n < limit, tokens[n] == cachedTokens[n] { n += 1 }
        return n
    }

    /// Keeps the cached prefix of `tokens` that can be reused (none unless `reuseCache`)
    /// and returns its length. When the whole prompt and its logits are cached, nothing is
    /// left to evaluate (the result is `tokens.count`); otherwise at least two tokens are
    /// left, so that the prompt's last token always goes through the batch path, as in a
    /// cold run. The caller evaluates `tokens[result...]` and calls `promptEvaluated`.
    func startPrompt(_ tokens: [Int], reuseCache: Bool) -> Int {
        var reused = reuseCache ? sharedPrefix(with: tokens) : 0
        if reused == tokens.count, promptEndLength == tokens.count, !promptEndLogits.isEmpty, caches.truncate(to: reused) == reused {
            cachedTokens.removeSubrange(reused...)
            sampleFromSnapshot = true
            return reused
        }
        // A sliding-window layer's ring may no longer hold the window the prefix needs (the
        // sequence went too far past it): then the caches are emptied and nothing is reused.
        reused = caches.truncate(to: max(0, min(reused, tokens.count - 2)))
        cachedTokens.removeSubrange(reused...)
        promptEndLength = 0
        sampleFromSnapshot = false
        return reused
    }

    /// Records that the caches now hold `tokens` (the prompt `startPrompt` was given) and
    /// that their logits are the prompt's last.
    func promptEvaluated(_ tokens: [Int]) {
        cachedTokens = tokens
        promptEndLogits.removeAll(keepingCapacity: true)
        promptEndLogits.append(contentsOf: caches.logits)
        promptEndLength = tokens.count
        sampleFromSnapshot = false
    }

    /// Records that the caches now also hold `token` (evaluated by the caller).
    func tokenEvaluated(_ token: Int) {
        sampleFromSnapshot = false
        cachedTokens.append(token)
    }

    /// Forgets everything (after a failed evaluation, whose state is unknown).
    func reset() {
        caches.truncate(to: 0)
        cachedTokens = []
        promptEndLength = 0
        sampleFromSnapshot = false
    }

    /// Brings the caches to the state after `tokens`, reusing the cached prefix when
    /// `reuseCache`; returns the number of prompt tokens taken from the cache.
    func evaluatePrompt(_ tokens: [Int], reuseCache: Bool) throws(ModelError) -> Int {
        let reused = startPrompt(tokens, reuseCache: reuseCache)
        guard reused < tokens.count else { return reused }
        do {
            try caches.evaluate(Array(tokens[reused...]))
        } catch {
            reset()
            throw error
        }
        promptEvaluated(tokens)
        return reused
    }

    /// Appends one generated token.
    func evaluate(_ token: Int) throws(ModelError) {
        do {
            try caches.evaluate([token])
        } catch {
            reset()
            throw error
        }
        tokenEvaluated(token)
    }

    /// The logits the next token is sampled from, and the hidden state they came from
    /// (empty when the logits are the prompt's snapshot: a reply's first step is text).
    func withNextLogits<R, E: Error>(
        _ body: (_ logits: UnsafeBufferPointer<Float>, _ hiddenState: UnsafeBufferPointer<Float>) throws(E) -> R
    ) throws(E) -> R {
        if sampleFromSnapshot {
            return try promptEndLogits.withUnsafeBufferPointer { (logits) throws(E) -> R in
                try body(logits, UnsafeBufferPointer(start: nil, count: 0))
            }
        }
        return try body(caches.logits, caches.hiddenState)
    }
}
