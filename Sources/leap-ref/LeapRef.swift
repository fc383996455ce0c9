import ArgumentParser

/// The `leap-ref` command line: one subcommand per job, each in its own file.
@main
struct LeapRef: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "leap-ref",
        abstract: "A pure-Swift LLM inference engine for GGUF models (LFM2, Llama).",
        subcommands: [
            Chat.self,
            Inspect.self,
            Logits.self,
            Pull.self,
            Quantize.self,
            Bench.self,
            Generate.self,
            RenderTemplate.self,
            SchemaBench.self,
            Serve.self,
            Speak.self,
            Tokenize.self
        ]
    )
}
