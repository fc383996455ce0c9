import Foundation
import GGUF
import LeapJSON
import Models
import Sampling
import TestSupport
import Testing
import Tokenizers

@testable import leap_ref

/// `leap-ref generate --model gemma-3-270m-q4_k_m.gguf --prompt "The capital of France is"
/// --temp 0` continues as llama.cpp does: the command's own tokenization and greedy loop,
/// pinned to llama.cpp's tokens in the golden file of that prompt (not to our output).
@Suite struct GenerateTests {
    @Test func gemmaGreedyContinuationIsLlamaCpps() throws {
        let golden = try JSONValue.parse(
            String(contentsOfFile: TestFixtures.path("golden/gemma3-270m-q4_k_m.gemma-plain.json"), encoding: .utf8))
        let ints = { (key: String) in golden[key]?.arrayValue?.compactMap(\.intValue) ?? [] }
        let theirs = ints("greedy")
        #expect(theirs.count == 32)

        let lm = try TransformerModel(path: try TestFixtures.require(TestFixtures.gemma3_270mQ4_K_M))
        let tokenizer = try Tokenizer(gguf: lm.file)
        // The golden prompt is "<bos>The capital of France is": the command adds the BOS itself.
        let ids = try Generate.promptTokens("The capital of France is", tokenizer)
        #expect(ids == ints("tokens"))

        let session = InferenceSession(model: lm, contextLength: ids.count + theirs.count)
        var sampler = Sampler(SamplingParameters(temperature: 0, topK: 40, topP: 0.95, minP: 0.05, repetitionPenalty: 1, seed: 0))
        var text = ""
        let ours = try Generate.continuation(of: ids, in: session, count: theirs.count, sampler: &sampler, tokenizer: tokenizer) {
            text += $0
        }
        print("generate: The capital of France is\(text)")
        // Equal to llama.cpp's tokens, except that from a step where llama.cpp's top-2 margin
        // is at most 0.5 (a near tie, where rounding may decide) the two may part.
        let rows = [golden["top"]?.arrayValue?.last] + (golden["greedy_top"]?.arrayValue ?? []).map { Optional($0) }
        let margins = rows.prefix(theirs.count).map { row -> Double in
            let r = row?.arrayValue ?? []
            return (r[0].arrayValue?[1].doubleValue ?? 0) - (r[1].arrayValue?[1].doubleValue ?? 0)
        }
        let same = zip(ours, theirs).prefix { $0 == $1 }.count
        print("generate: \(same) of \(theirs.count) tokens equal llama.cpp's")
        #expect(ours.count == theirs.count)
        if same < theirs.count { #expect(margins[same] <= 0.5, "parted at step \(same), where llama.cpp's margin is \(margins[same])") }
        #expect(same >= 4)
        #expect(text.hasPrefix(" the capital of"))
    }

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
        let count = try Generate.continuation(
            of: prompt, in: InferenceSession(model: model, contextLength: 64), count: 8, sampler: &sampler, tokenizer: tokenizer
        ) { text += $0 }.count
        #expect(count == expected.count)
        #expect(text == tokenizer.decode(expected.map(TokenID.init)))

        // A context one token longer than the prompt ends the generation after that token.
        var short = Sampler(.greedy)
        let shortCount = try Generate.continuation(
            of: prompt, in: InferenceSession(model: model, contextLength: prompt.count + 1), count: 8, sampler: &short,
            tokenizer: tokenizer
        ) { _ in }.count
        #expect(shortCount == min(1, expected.count))
    }
}
