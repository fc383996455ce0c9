import Foundation
import Testing

@testable import Tokenizers

/// Decoding gives the text back, and streaming decoding gives the same text without ever
/// emitting half a character.
@Suite("decoding")
struct RoundTripTests {
    @Test("decode(encode(s)) == s without space clean-up", arguments: VocabCase.all)
    func roundTrip(_ c: VocabCase) throws {
        let tokenizer = try c.vocab.tokenizer()
        let ids = tokenizer.encode(c.text, addSpecial: false)
        #expect(tokenizer.decode(ids, cleanSpaces: false) == c.text)
        // Decoding llama.cpp's ids (the .out file) gives the same.
        #expect(tokenizer.decode(c.expected, cleanSpaces: false) == c.text)
    }

    @Test("decode with the model's default clean-up changes only what llama.cpp's does", arguments: VocabCase.all)
    func defaultDecode(_ c: VocabCase) throws {
        let tokenizer = try c.vocab.tokenizer()
        let decoded = tokenizer.decode(c.expected)
        if tokenizer.cleanSpaces {
            var bytes = Array(c.text.utf8)
            Tokenizer.cleanUpSpaces(&bytes)
            #expect(decoded == String(decoding: bytes, as: UTF8.self))
        } else {
            #expect(decoded == c.text)
        }
    }

    @Test("streaming decode emits whole characters only and the same text", arguments: VocabCase.all)
    func streaming(_ c: VocabCase) throws {
        let tokenizer = try c.vocab.tokenizer()
        var detokenizer = StreamingDetokenizer(tokenizer: tokenizer, stripLeadingSpace: tokenizer.addSpacePrefix)
        var text = ""
        for id in c.expected {
            let chunk = detokenizer.append(id)
            #expect(!chunk.unicodeScalars.contains("\u{FFFD}"), "token \(id) produced a broken character")
            text += chunk
        }
        text += detokenizer.finish()
        #expect(text == c.text)
    }

    @Test("an emoji split over byte tokens is held back until complete")
    func emojiAcrossByteTokens() throws {
        let tokenizer = try VocabFixture.llamaSPM.tokenizer()
        // "🚀" is not in the Llama 2 vocabulary: it is encoded as four byte tokens.
        let ids = tokenizer.encode("🚀", addSpecial: false)
        #expect(ids == [29871, 243, 162, 157, 131])
        var detokenizer = StreamingDetokenizer(tokenizer: tokenizer)
        #expect(detokenizer.append(ids[0]) == " ")
        #expect(detokenizer.append(ids[1]) == "")
        #expect(detokenizer.pendingBytes == [0xF0])
        #expect(detokenizer.append(ids[2]) == "")
        #expect(detokenizer.append(ids[3]) == "")
        #expect(detokenizer.append(ids[4]) == "🚀")
        #expect(detokenizer.finish() == "")
    }

    @Test("CJK and emoji split across byte-level BPE tokens")
    func cjkAcrossBPETokens() throws {
        let tokenizer = try VocabFixture.gpt2.tokenizer()
        let text = "我想在apple工作1314151天～ 🚀 (normal)"
        let ids = tokenizer.encode(text, addSpecial: false)
        // Some tokens carry only part of a character.
        #expect(ids.contains { String(validating: tokenizer.tokenBytes($0), as: UTF8.self) == nil })
        var detokenizer = StreamingDetokenizer(tokenizer: tokenizer)
        var chunks: [String] = []
        for id in ids { chunks.append(detokenizer.append(id)) }
        chunks.append(detokenizer.finish())
        #expect(chunks.joined() == text)
        #expect(!chunks.joined().unicodeScalars.contains("\u{FFFD}"))
    }

    @Test("an unfinished character is flushed as U+FFFD by finish()")
    func flushIncomplete() throws {
        let tokenizer = try VocabFixture.llamaSPM.tokenizer()
        var detokenizer = StreamingDetokenizer(tokenizer: tokenizer)
        #expect(detokenizer.append(243) == "")  // <0xF0>
        #expect(detokenizer.append(162) == "")  // <0x9F>
        #expect(detokenizer.finish() == "\u{FFFD}")
        // A stray continuation byte is not held (it can never become valid).
        #expect(detokenizer.append(162) == "\u{FFFD}")
    }

