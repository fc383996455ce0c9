import ArgumentParser
import LeapSDKCore
import Sampling

/// The sampling flags of `chat`, `generate` and `serve`. An unset flag takes the model's
/// default (its `general.sampling.*` metadata, else leap-ref's, which include DRY: see
/// `SamplingDefaults`); `serve` applies them to the requests that leave the field out.
struct SamplingFlags: ParsableArguments {
    @Option(parsing: .unconditional, help: "Sampling temperature (default: the model's, else 0.8; 0 = greedy).")
    var temp: Float?

    @Option(
        name: .customLong("top-k"), parsing: .unconditional, help: "Keep the K most likely tokens (default: the model's, else 40; 0 = all)."
    )
    var topK: Int?

    @Option(name: .customLong("top-p"), parsing: .unconditional, help: "Nucleus sampling (default: the model's, else 0.95; 1 = off).")
    var topP: Float?

    @Option(
        name: .customLong("min-p"), parsing: .unconditional,
        help: "Drop tokens below this share of the best one (default: the model's, else 0.05).")
    var minP: Float?

    @Option(
        name: .customLong("repeat-penalty"), parsing: .unconditional,
        help: "Repetition penalty over the last 64 tokens (default: the model's, else 1.1; 1 = off).")
    var repeatPenalty: Float?

    @Option(
        name: .customLong("dry-multiplier"), parsing: .unconditional,
        help:
            "DRY (\"don't repeat yourself\") multiplier: a token extending a repeat loses multiplier × base^(length - allowed) (default 0.8; 0 = off)."
    )
    var dryMultiplier: Float?

    @Option(name: .customLong("dry-base"), parsing: .unconditional, help: "DRY base, at least 1 (default 1.75).")
    var dryBase: Float?

    @Option(
        name: .customLong("dry-allowed-length"), parsing: .unconditional,
        help: "DRY: repeats up to this many tokens go unpenalized (default 2).")
    var dryAllowedLength: Int?

    @Option(
        name: .customLong("dry-penalty-last-n"), parsing: .unconditional,
        help: "DRY: how many latest tokens to search (default -1 = the whole context; 0 = off).")
    var dryPenaltyLastN: Int?

    @Option(
        name: .customLong("dry-sequence-breaker"),
        help: ArgumentHelp(
            "DRY: a string that cuts repeats; repeat the flag for several; replaces the defaults (\\n : \" *); 'none' for none. \\n, \\t, \\\" and \\\\ are unescaped.",
            valueName: "string"))
    var drySequenceBreaker: [String] = []

    func validate() throws {
        if let v = temp, !(0...2).contains(v) { throw ValidationError("--temp must be between 0 and 2, not \(v)") }
        if let v = topK, v < 0 { throw ValidationError("--top-k must be at least 0, not \(v)") }
        if let v = topP, !(0...1).contains(v) { throw ValidationError("--top-p must be between 0 and 1, not \(v)") }
        if let v = minP, !(0...1).contains(v) { throw ValidationError("--min-p must be between 0 and 1, not \(v)") }
        if let v = repeatPenalty, !(v > 0 && v <= 10) { throw ValidationError("--repeat-penalty must be above 0 and at most 10, not \(v)") }
        if let v = dryMultiplier, !(0...100).contains(v) { throw ValidationError("--dry-multiplier must be between 0 and 100, not \(v)") }
        if let v = dryBase, !(1...100).contains(v) { throw ValidationError("--dry-base must be between 1 and 100, not \(v)") }
        if let v = dryAllowedLength, v < 0 { throw ValidationError("--dry-allowed-length must be at least 0, not \(v)") }
        if let v = dryPenaltyLastN, v < -1 { throw ValidationError("--dry-penalty-last-n must be at least -1, not \(v)") }
        if drySequenceBreaker.contains("") { throw ValidationError("--dry-sequence-breaker must not be empty") }
    }

    /// The breaker strings: nil for the defaults, none for `none`, the flags' values unescaped.
    var sequenceBreakers: [String]? {
        if drySequenceBreaker.isEmpty { return nil }
        if drySequenceBreaker.contains("none") { return [] }
        return drySequenceBreaker.map(Self.unescape)
    }

    /// `\n`, `\t`, `\r`, `\"`, `\'` and `\\` as llama.cpp's `string_process_escapes` reads them.
    static func unescape(_ s: String) -> String {
        var out = ""
        var escaped = false
        for c in s {
            if escaped {
                switch c {
                case "n": out.append("\n")
                case "t": out.append("\t")
                case "r": out.append("\r")
                case "\"", "'", "\\": out.append(c)
                default: out += "\\\(c)"
                }
                escaped = false
            } else if c == "\\" {
                escaped = true
            } else {
                out.append(c)
            }
        }
        if escaped { out.append("\\") }
        return out
    }

    /// The settings these flags set (unset ones nil: the model's defaults), with `seed`:
    /// `chat`'s and `generate`'s options, and `serve`'s defaults for the fields a request
    /// leaves out (there without a seed).
    func overrides(seed: UInt64? = nil) -> SamplingOverrides {
        SamplingOverrides(
            temperature: temp, topP: topP, topK: topK, minP: minP, repetitionPenalty: repeatPenalty, seed: seed,
            dryMultiplier: dryMultiplier, dryBase: dryBase, dryAllowedLength: dryAllowedLength, dryPenaltyLastN: dryPenaltyLastN,
            drySequenceBreakers: sequenceBreakers)
    }
}
