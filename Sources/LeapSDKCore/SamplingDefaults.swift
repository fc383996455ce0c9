import Foundation
import GGUF
import Sampling
import Tokenizers

/// The sampling settings a request gets for the fields it leaves unset: the model's own
/// `general.sampling.*` metadata where the GGUF has it, else leap-ref's defaults, which
/// include DRY and a repetition penalty of 1.1 (llama.cpp's default until 2024) so that
/// small models do not loop: over 24 replies of SmolLM2-135M (six prompts, four seeds, at
/// most 512 tokens), none of them repeats a sequence of four words more than three times
/// with both, 1 does with the penalty alone, 5 with DRY alone and 9 with neither.
///
/// | setting | leap-ref's default | GGUF key |
/// |---|---|---|
/// | temperature | 0.8 | `general.sampling.temp` |
/// | top-k | 40 | `general.sampling.top_k` |
/// | top-p | 0.95 | `general.sampling.top_p` |
/// | min-p | 0.05 | `general.sampling.min_p` |
/// | repetition penalty | 1.1 | `general.sampling.penalty_repeat` |
/// | penalty window | 64 | `general.sampling.penalty_last_n` |
/// | DRY multiplier, base, allowed length, window | 0.8, 1.75, 2, -1 (the whole context) | none |
/// | DRY sequence breakers | `"\n"`, `":"`, `"\""`, `"*"` and the end-of-generation tokens | none |
///
/// The keys are read as llama.cpp reads them (`common_params_sampling_from_model`): a
/// number of any type, or a string that starts with one. llama.cpp's other keys
/// (`xtc_*`, `mirostat*`, `sequence`) name samplers leap-ref does not have and are not
/// read. GGUF files carry no DRY keys, so DRY's defaults apply to every model.
public enum SamplingDefaults {
    /// leap-ref's DRY default: llama.cpp's DRY settings with the multiplier at 0.8 (the
    /// value DRY's author suggests; llama.cpp ships it off) and the window at -1 (the
    /// whole context). `sequenceBreakers` is empty here: breakers are token sequences of a
    /// vocabulary (`DRYBreakerResolver` adds `DRYParameters.defaultSequenceBreakerStrings`).
    public static let dry = DRYParameters(multiplier: 0.8, base: 1.75, allowedLength: 2, penaltyLastN: -1)

    /// leap-ref's defaults overridden by the model's `general.sampling.*` metadata (DRY's
    /// breakers not resolved: see `dry`).
    public static func parameters(_ m: GGUFMetadata) -> SamplingParameters {
        var p = SamplingParameters(temperature: 0.8, topK: 40, topP: 0.95, minP: 0.05, repetitionPenalty: 1.1, dry: dry)
        if let v = number(m, "general.sampling.temp") { p.temperature = Float(v) }
        if let v = integer(m, "general.sampling.top_k") { p.topK = v }
        if let v = number(m, "general.sampling.top_p") { p.topP = Float(v) }
        if let v = number(m, "general.sampling.min_p") { p.minP = Float(v) }
        if let v = number(m, "general.sampling.penalty_repeat") { p.repetitionPenalty = Float(v) }
        if let v = integer(m, "general.sampling.penalty_last_n") { p.penaltyWindow = max(0, v) }
        return p
    }

    /// A key's value as a number: any numeric type, or a string starting with a number
    /// (llama.cpp's `strtof` over the value's text). Non-finite values are ignored.
    static func number(_ m: GGUFMetadata, _ key: String) -> Double? {
        guard let value = m[key] else { return nil }
        if case .string(let s) = value { return leadingNumber(s, integer: false) }
        guard let d = value.doubleValue, d.isFinite else { return nil }
        return d
    }

    /// A key's value as an integer (llama.cpp's `strtol` over the value's text: a float
    /// is cut at its point, `40.0` reads as 40).
    static func integer(_ m: GGUFMetadata, _ key: String) -> Int? {
        guard let value = m[key] else { return nil }
        if case .string(let s) = value { return leadingNumber(s, integer: true).map { Int($0) } }
        if let i = value.intValue { return i }
        guard let d = value.doubleValue, d.isFinite, abs(d) < 2e9 else { return nil }
        return Int(d.rounded(.towardZero))
    }

    /// The number at the start of `s` (after spaces), as `strtol` or `strtof` read it;
    /// nil when it does not start with one.
    static func leadingNumber(_ s: String, integer: Bool) -> Double? {
        let text = s.drop { $0 == " " || $0 == "\t" }
        let match =
            integer
            ? text.prefixMatch(of: /[+-]?[0-9]+/)?.0
            : text.prefixMatch(of: /[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?/)?.0
        guard let literal = match else { return nil }
        guard let d = Double(literal.hasSuffix(".") ? String(literal) + "0" : String(literal)), d.isFinite else { return nil }
        return integer && abs(d) >= 2e9 ? nil : d
    }
}

/// Resolves DRY breaker strings to token sequences over one tokenizer's vocabulary
/// (`DRYSequenceBreakers.restartSequences`), and adds the end-of-generation tokens as
/// breakers by themselves: a turn that ends like an earlier one would otherwise have its
/// end-of-turn token penalized, and the model could not stop. Thread-safe; results are
/// cached per list of strings.
public final class DRYBreakerResolver: @unchecked Sendable {
    private let tokenizer: Tokenizer
    private let lock = NSLock()
    private var cache: [[String]: [[Int]]] = [:]
    /// Most lists kept (each costs a pass over the vocabulary to resolve).
    static let cacheLimit = 32

    /// A resolver over `tokenizer`'s vocabulary.
    public init(tokenizer: Tokenizer) {
        self.tokenizer = tokenizer
    }

    /// The restart sequences of `strings`, then each end-of-generation token alone.
    public func restartSequences(_ strings: [String]) -> [[Int]] {
        if let cached = lock.withLock({ cache[strings] }) { return cached }
        let tokenizer = self.tokenizer
        var sequences = DRYSequenceBreakers.restartSequences(
            for: strings, pieces: (0..<tokenizer.vocabularySize).lazy.map { tokenizer.tokenBytes(TokenID($0), renderSpecial: true) },
            tokenize: { tokenizer.encode($0, addSpecial: false, parseSpecial: false).map(Int.init) })
        for id in tokenizer.endOfGenerationIDs.sorted() where !sequences.contains([Int(id)]) { sequences.append([Int(id)]) }
        lock.withLock {
            if cache.count >= Self.cacheLimit { cache.removeAll() }
            cache[strings] = sequences
        }
        return sequences
    }
}
