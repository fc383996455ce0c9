import ArgumentParser
import ChatTemplates
import Foundation
import GGUF
import LeapJSON
import Tokenizers

/// `leap-ref render-template --template FILE.jinja --cases cases.json --out DIR`:
/// renders a chat template for every conversation of a fixture file, writing
/// `DIR/<case>.txt` or, where rendering fails, `DIR/<case>.error` with the error
/// (`Kind: message`), the layout of `fixtures/chat-templates/expected/<template>/`.
/// `leap-ref render-template --model FILE.gguf --messages msgs.json` renders the model's
/// own template (`tokenizer.chat_template`) for one conversation to stdout.
struct RenderTemplate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "render-template",
        abstract: "Render a Jinja chat template for each conversation of a cases file.",
        discussion: """
            Cases are a JSON list of {"name", "messages", "tools"?, "add_generation_prompt"?}. \
            Variables are set as for the chat-template fixtures: bos_token <s>, eos_token </s>, \
            add_generation_prompt true unless the case says otherwise, tools only when given, \
            and strftime_now fixed at 2026-01-15 09:30 (use --now to read the real clock).
            """
    )

    @Option(name: .long, help: "The Jinja template file (with --cases and --out).")
    var template: String?

    @Option(name: .long, help: "The cases JSON file.")
    var cases: String?

    @Option(name: .long, help: "The output directory (created if missing).")
    var out: String?

    @Option(name: .long, help: "A GGUF model whose own chat template to render (with --messages).")
    var model: String?

    @Option(name: .long, help: "A JSON list of messages ({\"role\", \"content\", ...}), or an object {\"messages\", \"tools\"?}.")
    var messages: String?

    @Flag(name: .customLong("no-generation-prompt"), help: "With --model: set add_generation_prompt to false.")
    var noGenerationPrompt = false

    @Flag(name: .long, help: "Let strftime_now read the real clock instead of the fixtures' fixed time.")
    var now = false

    func run() async throws {
        try await runReportingErrors {
            if let messages {
                guard template == nil, cases == nil else { throw CLIError("use either --model/--messages or --template/--cases/--out") }
                try renderModelTemplate(messagesPath: messages)
                return
            }
            guard let template, let cases, let out else {
                throw CLIError("give --template FILE --cases FILE --out DIR, or [--model FILE.gguf] --messages FILE")
            }
            try renderCases(template: template, cases: cases, out: out)
        }
    }

    private func renderModelTemplate(messagesPath: String) throws {
        let file = try GGUFFile(path: try ModelCache.resolve(model))
        guard let source = try file.metadata.optional("tokenizer.chat_template", file.metadata.string) else {
            throw CLIError("the model has no chat template (tokenizer.chat_template)")
        }
        guard let text = try? String(contentsOfFile: messagesPath, encoding: .utf8) else {
            throw CLIError("cannot read '\(messagesPath)'")
        }
        let json = try JSONValue.parse(text)
        let list = json.arrayValue ?? json["messages"]?.arrayValue
        guard let list else { throw CLIError("'\(messagesPath)' must hold a JSON list of messages or {\"messages\": [...]}") }
        let tokenizer = try Tokenizer(gguf: file)
        let piece = { (id: TokenID?) in id.map { tokenizer.tokenText($0) } ?? "" }
        let rendered = try ChatTemplate(source: source).render(
            messages: list, tools: json["tools"]?.arrayValue, addGenerationPrompt: !noGenerationPrompt,
            bosToken: piece(tokenizer.bosID), eosToken: piece(tokenizer.eosID),
            options: RenderOptions())
        writeOut(rendered)
    }

    private func renderCases(template: String, cases: String, out: String) throws {
        let source = try String(contentsOfFile: template, encoding: .utf8)
        let casesJSON = try String(contentsOfFile: cases, encoding: .utf8)
        let options: RenderOptions = now ? RenderOptions() : .fixtures
        let results = try renderFixtureCases(templateSource: source, casesJSON: casesJSON, options: options)
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        var failures = 0
        for result in results {
            let path = (out as NSString).appendingPathComponent(result.fileName)
            try Data(result.fileContents.utf8).write(to: URL(fileURLWithPath: path))
            if case .failure = result.result { failures += 1 }
        }
        print("\(results.count) cases rendered into \(out) (\(failures) errors)")
    }
}
