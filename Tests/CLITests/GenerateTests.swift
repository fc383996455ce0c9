import GGUF
import Models
import Sampling
import TestSupport
import Testing
import Tokenizers

@testable import leap_ref

/// `leap-ref generate`'s loop (`Generate.continueText`), on an lfm2moe file.
@Suite struct GenerateTests {
    /// Greedy generation streams the text of the argmax tokens of the engine, computed
    /// here step by step; it stops at `-n` tokens, and at the context's end.
    @Test func lfm2moeGeneratesTheGreedyContinuation() throws {
        let model = try TransformerModel(path: TestFixtures.path("models/lfm2moe-tiny.gguf"))
        let tokenizer = try Tokenizer(gguf: model.file)
        let prompt = tokenizer.encode("The capital of France is", addSpecial: true, parseSpecial: true).map(Int.init)

        var expected: [Int] = []
        let check = InferenceSession(model: model, contextLength: 64)
        try check.evaluate(prompt)
        for _ in 0..<8 {
            let logits = check.logits
            let next = logits.indices.max { logits[$0] < logits[$1] }!
            if tokenizer.isEndOfGeneration(TokenID(next)) { break }
            expected.append(next)
            try check.evaluate([next])
        }
        #expect(!expected.isEmpty)

        var text = ""
        var sampler = Sampler(.greedy)
        let count = try Generate.continueText(
            prompt, session: InferenceSession(model: model, contextLength: 64), tokenizer: tokenizer, sampler: &sampler,
            maxTokens: 8, write: { text += $0 })
        #expect(count == expected.count)
        #expect(text == tokenizer.decode(expected.map(TokenID.init)))

        // A context one token longer than the prompt ends the generation after that token.
        var short = Sampler(.greedy)
        let shortCount = try Generate.continueText(
            prompt, session: InferenceSession(model: model, contextLength: prompt.count + 1), tokenizer: tokenizer,
            sampler: &short, maxTokens: 8, write: { _ in })
        #expect(shortCount == min(1, expected.count))
    }
}
