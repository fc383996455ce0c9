import TestSupport
import Testing

@testable import Tokenizers

/// `encode(_:addSpecial:parseSpecial:stoppingAbove:)`: the whole encoding when the text
/// fits the limit, else a prefix of it with a lower bound of the count over the limit;
/// and a long word that cannot fit is not merged at all.
@Suite("Encoding up to a limit")
struct LimitedEncodingTests {
    /// The vocabulary's own test strings, and texts made to be long single words and runs
    /// (letters, spaces, digits, a CJK run, punctuation) or random mixes of them.
    static func texts(_ vocab: VocabFixture, seed: UInt64) -> [String] {
        var random = SeededRandom(seed: seed)
        let alphabet = Array("aab ccd  e1234.,;!?\n\t中文😀éß-_")
        var texts = vocab.cases.map(\.text).filter { !$0.isEmpty }
        texts += [
            String(repeating: "a", count: 3000), String(repeating: " ", count: 2000), String(repeating: "7", count: 900),
            String(repeating: "中", count: 700), String(repeating: "!?", count: 600),
            String(repeating: "hello world ", count: 150),
            // Control characters without a token in some vocabularies (SmolLM2 drops them).
            String(repeating: "\u{4}", count: 3000) + "a", String(repeating: "\u{4}\u{6}\u{13}", count: 500)
        ]
        for _ in 0..<12 {
            let length = Int.random(in: 1...1500, using: &random)
            texts.append(String((0..<length).map { _ in alphabet.randomElement(using: &random)! }))
        }
        return texts
    }

    static func check(_ tokenizer: Tokenizer, _ texts: [String], seed: UInt64) {
        var random = SeededRandom(seed: seed)
        for text in texts {
            let full = tokenizer.encode(text, addSpecial: true)
            let limits = Set([
                0, 1, full.count / 2, full.count - 1, full.count, full.count + 1, Int.random(in: 0...full.count + 4, using: &random)
            ])
            for limit in limits where limit >= 0 {
                let limited = tokenizer.encode(text, addSpecial: true, stoppingAbove: limit)
                if limited.isComplete {
                    #expect(limited.tokens == full && limited.count == full.count, "limit \(limit), \(text.prefix(30))")
                } else {
                    #expect(limited.count > limit, "limit \(limit), \(text.prefix(30))")
                    // A lower bound: never more than the text really has.
                    #expect(limited.count <= full.count, "limit \(limit), \(text.prefix(30))")
                    #expect(full.starts(with: limited.tokens), "limit \(limit), \(text.prefix(30))")
                }
                if full.count <= limit { #expect(limited.isComplete, "limit \(limit), \(text.prefix(30))") }
            }
        }
    }

    @Test("prefix and lower bound", arguments: VocabFixture.allCases)
    func prefixAndLowerBound(_ vocab: VocabFixture) throws {
        let tokenizer = try vocab.tokenizer()
        #expect(tokenizer.tokenCountBoundIsValid)
        Self.check(tokenizer, Self.texts(vocab, seed: 2811), seed: 2812)
    }

    @Test("prefix and lower bound, Gemma 3 (SentencePiece)")
    func gemma() throws {
        let tokenizer = try GemmaTokenizerTests.tokenizer()
        #expect(tokenizer.tokenCountBoundIsValid)
        Self.check(tokenizer, Self.texts(.llamaSPM, seed: 2813), seed: 2814)
    }

    @Test("a word that cannot fit is not merged", arguments: VocabFixture.allCases)
    func longWordStopsBeforeMerging(_ vocab: VocabFixture) throws {
        let tokenizer = try vocab.tokenizer()
        for text in [String(repeating: "a", count: 400_000), "hi " + String(repeating: " ", count: 400_000)] {
            let limited = tokenizer.encode(text, addSpecial: false, stoppingAbove: 100)
            #expect(!limited.isComplete)
            // Nothing of the long word was encoded: what is there came before it.
            #expect(limited.tokens.count <= 2)
            #expect(limited.count >= 400_000 / tokenizer.longestTokenBytes)
        }
    }

    @Test func unlimitedEncodingIsComplete() throws {
        let tokenizer = try VocabFixture.smolLM2.tokenizer()
        let text = String(repeating: "a", count: 100_000)
        let limited = tokenizer.encode(text, addSpecial: false, stoppingAbove: .max)
        #expect(limited.isComplete && limited.tokens == tokenizer.encode(text, addSpecial: false))
    }
}
