import GGUF
import LeapSDKCore
import Sampling
import TestSupport
import Testing
import Tokenizers

/// `SamplingOverrides`, the one type of sampling settings over defaults: each field is
/// written over the base by `apply`, an unset one keeps the base's, `overriding` fills
/// unset fields from a fallback, and `GenerationOptions`' fields are views of it.
@Suite struct SamplingOverridesTests {
    static let resolver = Result {
        DRYBreakerResolver(tokenizer: try Tokenizer(gguf: try GGUFFile(path: TestFixtures.path("models/lfm2-tiny.gguf"))))
    }

    /// A base whose every field differs from what the overrides below set.
    static let base = SamplingParameters(
        temperature: 0.8, topK: 40, topP: 0.95, minP: 0.05, repetitionPenalty: 1.1, frequencyPenalty: 0,
        presencePenalty: 0, penaltyWindow: 64, seed: 1, dry: DRYParameters(multiplier: 0.8, base: 1.75, allowedLength: 2))

    static let everything = SamplingOverrides(
        temperature: 0.3, topP: 0.5, topK: 7, minP: 0.2, repetitionPenalty: 1.3, frequencyPenalty: 0.4,
        presencePenalty: 0.6, seed: 42, dryMultiplier: 1.5, dryBase: 2.5, dryAllowedLength: 4, dryPenaltyLastN: 128,
        drySequenceBreakers: ["User:"])

    @Test func everyFieldIsWrittenOverTheBase() throws {
        let resolver = try Self.resolver.get()
        let p = Self.everything.apply(to: Self.base, breakers: resolver)
        #expect(p.temperature == 0.3 && p.topP == 0.5 && p.topK == 7 && p.minP == 0.2)
        #expect(p.repetitionPenalty == 1.3 && p.frequencyPenalty == 0.4 && p.presencePenalty == 0.6 && p.seed == 42)
        #expect(p.dry.multiplier == 1.5 && p.dry.base == 2.5 && p.dry.allowedLength == 4 && p.dry.penaltyLastN == 128)
        #expect(p.dry.sequenceBreakers == resolver.restartSequences(["User:"]))
        #expect(p.penaltyWindow == 64, "no override names the penalty window")
    }

    @Test func unsetFieldsKeepTheBase() throws {
        let resolver = try Self.resolver.get()
        let p = SamplingOverrides().apply(to: Self.base, breakers: resolver)
        var expected = Self.base
        expected.dry.sequenceBreakers = resolver.restartSequences(DRYParameters.defaultSequenceBreakerStrings)
        #expect(p == expected)
        // One field at a time: only that field moves.
        let topK = SamplingOverrides(topK: 3).apply(to: Self.base, breakers: resolver)
        var onlyTopK = expected
        onlyTopK.topK = 3
        #expect(topK == onlyTopK)
    }

    @Test func requestSettingsOverrideTheFallbackFieldByField() {
        let fallback = Self.everything
        #expect(SamplingOverrides().overriding(fallback) == fallback)
        #expect(fallback.overriding(SamplingOverrides()) == fallback)
        let request = SamplingOverrides(temperature: 0, seed: 5, drySequenceBreakers: [])
        let merged = request.overriding(fallback)
        var expected = fallback
        expected.temperature = 0
        expected.seed = 5
        expected.drySequenceBreakers = []
        #expect(merged == expected)
    }

    @Test func generationOptionsSamplingFieldsAreTheOverrides() {
        var options = GenerationOptions(
            temperature: 0.3, topP: 0.5, topK: 7, minP: 0.2, repetitionPenalty: 1.3, rngSeed: 42, dryMultiplier: 1.5,
            dryBase: 2.5, dryAllowedLength: 4, dryPenaltyLastN: 128, drySequenceBreakers: ["User:"])
        var expected = Self.everything
        expected.frequencyPenalty = nil
        expected.presencePenalty = nil
        #expect(options.sampling == expected)
        options.temperature = 1
        options.rngSeed = nil
        #expect(options.sampling.temperature == 1 && options.sampling.seed == nil)
        options.sampling.frequencyPenalty = 0.25
        #expect(options.sampling.frequencyPenalty == 0.25 && options.topK == 7)
    }
}
