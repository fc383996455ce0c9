import Foundation
import GGUF
import TestSupport
import Testing

@testable import Tokenizers

@Suite("errors")
struct ErrorTests {
    /// A tiny byte-level BPE vocabulary: the 256 byte tokens plus a few merges.
    static func tinyBPE() -> GGUFMetadata {
        var m = GGUFMetadata()
        m.set("tokenizer.ggml.model", .string("gpt2"))
        m.set("tokenizer.ggml.pre", .string("gpt-2"))
        var tokens = (0..<256).map { String(Unicode.Scalar(ByteLevel.byteToScalar[$0])!) }
        tokens += ["he", "ll", "llo", "hello", "<|end|>"]
        m.set("tokenizer.ggml.tokens", .array(.string(tokens)))
        m.set("tokenizer.ggml.token_type", .array(.int32(tokens.indices.map { $0 == tokens.count - 1 ? 3 : 1 })))
        m.set("tokenizer.ggml.merges", .array(.string(["h e", "l l", "ll o", "he llo"])))
        return m
    }

    func expectError(_ expected: TokenizerError, _ metadata: GGUFMetadata) {
        do {
            _ = try Tokenizer(metadata: metadata)
            Issue.record("expected \(expected)")
        } catch {
            #expect(error == expected)
            #expect(!error.description.isEmpty)
        }
    }

    @Test("a tiny hand-made vocabulary works")
    func tiny() throws {
        let t = try Tokenizer(metadata: ErrorTests.tinyBPE())
        #expect(t.encode("hello", addSpecial: false) == [259])
        #expect(t.encode("hello hello", addSpecial: false) == [259, 32, 259])  // "Ġ" is byte 32's token (id 32 maps to U+0120)
        #expect(t.decode([259, 32, 259]) == "hello hello")
        #expect(t.endOfGenerationIDs.contains(260))  // <|end|> by its text
        // The default BOS/EOS ids of a BPE vocabulary are 11 (llama.cpp).
        #expect(t.bosID == 11 && t.eosID == 11)
    }

    @Test("missing keys")
    func missing() {
        var m = ErrorTests.tinyBPE()
        m.remove("tokenizer.ggml.tokens")
        expectError(.missingKey("tokenizer.ggml.tokens"), m)
        m = ErrorTests.tinyBPE()
        m.remove("tokenizer.ggml.merges")
        expectError(.missingKey("tokenizer.ggml.merges"), m)
        m = ErrorTests.tinyBPE()
        m.remove("tokenizer.ggml.model")
        expectError(.missingKey("tokenizer.ggml.model"), m)
        expectError(.missingKey("tokenizer.ggml.model"), GGUFMetadata())
    }

    @Test("malformed keys")
    func malformed() {
        var m = ErrorTests.tinyBPE()
        m.set("tokenizer.ggml.tokens", .array(.int32([1, 2, 3])))
        expectError(.malformedKey(key: "tokenizer.ggml.tokens", reason: "it holds array of i32, expected an array of string"), m)
        m = ErrorTests.tinyBPE()
        m.set("tokenizer.ggml.token_type", .array(.int32([1, 1])))
        expectError(.malformedKey(key: "tokenizer.ggml.token_type", reason: "it has 2 entries for 261 tokens"), m)
        m = ErrorTests.tinyBPE()
        m.set("tokenizer.ggml.tokens", .array(.string([])))
        expectError(.malformedKey(key: "tokenizer.ggml.tokens", reason: "the vocabulary is empty"), m)
        m = ErrorTests.tinyBPE()
        m.set("tokenizer.ggml.model", .uint32(2))
        expectError(.malformedKey(key: "tokenizer.ggml.model", reason: "it holds u32, expected a string"), m)
        m = ErrorTests.tinyBPE()
        m.set("tokenizer.ggml.model", .string("llama"))
        m.set("tokenizer.ggml.scores", .array(.float32([0, 1])))
        expectError(.malformedKey(key: "tokenizer.ggml.scores", reason: "it has 2 entries for 261 tokens"), m)
    }

    @Test("unsupported model and pre-tokenizer names")
    func unsupported() {
        var m = ErrorTests.tinyBPE()
        m.set("tokenizer.ggml.model", .string("bert"))
        expectError(.unsupportedModel("bert"), m)
        m = ErrorTests.tinyBPE()
        m.set("tokenizer.ggml.pre", .string("no-such-pre"))
        expectError(.unsupportedPreTokenizer("no-such-pre"), m)
        #expect(TokenizerError.unsupportedPreTokenizer("x").description.contains("smollm"))
    }

    @Test("a missing pre-tokenizer name means llama.cpp's default")
    func defaultPre() throws {
        var m = ErrorTests.tinyBPE()
        m.remove("tokenizer.ggml.pre")
        let t = try Tokenizer(metadata: m)
        #expect(t.preTokenizer == .default)
    }

    @Test("out-of-range special ids are ignored, invalid ids decode to nothing")
    func outOfRange() throws {
        var m = ErrorTests.tinyBPE()
        m.set("tokenizer.ggml.bos_token_id", .uint32(100_000))
        m.set("tokenizer.ggml.eos_token_id", .uint32(260))
        let t = try Tokenizer(metadata: m)
        #expect(t.bosID == 11)
        #expect(t.eosID == 260)
        #expect(t.decode([-1, 259, 9999]) == "hello")
        #expect(t.tokenBytes(-5).isEmpty)
        #expect(t.tokenType(9999) == .undefined)
        #expect(t.tokenText(9999) == "")
    }

    @Test("a file without a vocabulary gives a typed error")
    func kernelsFixture() throws {
        // kquants-sample.gguf holds tensors only.
        let file = try GGUFFile(path: TestFixtures.path("models/kquants-sample.gguf"))
        #expect(throws: TokenizerError.missingKey("tokenizer.ggml.model")) { try Tokenizer(gguf: file) }
    }
}
