import Sampling
import Testing

@testable import Grammar

/// The shortcuts of the token masks' walks give the general automata's verdicts.
@Suite struct DFAStringLexerTests {
    /// `DFAStringLexer` (first walks of pattern and format strings) steps as `StringLexer.step`
    /// for every byte, from states along seeded random strings of each pattern (ASCII, escapes,
    /// multi-byte UTF-8), with and without length bounds.
    @Test func stepsAsTheStringLexer() throws {
        let patterns = [#"^[a-z]+[0-9]?$"#, #"^(?:\S+\s+){0,3}\S+$"#, #"ab|c\"d"#, #"^é[^x]*x$"#, #"^[A-Z]{2,4}-\d+$"#]
        let bounds: [(Int, Int?)] = [(0, nil), (2, 6), (3, nil), (0, 4)]
        var rng = SplitMix64(seed: 45)
        var compared = 0
        var mismatches: [String] = []
        for pattern in patterns {
            let dfa = try #require(try RegexCompiler.compilePattern(pattern, limits: .unlimited))
            #expect(!dfa.ascii.isEmpty)
            for (minLength, maxLength) in bounds {
                let spec = StringSpec(dfa: dfa, minLength: minLength, maxLength: maxLength)
                let lexer = DFAStringLexer(spec: spec, dfa: dfa)
                for _ in 0..<60 {
                    var s = LexState(0, StringLexer.start)
                    for _ in 0..<10 {
                        var next: [LexState] = []
                        for b in 0...255 {
                            let expected = StringLexer.step(spec, s, UInt8(b))
                            compared += 1
                            if lexer.step(s, UInt8(b)) != expected {
                                mismatches.append("\(pattern) [\(minLength), \(maxLength ?? -1)] state \(s) byte \(b)")
                            }
                            if let e = expected, lexer.canContinue(e) { next.append(e) }
                        }
                        guard !next.isEmpty else { break }
                        s = next[Int(rng.next() % UInt64(next.count))]
                    }
                }
            }
        }
        #expect(compared > 100_000)
        #expect(mismatches.isEmpty, "\(mismatches.prefix(5))")
    }
}
