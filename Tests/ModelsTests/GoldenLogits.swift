import Foundation
import LeapJSON
import Models
import TestSupport

/// One golden file of `Tests/Fixtures/golden`: llama.cpp's outputs for a model and prompt.
struct GoldenLogits {
    typealias Top = [(id: Int, logit: Float)]

    let tokens: [Int]
    /// For every prompt position, the 10 highest logits as (id, logit), best first.
    let top: [Top]
    /// 32 greedy tokens decoded one at a time.
    let greedy: [Int]
    /// After each greedy token is fed, the 10 highest logits of the next step.
    let greedyTop: [Top]

    init(model: String, prompt: String) throws {
        let url = TestFixtures.directory.appendingPathComponent("golden/\(model).\(prompt).json")
        let json = try JSONValue.parse(String(contentsOf: url, encoding: .utf8))
        func ints(_ v: JSONValue?) -> [Int] { v?.arrayValue?.compactMap(\.intValue) ?? [] }
        func tops(_ v: JSONValue?) -> [Top] {
            (v?.arrayValue ?? []).map { row in
                (row.arrayValue ?? []).map { pair in
                    (pair.arrayValue?[0].intValue ?? -1, Float(pair.arrayValue?[1].doubleValue ?? .nan))
                }
            }
        }
        tokens = ints(json["tokens"])
        top = tops(json["top"])
        greedy = ints(json["greedy"])
        greedyTop = tops(json["greedy_top"])
    }

    /// llama.cpp's top-10 at `position`.
    func top(at position: GoldenPosition) -> Top {
        switch position {
        case .prompt(let p): top[p]
        case .greedy(let step): greedyTop[step]
        }
    }

    /// Whether the logits at `position` come from the same token sequence in `self` and
    /// `other`: always for prompt positions; for greedy steps, only while the two greedy
    /// continuations agree (each step's logits follow the tokens fed so far).
    func sharesContext(with other: GoldenLogits, at position: GoldenPosition) -> Bool {
        guard tokens == other.tokens else { return false }
        switch position {
        case .prompt: return true
        case .greedy(let step): return step < greedy.count && step < other.greedy.count && greedy[...step] == other.greedy[...step]
        }
    }
}

/// A row of logits in a golden file: after the prompt token at an index (prefill), or
/// after a greedy token is fed (decode).
enum GoldenPosition: CustomStringConvertible {
    case prompt(Int)
    case greedy(Int)

    var description: String {
        switch self {
        case .prompt(let p): "prefill position \(p)"
        case .greedy(let step): "greedy step \(step)"
        }
    }
}

extension GoldenLogits {
    /// Runs the engine over this golden's prompt and continuation: the whole prompt in one
    /// batch (prefill: every position's logits), then llama.cpp's greedy tokens one at a
    /// time through the cache (decode), following llama.cpp's tokens so that a near tie
    /// cannot send the two engines down different paths. `visit` gets our logits at every
    /// position, in order.
    func replay(
        modelPath: String, kvCacheType: KVCacheType = .f32, visit: (GoldenPosition, UnsafeBufferPointer<Float>) -> Void
    ) throws {
        let model = try TransformerModel(path: modelPath)
        let session = InferenceSession(model: model, contextLength: tokens.count + greedy.count + 1, kvCacheType: kvCacheType)
        let rows = try session.evaluateAllLogits(tokens)
        for (p, row) in rows.enumerated() { row.withUnsafeBufferPointer { visit(.prompt(p), $0) } }
        for (step, token) in greedy.enumerated() {
            try session.evaluate([token])
            visit(.greedy(step), session.logits)
        }
    }
}

extension GoldenLogits {
    /// Our own greedy continuation of the prompt: the prompt in one batch, then `count`
    /// tokens, each our argmax, fed back one at a time.
    func ownGreedy(modelPath: String, count: Int) throws -> [Int] {
        let model = try TransformerModel(path: modelPath)
        let session = InferenceSession(model: model, contextLength: tokens.count + count + 1)
        try session.evaluate(tokens)
        var out: [Int] = []
        while out.count < count {
            out.append(argmax(session.logits))
            if out.count < count { try session.evaluate([out.last!]) }
        }
        return out
    }

    /// How `ours` follows llama.cpp's greedy tokens: the steps on which both chose the same
    /// token, and, at the first step they part, llama.cpp's top-2 margin there (its logits
    /// after the prompt for step 0, else after greedy token `step - 1`).
    func greedyAgreement(_ ours: [Int]) -> GreedyAgreement {
        let steps = min(ours.count, greedy.count)
        let same = (0..<steps).prefix { ours[$0] == greedy[$0] }.count
        guard same < steps else { return GreedyAgreement(sameTokens: same, steps: steps, partingMargin: nil) }
        let row = same == 0 ? top[tokens.count - 1] : greedyTop[same - 1]
        return GreedyAgreement(sameTokens: same, steps: steps, partingMargin: row[0].logit - row[1].logit)
    }
}

/// Where our greedy continuation parts from llama.cpp's, if it does.
struct GreedyAgreement {
    /// Leading steps with the same token.
    let sameTokens: Int
    let steps: Int
    /// llama.cpp's top-2 margin at the step where the two part (nil: they never do).
    let partingMargin: Float?

