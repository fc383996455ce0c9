import Foundation
import GGUF
import TestSupport
import Testing

@testable import Tokenizers

/// Gemma 3's vocabulary (262,144 SentencePiece tokens, no space prefix, byte fallback,
/// `<start_of_turn>`-style control tokens, user-defined whitespace runs and HTML tags),
/// read from the real model (`scripts/setup.sh --gemma`), against llama.cpp:
/// `Fixtures/tokenizer/llamacpp-gemma3.json` (`scripts/gen-gemma-tokenizer-fixture.py`)
/// and the prompt tokens of the Gemma golden files.
@Suite("Gemma 3 vocabulary")
struct GemmaTokenizerTests {
    static func tokenizer() throws -> Tokenizer {
        try TokenizerCache.shared.get(path: TestFixtures.require(TestFixtures.gemma3_270mQ4_K_M))
    }

    struct Case: Decodable {
        let text: String
        let plain: [TokenID]
        let special: [TokenID]
        /// The pieces of `special` with control tokens rendered, concatenated (hex).
        let pieces: String
    }

    struct Fixture: Decodable {
        let bos: TokenID
        let eos: TokenID
        let eot: TokenID
        let eog: [TokenID]
        let cases: [Case]
    }

    static func fixture() throws -> Fixture {
        let data = try Data(contentsOf: URL(fileURLWithPath: TestFixtures.path("tokenizer/llamacpp-gemma3.json")))
        return try JSONDecoder().decode(Fixture.self, from: data)
    }

    @Test("special ids and the end-of-generation set are llama.cpp's")
    func specialIDs() throws {
        let tokenizer = try Self.tokenizer()
        let fixture = try Self.fixture()
        #expect(tokenizer.vocabularySize == 262_144)
        #expect(tokenizer.model == .sentencePiece && !tokenizer.addSpacePrefix && tokenizer.addBOS)
        #expect(tokenizer.bosID == fixture.bos && tokenizer.eosID == fixture.eos && tokenizer.eotID == fixture.eot)
        // <eos>, <end_of_turn>, and </s> (a user-defined token that llama.cpp turns into a
        // control token because its text ends generation elsewhere).
        #expect(tokenizer.endOfGenerationIDs == Set(fixture.eog))
        #expect(fixture.eog == [1, 106, 212])
    }

    @Test("ids with and without special parsing, and rendered pieces, equal llama.cpp's")
    func llamaCppCases() throws {
        let tokenizer = try Self.tokenizer()
        let cases = try Self.fixture().cases
        #expect(cases.count > 350)
        var mismatches = 0
        for (i, c) in cases.enumerated() where mismatches < 10 {
            let plain = tokenizer.encode(c.text, addSpecial: false, parseSpecial: false)
            let special = tokenizer.encode(c.text, addSpecial: true, parseSpecial: true)
            let pieces = tokenizer.decodeBytes(c.special, renderSpecial: true)
            if plain != c.plain || special != c.special || pieces != LlamaCppFuzzTests.bytes(c.pieces) {
                mismatches += 1
                #expect(plain == c.plain, "#\(i) \(c.text.debugDescription)")
                #expect(special == c.special, "#\(i) special \(c.text.debugDescription)")
                #expect(pieces == LlamaCppFuzzTests.bytes(c.pieces), "#\(i) pieces \(c.text.debugDescription)")
            }
        }
    }

    @Test(
        "prompt tokens of the Gemma golden files (special tokens parsed, no BOS added)",
        arguments: ["gemma-plain", "gemma-chat", "gemma-long"])
    func goldenPrompts(_ prompt: String) throws {
        struct Golden: Decodable {
            let prompt: String
            let tokens: [TokenID]
        }
        let url = URL(fileURLWithPath: TestFixtures.path("golden/gemma3-270m-q4_k_m.\(prompt).json"))
        let golden = try JSONDecoder().decode(Golden.self, from: Data(contentsOf: url))
        let tokenizer = try Self.tokenizer()
        #expect(tokenizer.encode(golden.prompt, addSpecial: false, parseSpecial: true) == golden.tokens)
        #expect(tokenizer.decode(golden.tokens, renderSpecial: true) == golden.prompt)
    }

