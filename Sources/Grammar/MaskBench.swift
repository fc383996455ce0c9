import LeapJSON

/// The MaskBench protocol (as in JSONSchemaBench) over one schema file: compile the schema,
/// then for every test instance serialize it as Python's `json.dumps(data, ensure_ascii=False)`,
/// tokenize it, and for each token compute the mask and check that the token is allowed.
/// A valid instance must be accepted to the end (and be complete); an invalid one must be
/// rejected at some token or be incomplete at the end.
public enum MaskBench {
    /// The outcome for one schema file.
    public struct FileResult: Sendable {
        public var id: String
        /// The compile error message, when the schema did not compile.
        public var compileError: String?
        /// A valid instance was rejected.
        public var validationError = false
        /// An invalid instance was accepted.
        public var invalidationError = false
        public var compileMicros: Double = 0
        public var numTokens = 0
        /// Mask computation times, one per token checked, in microseconds.
        public var maskMicros: [Double] = []
        /// Tokens allowed by the mask that the matcher then refused (must be 0: internal check).
        public var maskInconsistencies = 0
        /// Indices of the tests whose outcome was wrong (for diagnostics).
        public var wrongTests: [Int] = []
        /// For the first valid instance refused: the text accepted before the refused token.
        public var firstRefusal: String?

        public var passed: Bool { compileError == nil && !validationError && !invalidationError }

        /// The `--json` form of this result.
        public var json: JSONValue {
            var o = JSONObject()
            o["id"] = .string(id)
            o["compile_error"] = compileError.map { .string($0) } ?? .bool(false)
            o["validation_error"] = .bool(validationError)
            o["invalidation_error"] = .bool(invalidationError)
            o["compile_us"] = .double(compileMicros)
            o["num_tokens"] = .integer(numTokens)
            o["all_mask_us"] = .array(maskMicros.map { .double(($0 * 100).rounded() / 100) })
            return .object(o)
        }
    }

    /// Runs the protocol on one file's JSON text (`{"schema": ..., "tests": [{"data", "valid"}]}`).
    ///
    /// - Parameters:
    ///   - vocabulary: the model's tokens (shared across files).
    ///   - tokenize: the model's tokenizer, without special tokens.
    public static func run(
        id: String, fileText: String, computer: TokenMaskComputer, options: JSONSchemaCompiler.Options = .init(),
        tokenize: (String) -> [Int]
    ) -> FileResult {
        var result = FileResult(id: id)
        let file: JSONValue
        do { file = try JSONValue.parse(fileText) } catch {
            result.compileError = "bad file: \(error)"
            return result
        }
        guard let schema = file["schema"], let tests = file["tests"]?.arrayValue else {
            result.compileError = "bad file: no schema/tests"
            return result
        }
        let clock = ContinuousClock()
        var grammar: Grammar?
        var compileError: SchemaError?
        let t0 = clock.now
        do { grammar = try JSONSchemaCompiler.compile(schema, options: options) } catch { compileError = error }
        result.compileMicros = micros(clock.now - t0)
        guard let grammar else {
            result.compileError = compileError?.description ?? "compile error"
            return result
        }
        let vocabulary = computer.vocabulary
        for (testIndex, test) in tests.enumerated() {
            guard let data = test["data"], let valid = test["valid"]?.boolValue else { continue }
            let text = data.serialized(.python)
            let ids = tokenize(text)
            let matcher = GrammarMatcher(grammar: grammar)
            var accepted = true
            var consumed: [UInt8] = []
            for id in ids {
                let t1 = clock.now
                let mask = computer.mask(for: matcher)
                result.maskMicros.append(micros(clock.now - t1))
                result.numTokens += 1
                if !mask[id] {
                    accepted = false
                    if valid && result.firstRefusal == nil {
                        result.firstRefusal =
                            String(decoding: consumed, as: UTF8.self) + " ⟨" + String(decoding: vocabulary.tokens[id], as: UTF8.self) + "⟩"
                    }
                    break
                }
                consumed += vocabulary.tokens[id]
                if !matcher.accept(bytes: vocabulary.tokens[id]) {
                    result.maskInconsistencies += 1
                    accepted = false
                    break
                }
            }
            if accepted && !matcher.canAcceptEnd { accepted = false }
            if valid && !accepted {
                result.validationError = true
                result.wrongTests.append(testIndex)
            }
            if !valid && accepted {
                result.invalidationError = true
                result.wrongTests.append(testIndex)
            }
        }
        return result
    }

    static func micros(_ d: Duration) -> Double {
        let (s, atto) = d.components
        return Double(s) * 1e6 + Double(atto) / 1e12
    }

