import Foundation
import LeapJSON
import Models
import TestSupport
import Testing

@testable import leap_ref

/// `leap-ref logits` prints the golden files' layout, so its output for a golden prompt
/// can be compared with llama.cpp's field by field.
@Suite struct LogitsTests {
    @Test func reportForAGoldenPromptHasTheGoldenLayoutAndTokens() throws {
        let golden = try JSONValue.parse(String(contentsOfFile: TestFixtures.path("golden/smollm2-q4_1.chat.json"), encoding: .utf8))
        let promptText = try String(contentsOfFile: TestFixtures.path("golden/prompts/chat.txt"), encoding: .utf8)
        let lm = try TransformerModel(path: try TestFixtures.require(TestFixtures.smolLM2Q4_1))
        let prompt = try tokenizePrompt(promptText, file: lm.file)
        #expect(.array(prompt.map { .integer($0) }) == golden["tokens"])

        let report = try Logits.report(lm, prompt: prompt, top: 10, greedy: 8, follow: nil)
        #expect(report.objectValue?.keys == ["n_vocab", "tokens", "top", "greedy", "greedy_top"])
        #expect(report["n_vocab"] == golden["n_vocab"])
        #expect(report["top"]?.arrayValue?.count == prompt.count)
        #expect(report["top"]?.arrayValue?.first?.arrayValue?.count == 10)
        // Our own greedy path follows llama.cpp's up to its first near tie (a top-2 margin
        // under 0.5 logits), after which the two may part.
        let ours = report["greedy"]?.arrayValue?.compactMap(\.intValue) ?? []
        let theirs = golden["greedy"]?.arrayValue?.compactMap(\.intValue) ?? []
        let margins = ([golden["top"]?.arrayValue?.last] + (golden["greedy_top"]?.arrayValue ?? []).map { Optional($0) }).map {
            row -> Double in
            let r = row?.arrayValue ?? []
            return (r[0].arrayValue?[1].doubleValue ?? 0) - (r[1].arrayValue?[1].doubleValue ?? 0)
        }
        let clear = margins.prefix { $0 > 0.5 }.count
        #expect(clear >= 3, "the fixture should give a few clear steps")
        #expect(Array(ours.prefix(min(8, clear))) == Array(theirs.prefix(min(8, clear))))

        // --follow feeds the given tokens instead of the argmax.
        let followed = try Logits.report(lm, prompt: prompt, top: 3, greedy: 0, follow: [5, 6, 7])
        #expect(followed["greedy"] == .array([5, 6, 7]))
        #expect(followed["greedy_top"]?.arrayValue?.count == 3)
        #expect(throws: CLIError.self) { try Logits.report(lm, prompt: [], top: 3, greedy: 1, follow: nil) }
    }
}
