import Foundation
import Testing

@testable import Tokenizers
@testable import leap_ref

/// Every test string of every vocabulary tokenizes to exactly llama.cpp's ids.
@Suite("llama.cpp vocabulary vectors")
struct VocabVectorTests {
    @Test("fixture files are present and consistent", arguments: VocabFixture.allCases)
    func fixtures(_ vocab: VocabFixture) throws {
        let inp = try String(contentsOfFile: vocab.inputPath, encoding: .utf8)
        let out = try String(contentsOfFile: vocab.outputPath, encoding: .utf8)
        #expect(VocabTest.inputs(inp).count == 46)
        #expect(VocabTest.expectedIDs(out).count == 46)
    }

    @Test("encode matches llama.cpp", arguments: VocabCase.all)
    func encode(_ c: VocabCase) throws {
        let tokenizer = try c.vocab.tokenizer()
        let ids = tokenizer.encode(c.text, addSpecial: false, parseSpecial: false)
        #expect(ids == c.expected)
    }
}