    @Test("complete-prefix rule")
    func completePrefix() {
        #expect(StreamingDetokenizer.completePrefixLength([]) == 0)
        #expect(StreamingDetokenizer.completePrefixLength([0x41]) == 1)
        #expect(StreamingDetokenizer.completePrefixLength([0x41, 0xE6]) == 1)
        #expect(StreamingDetokenizer.completePrefixLength([0x41, 0xE6, 0x88]) == 1)
        #expect(StreamingDetokenizer.completePrefixLength([0x41, 0xE6, 0x88, 0x91]) == 4)
        #expect(StreamingDetokenizer.completePrefixLength([0xF0, 0x9F, 0x9A]) == 0)
        #expect(StreamingDetokenizer.completePrefixLength([0xF0, 0x9F, 0x9A, 0x80]) == 4)
        #expect(StreamingDetokenizer.completePrefixLength([0xFF]) == 1)
        #expect(StreamingDetokenizer.completePrefixLength([0x80, 0x80, 0x80, 0x80]) == 4)
    }

    @Test("control tokens are hidden unless rendered")
    func controlRendering() throws {
        let tokenizer = try VocabFixture.smolLM2.tokenizer()
        let ids: [TokenID] = [1, 4093, 198, 6004, 2]
        #expect(tokenizer.decode(ids) == "user\nhi")
        #expect(tokenizer.decode(ids, renderSpecial: true) == "<|im_start|>user\nhi<|im_end|>")
        #expect(tokenizer.tokenBytes(1).isEmpty)
        #expect(tokenizer.tokenBytes(1, renderSpecial: true) == Array("<|im_start|>".utf8))
        #expect(tokenizer.piece(for: 2) == "<|im_end|>")
        #expect(tokenizer.piece(for: 2, renderSpecial: false) == "")
    }

    @Test("SentencePiece: leading space and BOS handling in decode")
    func spmDecode() throws {
        let tokenizer = try VocabFixture.llamaSPM.tokenizer()
        let ids = tokenizer.encode("Hello world", addSpecial: true)
        #expect(ids == [1, 15043, 3186])
        // The leading space is dropped from the first token only, as llama.cpp does: a
        // leading BOS (hidden or not) uses up the rule, and so does removeSpecial.
        #expect(tokenizer.decode(Array(ids.dropFirst())) == "Hello world")
        #expect(tokenizer.decode(ids) == " Hello world")
        #expect(tokenizer.decode(ids, renderSpecial: true) == "<s> Hello world")
        #expect(tokenizer.decode(ids, removeSpecial: true) == " Hello world")
        #expect(tokenizer.tokenBytes(13) == [0x0A])  // <0x0A>
        #expect(tokenizer.tokenText(13) == "<0x0A>")
        #expect(tokenizer.tokenBytes(15043) == Array(" Hello".utf8))
    }

    @Test("clean-up of spaces follows llama.cpp")
    func cleanUp() {
        func clean(_ s: String) -> String {
            var b = Array(s.utf8)
            Tokenizer.cleanUpSpaces(&b)
            return String(decoding: b, as: UTF8.self)
        }
        #expect(clean("Hello , world !") == "Hello, world!")
        #expect(clean("it ' s") == "it's")
        #expect(clean("we 're here , they 've gone and I 'm done ; don 't") == "we're here, they've gone and I'm done ; don 't")
        #expect(clean("") == "")
        #expect(clean(" .") == ".")
    }

    @Test("the whole vocabulary's bytes")
    func allTokenBytes() throws {
        let tokenizer = try VocabFixture.gpt2.tokenizer()
        let all = tokenizer.allTokenBytes()
        #expect(all.count == 50257)
        #expect(all[220] == [0x20])  // "Ġ"
        #expect(all[198] == [0x0A])  // "Ċ"
        #expect(all[50256].isEmpty)  // <|endoftext|>, a control token
        #expect(tokenizer.allTokenBytes(renderSpecial: true)[50256] == Array("<|endoftext|>".utf8))
        // Every one of the 256 bytes is some token's bytes.
        let singles = Set(all.filter { $0.count == 1 }.map { $0[0] })
        #expect(singles.count == 256)
    }
}
