import ArgumentParser
import LeapSDKCore
import Testing

@testable import leap_ref

/// The sampling flags of `chat`, `generate` and `serve`.
@Suite struct SamplingFlagsTests {
    @Test func unsetFlagsLeaveTheModelsDefaults() throws {
        let chat = try Chat.parse(["--max-tokens", "512"])
        #expect(chat.sampling.overrides() == SamplingOverrides())
        #expect(chat.generationOptions.sampling == SamplingOverrides(seed: chat.seed))
        #expect(chat.generationOptions.maxOutputTokens == 512)
        let serve = try Serve.parse([])
        #expect(serve.sampling.overrides() == SamplingOverrides())
        #expect(!serve.noWebUI)
        #expect(try Serve.parse(["--no-webui"]).noWebUI)
    }

    @Test func flagsBecomeOptions() throws {
        let chat = try Chat.parse([
            "--temp", "0.5", "--top-k", "20", "--top-p", "0.9", "--min-p", "0.1", "--repeat-penalty", "1.1",
            "--dry-multiplier", "1.2", "--dry-base", "2", "--dry-allowed-length", "3", "--dry-penalty-last-n", "-1",
            "--dry-sequence-breaker", #"\n"#, "--dry-sequence-breaker", "User:", "--seed", "7"
        ])
        let o = chat.generationOptions
        #expect(o.temperature == 0.5 && o.topK == 20 && o.topP == 0.9 && o.minP == 0.1 && o.repetitionPenalty == 1.1)
        #expect(o.dryMultiplier == 1.2 && o.dryBase == 2 && o.dryAllowedLength == 3 && o.dryPenaltyLastN == -1)
        #expect(o.drySequenceBreakers == ["\n", "User:"])
        #expect(o.rngSeed == 7)
        let serve = try Serve.parse(["--dry-multiplier", "0", "--dry-sequence-breaker", "none", "--temp", "0.3"])
        #expect(serve.sampling.overrides() == SamplingOverrides(temperature: 0.3, dryMultiplier: 0, drySequenceBreakers: []))
        #expect(try Generate.parse(["--prompt", "x", "--top-k", "5"]).sampling.topK == 5)
    }

    @Test func escapesAreReadAsLlamaCppReadsThem() {
        #expect(SamplingFlags.unescape(#"\n"#) == "\n")
        #expect(SamplingFlags.unescape(#"a\tb\\c\"d\'e"#) == "a\tb\\c\"d'e")
        #expect(SamplingFlags.unescape(#"\q"#) == #"\q"#)
        #expect(SamplingFlags.unescape(#"end\"#) == #"end\"#)
    }

    @Test(arguments: [
        (["--temp", "3"], "--temp must be between 0 and 2, not 3.0"),
        (["--dry-multiplier", "-1"], "--dry-multiplier must be between 0 and 100, not -1.0"),
        (["--dry-base", "0.5"], "--dry-base must be between 1 and 100, not 0.5"),
        (["--dry-allowed-length", "-1"], "--dry-allowed-length must be at least 0, not -1"),
        (["--dry-penalty-last-n", "-2"], "--dry-penalty-last-n must be at least -1, not -2"),
        (["--dry-sequence-breaker", ""], "--dry-sequence-breaker must not be empty")
    ])
    func badValuesAreRefused(arguments: [String], message: String) {
        #expect(Chat.message(for: parseError(arguments)).contains(message))
    }
}

/// The error `Chat.parse` throws for `arguments`.
private func parseError(_ arguments: [String]) -> Error {
    do {
        _ = try Chat.parse(arguments)
        return ValidationError("parsed")
    } catch {
        return error
    }
}
