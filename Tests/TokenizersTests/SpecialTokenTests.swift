import Foundation
import GGUF
import TestSupport
import Testing

@testable import Tokenizers

@Suite("special tokens")
struct SpecialTokenTests {
    @Test("ChatML markers become single tokens when parsing specials (SmolLM2)")
    func chatML() throws {
        let tokenizer = try VocabFixture.smolLM2.tokenizer()
        let text = "<|im_start|>user\nhi<|im_end|>"
        #expect(tokenizer.encode(text, addSpecial: false, parseSpecial: true) == [1, 4093, 198, 6004, 2])
        // As plain text the markers are spelled out.
        let plain = tokenizer.encode(text, addSpecial: false, parseSpecial: false)
        #expect(!plain.contains(1) && !plain.contains(2))
        #expect(tokenizer.decode(plain) == text)
        // SmolLM2 does not add BOS (tokenizer.ggml.add_bos_token = false).
        #expect(tokenizer.addBOS == false)
        #expect(tokenizer.encode(text, addSpecial: true, parseSpecial: true) == [1, 4093, 198, 6004, 2])
    }

    struct Golden: Decodable {
        let prompt: String
        let tokens: [TokenID]
    }

    @Test(
        "llama.cpp's prompt tokens of the golden files",
        arguments: [
            "smollm2-q4_1.chat", "smollm2-q4_1.long", "smollm2-q4_1.plain",
            "lfm2-tiny.chat", "lfm2-tiny.long", "lfm2-tiny.plain", "lfm2-tiny.lfm2chat"
        ])
    func golden(_ name: String) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: TestFixtures.path("tokenizer/golden/\(name).json")))
        let golden = try JSONDecoder().decode(Golden.self, from: data)
        let tokenizer: Tokenizer
        if name.hasPrefix("lfm2-tiny") {
            tokenizer = try Tokenizer(gguf: GGUFFile(path: TestFixtures.path("models/lfm2-tiny.gguf")))
        } else {
            tokenizer = try VocabFixture.smolLM2.tokenizer()
        }
        #expect(tokenizer.encode(golden.prompt, addSpecial: false, parseSpecial: true) == golden.tokens)
        #expect(tokenizer.decode(golden.tokens, renderSpecial: true, cleanSpaces: false) == golden.prompt)
    }

    @Test("LFM2 adds its BOS <|startoftext|>")
    func lfm2BOS() throws {
        let tokenizer = try Tokenizer(gguf: GGUFFile(path: TestFixtures.path("models/lfm2-tiny.gguf")))
        #expect(tokenizer.bosID == 49152)
        #expect(tokenizer.addBOS)
        #expect(tokenizer.encode("Hi", addSpecial: true).first == 49152)
        #expect(tokenizer.isControl(49155))  // <|tool_call_start|>
    }

    @Test("BOS/EOS per metadata")
    func addSpecial() throws {
        let spm = try VocabFixture.llamaSPM.tokenizer()
        #expect(spm.encode("Hello", addSpecial: true) == [1, 15043])
        #expect(spm.encode("", addSpecial: true) == [1])
        #expect(spm.encode("", addSpecial: false) == [])
        let llama3 = try VocabFixture.llamaBPE.tokenizer()
        #expect(llama3.addBOS)  // the llama-bpe pre-tokenizer adds BOS by default
        #expect(llama3.encode("Hello", addSpecial: true) == [128000, 9906])
        let gpt2 = try VocabFixture.gpt2.tokenizer()
        #expect(gpt2.encode("Hello", addSpecial: true) == [15496])
    }

    @Test("end-of-generation tokens as llama.cpp determines them")
    func endOfGeneration() throws {
        let smol = try VocabFixture.smolLM2.tokenizer()
        #expect(smol.eosID == 2)
        #expect(smol.eotID == 2)  // <|im_end|>
        // <|endoftext|>, <|im_end|>, and <reponame>, which llama.cpp takes for the
        // fill-in-the-middle "repo" marker (Granite's spelling) and so for an end of generation.
        #expect(smol.endOfGenerationIDs == [0, 2, 4])
        #expect(smol.isEndOfGeneration(2) && !smol.isEndOfGeneration(1))
        let llama3 = try VocabFixture.llamaBPE.tokenizer()
        #expect(llama3.eotID == 128009)  // <|eot_id|>
        #expect(llama3.endOfGenerationIDs == [128001, 128009])
        let qwen = try VocabFixture.qwen2.tokenizer()
        // <|endoftext|>, <|im_end|>, and the ordinary token "</s>" (128247), which llama.cpp
        // treats as an end-of-generation marker by its text (and so as a control token).
        #expect(qwen.endOfGenerationIDs == [151643, 151645, 128247])
        #expect(qwen.isControl(128247))
        let phi3 = try VocabFixture.phi3.tokenizer()
        #expect(phi3.eotID == 32007)  // <|end|>
        #expect(phi3.endOfGenerationIDs == [2, 32000, 32007])
        let gpt2 = try VocabFixture.gpt2.tokenizer()
        #expect(gpt2.endOfGenerationIDs == [50256])
        #expect(gpt2.bosID == 50256 && gpt2.eosID == 50256)
    }

    @Test("user-defined tokens are matched even without special parsing")
    func userDefined() throws {
        let qwen = try VocabFixture.qwen2.tokenizer()
        #expect(qwen.tokenType(151646) == .userDefined)  // [PAD151646]
        let ids = qwen.encode("a[PAD151646]b", addSpecial: false, parseSpecial: false)
        #expect(ids.contains(151646))
        #expect(qwen.decode(ids) == "a[PAD151646]b")
        // Control tokens are not.
        #expect(!qwen.encode("<|im_start|>", addSpecial: false, parseSpecial: false).contains(151644))
        #expect(qwen.encode("<|im_start|>", addSpecial: false, parseSpecial: true) == [151644])
    }

    @Test("Phi-3: special tokens swallow the whitespace after them (rstrip)")
    func phi3RStrip() throws {
        let phi3 = try VocabFixture.phi3.tokenizer()
        let hello = phi3.encode("Hello", addSpecial: false)
        #expect(phi3.encode("<|user|>\n  Hello", addSpecial: false, parseSpecial: true) == [32010] + hello)
        // </s> is user-defined in this vocabulary, but llama.cpp adds the control flag to
        // every end-of-generation spelling: it is then matched only when parsing specials.
        #expect(phi3.tokenType(2) == .control)
        #expect(phi3.encode("</s> Hello", addSpecial: false, parseSpecial: true) == [2] + hello)
        #expect(!phi3.encode("</s> Hello", addSpecial: false, parseSpecial: false).contains(2))
    }

    @Test("longest special token wins")
    func longestFirst() throws {
        let llama3 = try VocabFixture.llamaBPE.tokenizer()
        // <|reserved_special_token_10|> contains the text of no shorter token, but
        // <|reserved_special_token_1|> is a prefix of it.
        #expect(llama3.encode("<|reserved_special_token_10|>", addSpecial: false, parseSpecial: true) == [128015])
        #expect(llama3.encode("x<|eot_id|><|eot_id|>y", addSpecial: false, parseSpecial: true).filter { $0 == 128009 }.count == 2)
    }
}

@Suite("sharing")
struct SharingTests {
    @Test("one tokenizer used from many tasks at once gives the same ids")
    func concurrentEncode() async throws {
        let tokenizer = try VocabFixture.smolLM2.tokenizer()
        let cases = VocabFixture.smolLM2.cases
        let results = await withTaskGroup(of: (Int, [TokenID]).self) { group in
            for _ in 0..<4 {
                for c in cases {
                    group.addTask { (c.index, tokenizer.encode(c.text, addSpecial: false)) }
                }
            }
            var all: [(Int, [TokenID])] = []
            for await r in group { all.append(r) }
            return all
        }
        #expect(results.count == cases.count * 4)
        for (index, ids) in results {
            #expect(ids == cases[index].expected)
        }
    }

    @Test("description names the model and special tokens")
    func description() throws {
        let tokenizer = try VocabFixture.smolLM2.tokenizer()
        #expect(
            tokenizer.description
                == #"Tokenizer(gpt2, pre-tokenizer smollm ('smollm'), 49152 tokens, BOS 1 "<|im_start|>", EOS 2 "<|im_end|>", EOT 2 "<|im_end|>", end of generation [0, 2, 4])"#
        )
    }
}
