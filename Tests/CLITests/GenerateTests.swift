import Foundation
import GGUF
import LeapJSON
import LeapSDKCore
import Models
import TestSupport
import Testing
import Tokenizers

@testable import leap_ref

/// `leap-ref generate --model gemma-3-270m-q4_k_m.gguf --prompt "The capital of France is"
/// --temp 0` continues as llama.cpp does: the command runs on the serving engine (its
/// `.text` prompt's tokenization and the per-token step), pinned to llama.cpp's tokens in
/// the golden file of that prompt (not to our output).
@Suite struct GenerateTests {
    /// Greedy and nothing else: no repetition penalty, no DRY (the golden's sampler).
    static let greedy = SamplingOverrides(temperature: 0, repetitionPenalty: 1, dryMultiplier: 0)

    static func engine(_ path: String, context: Int? = nil) async throws -> ServingEngine {
        let runner = try await Leap.load(path: path, options: LiquidInferenceEngineOptions())
        return try ServingEngine(runner: runner, configuration: .init(contextSize: context ?? Int.max, prefillChunk: 512))
    }

    @Test func gemmaGreedyContinuationIsLlamaCpps() async throws {
        let golden = try JSONValue.parse(
            String(contentsOfFile: TestFixtures.path("golden/gemma3-270m-q4_k_m.gemma-plain.json"), encoding: .utf8))
        let ints = { (key: String) in golden[key]?.arrayValue?.compactMap(\.intValue) ?? [] }
        let theirs = ints("greedy")
        #expect(theirs.count == 32)

        let engine = try await Self.engine(try TestFixtures.require(TestFixtures.gemma3_270mQ4_K_M))
        // The golden prompt is "<bos>The capital of France is": the text prompt gets the BOS.
        #expect(try engine.promptTokens(.text("The capital of France is")) == ints("tokens"))
        var streamed = ""
        let result = try await Generate.continuation(
            of: "The capital of France is", on: engine, count: theirs.count, sampling: Self.greedy, recordTokens: true
        ) { streamed += $0 }
        let ours = result.tokens
        print("generate: The capital of France is\(result.text)")
        #expect(streamed == result.text)
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
        #expect(result.reason == .length && result.usage?.completionTokens == theirs.count)
        if same < theirs.count { #expect(margins[same] <= 0.5, "parted at step \(same), where llama.cpp's margin is \(margins[same])") }
        #expect(same >= 4)
        #expect(result.text.hasPrefix(" the capital of"))
        await engine.shutdown(cancelRunning: true)
    }

    /// Greedy generation streams the text of the argmax tokens of the model, computed
    /// here step by step on a session of its own; it stops at `-n` tokens, and at the
    /// context's end.
    @Test func lfm2moeGeneratesTheGreedyContinuation() async throws {
        let path = TestFixtures.path("models/lfm2moe-tiny.gguf")
        let model = try TransformerModel(path: path)
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

        let engine = try await Self.engine(path, context: 64)
        #expect(try engine.promptTokens(.text("The capital of France is")) == prompt)
        let result = try await Generate.continuation(
            of: "The capital of France is", on: engine, count: 8, sampling: Self.greedy, recordTokens: true
        ) { _ in }
        #expect(result.tokens == expected)
        #expect(result.text == tokenizer.decode(expected.map(TokenID.init)))

        // A context one token longer than the prompt ends the generation after that token.
        let short = try await Generate.continuation(
            of: "The capital of France is", on: engine, count: 8, sampling: Self.greedy, contextLength: prompt.count + 1,
            recordTokens: true
        ) { _ in }
        #expect(short.tokens == Array(expected.prefix(1)))
        #expect(short.reason == (expected.isEmpty ? .stop : .length))
        await engine.shutdown(cancelRunning: true)
    }

    /// The command itself: the prompt, then its continuation, on stdout; the speed line
    /// on stderr.
    @Test func theCommandPrintsTheContinuation() async throws {
        let path = TestFixtures.path("models/lfm2moe-tiny.gguf")
        let run = try LeapRefBinary.run([
            "generate", "--model", path, "--prompt", "The capital of France is", "-n", "8", "--temp", "0",
            "--repeat-penalty", "1", "--dry-multiplier", "0"
        ])
        #expect(run.status == 0, "\(run.stderr)")
        let engine = try await Self.engine(path, context: 64)
        let expected = try await Generate.continuation(
            of: "The capital of France is", on: engine, count: 8, sampling: Self.greedy
        ) { _ in }
        await engine.shutdown(cancelRunning: true)
        #expect(run.stdout == "The capital of France is" + expected.text + "\n")
        #expect(run.stderr.contains("generated \(expected.usage?.completionTokens ?? -1) tokens"), "\(run.stderr)")
        // A prompt that does not fit the context given is refused with the count.
        let tooLong = try LeapRefBinary.run(["generate", "--model", path, "--prompt", "The capital of France is", "--ctx", "3"])
        #expect(tooLong.status != 0)
        #expect(tooLong.stderr.contains("does not fit in the context of 3 tokens"), "\(tooLong.stderr)")
    }
}
