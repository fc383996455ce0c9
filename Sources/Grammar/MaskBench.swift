import LeapJSON

/// The MaskBench protocol of JSONSchemaBench, as semantics (the timing is the benchmark's,
/// in `leap-ref schema-bench`): a file holds a schema and instances labelled valid or
/// invalid; each instance, serialized as Python's `json.dumps(data, ensure_ascii=False)` and
/// tokenized, is fed token by token through the masks. A valid instance must be allowed to
/// the end (and be complete); an invalid one must be refused at some token or be incomplete.
public enum MaskBench {
    /// One MaskBench file: `{"schema": ..., "tests": [{"data": ..., "valid": true|false}]}`.
    public struct File: Sendable {
        public var schema: JSONValue
        public var tests: [(data: JSONValue, valid: Bool)]

        /// Reads a file's JSON text; nil when it is not in the MaskBench format.
        public init?(text: String) {
            guard let file = try? JSONValue.parse(text), let schema = file["schema"], let tests = file["tests"]?.arrayValue else {
                return nil
            }
            self.schema = schema
            self.tests = tests.compactMap { t in
                guard let data = t["data"], let valid = t["valid"]?.boolValue else { return nil }
                return (data, valid)
            }
        }
    }

    /// How a compiled grammar fared on a file's instances.
    public struct Outcome: Sendable {
        /// A valid instance was refused.
        public var validationError = false
        /// An invalid instance was accepted.
        public var invalidationError = false
        /// Tokens that a mask allowed and the matcher then refused (must be 0: an internal check).
        public var maskInconsistencies = 0
        /// Indices of the tests whose outcome was wrong.
        public var wrongTests: [Int] = []
        /// For the first valid instance refused: the text accepted before the refused token.
        public var firstRefusal: String?
        /// Tokens checked (one mask each).
        public var tokens = 0

        public init() {}
    }

    /// Runs the protocol for every instance of `file` through `grammar`.
    ///
    /// - Parameters:
    ///   - tokenize: the model's tokenizer, without special tokens.
    ///   - mask: the mask for a matcher state (usually `TokenMaskComputer.mask(for:)`; a
    ///     benchmark wraps it to time it).
    public static func check(
        _ file: File, grammar: Grammar, vocabulary: TokenVocabulary, tokenize: (String) -> [Int],
        mask: (GrammarMatcher) -> TokenMask
    ) -> Outcome {
        var outcome = Outcome()
        for (testIndex, test) in file.tests.enumerated() {
            let accepted = run(
                test.data.serialized(.python), grammar: grammar, vocabulary: vocabulary, tokenize: tokenize, mask: mask, into: &outcome,
                reportRefusal: test.valid)
            if test.valid != accepted {
                if test.valid { outcome.validationError = true } else { outcome.invalidationError = true }
                outcome.wrongTests.append(testIndex)
            }
        }
        return outcome
    }

    /// Feeds one text token by token; whether every token was allowed and the text is complete.
    static func run(
        _ text: String, grammar: Grammar, vocabulary: TokenVocabulary, tokenize: (String) -> [Int],
        mask: (GrammarMatcher) -> TokenMask, into outcome: inout Outcome, reportRefusal: Bool
    ) -> Bool {
        let matcher = GrammarMatcher(grammar: grammar)
        var consumed: [UInt8] = []
        for id in tokenize(text) {
            outcome.tokens += 1
            guard mask(matcher)[id] else {
                if reportRefusal && outcome.firstRefusal == nil {
                    outcome.firstRefusal =
                        String(decoding: consumed, as: UTF8.self) + " ⟨" + String(decoding: vocabulary.tokens[id], as: UTF8.self) + "⟩"
                }
                return false
            }
            consumed += vocabulary.tokens[id]
            if !matcher.accept(bytes: vocabulary.tokens[id]) {
                outcome.maskInconsistencies += 1
                return false
            }
        }
        return matcher.canAcceptEnd
    }
}
