#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How the next token is chosen from the logits. Stages run in llama.cpp's default
/// order: penalties (repetition, frequency, presence), DRY, top-k, top-p, min-p,
/// temperature, then a draw (or the argmax when the temperature is 0).
public struct SamplingParameters: Sendable, Equatable {
    /// 0 picks the most likely token (greedy); higher flattens the distribution.
    public var temperature: Float
    /// Keep only the `topK` most likely tokens (0 = all).
    public var topK: Int
    /// Keep the smallest set of most likely tokens whose probability sums to `topP` (1 = all).
    public var topP: Float
    /// Drop tokens less likely than `minP` times the most likely one (0 = none).
    public var minP: Float
    /// Divide positive logits (multiply negative ones) of recently seen tokens by this (1 = off).
    public var repetitionPenalty: Float
    /// Subtract `frequencyPenalty` times the number of times a token occurs in the penalty
    /// window from its logit (OpenAI's `frequency_penalty`; 0 = off).
    public var frequencyPenalty: Float
    /// Subtract `presencePenalty` from the logit of every token that occurs in the penalty
    /// window (OpenAI's `presence_penalty`; 0 = off).
    public var presencePenalty: Float
    /// How many recent tokens the penalties look at.
    public var penaltyWindow: Int
    /// Seed of the random draw: the same seed, logits and parameters give the same tokens.
    public var seed: UInt64
    /// The DRY repetition penalty (`DRYParameters.off` by default).
    public var dry: DRYParameters

    public init(
        temperature: Float = 0.8, topK: Int = 40, topP: Float = 0.95, minP: Float = 0.05,
        repetitionPenalty: Float = 1.0, frequencyPenalty: Float = 0, presencePenalty: Float = 0,
        penaltyWindow: Int = 64, seed: UInt64 = 0, dry: DRYParameters = .off
    ) {
        self.temperature = temperature
        self.topK = topK
        self.topP = topP
        self.minP = minP
        self.repetitionPenalty = repetitionPenalty
        self.frequencyPenalty = frequencyPenalty
        self.presencePenalty = presencePenalty
        self.penaltyWindow = penaltyWindow
        self.seed = seed
        self.dry = dry
    }

    /// Always the most likely token.
    public static let greedy = SamplingParameters(temperature: 0, topK: 0, topP: 1, minP: 0)

    /// Whether any penalty changes the logits (then the sampler keeps a window of tokens).
    public var penalizes: Bool {
        penaltyWindow > 0 && (repetitionPenalty != 1 || frequencyPenalty != 0 || presencePenalty != 0)
    }

    /// How many of the latest prompt tokens a caller should `accept` before sampling, for
    /// the penalties and DRY to see them: `Int.max` when DRY searches the whole history
    /// (`prompt.suffix(historyLength)` is then the whole prompt), 0 when nothing looks back.
    public var historyLength: Int {
        max(penalizes ? penaltyWindow : 0, dry.historyLength)
    }
}

/// A sampler chain with its own random state and scratch buffers: create one per
/// generation; `sample` allocates nothing after the first call.
public struct Sampler: Sendable {
    public let parameters: SamplingParameters
    private var rng: SplitMix64
    private var candidates: [Candidate] = []
    private var probs: [Float] = []
    /// The penalty window, oldest first.
    private var recent: [Int] = []
    /// `occurrences[id]`: how many times `id` is in the penalty window (sized on first use).
    private var occurrences: [Int32] = []
    /// The DRY stage's history and scratch buffers.
    private var dryState: DRYState

    struct Candidate: Sendable {
        var id: Int
        var logit: Float
    }

    public init(_ parameters: SamplingParameters) {
        self.parameters = parameters
        self.rng = SplitMix64(seed: parameters.seed)
        self.dryState = DRYState(parameters.dry)
    }

    /// Records a token as generated (or as part of the prompt), for the penalties and DRY.
    public mutating func accept(_ token: Int) {
        guard token >= 0 else { return }
        dryState.accept(token)
        guard parameters.penalizes else { return }
        if token >= occurrences.count { occurrences += [Int32](repeating: 0, count: token + 1 - occurrences.count) }
        recent.append(token)
        occurrences[token] += 1
        if recent.count > parameters.penaltyWindow {
            occurrences[recent.removeFirst()] -= 1
        }
    }

    /// `logits` after the penalty stages (repetition, frequency, presence, then DRY), as
    /// the later stages see them; for tests and inspection (`sample` does this in place).
    public mutating func penalizedLogits(_ logits: [Float]) -> [Float] {
        candidates.removeAll(keepingCapacity: true)
        for (i, l) in logits.enumerated() { candidates.append(Candidate(id: i, logit: l)) }
        applyPenalties()
        return candidates.map(\.logit)
    }

    /// The penalty stages over `candidates`, which are in increasing id order.
    private mutating func applyPenalties() {
        let p = parameters
        if !recent.isEmpty {
            // As llama.cpp: positive logits are divided by the repetition penalty, the
            // others multiplied; then the frequency and presence penalties are subtracted.
            for i in candidates.indices where candidates[i].id < occurrences.count {
                let count = occurrences[candidates[i].id]
                guard count > 0 else { continue }
                let l = candidates[i].logit
                candidates[i].logit =
                    (l > 0 ? l / p.repetitionPenalty : l * p.repetitionPenalty)
                    - Float(count) * p.frequencyPenalty - p.presencePenalty
            }
        }
        if p.dry.isEnabled {
            dryState.findRepeats()
            for (token, length) in dryState.longestRepeat where !dryState.isSingleTokenBreaker(token) {
                guard let i = candidateIndex(of: token) else { continue }
                candidates[i].logit -= p.dry.penalty(repeatLength: length)
            }
        }
    }

