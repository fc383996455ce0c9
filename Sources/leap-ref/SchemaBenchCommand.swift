import ArgumentParser
import Foundation
import GGUF
import Grammar
import LeapJSON
import Tokenizers

/// `leap-ref schema-bench`: the MaskBench protocol over a directory of schemas, timed, with
/// a model's own vocabulary and tokenizer (or a vocabulary dump and greedy tokenization).
struct SchemaBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "schema-bench",
        abstract: "Run the MaskBench protocol (compile, then per-token masks) over every *.json schema file in DIR.",
        discussion: """
            Each file is {"schema", "tests": [{"data", "valid"}]}. The schema is compiled (timed); each \
            instance is serialized as Python's json.dumps(data, ensure_ascii=False), tokenized with the \
            model's tokenizer (no special tokens), and for every token the mask is computed (timed) and \
            must allow the token. A valid instance must be accepted to the end; an invalid one must be \
            refused at some token or be incomplete at the end. See docs/structured-output.md.
            """
    )

    @Argument(help: "Directory of MaskBench *.json files.")
    var directory: String

    @Option(help: "The GGUF model whose vocabulary and tokenizer to use (default: the installed model).")
    var model: String?

    @Option(
        help: """
            A vocabulary dump (scripts/dump_vocab.py) to use instead of a model: text is split by greedy \
            longest match over it, which needs no model file.
            """)
    var vocab: String?

    @Option(help: "Write per-file results and the summary as JSON to this file.")
    var json: String?

    @Option(help: "Only the first N files (sorted by name).")
    var limit: Int?

    @Option(help: "Only the files whose name contains this text.")
    var filter: String?

    @Flag(name: .customLong("oneof-as-anyof"), help: "Compile every oneOf as anyOf (not exact).")
    var oneOfAsAnyOf = false

    @Flag(
        name: .customLong("exact-oneof"),
        help: "Refuse a oneOf whose exclusivity cannot be enforced (by default it compiles as anyOf, counted).")
    var exactOneOf = false

    @Option(
        name: .customLong("property-order"),
        help: "Object properties in the schema's order ('schema', the default), in any order ('any'), or both runs ('both').")
    var propertyOrder = "schema"

    @Flag(name: .shortAndLong, help: "One line per file, and mask-cache statistics.")
    var verbose = false

    @Flag(help: "Describe the slowest 1% of masks beside all of them: live parses, lexical walks, work, files.")
    var tail = false

    func run() async throws {
        try await runReportingErrors {
            let (vocabulary, tokenize) = try tokenizer()
            let computer = TokenMaskComputer(vocabulary: vocabulary)
            computer.prewarm()
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else {
                throw CLIError("cannot list directory '\(directory)'")
            }
            var files = names.filter { $0.hasSuffix(".json") && (filter.map($0.contains) ?? true) }.sorted()
            if let limit { files = Array(files.prefix(max(0, limit))) }
            guard !files.isEmpty else { throw CLIError("no *.json files in '\(directory)'") }
            let orders: [JSONSchemaCompiler.PropertyOrder]
            if propertyOrder == "both" {
                orders = [.schema, .any]
            } else if let o = JSONSchemaCompiler.PropertyOrder(rawValue: propertyOrder) {
                orders = [o]
            } else {
                throw CLIError("--property-order must be 'schema', 'any' or 'both', not '\(propertyOrder)'")
            }
            var runs: [(JSONSchemaCompiler.PropertyOrder, [SchemaBenchResult], SchemaBenchSummary)] = []
            for order in orders {
                var options = JSONSchemaCompiler.Options()
                options.oneOfAsAnyOf = oneOfAsAnyOf
                options.propertyOrder = order
                if orders.count > 1 { print("property order: \(order.rawValue)") }
                var results: [SchemaBenchResult] = []
                for name in files {
                    guard let text = try? String(contentsOfFile: directory + "/" + name, encoding: .utf8) else {
                        throw CLIError("cannot read '\(name)'")
                    }
                    let r = SchemaBenchResult.measure(
                        id: name, fileText: text, options: options, overlappingOneOf: exactOneOf ? .refuse : .anyOf, computer: computer,
                        tokenize: tokenize)
                    if verbose || r.outcome.invalidationError || r.outcome.maskInconsistencies > 0 { print(r.line) }
                    results.append(r)
                }
                let summary = SchemaBenchSummary(results)
                print(summary.text)
                if verbose { print("lexical walks: \(computer.lexCacheMisses); state cache hits: \(computer.stateCacheHits)") }
                if tail { print(MaskTail(results).text) }
                runs.append((order, results, summary))
            }
            if let json {
                // One run: {"files", "summary", "property_order"}; both: {"runs": [those]}.
                let docs = runs.map { order, results, summary in
                    JSONValue.object(
                        JSONObject([
                            ("property_order", .string(order.rawValue)), ("files", .array(results.map(\.json))), ("summary", summary.json)
                        ]))
                }
                let doc = docs.count == 1 ? docs[0] : .object(JSONObject([("runs", .array(docs))]))
                do { try doc.serialized(.compact).write(toFile: json, atomically: true, encoding: .utf8) } catch {
                    throw CLIError("cannot write '\(json)': \(error.localizedDescription)")
                }
            }
        }
    }

    /// The vocabulary and tokenizer: a dump with greedy tokenization, or a model's own.
    func tokenizer() throws -> (TokenVocabulary, (String) -> [Int]) {
        if let vocab {
            guard let text = try? String(contentsOfFile: vocab, encoding: .utf8), let v = TokenVocabulary.parseDump(text) else {
                throw CLIError("cannot read the vocabulary dump '\(vocab)'")
            }
            let greedy = GreedyTokenizer(vocabulary: v)
            return (v, greedy.tokenize)
        }
        let file = try GGUFFile(path: try ModelCache.resolve(model))
        let tokenizer = try Tokenizer(gguf: file)
        let specials = Set((0..<tokenizer.vocabularySize).filter { tokenizer.isControl(TokenID($0)) })
        let vocabulary = TokenVocabulary(tokens: tokenizer.allTokenBytes(), specialTokens: specials)
        return (vocabulary, { text in tokenizer.encode(text, addSpecial: false, parseSpecial: false).map(Int.init) })
    }
}

