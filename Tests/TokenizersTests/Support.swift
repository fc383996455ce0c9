import Foundation
import GGUF
import TestSupport
import Testing

@testable import Tokenizers
@testable import leap_ref

/// The vocabularies of `Tests/Fixtures/tokenizer` (llama.cpp's test vocabularies) and
/// SmolLM2's own, each with its test strings and the ids llama.cpp produces.
enum VocabFixture: String, CaseIterable, Sendable {
    case gpt2 = "gpt-2"
    case llamaBPE = "llama-bpe"
    case qwen2 = "qwen2"
    case llamaSPM = "llama-spm"
    case phi3 = "phi-3"
    case smolLM2 = "smollm2"

    /// The GGUF holding the vocabulary (SmolLM2's is the real model from the model cache).
    func modelPath() throws -> String {
        switch self {
        case .smolLM2: return try TestFixtures.require(TestFixtures.smolLM2Q4_1)
        default: return TestFixtures.path("tokenizer/ggml-vocab-\(rawValue).gguf")
        }
    }

    var inputPath: String {
        self == .smolLM2 ? TestFixtures.path("tokenizer/smollm2.inp") : TestFixtures.path("tokenizer/ggml-vocab-\(rawValue).gguf.inp")
    }

    var outputPath: String {
        self == .smolLM2 ? TestFixtures.path("tokenizer/smollm2.inp.out") : TestFixtures.path("tokenizer/ggml-vocab-\(rawValue).gguf.out")
    }

    /// The test strings paired with their expected ids.
    var cases: [VocabCase] {
        guard let inp = try? String(contentsOfFile: inputPath, encoding: .utf8),
            let out = try? String(contentsOfFile: outputPath, encoding: .utf8)
        else { return [] }
        let inputs = VocabTest.inputs(inp)
        let expected = VocabTest.expectedIDs(out)
        return inputs.indices.map {
            VocabCase(vocab: self, index: $0, text: $0 < inputs.count ? inputs[$0] : "", expected: $0 < expected.count ? expected[$0] : [])
        }
    }

    /// The tokenizer, loaded once per test process.
    func tokenizer() throws -> Tokenizer {
        try TokenizerCache.shared.get(self)
    }
}

struct VocabCase: Sendable, CustomTestStringConvertible {
    let vocab: VocabFixture
    let index: Int
    let text: String
    let expected: [TokenID]

    var testDescription: String {
        let shown = text.count > 40 ? String(text.prefix(40)) + "…" : text
        return "\(vocab.rawValue) #\(index) \(shown.debugDescription)"
    }

    static var all: [VocabCase] { VocabFixture.allCases.flatMap(\.cases) }
}

/// Tokenizers loaded once per test process, by GGUF path (the large vocabularies take a
/// noticeable time to build in debug builds).
final class TokenizerCache: @unchecked Sendable {
    static let shared = TokenizerCache()
    private let lock = NSLock()
    private var loaded: [String: Tokenizer] = [:]

    func get(_ fixture: VocabFixture) throws -> Tokenizer {
        try get(path: fixture.modelPath())
    }

    func get(path: String) throws -> Tokenizer {
        lock.lock()
        defer { lock.unlock() }
        if let t = loaded[path] { return t }
        let t = try Tokenizer(gguf: GGUFFile(path: path))
        loaded[path] = t
        return t
    }
}
