import Foundation
import LeapJSON
import Testing

@testable import Grammar

/// SmolLM2's vocabulary (49,152 byte-level BPE tokens and LFM2's control tokens), dumped by
/// scripts/dump_vocab.py from the lfm2-tiny fixture.
let smolVocabulary: TokenVocabulary = {
    let text = try! String(contentsOf: fixtureURL("smollm2-vocab.txt"), encoding: .utf8)
    return TokenVocabulary.parseDump(text)!
}()

/// The mask computed by brute force: every token checked byte by byte against the matcher.
func bruteForceMask(_ m: GrammarMatcher, _ v: TokenVocabulary) -> [Int] {
    var out: [Int] = []
    for (id, t) in v.tokens.enumerated() {
        if v.specialTokens.contains(id) {
            if m.canAcceptEnd { out.append(id) }
            continue
        }
        if !t.isEmpty && m.wouldAccept(t) { out.append(id) }
    }
    return out
}

@Suite struct TokenMaskTests {
    @Test func trieHoldsEveryToken() {
        let v = TokenVocabulary(tokens: [[0x61], [0x61, 0x62], [0x62], [0x61, 0x62], [], [0x3C, 0x73, 0x3E]], specialTokens: [5])
        #expect(v.nodeCount == 4)  // root, a, ab, b
        let tok = GreedyTokenizer(vocabulary: v)
        #expect(tok.tokenize("abba").map { v.tokens[$0] } == [[0x61, 0x62], [0x62], [0x61]])
    }

