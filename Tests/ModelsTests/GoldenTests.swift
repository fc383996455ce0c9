import Foundation
import Models
import TestSupport
import Testing

/// The forward pass against llama.cpp's outputs (CPU, 2 threads) for every model and
/// prompt in the golden fixtures (docs/numerics.md): the prompt's logits at every position
/// in one batch (prefill), then llama.cpp's greedy continuation decoded one token at a time
/// through the cache, following llama.cpp's own tokens so that a near tie cannot send the
/// two engines down different paths. For Gemma 3, also our own greedy continuation
/// against llama.cpp's, as far as its margins decide it.
///
/// - Quantized models follow `StoredWeightsFidelity`: the same top-1 as llama.cpp wherever
///   its top-2 margin exceeds 0.5, and a mean distance to the logits of the stored weights
///   (llama.cpp on the file's F32 dequantization, the `*-f32` goldens) no larger than
///   llama.cpp's, times 1.1. llama.cpp rounds activations to 8 bits before every quantized
///   matrix product; the rule asks that we compute the stored weights at least as faithfully.
/// - The F32 model has no separate reference: both engines do float arithmetic, and every
///   logit of llama.cpp's top-10 must be within a small fraction of the logit range of ours.
@Suite(.serialized) struct GoldenTests {
    /// Where a test model comes from.
    enum ModelFile: Sendable {
        /// Installed in the model cache by scripts/setup.sh and scripts/make-test-models.sh.
        case cache(String)
        /// Committed under Tests/Fixtures.
        case fixture(String)

        func path() throws -> String {
            switch self {
            case .cache(let name): try TestFixtures.require(TestFixtures.modelCache + "/" + name)
            case .fixture(let relative): TestFixtures.path(relative)
            }
        }
    }

    /// A quantized model with llama.cpp goldens and the goldens of its stored weights.
    struct QuantizedCase: CustomTestStringConvertible, Sendable {
        let model: String
        let reference: String
        let file: ModelFile
        let prompts: [String]
        var testDescription: String { "\(model) (reference \(reference))" }
    }

    static let smolPrompts = ["plain", "chat", "long"]
    static let lfm2Prompts = ["plain", "chat", "lfm2chat", "long"]
    static let gemmaPrompts = ["gemma-plain", "gemma-chat", "gemma-long"]

    /// Golden name, golden name of its stored weights, model file, prompts: one line per
    /// model.
    static let quantized: [QuantizedCase] = [
        ("smollm2-q4_1", "smollm2-f32", ModelFile.cache("SmolLM2-135M-Instruct.Q4_1.gguf"), smolPrompts),
        ("smollm2-q8_0", "smollm2-f32", .cache("SmolLM2-135M-Instruct.Q8_0.gguf"), smolPrompts),
        ("smollm2-q4_0", "smollm2-f32", .cache("SmolLM2-135M-Instruct.Q4_0.gguf"), smolPrompts),
        ("lfm2-tiny", "lfm2-tiny-f32", .fixture("models/lfm2-tiny.gguf"), lfm2Prompts),
        ("lfm2moe-tiny", "lfm2moe-tiny-f32", .fixture("models/lfm2moe-tiny.gguf"), lfm2Prompts),
        ("gemma3-270m-q4_k_m", "gemma3-270m-f32", .cache("gemma-3-270m-q4_k_m.gguf"), gemmaPrompts)
    ].map { model, reference, file, prompts in QuantizedCase(model: model, reference: reference, file: file, prompts: prompts) }