/// One file's MaskBench outcome with its timings.
struct SchemaBenchResult {
    var id: String
    /// The compile error (or why the file could not be read), when the schema did not compile.
    var compileError: String?
    var outcome = MaskBench.Outcome()
    var compileMicros = 0.0
    /// The `oneOf`s compiled as `anyOf` (JSON Pointers; see `JSONSchemaCompiler.OverlappingOneOf`).
    var oneOfsAsAnyOf: [String] = []
    /// Mask computation times, one per token checked.
    var maskMicros: [Double] = []
    /// What each of those masks did (`TokenMaskComputer.lastMask`).
    var maskStatistics: [TokenMaskComputer.MaskStatistics] = []

    var passed: Bool { compileError == nil && !outcome.validationError && !outcome.invalidationError }

    /// Compiles the file's schema and checks its instances, timing the compilation and every mask.
    static func measure(
        id: String, fileText: String, options: JSONSchemaCompiler.Options,
        overlappingOneOf: JSONSchemaCompiler.OverlappingOneOf = .refuse, computer: TokenMaskComputer,
        tokenize: (String) -> [Int]
    ) -> SchemaBenchResult {
        var r = SchemaBenchResult(id: id)
        guard let file = MaskBench.File(text: fileText) else {
            r.compileError = "bad file: not in the MaskBench format"
            return r
        }
        let clock = ContinuousClock()
        let t0 = clock.now
        let grammar: Grammar
        do {
            let compiled = try JSONSchemaCompiler.compileReporting(file.schema, options: options, overlappingOneOf: overlappingOneOf)
            grammar = compiled.grammar
            r.oneOfsAsAnyOf = compiled.report.oneOfsAsAnyOf
        } catch {
            r.compileMicros = micros(clock.now - t0)
            r.compileError = error.description
            return r
        }
        r.compileMicros = micros(clock.now - t0)
        var times: [Double] = []
        var statistics: [TokenMaskComputer.MaskStatistics] = []
        r.outcome = MaskBench.check(file, grammar: grammar, vocabulary: computer.vocabulary, tokenize: tokenize) { matcher in
            let t = clock.now
            let mask = computer.mask(for: matcher)
            times.append(micros(clock.now - t))
            statistics.append(computer.lastMask)
            return mask
        }
        r.maskMicros = times
        r.maskStatistics = statistics
        return r
    }

    static func micros(_ d: Duration) -> Double {
        let (s, atto) = d.components
        return Double(s) * 1e6 + Double(atto) / 1e12
    }

