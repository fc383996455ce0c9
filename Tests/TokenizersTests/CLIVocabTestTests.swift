import Foundation
import Testing

@testable import Tokenizers
@testable import leap_ref

/// `leap-ref tokenize --vocab-test FILE.inp` prints `VocabTest.run`; its output must be
/// the `.out` file byte for byte.
@Suite("vocab-test output")
struct CLIVocabTestTests {
    @Test("VocabTest.run reproduces the .out file", arguments: VocabFixture.allCases)
    func outFile(_ vocab: VocabFixture) throws {
        let tokenizer = try vocab.tokenizer()
        let inp = try String(contentsOfFile: vocab.inputPath, encoding: .utf8)
        let out = try String(contentsOfFile: vocab.outputPath, encoding: .utf8)
        #expect(VocabTest.run(tokenizer, inp: inp) == out)
    }

    @Test("format helpers")
    func helpers() {
        #expect(VocabTest.inputs("a\n__ggml_vocab_test__\n\n__ggml_vocab_test__\n") == ["a", ""])
        #expect(VocabTest.outputLine([1, 22, 333]) == " 1 22 333")
        #expect(VocabTest.outputLine([]) == "")
        #expect(VocabTest.expectedIDs(" 1 2\n\n 3\n") == [[1, 2], [], [3]])
    }
}
