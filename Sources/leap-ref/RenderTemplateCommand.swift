import ArgumentParser
import ChatTemplates
import Foundation

/// `leap-ref render-template --template FILE.jinja --cases cases.json --out DIR`:
/// renders a chat template for every conversation of a fixture file, writing
/// `DIR/<case>.txt` or, where rendering fails, `DIR/<case>.error` with the error
/// (`Kind: message`), the layout of `fixtures/chat-templates/expected/<template>/`.
struct RenderTemplate: ParsableCommand {
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

    @Option(name: .long, help: "The Jinja template file.")
    var template: String

    @Option(name: .long, help: "The cases JSON file.")
    var cases: String

    @Option(name: .long, help: "The output directory (created if missing).")
    var out: String

    @Flag(name: .long, help: "Let strftime_now read the real clock instead of the fixtures' fixed time.")
    var now = false

    func run() throws {
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