    /// Summary statistics over files.
    public struct Summary: Sendable {
        public var files = 0, passed = 0, compileErrors = 0, validationErrors = 0, invalidationErrors = 0, inconsistencies = 0
        public var compileMeanMicros = 0.0, compileP50Micros = 0.0
        public var maskMeanMicros = 0.0, maskP50Micros = 0.0, maskP99Micros = 0.0, maskMaxMicros = 0.0
        public var tokens = 0

        public init(_ results: [FileResult]) {
            files = results.count
            passed = results.filter(\.passed).count
            compileErrors = results.filter { $0.compileError != nil }.count
            validationErrors = results.filter(\.validationError).count
            invalidationErrors = results.filter(\.invalidationError).count
            inconsistencies = results.reduce(0) { $0 + $1.maskInconsistencies }
            let compiled = results.filter { $0.compileError == nil }.map(\.compileMicros).sorted()
            if !compiled.isEmpty {
                compileMeanMicros = compiled.reduce(0, +) / Double(compiled.count)
                compileP50Micros = compiled[compiled.count / 2]
            }
            let masks = results.flatMap(\.maskMicros).sorted()
            tokens = masks.count
            if !masks.isEmpty {
                maskMeanMicros = masks.reduce(0, +) / Double(masks.count)
                maskP50Micros = masks[masks.count / 2]
                maskP99Micros = masks[min(masks.count - 1, Int(Double(masks.count) * 0.99))]
                maskMaxMicros = masks.last!
            }
        }

        public var json: JSONValue {
            .object(
                JSONObject([
                    ("files", .integer(files)), ("passed", .integer(passed)),
                    ("pass_rate", .double(files == 0 ? 0 : Double(passed) / Double(files))),
                    ("compile_errors", .integer(compileErrors)), ("validation_errors", .integer(validationErrors)),
                    ("invalidation_errors", .integer(invalidationErrors)), ("mask_inconsistencies", .integer(inconsistencies)),
                    ("compile_us_mean", .double(compileMeanMicros)), ("compile_us_p50", .double(compileP50Micros)),
                    ("tokens", .integer(tokens)),
                    ("mask_us_mean", .double(maskMeanMicros)), ("mask_us_p50", .double(maskP50Micros)),
                    ("mask_us_p99", .double(maskP99Micros)), ("mask_us_max", .double(maskMaxMicros))
                ]))
        }

        public var text: String {
            func f(_ x: Double) -> String { String(Int((x * 10).rounded())).withDecimal }
            return """
                schemas passed: \(passed) / \(files) (\(files == 0 ? 0 : passed * 100 / files)%)
                compile errors: \(compileErrors), validation errors: \(validationErrors), invalidation errors: \(invalidationErrors)\(inconsistencies > 0 ? ", MASK INCONSISTENCIES: \(inconsistencies)" : "")
                compile time: mean \(f(compileMeanMicros / 1000)) ms, p50 \(f(compileP50Micros / 1000)) ms
                mask time (\(tokens) tokens): mean \(f(maskMeanMicros)) µs, p50 \(f(maskP50Micros)) µs, p99 \(f(maskP99Micros)) µs, max \(f(maskMaxMicros)) µs
                """
        }
    }
}

extension String {
    /// "123" (tenths) -> "12.3"
    fileprivate var withDecimal: String {
        var s = self
        let neg = s.hasPrefix("-")
        if neg { s.removeFirst() }
        while s.count < 2 { s = "0" + s }
        s.insert(".", at: s.index(before: s.endIndex))
        return (neg ? "-" : "") + s
    }
}

/// Greedy longest-match tokenization over a vocabulary (a stand-in for the model's BPE in
/// development benchmarks: it yields valid token boundaries, not the model's own).
public struct GreedyTokenizer: Sendable {
    let vocabulary: TokenVocabulary
    public init(vocabulary: TokenVocabulary) { self.vocabulary = vocabulary }

    public func tokenize(_ text: String) -> [Int] {
        let bytes = Array(text.utf8)
        let v = vocabulary
        var out: [Int] = []
        var i = 0
        while i < bytes.count {
            var node = 0, best = -1, bestLen = 0, j = i
            while j < bytes.count {
                let end = Int(v.subtreeEnd[node])
                var child = node + 1
                var found = -1
                while child < end {
                    if v.nodeByte[child] == bytes[j] {
                        found = child
                        break
                    }
                    child = Int(v.subtreeEnd[child])
                }
                if found < 0 { break }
                node = found
                j += 1
                if v.tokenStart[node + 1] > v.tokenStart[node] {
                    best = Int(v.tokenIDs[Int(v.tokenStart[node])])
                    bestLen = j - i
                }
            }
            if best < 0 { return out }  // a byte with no token: cannot happen with byte-level vocabularies
            out.append(best)
            i += bestLen
        }
        return out
    }
}
