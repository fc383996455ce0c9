// The worker of the schema fuzzer (scripts/fuzz_schemas.py drives it; see docs/fuzzing.md).
//
//   SchemaFuzz [--vocab VOCAB.txt]
//
// Reads one request per line on stdin and answers one JSON line per request on stdout:
//
//   {"id": "...", "schema": "<schema text>", "texts": ["<instance>", ...], "walks": 8, "seed": 1}
//
// For each request: compile the schema (default limits), then for every instance text feed its
// tokens (greedy tokenization over the vocabulary) through the masks and the matcher, checking
// that each mask agrees with the matcher on the token; then generate `walks` documents by
// seeded random walks over the masks. The driver validates accepted instances and generated
// documents with python-jsonschema. A crash or a hang of this process is a finding too.
import Foundation
import Grammar
import LeapJSON
import Sampling

/// What the worker found for one request.
struct Report {
    var fields = JSONObject()
    var inconsistencies: [String] = []
    var maxMaskMillis = 0.0
    var truncatedMasks = 0
    var overflows = 0
    var deadEnds = 0
}

final class Worker {
    let vocabulary: TokenVocabulary
    let computer: TokenMaskComputer
    let tokenizer: GreedyTokenizer
    /// Tokens that close something (`"`, `]`, `}`) and short tokens: walks prefer them, so that
    /// documents end.
    let closing: [Bool]
    let short: [Bool]
    let clock = ContinuousClock()

    init(vocabulary: TokenVocabulary) {
        self.vocabulary = vocabulary
        computer = TokenMaskComputer(vocabulary: vocabulary)
        computer.prewarm()
        tokenizer = GreedyTokenizer(vocabulary: vocabulary)
        closing = vocabulary.tokens.map { t in t.contains { $0 == 0x22 || $0 == 0x5D || $0 == 0x7D } }
        short = vocabulary.tokens.map { $0.count <= 2 }
    }

    func handle(_ request: JSONValue) -> JSONValue {
        var report = Report()
        report.fields["id"] = request["id"] ?? .null
        let schemaText = request["schema"]?.stringValue ?? "{}"
        let t0 = clock.now
        let grammar: Grammar
        do {
            grammar = try JSONSchemaCompiler.compile(schemaText)
        } catch {
            report.fields["compile_ms"] = .double(millis(clock.now - t0))
            report.fields["compile"] = .string("error")
            report.fields["kind"] = .string(kindName(error.kind))
            report.fields["error"] = .string(error.description)
            return .object(report.fields)
        }
        report.fields["compile_ms"] = .double(millis(clock.now - t0))
        report.fields["compile"] = .string("ok")
        let texts = (request["texts"]?.arrayValue ?? []).compactMap(\.stringValue)
        report.fields["accepted"] = .array(texts.map { .bool(check($0, grammar, &report)) })
        var rng = SplitMix64(seed: UInt64(truncatingIfNeeded: request["seed"]?.intValue ?? 1))
        var generated: [JSONValue] = []
        for _ in 0..<(request["walks"]?.intValue ?? 0) {
            if let doc = walk(grammar, &rng, &report, maxTokens: request["maxTokens"]?.intValue ?? 300) { generated.append(.string(doc)) }
        }
        report.fields["generated"] = .array(generated)
        report.fields["inconsistencies"] = .array(report.inconsistencies.prefix(5).map { .string($0) })
        report.fields["max_mask_ms"] = .double(report.maxMaskMillis)
        report.fields["truncated_masks"] = .integer(report.truncatedMasks)
        report.fields["overflows"] = .integer(report.overflows)
        report.fields["dead_ends"] = .integer(report.deadEnds)
        return .object(report.fields)
    }

    func kindName(_ kind: SchemaError.Kind) -> String {
        switch kind {
        case .invalid: return "invalid"
        case .unsatisfiable: return "unsatisfiable"
        case .unsupported(let k): return "unsupported:" + k
        case .limitExceeded(let l): return "limit:" + l
        }
    }

    func millis(_ d: Duration) -> Double {
        let (s, atto) = d.components
        return Double(s) * 1e3 + Double(atto) / 1e15
    }

    func timedMask(_ m: GrammarMatcher, _ report: inout Report) -> TokenMask {
        let t = clock.now
        let mask = computer.mask(for: m)
        report.maxMaskMillis = max(report.maxMaskMillis, millis(clock.now - t))
        if mask.isTruncated { report.truncatedMasks += 1 }
        return mask
    }