    /// The `-v` line.
    var line: String {
        let status =
            passed ? "ok" : (compileError.map { "compile: \($0)" } ?? (outcome.invalidationError ? "INVALIDATION" : "validation"))
        let refusal = outcome.firstRefusal.map { " refused after: …" + String($0.suffix(160)) } ?? ""
        return "\(id): \(status) compile \(Int(compileMicros))us tokens \(outcome.tokens) maxmask \(Int(maskMicros.max() ?? 0))us"
            + " wrong tests \(outcome.wrongTests)\(refusal)"
    }

    /// The `--json` form.
    var json: JSONValue {
        var o = JSONObject()
        o["id"] = .string(id)
        o["compile_error"] = compileError.map { .string($0) } ?? .bool(false)
        o["validation_error"] = .bool(outcome.validationError)
        o["invalidation_error"] = .bool(outcome.invalidationError)
        o["compile_us"] = .double(compileMicros)
        o["oneofs_as_anyof"] = .integer(oneOfsAsAnyOf.count)
        o["num_tokens"] = .integer(outcome.tokens)
        o["all_mask_us"] = .array(maskMicros.map { .double(($0 * 100).rounded() / 100) })
        return .object(o)
    }
}

/// Counts and timing statistics over files.
struct SchemaBenchSummary {
    var files = 0, passed = 0, compileErrors = 0, validationErrors = 0, invalidationErrors = 0, inconsistencies = 0
    var compileMeanMicros = 0.0, compileP50Micros = 0.0, compileP99Micros = 0.0, compileMaxMicros = 0.0
    var maskMeanMicros = 0.0, maskP50Micros = 0.0, maskP99Micros = 0.0, maskMaxMicros = 0.0
    var tokens = 0
    /// Schemas compiled with some overlapping `oneOf` as `anyOf`, and how many of them passed.
    var relaxedOneOf = 0, relaxedOneOfPassed = 0

    init(_ results: [SchemaBenchResult]) {
        files = results.count
        passed = results.filter(\.passed).count
        compileErrors = results.filter { $0.compileError != nil }.count
        validationErrors = results.filter { $0.outcome.validationError }.count
        invalidationErrors = results.filter { $0.outcome.invalidationError }.count
        relaxedOneOf = results.filter { !$0.oneOfsAsAnyOf.isEmpty }.count
        relaxedOneOfPassed = results.filter { !$0.oneOfsAsAnyOf.isEmpty && $0.passed }.count
        inconsistencies = results.reduce(0) { $0 + $1.outcome.maskInconsistencies }
        let compiled = results.filter { $0.compileError == nil }.map(\.compileMicros).sorted()
        if let last = compiled.last {
            compileMeanMicros = compiled.reduce(0, +) / Double(compiled.count)
            compileP50Micros = compiled[compiled.count / 2]
            compileP99Micros = compiled[min(compiled.count - 1, Int(Double(compiled.count) * 0.99))]
            compileMaxMicros = last
        }
        let masks = results.flatMap(\.maskMicros).sorted()
        tokens = masks.count
        if let last = masks.last {
            maskMeanMicros = masks.reduce(0, +) / Double(masks.count)
            maskP50Micros = masks[masks.count / 2]
            maskP99Micros = masks[min(masks.count - 1, Int(Double(masks.count) * 0.99))]
            maskMaxMicros = last
        }
    }

    var json: JSONValue {
        .object(
            JSONObject([
                ("files", .integer(files)), ("passed", .integer(passed)),
                ("pass_rate", .double(files == 0 ? 0 : Double(passed) / Double(files))),
                ("compile_errors", .integer(compileErrors)), ("validation_errors", .integer(validationErrors)),
                ("invalidation_errors", .integer(invalidationErrors)), ("mask_inconsistencies", .integer(inconsistencies)),
                ("oneof_as_anyof", .integer(relaxedOneOf)), ("oneof_as_anyof_passed", .integer(relaxedOneOfPassed)),
                ("compile_us_mean", .double(compileMeanMicros)), ("compile_us_p50", .double(compileP50Micros)),
                ("compile_us_p99", .double(compileP99Micros)),
                ("compile_us_max", .double(compileMaxMicros)), ("tokens", .integer(tokens)),
                ("mask_us_mean", .double(maskMeanMicros)), ("mask_us_p50", .double(maskP50Micros)),
                ("mask_us_p99", .double(maskP99Micros)), ("mask_us_max", .double(maskMaxMicros))
            ]))
    }

