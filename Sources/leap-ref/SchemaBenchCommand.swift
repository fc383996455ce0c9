import ArgumentParser
import Foundation
import GGUF
import Grammar
import LeapJSON
import Tokenizers

/// `leap-ref schema-bench`: the MaskBench protocol over a directory of schemas, with a
/// model's own vocabulary and tokenizer.
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

    @Option(help: "Write per-file results and the summary as JSON to this file.")
    var json: String?

    @Option(help: "Only the first N files (sorted by name).")
    var limit: Int?

    func run() async throws {
        try await runReportingErrors {
            let file = try GGUFFile(path: try ModelCache.resolve(model))
            let tokenizer = try Tokenizer(gguf: file)
            let specials = Set((0..<tokenizer.vocabularySize).filter { tokenizer.isControl(TokenID($0)) })
            let vocabulary = TokenVocabulary(tokens: tokenizer.allTokenBytes(), specialTokens: specials)
            let computer = TokenMaskComputer(vocabulary: vocabulary)
            computer.prewarm()
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else {
                throw CLIError("cannot list directory '\(directory)'")
            }
            var files = names.filter { $0.hasSuffix(".json") }.sorted()
            if let limit { files = Array(files.prefix(max(0, limit))) }
            guard !files.isEmpty else { throw CLIError("no *.json files in '\(directory)'") }
            var results: [MaskBench.FileResult] = []
            for name in files {
                guard let text = try? String(contentsOfFile: directory + "/" + name, encoding: .utf8) else {
                    throw CLIError("cannot read '\(name)'")
                }
                results.append(
                    MaskBench.run(id: name, fileText: text, computer: computer) { text in
                        tokenizer.encode(text, addSpecial: false, parseSpecial: false).map(Int.init)
                    })
            }
            let summary = MaskBench.Summary(results)
            print(summary.text)
            if let json {
                let doc = JSONValue.object(JSONObject([("files", .array(results.map(\.json))), ("summary", summary.json)]))
                do { try doc.serialized(.compact).write(toFile: json, atomically: true, encoding: .utf8) } catch {
                    throw CLIError("cannot write '\(json)': \(error.localizedDescription)")
                }
            }
        }
    }
}
