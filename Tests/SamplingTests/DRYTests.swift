import Sampling
import Testing

/// DRY against hand-computed penalties. Token ids stand for letters: a = 0, b = 1, c = 2,
/// y = 3, and 4 is a spare token.
@Suite struct DRYTests {
    /// The logits of a 5-token vocabulary (all 0) after `history` was accepted.
    func penalized(
        _ history: [Int], multiplier: Float = 0.8, base: Float = 1.75, allowed: Int = 2, lastN: Int = -1,
        breakers: [[Int]] = [], vocabulary: Int = 5
    ) -> [Float] {
        let dry = DRYParameters(
            multiplier: multiplier, base: base, allowedLength: allowed, penaltyLastN: lastN, sequenceBreakers: breakers)
        var sampler = Sampler(SamplingParameters(temperature: 0, dry: dry))
        for t in history { sampler.accept(t) }
        return sampler.penalizedLogits([Float](repeating: 0, count: vocabulary))
    }

    func expectClose(_ a: [Float], _ b: [Float], sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(a.count == b.count, sourceLocation: sourceLocation)
        for (x, y) in zip(a, b) { #expect(abs(x - y) < 1e-5, "\(a) vs \(b)", sourceLocation: sourceLocation) }
    }

    /// llama.cpp's own example: `a b c c b c y a b c`. The suffix `a b c` also ends at the
    /// third token (followed by `c`: a repeat of 3), `b c` at the sixth (followed by `y`:
    /// 2), `c` at the fourth (followed by `b`: 1).
    let example = [0, 1, 2, 2, 1, 2, 3, 0, 1, 2]

    @Test func llamaCppExample() {
        // c: 0.8 × 1.75^(3-2) = 1.4; y: 0.8 × 1.75^0 = 0.8; b: 1 < 2, not penalized.
        expectClose(penalized(example), [0, 0, -1.4, -0.8, 0])
    }

    @Test func allowedLengthEdges() {
        // A repeat of exactly the allowed length is penalized by the multiplier alone.
        expectClose(penalized(example, allowed: 3), [0, 0, -0.8, 0, 0])
        expectClose(penalized(example, allowed: 4), [0, 0, 0, 0, 0])
        // allowed 1: b (1) 0.8, y (2) 1.4, c (3) 0.8 × 1.75² = 2.45.
        expectClose(penalized(example, allowed: 1), [0, -0.8, -2.45, -1.4, 0])
        // A history no longer than the allowed length is never searched.
        expectClose(penalized([0, 0], allowed: 2), [0, 0, 0, 0, 0])
        // [0, 0, 0]: `0 0` ends at the second token, followed by 0: a repeat of 2.
        expectClose(penalized([0, 0, 0], allowed: 2), [-0.8, 0, 0, 0, 0])
    }

    @Test func multiplierAndBaseScale() {
        expectClose(penalized(example, multiplier: 2, base: 3), [0, 0, -6, -2, 0])
        // Off: multiplier 0, base below 1, window 0.
        expectClose(penalized(example, multiplier: 0), [0, 0, 0, 0, 0])
        expectClose(penalized(example, base: 0.5), [0, 0, 0, 0, 0])
        expectClose(penalized(example, lastN: 0), [0, 0, 0, 0, 0])
    }

    @Test func breakersLimitTheRepeat() {
        // `a b c y a b`: the suffix `a b` also ends at the second token, followed by c.
        let history = [0, 1, 2, 3, 0, 1]
        expectClose(penalized(history), [0, 0, -0.8, 0, 0])
        // y two tokens back: the repeat may be 2 long, still penalized.
        expectClose(penalized(history, breakers: [[3]]), [0, 0, -0.8, 0, 0])
        // a one token back: repeats are cut to 1, below the allowed length.
        expectClose(penalized(history, breakers: [[0]]), [0, 0, 0, 0, 0])
        // The two-token restart sequence `y a` cuts at the same place as `a`.
        expectClose(penalized(history, breakers: [[3, 0]]), [0, 0, 0, 0, 0])
        // `y b` does not occur: no cut.
        expectClose(penalized(history, breakers: [[3, 1]]), [0, 0, -0.8, 0, 0])
        // Of several sequences with the same head, the longest that matches counts:
        // `y a` (cut to 1) rather than `y` (cut to 2).
        expectClose(penalized(history, breakers: [[3], [3, 0]]), [0, 0, 0, 0, 0])
    }

    @Test func aBreakerTokenIsNeverPenalized() {
        // `a b 4 a b`: 4 would extend `a b` (2 tokens).
        let history = [0, 1, 4, 0, 1]
        expectClose(penalized(history), [0, 0, 0, 0, -0.8])
        expectClose(penalized(history, breakers: [[4]]), [0, 0, 0, 0, 0])
        // As the head of a longer sequence only, it is penalized.
        expectClose(penalized(history, breakers: [[4, 2]]), [0, 0, 0, 0, -0.8])
    }

    @Test func theWindowLimitsTheSearch() {
        // `a b c 4 4 a b`: `a b` repeats only if the window reaches back to the start.
        let history = [0, 1, 2, 4, 4, 0, 1]
        expectClose(penalized(history, lastN: -1), [0, 0, -0.8, 0, 0])
        expectClose(penalized(history, lastN: 7), [0, 0, -0.8, 0, 0])
        expectClose(penalized(history, lastN: 6), [0, 0, 0, 0, 0])
        // A long history is trimmed to the window without changing the result.
        let long = [Int](repeating: 4, count: 500) + [0, 1, 2, 3, 0, 1]
        expectClose(penalized(long, lastN: 6), [0, 0, -0.8, 0, 0])
        expectClose(penalized(long, lastN: 5), [0, 0, 0, 0, 0])
    }

    @Test func theExponentIsCappedAndThePenaltyFinite() {
        let dry = DRYParameters(multiplier: 0.8, base: 1.75, allowedLength: 2)
        // ln(FLT_MAX) / ln(1.75) = 158.5: exponents beyond 158 stay at 158.
        #expect(dry.penalty(repeatLength: 160) == dry.penalty(repeatLength: 1000))
        #expect(dry.penalty(repeatLength: 159) < dry.penalty(repeatLength: 160))
        #expect(dry.penalty(repeatLength: 1000).isFinite)
        // 2^128 overflows a Float: the penalty is capped at the largest finite value.
        let steep = DRYParameters(multiplier: 10, base: 2, allowedLength: 0)
        #expect(steep.penalty(repeatLength: 500) == .greatestFiniteMagnitude)
        let logits = penalized([Int](repeating: 0, count: 300), multiplier: 10, base: 2, allowed: 0)
        #expect(logits[0] == -.greatestFiniteMagnitude)
    }

    @Test func drySteersTheChoiceUnderAMask() {
        let dry = DRYParameters(multiplier: 0.8, base: 1.75, allowedLength: 2)
        var sampler = Sampler(SamplingParameters(temperature: 0, dry: dry))
        for t in example { sampler.accept(t) }
        // c leads y by 0.5 before DRY, which takes 1.4 from c and 0.8 from y: y wins.
        // Tokens 0 and 1 are masked out, so the candidates do not start at id 0.
        let logits: [Float] = [9, 9, 1.5, 1, 0]
        #expect(logits.withUnsafeBufferPointer { sampler.sample($0, allowed: { $0 >= 2 }) } == 3)
        var plain = Sampler(SamplingParameters(temperature: 0))
        for t in example { plain.accept(t) }
        #expect(logits.withUnsafeBufferPointer { plain.sample($0, allowed: { $0 >= 2 }) } == 2)
    }

    @Test func historyLengthCoversTheStagesThatLookBack() {
        #expect(SamplingParameters.greedy.historyLength == 0)
        #expect(SamplingParameters(repetitionPenalty: 1.1, penaltyWindow: 64).historyLength == 64)
        let dry = DRYParameters(multiplier: 0.8)
        #expect(SamplingParameters(dry: dry).historyLength == Int.max)
        var windowed = dry
        windowed.penaltyLastN = 256
        #expect(SamplingParameters(repetitionPenalty: 1.1, penaltyWindow: 64, dry: windowed).historyLength == 256)
    }

    // MARK: Breaker strings to token sequences

    /// A toy vocabulary and a greedy longest-match tokenizer over it.
    let pieces: [[UInt8]] = ["he", "llo", ":", "o:", "lo", "\n", "x", "l", "o"].map { Array($0.utf8) }

    func tokenize(_ text: String) -> [Int] {
        var bytes = Array(text.utf8)[...]
        var ids: [Int] = []
        while !bytes.isEmpty {
            let best = pieces.indices.filter { bytes.starts(with: pieces[$0]) }.max { pieces[$0].count < pieces[$1].count }
            guard let id = best else { break }
            ids.append(id)
            bytes = bytes.dropFirst(pieces[id].count)
        }
        return ids
    }

    @Test func breakerStringsBecomeRestartSequences() {
        // Every token containing ':' is a breaker by itself.
        #expect(DRYSequenceBreakers.restartSequences(for: [":"], pieces: pieces, tokenize: tokenize) == [[2], [3]])
        // "lo:": "llo" and "lo" end with "lo" (the rest, ":", is token 2), "l" ends with
        // "l" (the rest, "o:", is token 3); no token contains the whole string.
        #expect(
            DRYSequenceBreakers.restartSequences(for: ["lo:"], pieces: pieces, tokenize: tokenize)
                == [[1, 2], [4, 2], [7, 3]])
        // Several strings: de-duplicated, in order; empty strings skipped.
        #expect(
            DRYSequenceBreakers.restartSequences(for: ["\n", "", ":", "\n"], pieces: pieces, tokenize: tokenize)
                == [[5], [2], [3]])
    }

    @Test func breakerStringsAreCutAndSplitOnlyAtCharacterBoundaries() {
        // "é" is C3 A9: a token holding only C3 ends with a prefix of it, but the rest
        // (A9) is not text, so no sequence; a token holding both bytes is a breaker.
        let bytes: [[UInt8]] = [[0xC3], [0xC3, 0xA9], Array("a".utf8)]
        #expect(DRYSequenceBreakers.restartSequences(for: ["é"], pieces: bytes, tokenize: { _ in [0] }) == [[1]])
        // A 50-byte breaker is cut to 40 bytes: a token holding the first 40 contains it.
        let long = String(repeating: "x", count: 50)
        let vocab: [[UInt8]] = [Array(String(repeating: "x", count: 40).utf8), Array("y".utf8)]
        #expect(DRYSequenceBreakers.restartSequences(for: [long], pieces: vocab, tokenize: { _ in [] }) == [[0]])
    }
}
