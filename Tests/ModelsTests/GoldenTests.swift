import Foundation
import Models
import TestSupport
import Testing

/// The forward pass against llama.cpp's outputs (CPU, 2 threads) for every model and
/// prompt in the golden fixtures: prefill logits at every position (one batch), then the
/// greedy continuation decoded one token at a time, following llama.cpp's own tokens so
/// that a near tie cannot send the two engines down different paths.
///
/// Tolerances (docs/numerics.md): the largest error over llama.cpp's top-10 ids at a
/// position must stay below `maxError` for the weight type (llama.cpp multiplies
/// quantized weights with 8-bit-quantized activations; we multiply in F32), and the top-1
/// must agree wherever llama.cpp's top-2 margin exceeds 0.5.
@Suite(.serialized) struct GoldenTests {
    struct Case: CustomTestStringConvertible, Sendable {
        let model: String
        let prompt: String
        let file: String
        let maxError: Float
        var testDescription: String { "\(model).\(prompt)" }
    }

    static let models: [(name: String, file: String, maxError: Float)] = [
        ("smollm2-f32", "SmolLM2-135M-Instruct.F32.gguf", 0.1),
        ("smollm2-q8_0", "SmolLM2-135M-Instruct.Q8_0.gguf", 0.25),
        ("smollm2-q4_0", "SmolLM2-135M-Instruct.Q4_0.gguf", 0.6),
        ("smollm2-q4_1", "SmolLM2-135M-Instruct.Q4_1.gguf", 0.6),
        ("lfm2-tiny", "", 0.05),
    ]

    static let cases: [Case] = models.flatMap { m in
        (m.name == "lfm2-tiny" ? ["plain", "chat", "lfm2chat", "long"] : ["plain", "chat", "long"]).map {
            Case(model: m.name, prompt: $0, file: m.file, maxError: m.maxError)
        }
    }

    static func modelPath(_ c: Case) throws -> String {
        c.file.isEmpty ? TestFixtures.path("models/lfm2-tiny.gguf") : try TestFixtures.require(TestFixtures.modelCache + "/" + c.file)
    }

    @Test(arguments: cases)
    func prefillAndGreedyDecodeMatchLlamaCpp(_ c: Case) throws {
        let golden = try GoldenLogits(model: c.model, prompt: c.prompt)
        let model = try TransformerModel(path: try Self.modelPath(c))
        let session = InferenceSession(model: model, contextLength: golden.tokens.count + golden.greedy.count + 1)

        var worst: Float = 0
        let rows = try session.evaluateAllLogits(golden.tokens)
        #expect(rows.count == golden.tokens.count)
        for (p, row) in rows.enumerated() {
            let cmp = LogitComparison(ours: row, golden: golden.top[p])
            worst = max(worst, cmp.maxError)
            #expect(cmp.maxError <= c.maxError, "prefill position \(p): max error \(cmp.maxError)")
            #expect(cmp.topOneAgrees(minimumMargin: 0.5), "prefill position \(p): top-1 \(cmp.ourBest) vs \(cmp.goldenBest)")
        }
        // The first greedy token is the prompt's argmax.
        let first = LogitComparison(ours: rows.last!, golden: golden.top.last!)
        #expect(first.goldenMargin <= 0.5 || first.ourBest == golden.greedy[0])

        for (step, token) in golden.greedy.enumerated() {
            try session.evaluate([token])
            let cmp = LogitComparison(ours: Array(session.logits), golden: golden.greedyTop[step])
            worst = max(worst, cmp.maxError)
            #expect(cmp.maxError <= c.maxError, "greedy step \(step): max error \(cmp.maxError)")
            #expect(cmp.topOneAgrees(minimumMargin: 0.5), "greedy step \(step): top-1 \(cmp.ourBest) vs \(cmp.goldenBest)")
            if step + 1 < golden.greedy.count, cmp.goldenMargin > 0.5 {
                #expect(cmp.ourBest == golden.greedy[step + 1], "greedy step \(step)")
            }
        }
        print("golden \(c.model).\(c.prompt): max logit error \(worst) (tolerance \(c.maxError))")
    }
}
