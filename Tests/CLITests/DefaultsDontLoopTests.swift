import Foundation
import LeapSDKCore
import TestSupport
import Testing

@testable import leap_ref

/// The README's first command, `leap-ref chat` on the default model (SmolLM2-135M-Instruct)
/// with its default sampling, does not loop: for several prompts and fixed seeds no
/// sequence of 4 words comes back more than 3 times, and the model still ends its turn by
/// itself. (Before DRY and the repetition penalty were on by default, the France question
/// ran to the 512-token limit repeating "the City of Rome".) The session is built exactly
/// as the command builds it.
@Suite(.serialized) struct DefaultsDontLoopTests {
    static let prompts = [
        "What is the capital of France?",
        "What is a computer?",
        "Explain how rain forms.",
        "Give me three tips for learning to code.",
        "Write a short poem about cats."
    ]

    /// The most times any sequence of 4 words occurs in `text` (words: runs of letters and
    /// digits, case folded).
    static func maxFourGramCount(_ text: String) -> Int {
        let words = text.lowercased().split { !($0.isLetter || $0.isNumber) }.map(String.init)
        guard words.count >= 4 else { return 0 }
        var counts: [[String]: Int] = [:]
        for i in 0...(words.count - 4) { counts[Array(words[i..<(i + 4)]), default: 0] += 1 }
        return counts.values.max() ?? 0
    }

    @Test func fourGramCounter() {
        #expect(Self.maxFourGramCount("the City of Rome, the City of Rome, the City of Rome") == 3)
        #expect(Self.maxFourGramCount("The city of Rome. THE CITY OF ROME! the city of rome") == 3)
        #expect(Self.maxFourGramCount("one two three") == 0)
    }

    /// One reply of `leap-ref chat --seed SEED [flags]` to `prompt`: its text and how it ended.
    func reply(_ prompt: String, seed: UInt64, flags: [String] = []) async throws -> (String, MessageCompletion) {
        let model = try TestFixtures.require(TestFixtures.smolLM2Q4_1)
        let chat = try Chat.parse(["--model", model, "--seed", String(seed)] + flags)
        let runner = try await Leap.load(path: model, options: chat.loadOptions)
        var session = chat.makeSession(runner: runner, interactive: false)
        #expect(try await session.handle(prompt))
        let completion = try #require(session.lastCompletion)
        await runner.unload()
        return (session.conversation.history.last?.textContent ?? "", completion)
    }

    /// Without DRY and the repetition penalty (llama.cpp's defaults), the same command
    /// loops for some seed (the check can fail), and with the defaults that seed does not.
    /// Which seeds loop depends on the last bits of the logits (a change in a product's
    /// summation order moves them, and so does the machine: OpenBLAS picks its kernels by
    /// CPU, and the VNNI and AVX2 builds multiply prompts differently), so the first of 32
    /// that loops is taken (one of 1...8 on the AVX-512 VNNI development machine, 15 on an
    /// AVX2-only Zen machine, 2026-11-28).
    @Test func withoutTheAntiLoopDefaultsTheFrenchAnswerLoops() async throws {
        var loopingSeed: UInt64?
        for seed: UInt64 in 1...32 {
            let (text, completion) = try await reply(
                Self.prompts[0], seed: seed, flags: ["--dry-multiplier", "0", "--repeat-penalty", "1"])
            if Self.maxFourGramCount(text) > 3 && completion.stats?.completionTokens == 512 {
                loopingSeed = seed
                break
            }
        }
        let seed = try #require(loopingSeed, "no seed in 1...32 loops without DRY and the repetition penalty")
        let (withDefaults, _) = try await reply(Self.prompts[0], seed: seed)
        #expect(Self.maxFourGramCount(withDefaults) <= 3, "seed \(seed): \(withDefaults)")
    }

    /// Every prompt with seeds 1 and 2: no reply loops, and at most one of the ten runs to
    /// the 512-token limit instead of ending its turn. A 135M model sampled at temperature
    /// 0.8 sometimes rambles on without repeating itself, and which seed does depends on the
    /// last bits of the logits, as above (the France question with seed 2 rambled once the
    /// decode scores were summed in tiles, commit of 2026-11-28 evening, where before it
    /// ended after 65 tokens); a loop is what the defaults must prevent, and one would be
    /// caught by the 4-gram count in every run.
    @Test func theDefaultsDoNotLoopAndTheTurnsEnd() async throws {
        var ranToTheLimit: [String] = []
        for prompt in Self.prompts {
            for seed: UInt64 in [1, 2] {
                let (text, completion) = try await reply(prompt, seed: seed)
                #expect(Self.maxFourGramCount(text) <= 3, "\(prompt) seed \(seed): \(text)")
                #expect(completion.finishReason == .stop, "\(prompt) seed \(seed)")
                let tokens = try #require(completion.stats?.completionTokens)
                #expect(tokens > 0 && tokens <= 512, "\(prompt) seed \(seed)")
                if tokens >= 512 { ranToTheLimit.append("\(prompt) seed \(seed)") }
            }
        }
        #expect(ranToTheLimit.count <= 1, "ran to the 512-token limit: \(ranToTheLimit)")
    }
}
