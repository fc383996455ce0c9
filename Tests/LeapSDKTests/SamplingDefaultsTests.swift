import GGUF
import LeapSDKCore
import Sampling
import TestSupport
import Testing
import Tokenizers

/// The sampling defaults: the GGUF's `general.sampling.*` keys read as llama.cpp reads
/// them, leap-ref's DRY default, and DRY's breaker strings over a real vocabulary.
@Suite struct SamplingDefaultsTests {
    @Test func withoutKeysTheDefaultsIncludeDRY() {
        let p = SamplingDefaults.parameters(GGUFMetadata())
        #expect(p.temperature == 0.8 && p.topK == 40 && p.topP == 0.95 && p.minP == 0.05)
        #expect(abs(p.repetitionPenalty - 1.1) < 1e-6 && p.penaltyWindow == 64)
        #expect(p.dry == DRYParameters(multiplier: 0.8, base: 1.75, allowedLength: 2, penaltyLastN: -1))
        #expect(p.dry.isEnabled)
    }

    @Test func keysAreReadAsLlamaCppReadsThem() {
        var m = GGUFMetadata()
        m.set("general.sampling.temp", .string("0.7"))  // strtof over the text
        m.set("general.sampling.top_k", .float32(20.9))  // strtol over "20.9…": 20
        m.set("general.sampling.top_p", .int32(1))  // an integer for a float key
        m.set("general.sampling.min_p", .string(" 0.1 (tuned)"))  // a leading number
        m.set("general.sampling.penalty_repeat", .float64(1.05))
        m.set("general.sampling.penalty_last_n", .string("128"))
        let p = SamplingDefaults.parameters(m)
        #expect(abs(p.temperature - 0.7) < 1e-6)
        #expect(p.topK == 20)
        #expect(p.topP == 1)
        #expect(abs(p.minP - 0.1) < 1e-6)
        #expect(abs(p.repetitionPenalty - 1.05) < 1e-6)
        #expect(p.penaltyWindow == 128)
        #expect(p.dry == SamplingDefaults.dry, "no GGUF key speaks of DRY")
    }

    @Test func unreadableValuesKeepTheDefaults() {
        var m = GGUFMetadata()
        m.set("general.sampling.temp", .string("warm"))
        m.set("general.sampling.top_k", .bool(true))
        m.set("general.sampling.top_p", .float32(.nan))
        m.set("general.sampling.penalty_last_n", .int32(-1))  // llama.cpp clamps negative windows to 0
        let p = SamplingDefaults.parameters(m)
        #expect(p.temperature == 0.8 && p.topK == 40 && p.topP == 0.95)
        #expect(p.penaltyWindow == 0)
    }

    @Test func optionsOverrideTheDefaultsAndResolveBreakers() throws {
        let tokenizer = try Tokenizer(gguf: try GGUFFile(path: TestFixtures.path("models/lfm2-tiny.gguf")))
        let resolver = DRYBreakerResolver(tokenizer: tokenizer)
        let base = SamplingDefaults.parameters(GGUFMetadata())
        let p = GenerationOptions(temperature: 0.2, rngSeed: 9, dryBase: 2, dryPenaltyLastN: 256).sampling.apply(
            to: base, breakers: resolver)
        #expect(p.temperature == 0.2 && p.seed == 9 && p.topK == 40)
        #expect(p.dry.multiplier == 0.8 && p.dry.base == 2 && p.dry.penaltyLastN == 256)
        // The default breakers, then every end-of-generation token alone.
        let newline = try #require(tokenizer.encode("\n", addSpecial: false).first)
        #expect(p.dry.sequenceBreakers.contains([Int(newline)]))
        for id in tokenizer.endOfGenerationIDs { #expect(p.dry.sequenceBreakers.contains([Int(id)])) }
        // Off: no breakers are resolved; out-of-range values are read as llama.cpp reads them.
        let off = SamplingOverrides(dryMultiplier: 0).apply(to: base, breakers: resolver)
        #expect(!off.dry.isEnabled && off.dry.sequenceBreakers.isEmpty)
        let odd = SamplingOverrides(dryAllowedLength: -3, dryPenaltyLastN: -9).apply(to: base, breakers: resolver)
        #expect(odd.dry.allowedLength == 0 && odd.dry.penaltyLastN == -1)
        // A request's own breakers replace the defaults (the end-of-generation tokens stay).
        let own = SamplingOverrides(drySequenceBreakers: []).apply(to: base, breakers: resolver)
        #expect(Set(own.dry.sequenceBreakers) == Set(tokenizer.endOfGenerationIDs.map { [Int($0)] }))
    }

    /// Every restart sequence of "User:" over a real vocabulary: its head token ends with a
    /// prefix of the string and its tail spells the rest; or its one token contains it.
    @Test func restartSequencesSpellTheBreaker() throws {
        let tokenizer = try Tokenizer(gguf: try GGUFFile(path: TestFixtures.path("models/lfm2-tiny.gguf")))
        let breaker = "User:"
        let sequences = DRYBreakerResolver(tokenizer: tokenizer).restartSequences([breaker])
        let eog = Set(tokenizer.endOfGenerationIDs.map { Int($0) })
        var multiToken = 0
        for s in sequences where !(s.count == 1 && eog.contains(s[0])) {
            let head = tokenizer.tokenBytes(TokenID(s[0]), renderSpecial: true)
            let tail = s.dropFirst().flatMap { tokenizer.tokenBytes(TokenID($0), renderSpecial: true) }
            if s.count == 1 {
                #expect(DRYSequenceBreakersProbe.contains(head, Array(breaker.utf8)), "\(s)")
                continue
            }
            multiToken += 1
            let overlap = Array(breaker.utf8).count - tail.count
            #expect(overlap > 0 && head.suffix(overlap).elementsEqual(breaker.utf8.prefix(overlap)), "\(s)")
            #expect(tail.elementsEqual(breaker.utf8.dropFirst(overlap)), "\(s)")
        }
        #expect(multiToken > 0, "some token ends with 'U', 'Us', 'Use' or 'User'")
    }
}

/// Byte containment, as the resolver tests it.
enum DRYSequenceBreakersProbe {
    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count else { return false }
        return (0...(haystack.count - needle.count)).contains { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
    }
}