    var text: String {
        func f(_ x: Double) -> String { String(format: "%.1f", x) }
        let inconsistent = inconsistencies > 0 ? ", MASK INCONSISTENCIES: \(inconsistencies)" : ""
        return """
            schemas passed: \(passed) / \(files) (\(files == 0 ? 0 : passed * 100 / files)%)
            compile errors: \(compileErrors), validation errors: \(validationErrors), invalidation errors: \(invalidationErrors)\(inconsistent)
            overlapping oneOf compiled as anyOf: \(relaxedOneOf) schemas (\(relaxedOneOfPassed) passed)
            compile time: mean \(f(compileMeanMicros / 1000)) ms, p50 \(f(compileP50Micros / 1000)) ms, p99 \(f(compileP99Micros / 1000)) ms, max \(f(compileMaxMicros / 1000)) ms
            mask time (\(tokens) tokens): mean \(f(maskMeanMicros)) µs, p50 \(f(maskP50Micros)) µs, p99 \(f(maskP99Micros)) µs, max \(f(maskMaxMicros)) µs
            """
    }
}

/// The slowest 1% of masks against all of them: what their matcher states held and what the
/// computation did (`schema-bench --tail`).
struct MaskTail {
    struct Row {
        var count = 0, cached = 0, withLexicalWalks = 0
        var threads: [Int] = [], groups: [Int] = [], work: [Int] = []
        var micros = 0.0

        mutating func add(_ s: TokenMaskComputer.MaskStatistics, _ t: Double) {
            count += 1
            micros += t
            if s.cached { cached += 1 }
            if s.lexicalWalks > 0 { withLexicalWalks += 1 }
            threads.append(s.threads)
            groups.append(s.groups)
            work.append(s.work)
        }

        func median(_ xs: [Int]) -> Int { xs.isEmpty ? 0 : xs.sorted()[xs.count / 2] }
        func p90(_ xs: [Int]) -> Int { xs.isEmpty ? 0 : xs.sorted()[xs.count * 9 / 10] }
        func percent(_ n: Int) -> String { count == 0 ? "0%" : "\(n * 100 / count)%" }

        func line(_ name: String) -> String {
            "\(name): \(count) masks, \(String(format: "%.0f", micros / 1000)) ms; cached \(percent(cached)), "
                + "with a first lexical walk \(percent(withLexicalWalks)); threads median \(median(threads)) p90 \(p90(threads)), "
                + "groups median \(median(groups)) p90 \(p90(groups)), work median \(median(work)) p90 \(p90(work))"
        }
    }

    var all = Row(), slowest = Row(), walksOnly = Row()
    var files: [(String, Int)] = []
    var threshold = 0.0

    init(_ results: [SchemaBenchResult]) {
        var times: [(Double, Int, Int)] = []
        for (f, r) in results.enumerated() {
            for (i, t) in r.maskMicros.enumerated() where i < r.maskStatistics.count { times.append((t, f, i)) }
        }
        guard !times.isEmpty else { return }
        times.sort { $0.0 > $1.0 }
        let n = max(1, times.count / 100)
        threshold = times[n - 1].0
        var perFile: [Int: Int] = [:]
        for (k, (t, f, i)) in times.enumerated() {
            let s = results[f].maskStatistics[i]
            all.add(s, t)
            if k < n {
                slowest.add(s, t)
                perFile[f, default: 0] += 1
                if s.lexicalWalks > 0 { walksOnly.add(s, t) }
            }
        }
        files = perFile.sorted { $0.value > $1.value }.prefix(8).map { (results[$0.key].id, $0.value) }
        let steady = times.filter { results[$0.1].maskStatistics[$0.2].lexicalWalks == 0 }.map(\.0)
        if !steady.isEmpty {
            // Sorted slowest first: the mean and p99 of the masks that walked no new lexical state.
            steadyMean = steady.reduce(0, +) / Double(steady.count)
            steadyP99 = steady[steady.count / 100]
        }
    }

    /// Mean and p99 over the masks without a first lexical walk (a terminal state seen for the
    /// first time costs a walk of the vocabulary once; the rest is the steady state).
    var steadyMean = 0.0, steadyP99 = 0.0

    var text: String {
        var lines = [
            "mask tail (the slowest 1%, from \(String(format: "%.1f", threshold)) µs):",
            "  " + all.line("all"), "  " + slowest.line("slowest 1%"),
            "  " + walksOnly.line("slowest 1% with a first lexical walk")
        ]
        lines.append(
            "  masks without a first lexical walk: mean \(String(format: "%.1f", steadyMean)) µs, p99 \(String(format: "%.1f", steadyP99)) µs"
        )
        lines.append("  files with most of them: " + files.map { "\($0.0) (\($0.1))" }.joined(separator: ", "))
        return lines.joined(separator: "\n")
    }
}
