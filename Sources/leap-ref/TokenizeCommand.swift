import ArgumentParser
import Foundation
import GGUF
import Tokenizers

/// `leap-ref tokenize`: a model's token ids for a text, or llama.cpp's vocabulary test.
struct Tokenize: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Tokenize text with a model's tokenizer and print the ids and pieces.",
        discussion: """
            With --vocab-test FILE.inp, tokenizes each test string of a llama.cpp vocabulary test \
            file (strings separated by '\\n__ggml_vocab_test__\\n') without BOS and without \
            special-token parsing, and prints one line per string in the .out format \
            (each id preceded by a space), so that the output can be diffed with the .out file.
            """
    )

    @Option(help: "The GGUF model (default: the model installed by scripts/setup.sh).")
    var model: String?

    @Option(name: .customLong("vocab-test"), help: "A llama.cpp vocabulary test file (.inp).")
    var vocabTest: String?

    @Flag(name: .customLong("no-special"), help: "Do not add BOS/EOS.")
    var noSpecial = false

    @Flag(name: .customLong("no-parse-special"), help: "Tokenize control-token text (<|im_start|>...) as plain text.")
    var noParseSpecial = false

    @Flag(name: .customLong("ids-only"), help: "Print only the ids, space-separated.")
    var idsOnly = false

    @Argument(help: "The text to tokenize.")
    var text: String?

    func run() async throws {
        try await runReportingErrors {
            let path = try ModelCache.resolve(model)
            let tokenizer = try Tokenizer(gguf: GGUFFile(path: path))
            if let vocabTest {
                guard let inp = try? String(contentsOfFile: vocabTest, encoding: .utf8) else {
                    throw CLIError("cannot read '\(vocabTest)' as UTF-8 text")
                }
                writeOut(VocabTest.run(tokenizer, inp: inp))
                return
            }
            guard let text else { throw CLIError("give a text to tokenize, or --vocab-test FILE.inp") }
            let ids = tokenizer.encode(text, addSpecial: !noSpecial, parseSpecial: !noParseSpecial)
            writeOut(Tokenize.report(ids, tokenizer: tokenizer, idsOnly: idsOnly))
        }
    }

    /// One line per token: id, stored text and the decoded piece; then a summary.
    static func report(_ ids: [TokenID], tokenizer: Tokenizer, idsOnly: Bool) -> String {
        if idsOnly { return ids.map(String.init).joined(separator: " ") + "\n" }
        var out = ""
        for id in ids {
            let type = tokenizer.tokenType(id)
            let marker = type == .normal ? "" : "  [\(type)]"
            let bytes = tokenizer.tokenBytes(id, renderSpecial: true)
            // A piece that is not valid UTF-8 on its own (part of a character) is shown as bytes.
            let shown =
                String(validating: bytes, as: UTF8.self)?.debugDescription
                ?? bytes.map { "\\x" + String($0, radix: 16, uppercase: true) }.joined()
            out +=
                String(format: "%8d", Int(id)) + "  " + tokenizer.tokenText(id).debugDescription
                + "  -> " + shown + marker + "\n"
        }
        out += "\(ids.count) tokens: [" + ids.map(String.init).joined(separator: ", ") + "]\n"
        return out
    }
}