    /// Whether the grammar accepts `text` (bytes); along its tokens, every mask must agree
    /// with the matcher (exactly, or as a subset when truncated).
    func check(_ text: String, _ grammar: Grammar, _ report: inout Report) -> Bool {
        let byBytes = GrammarMatcher(grammar: grammar)
        let accepted = byBytes.accept(text) && byBytes.canAcceptEnd
        let m = GrammarMatcher(grammar: grammar)
        for id in tokenizer.tokenize(text) {
            let mask = timedMask(m, &report)
            let bytes = vocabulary.tokens[id]
            let accepts = m.wouldAccept(bytes)
            if mask[id] && !accepts {
                report.inconsistencies.append("mask allows a refused token \(String(decoding: bytes, as: UTF8.self).debugDescription)")
            }
            // (Tokens that lead into the overflow state are left out of masks where they can be.)
            if !mask[id] && accepts && !mask.isTruncated && !overflowsOnTheWay(m, bytes) {
                report.inconsistencies.append("mask misses an accepted token \(String(decoding: bytes, as: UTF8.self).debugDescription)")
            }
            guard m.accept(bytes: bytes) else { break }
            if m.hasOverflowed {
                report.overflows += 1
                break
            }
        }
        return accepted
    }

    /// Whether feeding `bytes` passes through the overflow state (the mask excludes such tokens).
    func overflowsOnTheWay(_ m: GrammarMatcher, _ bytes: [UInt8]) -> Bool {
        let mark = m.checkpoint()
        defer { m.rollback(to: mark) }
        return m.accept(bytes: bytes) && m.hasOverflowed
    }

    /// A random document of the grammar, or nil when the walk does not finish.
    func walk(_ grammar: Grammar, _ rng: inout SplitMix64, _ report: inout Report, maxTokens: Int) -> String? {
        let m = GrammarMatcher(grammar: grammar)
        var out: [UInt8] = []
        for step in 0..<maxTokens {
            if m.canAcceptEnd && (!m.canContinue || Double.random(in: 0..<1, using: &rng) < 0.2 + Double(step) / Double(maxTokens)) {
                return String(decoding: out, as: UTF8.self)
            }
            let mask = timedMask(m, &report)
            let allowed = mask.allowed.filter { !vocabulary.specialTokens.contains($0) }
            guard !allowed.isEmpty else {
                if !m.canAcceptEnd { report.deadEnds += 1 }
                return m.canAcceptEnd ? String(decoding: out, as: UTF8.self) : nil
            }
            let r = Double.random(in: 0..<1, using: &rng)
            let preferred = r < 0.4 ? allowed.filter { closing[$0] } : r < 0.7 ? allowed.filter { short[$0] } : allowed
            let id = (preferred.isEmpty ? allowed : preferred).randomElement(using: &rng) ?? allowed[0]
            let bytes = vocabulary.tokens[id]
            guard m.accept(bytes: bytes) else {
                report.inconsistencies.append("walk: mask allowed a token the matcher refused")
                return nil
            }
            if m.hasOverflowed {
                report.overflows += 1
                return nil
            }
            out += bytes
        }
        return nil
    }
}

var vocabPath = "Tests/GrammarTests/Fixtures/smollm2-vocab.txt"
var arguments = Array(CommandLine.arguments.dropFirst())
if let i = arguments.firstIndex(of: "--vocab"), i + 1 < arguments.count { vocabPath = arguments[i + 1] }
guard let vocabText = try? String(contentsOfFile: vocabPath, encoding: .utf8), let vocabulary = TokenVocabulary.parseDump(vocabText) else {
    FileHandle.standardError.write(Data("SchemaFuzz: cannot read the vocabulary dump \(vocabPath)\n".utf8))
    exit(2)
}
let worker = Worker(vocabulary: vocabulary)
while let line = readLine(strippingNewline: true) {
    let answer: JSONValue
    if let request = try? JSONValue.parse(line) {
        answer = worker.handle(request)
    } else {
        answer = .object(JSONObject([("error", .string("bad request line"))]))
    }
    FileHandle.standardOutput.write(Data((answer.serialized(.compact) + "\n").utf8))
}