    @Test("decode(encode(s)) == s for every fixture string, whole and streamed")
    func roundTrip() throws {
        let tokenizer = try Self.tokenizer()
        // A literal `▁` is SentencePiece's space marker and decodes as a space, in
        // llama.cpp too (the pieces above), so such texts cannot round-trip.
        for c in try Self.fixture().cases where !c.text.contains("\u{2581}") {
            let ids = tokenizer.encode(c.text, addSpecial: false, parseSpecial: false)
            #expect(tokenizer.decode(ids, renderSpecial: true) == c.text, "\(c.text.debugDescription)")
            var detokenizer = StreamingDetokenizer(tokenizer: tokenizer, renderSpecial: true)
            var streamed = ""
            for id in ids { streamed += detokenizer.append(id) }
            streamed += detokenizer.finish()
            #expect(streamed == c.text, "streamed \(c.text.debugDescription)")
        }
    }

    @Test("word-by-word tokenization equals whole-text tokenization, around Gemma's `>▁</` token")
    func chunking() throws {
        let tokenizer = try Self.tokenizer()
        let spm = try #require(tokenizer.spm)
        // `>▁</` is the only token with a `▁` after another character: the text is cut
        // before every `▁` except one that follows `>`.
        #expect(spm.charactersBeforeInnerSpace == [Array(">".utf8)])
        #expect(spm.splitsAtWords)
        let samples = SentencePieceTests.samples + ["<p> </p> a> </b", "x>  </y", "> </", ">> <</", "→ ← ⟩ ⟨"]
        for sample in try samples + Self.fixture().cases.map(\.text) {
            let (whole, chunked) = SentencePieceTests.wholeAndChunked(spm, tokenizer, sample)
            #expect(whole == chunked, "\(sample.debugDescription)")
        }
    }

    @Test("turn markers are single control tokens, hidden unless rendered")
    func controlTokens() throws {
        let tokenizer = try Self.tokenizer()
        let ids = tokenizer.encode("<start_of_turn>user\nhi<end_of_turn>\n", addSpecial: false, parseSpecial: true)
        #expect(ids == [105, 2364, 107, 2202, 106, 107])
        #expect(tokenizer.isControl(105) && tokenizer.isControl(106))
        #expect(tokenizer.isEndOfGeneration(106) && !tokenizer.isEndOfGeneration(105))
        #expect(tokenizer.decode(ids) == "user\nhi\n")
        #expect(tokenizer.decode(ids, renderSpecial: true) == "<start_of_turn>user\nhi<end_of_turn>\n")
        // Without special parsing the markers are spelled out in ordinary tokens.
        let plain = tokenizer.encode("<start_of_turn>", addSpecial: false, parseSpecial: false)
        #expect(plain.count > 1 && !plain.contains(105))
        // BOS is added when asked (tokenizer.ggml.add_bos_token).
        #expect(tokenizer.encode("hi", addSpecial: true) == [2, 2202])
    }

    @Test("characters missing from the vocabulary fall back to byte tokens")
    func byteFallback() throws {
        let tokenizer = try Self.tokenizer()
        let text = "\u{10FFFD}"  // a private-use character of plane 16: not a token
        #expect(tokenizer.tokenID(forText: text) == nil)
        let bytes = ["<0xF4>", "<0x8F>", "<0xBF>", "<0xBD>"].map { tokenizer.tokenID(forText: $0) }
        #expect(tokenizer.encode(text, addSpecial: false) == bytes.compactMap { $0 })
        #expect(bytes.allSatisfy { $0.map { tokenizer.tokenType($0) == .byte } ?? false })
        #expect(tokenizer.decode(tokenizer.encode("a\u{10FFFD}b", addSpecial: false)) == "a\u{10FFFD}b")
    }

    @Test("whitespace runs and HTML tags are user-defined tokens, matched without special parsing")
    func userDefinedTokens() throws {
        let tokenizer = try Self.tokenizer()
        let twoSpaces = try #require(tokenizer.tokenID(forText: "  "))
        let bold = try #require(tokenizer.tokenID(forText: "<b>"))
        #expect(tokenizer.tokenType(twoSpaces) == .userDefined && tokenizer.tokenType(bold) == .userDefined)
        let ids = tokenizer.encode("a  <b>b</b>", addSpecial: false, parseSpecial: false)
        #expect(ids.contains(twoSpaces) && ids.contains(bold))
        #expect(tokenizer.decode(ids) == "a  <b>b</b>")
    }
}