    /// Whether the two agree wherever llama.cpp's margin decides the token.
    var isAllowed: Bool { partingMargin.map { $0 <= StoredWeightsFidelity.decisiveMargin } ?? true }

    var summary: String {
        guard let partingMargin else { return "all \(steps) greedy tokens equal llama.cpp's" }
        return "\(sameTokens) of \(steps) greedy tokens equal llama.cpp's; they part where llama.cpp's top-2 margin is \(partingMargin)"
    }
}

/// The argmax of a row of logits (the lowest id on ties).
func argmax(_ logits: UnsafeBufferPointer<Float>) -> Int {
    var best = 0
    for i in logits.indices where logits[i] > logits[best] { best = i }
    return best
}

/// The fidelity rule for a quantized model (the golden files' rule, stated in full in
/// docs/numerics.md), measured over every position of one golden file:
///
/// 1. **Top-1**: our argmax equals llama.cpp's wherever llama.cpp's top-2 margin exceeds
///    `decisiveMargin` (below it, llama.cpp itself is at a near tie and the order is noise).
/// 2. **Distance to the stored weights**: the mean |logit - reference logit| over the ids of
///    the reference's top-10, where the reference is llama.cpp on the F32 dequantization of
///    the same file (the logits of the weights as stored, no activation rounding), is no
///    larger for us than for llama.cpp, times `distanceSlack`. llama.cpp's golden lists only
///    its own top-10, so both means run over the reference top-10 ids that llama.cpp's row
///    also lists (the same ids for both engines), at the positions where the two golden
///    files fed the same tokens.
///
/// Feed it every position with `add`, then read `topOneMisses` and the two distances.
struct StoredWeightsFidelity {
    static let decisiveMargin: Float = 0.5
    static let distanceSlack = 1.1
    /// The bound on one prompt's ratio when the model's prompts are pooled (GoldenTests).
    static let promptSlack = 1.5

    let golden: GoldenLogits
    let reference: GoldenLogits

    /// Positions where llama.cpp's margin was decisive and our top-1 differs.
    private(set) var topOneMisses: [String] = []
    /// Positions whose top-1 was checked (llama.cpp's margin above `decisiveMargin`).
    private(set) var topOneChecked = 0
    private var ourSum = 0.0, llamaSum = 0.0
    /// Number of (position, id) pairs in the distances.
    private(set) var comparedLogits = 0

    init(golden: GoldenLogits, reference: GoldenLogits) {
        self.golden = golden
        self.reference = reference
    }

    /// Our mean distance to the stored weights' logits.
    var ourDistance: Double { comparedLogits == 0 ? .nan : ourSum / Double(comparedLogits) }
    /// llama.cpp's mean distance to the stored weights' logits, over the same ids.
    var llamaDistance: Double { comparedLogits == 0 ? .nan : llamaSum / Double(comparedLogits) }
    /// Whether rule 2 holds.
    var withinLlamaCppDistance: Bool { comparedLogits > 0 && ourDistance <= llamaDistance * Self.distanceSlack }

    mutating func add(_ position: GoldenPosition, ours: UnsafeBufferPointer<Float>) {
        let llama = golden.top(at: position)
        let margin = llama[0].logit - llama[1].logit
        if margin > Self.decisiveMargin {
            topOneChecked += 1
            let best = argmax(ours)
            if best != llama[0].id {
                topOneMisses.append("\(position): top-1 \(best) vs llama.cpp's \(llama[0].id) (margin \(margin))")
            }
        }
        guard golden.sharesContext(with: reference, at: position) else { return }
        for (id, stored) in reference.top(at: position) {
            guard let theirs = llama.first(where: { $0.id == id })?.logit else { continue }
            ourSum += Double(abs(ours[id] - stored))
            llamaSum += Double(abs(theirs - stored))
            comparedLogits += 1
        }
    }

    var summary: String {
        let ratio = ourDistance / llamaDistance
        return "distance to stored weights: ours \(format(ourDistance)), llama.cpp \(format(llamaDistance)) "
            + "(ratio \(format(ratio)), bound \(Self.distanceSlack)) over \(comparedLogits) logits; "
            + "top-1 agrees at \(topOneChecked - topOneMisses.count)/\(topOneChecked) decisive positions"
    }
}

/// How far our logits are from llama.cpp's at one position, for float models, where the two
/// engines do the same arithmetic and must agree closely.
struct LogitComparison {
    /// Largest |ours - golden| over the golden top-10 ids.
    var maxError: Float = 0
    /// Sum of |ours - golden| over the golden top-10 ids.
    var sumError: Float = 0
    /// Our largest minus smallest logit.
    var range: Float = 0

    init(ours: UnsafeBufferPointer<Float>, golden: GoldenLogits.Top) {
        for (id, logit) in golden {
            maxError = max(maxError, abs(ours[id] - logit))
            sumError += abs(ours[id] - logit)
        }
        range = ours.max()! - ours.min()!
    }
}

func format(_ x: Double) -> String { String(format: "%.4f", x) }
