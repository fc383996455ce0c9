// Development harness for the MaskBench protocol (the `leap-ref schema-bench` core lives in
// Grammar.MaskBench). Until the model tokenizer is wired in, tokens come from a vocabulary dump
// (scripts/dump_vocab.py) and text is split by greedy longest match over that vocabulary.
//
//   swift run -c release SchemaBench DIR --vocab VOCAB.txt [--json OUT] [--limit N] [--filter S] [-v]
import Foundation
import Grammar
import LeapJSON

var args = Array(CommandLine.arguments.dropFirst())
@MainActor func option(_ name: String) -> String? {
    guard let i = args.firstIndex(of: name), i + 1 < args.count else { return nil }
    let v = args[i + 1]
    args.removeSubrange(i...(i + 1))
    return v
}
let vocabPath = option("--vocab") ?? "Tests/GrammarTests/Fixtures/smollm2-vocab.txt"
let jsonOut = option("--json")
let limit = option("--limit").flatMap(Int.init)
let filter = option("--filter")
let verbose = args.contains("-v")
args.removeAll { $0 == "-v" }
let lenientOneOf = args.contains("--oneof-as-anyof")
args.removeAll { $0 == "--oneof-as-anyof" }
guard let dir = args.first else {
    print("usage: SchemaBench DIR [--vocab FILE] [--json OUT] [--limit N] [--filter S] [-v]")
    exit(2)
}
guard let vtext = try? String(contentsOfFile: vocabPath, encoding: .utf8), let vocab = TokenVocabulary.parseDump(vtext) else {
    print("cannot read vocabulary \(vocabPath)")
    exit(1)
}
let tokenizer = GreedyTokenizer(vocabulary: vocab)
let computer = TokenMaskComputer(vocabulary: vocab)
let noPrewarm = args.contains("--no-prewarm")
args.removeAll { $0 == "--no-prewarm" }
if !noPrewarm {
    let t0 = ContinuousClock.now
    computer.prewarm()
    print("prewarm (once per vocabulary): \(ContinuousClock.now - t0)")
}
var files = (try FileManager.default.contentsOfDirectory(atPath: dir)).filter { $0.hasSuffix(".json") }.sorted()
if let filter { files = files.filter { $0.contains(filter) } }
if let limit { files = Array(files.prefix(limit)) }
var options = JSONSchemaCompiler.Options()
options.oneOfAsAnyOf = lenientOneOf
var results: [MaskBench.FileResult] = []
for f in files {
    let text = try String(contentsOfFile: dir + "/" + f, encoding: .utf8)
    let r = MaskBench.run(id: f, fileText: text, computer: computer, options: options, tokenize: tokenizer.tokenize)
    if verbose || r.invalidationError || r.maskInconsistencies > 0 {
        let status = r.passed ? "ok" : (r.compileError.map { "compile: \($0)" } ?? (r.invalidationError ? "INVALIDATION" : "validation"))
        let mx = r.maskMicros.max() ?? 0
        print(
            "\(f): \(status) compile \(Int(r.compileMicros))us tokens \(r.numTokens) maxmask \(Int(mx))us wrong tests \(r.wrongTests)\(r.firstRefusal.map { " refused after: …" + String($0.suffix(160)) } ?? "")"
        )
    }
    results.append(r)
}
let summary = MaskBench.Summary(results)
print(summary.text)
print("lexical walks: \(computer.lexCacheMisses), \(Int(computer.lexWalkMicros / 1000)) ms; state cache hits \(computer.stateCacheHits)")
if let jsonOut {
    let doc = JSONValue.object(JSONObject([("files", .array(results.map(\.json))), ("summary", summary.json)]))
    try doc.serialized(.compact).write(toFile: jsonOut, atomically: true, encoding: .utf8)
}
