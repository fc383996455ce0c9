import Foundation
import Testing

@testable import Tokenizers

@Suite("BPE merges")
struct MergeTests {
    static let bpeVocabularies: [VocabFixture] = [.gpt2, .llamaBPE, .qwen2, .smolLM2]

    @Test("the heap and the scan merge identically on every vector", arguments: bpeVocabularies)
    func strategiesAgree(_ vocab: VocabFixture) throws {
        let tokenizer = try vocab.tokenizer()
        for c in vocab.cases {
            var text = c.text
            for strategy in [BPEModel.MergeStrategy.scan, .heap] {
                let ids = text.withUTF8 { tokenizer.encode(utf8: $0, addSpecial: false, parseSpecial: false, mergeStrategy: strategy) }
                #expect(ids == c.expected, "\(strategy) on #\(c.index)")
            }
        }
    }

    @Test("long pieces without spaces (heap path) agree with the scan", arguments: bpeVocabularies)
    func longPieces(_ vocab: VocabFixture) throws {
        let tokenizer = try vocab.tokenizer()
        let samples = [
            String(repeating: "a", count: 3000),
            String(repeating: "abracadabra", count: 200),
            String(repeating: "🙂", count: 300),
            String(repeating: "=-", count: 700),
            (0..<400).map { ["super", "cali", "fragilistic", "expi", "ali", "docious"][$0 % 6] }.joined()
        ]
        for sample in samples {
            var text = sample
            let scan = text.withUTF8 { tokenizer.encode(utf8: $0, addSpecial: false, parseSpecial: false, mergeStrategy: .scan) }
            let heap = text.withUTF8 { tokenizer.encode(utf8: $0, addSpecial: false, parseSpecial: false, mergeStrategy: .heap) }
            #expect(scan == heap)
            #expect(tokenizer.decode(heap, cleanSpaces: false) == sample)
        }
    }

    @Test("ranks and merged symbols come from tokenizer.ggml.merges")
    func mergeTable() throws {
        let tokenizer = try VocabFixture.gpt2.tokenizer()
        let bpe = try #require(tokenizer.bpe)
        // GPT-2's first merge is "Ġ t".
        let space = try #require(tokenizer.tokenID(forText: "Ġ"))
        let t = try #require(tokenizer.tokenID(forText: "t"))
        let merged = try #require(bpe.merge(space, t))
        #expect(merged.rank == 0)
        #expect(tokenizer.tokenText(merged.merged) == "Ġt")
        #expect(bpe.merge(t, space) == nil)
        #expect(bpe.extraTexts.isEmpty)
    }

    @Test("the per-call word cache does not change results")
    func cacheRepeats() throws {
        let tokenizer = try VocabFixture.smolLM2.tokenizer()
        // Ends with a newline so that the second copy's first word is not " The".
        let sentence = "The cat sat on the mat, and the cat saw 12 other cats.\n"
        let once = tokenizer.encode(sentence, addSpecial: false)
        let twice = tokenizer.encode(sentence + sentence, addSpecial: false)
        #expect(twice == once + once)
    }
}

@Suite("SentencePiece")
struct SentencePieceTests {
    static let samples = [
        "Hello  world,\n\n  this is   a test 🚀 of words; 1234 and ▁ already-escaped ▁▁ text.",
        String(repeating: "The quick brown fox jumps over the lazy dog.  ", count: 50),
        " leading and trailing  ",
        "数字 123 和 emoji 🙂🙂 and Ωmega"
    ]

    @Test("word-by-word tokenization equals whole-text tokenization", arguments: [VocabFixture.llamaSPM, .phi3])
    func chunking(_ vocab: VocabFixture) throws {
        let tokenizer = try vocab.tokenizer()
        let spm = try #require(tokenizer.spm)
        #expect(spm.splitsAtWords)
        for sample in SentencePieceTests.samples + vocab.cases.map(\.text) {
            let (whole, chunked) = Self.wholeAndChunked(spm, tokenizer, "▁" + sample)
            #expect(whole == chunked, "\(sample.debugDescription)")
            if !sample.isEmpty { #expect(tokenizer.encode(sample, addSpecial: false) == chunked) }
        }
    }

    /// `text` (spaces escaped as `▁`) merged as one piece and cut at words.
    static func wholeAndChunked(
        _ spm: SentencePieceModel, _ tokenizer: Tokenizer, _ text: String
    ) -> (whole: [TokenID], chunked: [TokenID]) {
        let escaped = Array(text.utf8.flatMap { $0 == 0x20 ? [0xE2, 0x96, 0x81] : [$0] })
        var whole: [TokenID] = []
        escaped.withUnsafeBufferPointer { spm.tokenizeWhole($0, vocabulary: tokenizer.vocabulary, into: &whole) }
        var cache = WordCache()
        var chunked: [TokenID] = []
        var unbounded = TokenCountBound(limit: .max, bytesPerToken: nil)
        spm.tokenize(escaped, vocabulary: tokenizer.vocabulary, cache: &cache, bound: &unbounded, into: &chunked)
        return (whole, chunked)
    }
}
