import ArgumentParser
import Foundation
import LeapSDKCore

/// `leap-ref generate`: continues a raw prompt, streaming the text. It runs on the
/// `ServingEngine`, as every generation does: the engine tokenizes the raw text as it does
/// a `.text` prompt (special tokens parsed, BOS as the model asks), and each token comes
/// from its per-token step.
struct Generate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Continue a prompt (raw text, no chat template), streaming tokens to stdout.",
        discussion: """
            Stops after -n tokens or at an end-of-generation token. Speed goes to stderr. Unset sampling \
            flags take the model's defaults (its general.sampling.* metadata, else leap-ref's, with DRY).
            """
    )

    @Option(help: "The GGUF model (default: the model installed by scripts/setup.sh).")
    var model: String?

    @Option(help: "The prompt text (special tokens such as <|im_start|> are parsed).")
    var prompt: String

    @Option(name: .short, help: "Most tokens to generate.")
    var n = 128

    @OptionGroup(title: "Sampling")
    var sampling: SamplingFlags

    @Option(help: "Random seed (the same seed gives the same text).")
    var seed: UInt64 = 0

    @Option(name: .shortAndLong, help: "Threads (default: the cores granted to the process: its affinity mask and CPU quota).")
    var threads: Int?

    @Option(name: .customLong("ctx"), help: "Context length (default: prompt + n, at most the model's trained context).")
    var contextLength: Int?

    func run() async throws {
        try await runReportingErrors {
            guard n >= 0 else { throw CLIError("-n must be >= 0") }
            if let contextLength, contextLength < 2 { throw CLIError("--ctx must be at least 2") }
            let path = try ModelCache.resolve(model)
            let runner: ModelRunner
            do {
                runner = try await Leap.load(path: path, options: LiquidInferenceEngineOptions(cpuThreads: threads))
            } catch let error as LeapError {
                throw CLIError(error.description)
            }
            // The caches are reserved, not touched, up to the context: the trained one unless
            // --ctx says otherwise; the request's own limit is prompt + n.
            let engine = try ServingEngine(
                runner: runner, configuration: .init(contextSize: contextLength ?? Int.max, prefillChunk: 512))
            writeOut(prompt)
            let result = try await Generate.continuation(
                of: prompt, on: engine, count: n, sampling: sampling.overrides(seed: seed), contextLength: contextLength
            ) { writeOut($0) }
            writeOut("\n")
            guard let usage = result.usage else { throw CLIError("the generation ended without its usage") }
            let processed = usage.promptTokens - usage.cachedTokens
            let pp = usage.promptSeconds > 0 ? Double(processed) / usage.promptSeconds : 0
            let tg = usage.generationSeconds > 0 ? Double(usage.completionTokens) / usage.generationSeconds : 0
            FileHandle.standardError.write(
                Data(
                    String(
                        format: "[prompt %d tokens, %.1f t/s; generated %d tokens, %.1f t/s]\n", usage.promptTokens, pp,
                        usage.completionTokens, tg
                    ).utf8))
            await engine.shutdown(cancelRunning: true)
        }
    }

    /// What a continuation produced.
    struct Continuation {
        /// The generated text.
        var text = ""
        /// The generated tokens (only when asked for: `recordTokens`).
        var tokens: [Int] = []
        /// How it ended, and its counts and times (set by the completion's last event).
        var reason = ServingFinishReason.stop
        var usage: ServingUsage?
    }

    /// Continues `prompt` (raw text: special tokens parsed, BOS as the model asks) on
    /// `engine` for up to `count` tokens with `sampling`, stopping early at an
    /// end-of-generation token or the end of the context (`contextLength`, else prompt +
    /// `count`); `emit` gets the text as it forms. `recordTokens` also collects the
    /// generated token ids (from the tokens' log-probability records).
    static func continuation(
        of prompt: String, on engine: ServingEngine, count: Int, sampling: SamplingOverrides, contextLength: Int? = nil,
        recordTokens: Bool = false, emit: (String) -> Void
    ) async throws -> Continuation {
        var result = Continuation()
        do {
            // The engine tokenizes the text prompt once; its length sets the default limit.
            let ids = try engine.promptTokens(.text(prompt))
            let request = ServingRequest(
                prompt: .tokens(ids), sampling: sampling, maxTokens: count, logprobs: recordTokens ? 0 : nil,
                parsesCalls: false, contextLimit: contextLength ?? (ids.count + max(1, count)))
            // Raw text: no reasoning is split off, no call parsed; the reply is its text.
            for try await event in try engine.submit(request).events {
                switch event {
                case .text(let text, let logprobs):
                    result.text += text
                    result.tokens += logprobs.map(\.chosen.id)
                    emit(text)
                case .finished(let reason, let usage):
                    result.reason = reason
                    result.usage = usage
                case .started, .reasoning, .toolCalls, .audio, .speechStep: break
                }
            }
        } catch let error as ServingError {
            throw CLIError(error.description)
        }
        return result
    }
}