    /// Masks equal brute force on a vocabulary subset, along valid documents, for schemas that
    /// exercise every terminal kind and the length/pattern/exclusion shortcuts.
    @Test func masksMatchBruteForce() throws {
        // A subset keeps the brute force fast in debug builds: all single bytes, punctuation-rich
        // tokens, and a sample of the rest.
        let full = smolVocabulary
        var tokens: [[UInt8]] = []
        var special = Set<Int>()
        for (id, t) in full.tokens.enumerated()
        where id % 9 == 0 || t.count == 1 || t.contains(where: { "\"{}[],:\\ 0123456789".utf8.contains($0) }) {
            if full.specialTokens.contains(id) { special.insert(tokens.count) }
            tokens.append(t)
        }
        let vocab = TokenVocabulary(tokens: tokens, specialTokens: special)
        let computer = TokenMaskComputer(vocabulary: vocab)
        let cases: [(String, String)] = [
            (
                #"{"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 130}, "tags": {"type": "array", "items": {"enum": ["a", "b\"c"]}}}, "required": ["name"]}"#,
                #"{"name": "Ann \"A\" é", "age": 42, "extra": {"k": [1.5e3, null]}, "tags": ["a", "b\"c"]}"#
            ),
            (#"{"type": "array", "items": {"type": "string", "pattern": "^[a-z]+[0-9]?$", "minLength": 2}}"#, #"["abc1", "zz"]"#),
            (
                #"{"type": "object", "additionalProperties": {"type": "number"}, "properties": {"x": {"const": 1}}}"#,
                #"{"xy": -0.5, "x": 1, "z": 10}"#
            ),
            (#"{"anyOf": [{"type": "string", "format": "date"}, {"type": "boolean"}]}"#, #""2024-02-29""#)
        ]
        var grammars = try cases.map { (try JSONSchemaCompiler.compile($0.0), $0.0, $0.1) }
        var limited = JSONSchemaCompiler.Options()
        limited.maxWhitespaceRun = 2
        grammars.append((try JSONSchemaCompiler.compile("true", options: limited), "true, maxWhitespaceRun 2", "{\"k\":  [1, \n\"v\"]}"))
        let gbnf = #"""
            root ::= "[" call (", " call)* "]"
            call ::= [a-z_]+ "(" ([a-z]+ "=" ("\"" [^"\\]* "\"" | [0-9]+))? ")"
            """#
        grammars.append((try GBNF.parse(gbnf), gbnf, #"[get_weather(city="Zürich 12"), now()]"#))
        for (g, schema, doc) in grammars {
            let m = GrammarMatcher(grammar: g)
            let bytes = Array(doc.utf8)
            var checked = 0
            for i in 0...bytes.count {
                if i > 0 { #expect(m.accept(byte: bytes[i - 1]), "\(doc) at \(i)") }
                // Check at a sample of positions (all of them is slow in debug builds).
                if i % 3 != 0 && i != bytes.count { continue }
                let fast = computer.mask(for: m).allowed
                let slow = bruteForceMask(m, vocab)
                #expect(fast == slow, "\(schema) after \(String(decoding: bytes[..<i], as: UTF8.self))")
                checked += 1
            }
            #expect(m.canAcceptEnd)
            #expect(checked > 3)
        }
    }

    /// The walk of a plain string is cached without its scalar count, and length-bounded
    /// strings read the counts it records as relative: a walk from a string already two scalars
    /// long must not leave its count in the cache (found by the fuzzer: `"ab\` then `n` was
    /// refused under maxLength 3 after a plain string had been seen in the same state).
    @Test func cachedStringWalksAreRelativeToTheirCount() throws {
        let computer = TokenMaskComputer(vocabulary: smolVocabulary)
        let plain = GrammarMatcher(grammar: try JSONSchemaCompiler.compile(#"{"type": ["integer", "string"]}"#))
        #expect(plain.accept(#""ab"#))
        _ = computer.mask(for: plain)
        let bounded = GrammarMatcher(grammar: try JSONSchemaCompiler.compile(#"{"maxLength": 3}"#))
        #expect(bounded.accept(#""ab"#))
        #expect(computer.mask(for: bounded).allowed == bruteForceMask(bounded, smolVocabulary))
    }

    @Test func applyAndSingle() {
        var m = TokenMask(count: 130)
        m[3] = true
        #expect(m.single == 3 && m.allowedCount == 1)
        m[129] = true
        #expect(m.single == nil && m.allowed == [3, 129])
        var logits = [Float](repeating: 1, count: 130)
        m.apply(to: &logits)
        #expect(logits[3] == 1 && logits[129] == 1 && logits[0] == -.infinity && logits[128] == -.infinity)
    }

    @Test func specialTokensOnlyAtTheEnd() throws {
        let g = try JSONSchemaCompiler.compile(#"{"type": "integer"}"#)
        let computer = TokenMaskComputer(vocabulary: smolVocabulary)
        let m = GrammarMatcher(grammar: g)
        let eos = 0  // <|endoftext|>
        #expect(smolVocabulary.specialTokens.contains(eos))
        #expect(!computer.mask(for: m)[eos])
        m.accept("7")
        #expect(computer.mask(for: m)[eos])
    }

    /// A sample of maskbench-dev through the MaskBench protocol: never accept an invalid instance.
    @Test func maskBenchSample() throws {
        let results = try maskBench("maskbench-sample")
        #expect(results.count >= 20)
        for (name, outcome) in results {
            let o = try #require(outcome, "\(name) did not compile")
            #expect(!o.invalidationError && !o.validationError && o.maskInconsistencies == 0, "\(name): tests \(o.wrongTests)")
        }
    }
}

/// Every MaskBench file of a fixture directory through the protocol, with SmolLM2's
/// vocabulary and greedy tokenization: the outcome per file, nil when it did not compile.
func maskBench(_ directory: String, options: JSONSchemaCompiler.Options = .init()) throws -> [(String, MaskBench.Outcome?)] {
    let dir = fixtureURL(directory)
    let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".json") }.sorted()
    let computer = TokenMaskComputer(vocabulary: smolVocabulary)
    let tokenizer = GreedyTokenizer(vocabulary: smolVocabulary)
    var out: [(String, MaskBench.Outcome?)] = []
    for f in files {
        let text = try String(contentsOf: dir.appendingPathComponent(f), encoding: .utf8)
        let file = try #require(MaskBench.File(text: text), "\(f) is not a MaskBench file")
        guard let grammar = try? JSONSchemaCompiler.compile(file.schema, options: options) else {
            out.append((f, nil))
            continue
        }
        out.append(
            (
                f,
                MaskBench.check(file, grammar: grammar, vocabulary: smolVocabulary, tokenize: tokenizer.tokenize, mask: computer.mask(for:))
            ))
    }
    return out
}
