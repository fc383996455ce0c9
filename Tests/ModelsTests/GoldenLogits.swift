import Foundation
import LeapJSON
import TestSupport

/// One golden file of `Tests/Fixtures/golden`: llama.cpp's outputs for a model and prompt.
struct GoldenLogits {
    let tokens: [Int]
    /// For every prompt position, the 10 highest logits as (id, logit), best first.
    let top: [[(id: Int, logit: Float)]]
    /// 32 greedy tokens decoded one at a time.
    let greedy: [Int]
    /// After each greedy token is fed, the 10 highest logits of the next step.
    let greedyTop: [[(id: Int, logit: Float)]]

    init(model: String, prompt: String) throws {
        let url = TestFixtures.directory.appendingPathComponent("golden/\(model).\(prompt).json")
        let json = try JSONValue.parse(String(contentsOf: url, encoding: .utf8))
        func ints(_ v: JSONValue?) -> [Int] { v?.arrayValue?.compactMap(\.intValue) ?? [] }
        func tops(_ v: JSONValue?) -> [[(id: Int, logit: Float)]] {
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
}

/// How far one engine's logits are from the golden ones at one position.
struct LogitComparison {
    /// Largest |ours - golden| over the golden top-10 ids.
    var maxError: Float = 0
    /// The golden top-1 id and its margin over the golden top-2.
    var goldenBest = 0
    var goldenMargin: Float = 0
    /// Sum of |ours - golden| over the golden top-10 ids.
    var sumError: Float = 0
    /// Our argmax over the whole vocabulary.
    var ourBest = 0
    /// Our largest minus smallest logit.
    var range: Float = 0

    init(ours: [Float], golden: [(id: Int, logit: Float)]) {
        for (id, logit) in golden {
            maxError = max(maxError, abs(ours[id] - logit))
            sumError += abs(ours[id] - logit)
        }
        range = ours.max()! - ours.min()!
        goldenBest = golden[0].id
        goldenMargin = golden[0].logit - golden[1].logit
        ourBest = ours.indices.max { ours[$0] < ours[$1] }!
    }

    /// The top-1 must agree unless llama.cpp itself saw a near tie.
    func topOneAgrees(minimumMargin: Float) -> Bool { goldenMargin <= minimumMargin || ourBest == goldenBest }
}