    /// The index of `id` in `candidates` (in increasing id order), by binary search.
    private func candidateIndex(of id: Int) -> Int? {
        var low = 0
        var high = candidates.count
        while low < high {
            let mid = (low + high) / 2
            if candidates[mid].id < id { low = mid + 1 } else { high = mid }
        }
        return low < candidates.count && candidates[low].id == id ? low : nil
    }

    /// Chooses a token. `allowed`, when given, masks the vocabulary: only ids for which it
    /// returns true can be chosen (grammar-constrained decoding applies its mask here,
    /// before any other stage). Returns nil when no token is allowed.
    public mutating func sample(_ logits: UnsafeBufferPointer<Float>, allowed: ((Int) -> Bool)? = nil) -> Int? {
        let p = parameters
        candidates.removeAll(keepingCapacity: true)
        // Sized once for the whole vocabulary: grown by appending, the buffer passes through
        // every smaller size, and the heap keeps the pages of each.
        candidates.reserveCapacity(logits.count)
        if let allowed {
            for i in 0..<logits.count where allowed(i) && !logits[i].isNaN { candidates.append(Candidate(id: i, logit: logits[i])) }
        } else {
            for i in 0..<logits.count where !logits[i].isNaN { candidates.append(Candidate(id: i, logit: logits[i])) }
        }
        guard !candidates.isEmpty else { return nil }
        applyPenalties()

        if p.temperature <= 0 {
            var best = candidates[0]
            for c in candidates.dropFirst() where c.logit > best.logit { best = c }
            return best.id
        }

        // Best first (ties by id, for determinism), cut to the top k. Only the candidates
        // that can survive are sorted: the k best (selected in one pass), or, without top-k,
        // those min-p keeps (`e^(l - max) >= min_p`: the others are dropped by min-p after
        // top-p whatever top-p does), whose probabilities still count in top-p's total.
        var dropped: Float = 0
        if p.topK > 0, candidates.count > p.topK {
            selectBest(p.topK)
        } else if p.minP > 0 {
            let top = candidates.reduce(-Float.infinity) { max($0, $1.logit) }
            var kept = 0
            for i in candidates.indices {
                let c = candidates[i]
                if expf(c.logit - top) < p.minP {
                    dropped += expf(c.logit - top)
                } else {
                    candidates[kept] = c
                    kept += 1
                }
            }
            candidates.removeLast(candidates.count - kept)
        }
        candidates.sort(by: Self.isBetter)

        // Probabilities of the remaining candidates.
        let maxLogit = candidates[0].logit
        probs.removeAll(keepingCapacity: true)
        for c in candidates { probs.append(expf(c.logit - maxLogit)) }
        var total = probs.reduce(0, +) + dropped

        if p.topP < 1 {
            var cumulative: Float = 0
            var keep = candidates.count
            for i in 0..<probs.count {
                cumulative += probs[i] / total
                if cumulative >= p.topP {
                    keep = i + 1
                    break
                }
            }
            candidates.removeLast(candidates.count - keep)
            probs.removeLast(probs.count - keep)
        }
        if p.minP > 0 {
            let threshold = p.minP * probs[0]
            let keep = max(1, probs.firstIndex { $0 < threshold } ?? probs.count)
            candidates.removeLast(candidates.count - keep)
            probs.removeLast(probs.count - keep)
        }

        // Temperature, then a draw.
        for i in candidates.indices { probs[i] = expf((candidates[i].logit - maxLogit) / p.temperature) }
        total = probs.reduce(0, +)
        let r = Float(Double(rng.next() >> 11) / Double(1 << 53)) * total
        var cumulative: Float = 0
        for i in candidates.indices {
            cumulative += probs[i]
            if r < cumulative { return candidates[i].id }
        }
        return candidates[candidates.count - 1].id
    }
}

extension Sampler {
    /// The sampler's order: the higher logit first, the lower id on a tie.
    @inline(__always)
    static func isBetter(_ a: Candidate, _ b: Candidate) -> Bool {
        a.logit > b.logit || (a.logit == b.logit && a.id < b.id)
    }

    /// Keeps the `k` best candidates (in no particular order): one pass with a min-heap
    /// of `k`, O(n log k) instead of sorting the whole vocabulary for every token.
    fileprivate mutating func selectBest(_ k: Int) {
        // candidates[0..<k] is a heap whose root is the worst of the kept.
        func siftDown(_ start: Int) {
            var i = start
            while true {
                let l = 2 * i + 1, r = l + 1
                var worst = i
                if l < k, Self.isBetter(candidates[worst], candidates[l]) { worst = l }
                if r < k, Self.isBetter(candidates[worst], candidates[r]) { worst = r }
                if worst == i { return }
                candidates.swapAt(i, worst)
                i = worst
            }
        }
        for i in stride(from: k / 2 - 1, through: 0, by: -1) { siftDown(i) }
        for i in k..<candidates.count where Self.isBetter(candidates[i], candidates[0]) {
            candidates[0] = candidates[i]
            siftDown(0)
        }
        candidates.removeLast(candidates.count - k)
    }
}

/// SplitMix64: a small, fast, seedable generator (Steele, Lea & Flood 2014).
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
