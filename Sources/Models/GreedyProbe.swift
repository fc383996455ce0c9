/// The greedy continuation that the probing tools report beside the golden files
/// (`leap-ref logits`, `PromptProbe`): tokens decoded one at a time through a session's
/// caches, each the argmax of the logits before it, or a token the caller forces, with
/// the highest logits after each. Generation proper samples through the serving engine's
/// step; this is the plain loop that llama.cpp's goldens were made with.
public struct GreedyProbe: Sendable {
    /// The tokens decoded, in order.
    public var tokens: [Int] = []
    /// After each token, the highest logits of the next position, best first.
    public var topAfterEach: [[(id: Int, logit: Float)]] = []

    /// Decodes `steps` tokens in `session`, starting from `logits` (those after the
    /// prompt): token `i` is `follow[i]` where `follow` has one, else the argmax (the lower
    /// id on a tie); after each, the `top` highest logits are kept. Stops early when the
    /// session's context is full (that last token is reported but not evaluated).
    public init(session: InferenceSession, after logits: [Float], steps: Int, follow: [Int]? = nil, top: Int) throws {
        var next = logits.withUnsafeBufferPointer { Self.best($0, 1).first?.id ?? 0 }
        for step in 0..<max(0, steps) {
            let token = follow.flatMap { step < $0.count ? $0[step] : nil } ?? next
            tokens.append(token)
            guard session.position < session.contextLength else { break }
            try session.evaluate([token])
            let ranked = Self.best(session.logits, max(1, top))
            topAfterEach.append(Array(ranked.prefix(top)))
            next = ranked[0].id
        }
    }

    /// The `n` highest logits, best first (the lower id on a tie).
    public static func best(_ logits: UnsafeBufferPointer<Float>, _ n: Int) -> [(id: Int, logit: Float)] {
        var ids = Array(0..<logits.count)
        ids.sort { logits[$0] > logits[$1] || (logits[$0] == logits[$1] && $0 < $1) }
        return ids.prefix(n).map { ($0, logits[$0]) }
    }
}
