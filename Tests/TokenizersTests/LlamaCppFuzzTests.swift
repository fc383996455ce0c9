import Foundation
import GGUF
import TestSupport
import Testing

@testable import Tokenizers

/// llama.cpp's own results (through llama-cpp-python, `scripts/gen-llamacpp-fuzz.py`) for
/// random strings: mixed scripts, whitespace runs, digits, contractions, special-token
/// texts, random code points. For each vocabulary: ids without specials, ids with BOS and
/// special parsing, and `llama_detokenize` of both (plain, rendered, with specials removed).
@Suite("llama.cpp random strings")
struct LlamaCppFuzzTests {
    struct Case: Decodable {
        let text: String
        let plain: [TokenID]
        let special: [TokenID]
        let detok: String
        let detok_special: String
        let detok_remove: String
    }

    /// Bytes of a hex string.
    static func bytes(_ hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var it = hex.utf8.makeIterator()
        while let a = it.next(), let b = it.next() {
            out.append(UInt8(String(decoding: [a, b], as: UTF8.self), radix: 16)!)
        }
        return out
    }

    struct Vocab: Decodable {
        let eog: [TokenID]
        let bos: TokenID
        let eos: TokenID
        let eot: TokenID
        let cases: [Case]
    }

    static let data: [String: Vocab] = {
        guard let data = try? Data(contentsOf: URL(fileURLWithPath: TestFixtures.path("tokenizer/llamacpp-fuzz.json"))) else { return [:] }
        return (try? JSONDecoder().decode([String: Vocab].self, from: data)) ?? [:]
    }()

    static func tokenizer(_ name: String) throws -> Tokenizer {
        if name == "lfm2-tiny" { return try Tokenizer(gguf: GGUFFile(path: TestFixtures.path("models/lfm2-tiny.gguf"))) }
        return try VocabFixture(rawValue: name)!.tokenizer()
    }

    static let names = ["gpt-2", "llama-bpe", "qwen2", "llama-spm", "phi-3", "smollm2", "lfm2-tiny"]

    @Test("fixture is present")
    func fixture() {
        #expect(Set(LlamaCppFuzzTests.data.keys) == Set(LlamaCppFuzzTests.names))
    }

    @Test("ids, special parsing and detokenization equal llama.cpp's", arguments: names)
    func compare(_ name: String) throws {
        let vocab = try #require(LlamaCppFuzzTests.data[name])
        let tokenizer = try LlamaCppFuzzTests.tokenizer(name)
        #expect(tokenizer.endOfGenerationIDs == Set(vocab.eog))
        #expect(tokenizer.bosID == vocab.bos)
        #expect(tokenizer.eosID == vocab.eos)
        if name == "smollm2" || name == "lfm2-tiny" {
            // Both <|im_end|> (2) and <|endoftext|> (0) are EOT spellings; llama.cpp takes
            // whichever its hash map yields first (0 with libstdc++), we take <|im_end|>.
            // Both are end-of-generation tokens either way.
            #expect(vocab.eot == 0 && tokenizer.eotID == 2)
        } else {
            #expect((tokenizer.eotID ?? -1) == vocab.eot)
        }
        var mismatches = 0
        for (i, c) in vocab.cases.enumerated() where mismatches < 10 {
            let plain = tokenizer.encode(c.text, addSpecial: false, parseSpecial: false)
            let special = tokenizer.encode(c.text, addSpecial: true, parseSpecial: true)
            let ok =
                plain == c.plain && special == c.special
                && tokenizer.decodeBytes(c.plain) == Self.bytes(c.detok)
                && tokenizer.decodeBytes(c.special, renderSpecial: true) == Self.bytes(c.detok_special)
                && tokenizer.decodeBytes(c.special, removeSpecial: true) == Self.bytes(c.detok_remove)
            if !ok {
                mismatches += 1
                #expect(plain == c.plain, "#\(i) \(c.text.debugDescription)")
                #expect(special == c.special, "#\(i) special \(c.text.debugDescription)")
                #expect(tokenizer.decodeBytes(c.plain) == Self.bytes(c.detok), "#\(i) detok \(c.text.debugDescription)")
                #expect(tokenizer.decodeBytes(c.special, renderSpecial: true) == Self.bytes(c.detok_special), "#\(i) detok special")
                #expect(tokenizer.decodeBytes(c.special, removeSpecial: true) == Self.bytes(c.detok_remove), "#\(i) detok remove")
            }
        }
    }
}