    /// The rule over all of a model's prompts: top-1 at every decisive position, the
    /// distance pooled over the prompts' compared logits within `distanceSlack` of
    /// llama.cpp's, and each prompt's within `promptSlack` (a prompt of a few dozen
    /// positions is a small, correlated sample: on the tiny random models a router or
    /// rounding near-tie at one position moves its mean by tens of percent).
    @Test(arguments: quantized)
    func quantizedModelIsAsFaithfulAsLlamaCpp(_ c: QuantizedCase) throws {
        var ours = 0.0, theirs = 0.0, logits = 0
        for prompt in c.prompts {
            let golden = try GoldenLogits(model: c.model, prompt: prompt)
            let reference = try GoldenLogits(model: c.reference, prompt: prompt)
            #expect(golden.tokens == reference.tokens, "the two goldens must share their prompt")
            var fidelity = StoredWeightsFidelity(golden: golden, reference: reference)
            try golden.replay(modelPath: c.file.path()) { position, ours in fidelity.add(position, ours: ours) }

            #expect(fidelity.topOneMisses.isEmpty, "\(prompt): \(fidelity.topOneMisses.joined(separator: "; "))")
            #expect(
                fidelity.comparedLogits > 0 && fidelity.ourDistance <= fidelity.llamaDistance * StoredWeightsFidelity.promptSlack,
                "\(prompt): \(fidelity.summary)")
            print("golden \(c.model).\(prompt): \(fidelity.summary)")
            ours += fidelity.ourDistance * Double(fidelity.comparedLogits)
            theirs += fidelity.llamaDistance * Double(fidelity.comparedLogits)
            logits += fidelity.comparedLogits
        }
        let pooled = "ours \(ours / Double(logits)), llama.cpp \(theirs / Double(logits)) over \(logits) logits"
        #expect(ours <= theirs * StoredWeightsFidelity.distanceSlack, "\(c.model), all prompts: \(pooled)")
        print("golden \(c.model), all prompts: distance to stored weights \(pooled) (ratio \(ours / theirs))")
    }

    /// Our own greedy continuation (each token our argmax, fed back) against llama.cpp's 32
    /// greedy tokens: equal at every step, until a step where llama.cpp's top-2 margin is
    /// at most `decisiveMargin`, where the two may part (and are not compared after).
    static let greedyCases = quantized.filter { $0.model.hasPrefix("gemma3") }.flatMap { c in c.prompts.map { (c, $0) } }

    @Test(arguments: greedyCases)
    func greedyContinuationFollowsLlamaCpp(_ c: QuantizedCase, _ prompt: String) throws {
        let golden = try GoldenLogits(model: c.model, prompt: prompt)
        let ours = try golden.ownGreedy(modelPath: c.file.path(), count: golden.greedy.count)
        let agreed = golden.greedyAgreement(ours)
        print("greedy \(c.model).\(prompt): \(agreed.summary)")
        #expect(agreed.isAllowed, "\(agreed.summary)")
        #expect(agreed.sameTokens >= 4, "a golden prompt should give a few clear steps (measured: 15, 32, 6)")
    }

    /// A float model: llama.cpp's top-10 logits within `maxError` times our logit range at
    /// every position, and their mean error within `meanError` times the mean range.
    struct FloatCase: CustomTestStringConvertible, Sendable {
        let model: String
        let file: ModelFile
        let prompt: String
        let maxError: Float
        let meanError: Float
        var cache: KVCacheType = .f32
        var testDescription: String { "\(model).\(prompt)" + (cache == .f32 ? "" : " (\(cache) cache)") }
    }

    static let float: [FloatCase] =
        smolPrompts.map {
            FloatCase(model: "smollm2-f32", file: .cache("SmolLM2-135M-Instruct.F32.gguf"), prompt: $0, maxError: 0.003, meanError: 0.0005)
        }
        + smolPrompts.map {
            // The F16 attention cache (llama.cpp's default type) must keep the F32 model as
            // close to llama.cpp as the F32 cache does (see docs/numerics.md).
            FloatCase(
                model: "smollm2-f32", file: .cache("SmolLM2-135M-Instruct.F32.gguf"), prompt: $0, maxError: 0.002, meanError: 0.0003,
                cache: .f16)
        }

    @Test(arguments: float)
    func floatModelMatchesLlamaCpp(_ c: FloatCase) throws {
        let golden = try GoldenLogits(model: c.model, prompt: c.prompt)
        var worst: Float = 0, sum: Float = 0, count: Float = 0, rangeSum: Float = 0, positions: Float = 0
        var topOneMisses: [String] = []
        try golden.replay(modelPath: c.file.path(), kvCacheType: c.cache) { position, ours in
            let llama = golden.top(at: position)
            let cmp = LogitComparison(ours: ours, golden: llama)
            worst = max(worst, cmp.maxError / cmp.range)
            sum += cmp.sumError
            count += Float(llama.count)
            rangeSum += cmp.range
            positions += 1
            #expect(cmp.maxError <= c.maxError * cmp.range, "\(position): max error \(cmp.maxError), range \(cmp.range)")
            let margin = llama[0].logit - llama[1].logit
            if margin > StoredWeightsFidelity.decisiveMargin, argmax(ours) != llama[0].id {
                topOneMisses.append("\(position): top-1 \(argmax(ours)) vs \(llama[0].id) (margin \(margin))")
            }
        }
        #expect(topOneMisses.isEmpty, "\(topOneMisses.joined(separator: "; "))")
        let mean = sum / count, meanRange = rangeSum / positions
        #expect(mean <= c.meanError * meanRange, "mean error \(mean)")
        print(
            "golden \(c.testDescription): max error \(worst * 100)% of range (bound \(c.maxError * 100)%), mean error \(mean) (range \(meanRange))"
        )
    }
}
