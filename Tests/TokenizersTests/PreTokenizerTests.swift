import Foundation
import TestSupport
import Testing

@testable import Tokenizers

/// The hand-written scanners against Python's `regex` module running llama.cpp's regexes
/// (fixture made by scripts/gen-pretokenizer-fixture.py).
@Suite("pre-tokenizers")
struct PreTokenizerTests {
    struct Entry: Decodable {
        let text: String
        let pieces: [String: [String]]
    }

    static let entries: [Entry] = {
        guard let data = try? Data(contentsOf: URL(fileURLWithPath: TestFixtures.path("tokenizer/pretokenizer-pieces.json"))) else {
            return []
        }
        return (try? JSONDecoder().decode([Entry].self, from: data)) ?? []
    }()

    @Test("fixture is present")
    func fixture() {
        #expect(PreTokenizerTests.entries.count == 53)
    }

    @Test("pieces equal the regex engine's", arguments: PreTokenizer.allCases)
    func pieces(_ kind: PreTokenizer) throws {
        for entry in PreTokenizerTests.entries {
            let expected = try #require(entry.pieces[kind.rawValue])
            let cps = entry.text.utf8CString.withUnsafeBufferPointer { raw in
                raw.withMemoryRebound(to: UInt8.self) { CodePoints(UnsafeBufferPointer(rebasing: $0.dropLast())) }
            }
            var ends: [Int32] = []
            kind.split(cps, 0, cps.count, into: &ends)
            var pieces: [String] = []
            var start = 0
            for end in ends {
                pieces.append(String(String.UnicodeScalarView(cps.values[start..<Int(end)].map { Unicode.Scalar($0)! })))
                start = Int(end)
            }
            #expect(pieces == expected, "\(kind) on \(entry.text.debugDescription)")
        }
    }

    @Test("pre-tokenize through the public API")
    func publicAPI() throws {
        let smol = try VocabFixture.smolLM2.tokenizer()
        #expect(smol.preTokenizer == .smollm)
        #expect(smol.preTokenize("Hello world 123!") == ["Hello", " world", " ", "1", "2", "3", "!"])
        let llama3 = try VocabFixture.llamaBPE.tokenizer()
        #expect(llama3.preTokenize("Hello world 12345!") == ["Hello", " world", " ", "123", "45", "!"])
        #expect(try VocabFixture.llamaSPM.tokenizer().preTokenize("Hello") == [])
    }

    @Test("pre-tokenizer names map as in llama.cpp")
    func names() {
        #expect(PreTokenizer.settings(forGGUFName: "lfm2")?.preTokenizer == .llama3)
        #expect(PreTokenizer.settings(forGGUFName: "llama-bpe")?.ignoreMerges == true)
        #expect(PreTokenizer.settings(forGGUFName: "smollm")?.preTokenizer == .smollm)
        #expect(PreTokenizer.settings(forGGUFName: "smollm")?.cleanSpaces == false)
        #expect(PreTokenizer.settings(forGGUFName: "gpt-2")?.preTokenizer == .gpt2)
        #expect(PreTokenizer.settings(forGGUFName: "qwen2")?.preTokenizer == .qwen2)
        #expect(PreTokenizer.settings(forGGUFName: "default")?.preTokenizer == .default)
        #expect(PreTokenizer.settings(forGGUFName: "tekken") == nil)
        for name in PreTokenizer.supportedGGUFNames {
            #expect(PreTokenizer.settings(forGGUFName: name) != nil, "\(name)")
        }
    }
}
