import ArgumentParser
import Foundation
import GGUF
import Kernels
import Models
import Sampling
import Tokenizers

/// `leap-ref generate`: continues a raw prompt, streaming the text.
struct Generate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Continue a prompt (raw text, no chat template), streaming tokens to stdout.",
        discussion: "Stops after -n tokens or at an end-of-generation token. Speed goes to stderr."
    )

    @Option(help: "The GGUF model (default: the model installed by scripts/setup.sh).")
    var model: String?

    @Option(help: "The prompt text (special tokens such as <|im_start|> are parsed).")
    var prompt: String

    @Option(name: .short, help: "Most tokens to generate.")
    var n = 128

    @Option(help: "Sampling temperature (0 = greedy).")
    var temp: Float = 0.8

    @Option(name: .customLong("top-k"), help: "Top-k (0 = off).")
    var topK = 40

    @Option(name: .customLong("top-p"), help: "Top-p (1 = off).")
    var topP: Float = 0.95

    @Option(name: .customLong("min-p"), help: "Min-p (0 = off).")
    var minP: Float = 0.05

    @Option(name: .customLong("repeat-penalty"), help: "Repetition penalty (1 = off).")
    var repeatPenalty: Float = 1.0

    @Option(help: "Random seed (the same seed gives the same text).")
    var seed: UInt64 = 0

    @Option(name: .shortAndLong, help: "Threads (default: all cores).")
    var threads: Int?

    @Option(name: .customLong("ctx"), help: "Context length (default: prompt + n).")
    var contextLength: Int?

    func run() async throws {
        try await runReportingErrors {
            guard n >= 0 else { throw CLIError("-n must be >= 0") }
            let path = try ModelCache.resolve(model)
            let threadCount = max(1, threads ?? ThreadPool.defaultThreads)
            BLAS.setThreads(threadCount)
            let lm = try TransformerModel(path: path, threads: threadCount)
            let tokenizer = try Tokenizer(gguf: lm.file)
            var ids = tokenizer.encode(prompt, addSpecial: true, parseSpecial: true).map(Int.init)
            if ids.isEmpty, let bos = tokenizer.bosID { ids = [Int(bos)] }
            guard !ids.isEmpty else { throw CLIError("the prompt is empty and the model has no BOS token") }
            let context = contextLength ?? (ids.count + n)
            guard ids.count < context else {
                throw CLIError("the prompt has \(ids.count) tokens, more than the context length \(context); raise --ctx")
            }
            let session = InferenceSession(model: lm, contextLength: context)
            var sampler = Sampler(
                SamplingParameters(
                    temperature: temp, topK: topK, topP: topP, minP: minP,
                    repetitionPenalty: repeatPenalty, seed: seed))
            writeOut(prompt)
            let t0 = DispatchTime.now().uptimeNanoseconds
            var t1 = t0
            let generated = try Generate.continueText(
                ids, session: session, tokenizer: tokenizer, sampler: &sampler, maxTokens: n,
                promptDone: { t1 = DispatchTime.now().uptimeNanoseconds }, write: writeOut)
            writeOut("\n")
            let t2 = DispatchTime.now().uptimeNanoseconds
            let pp = Double(ids.count) / (Double(t1 - t0) / 1e9)
            let tg = generated > 0 ? Double(generated) / (Double(t2 - t1) / 1e9) : 0
            FileHandle.standardError.write(
                Data(String(format: "[prompt %d tokens, %.1f t/s; generated %d tokens, %.1f t/s]\n", ids.count, pp, generated, tg).utf8))
        }
    }

    /// Evaluates `prompt` in `session` (empty, with room for the prompt), then samples up to
    /// `maxTokens` tokens, stopping early at an end-of-generation token or the end of the
    /// context, and passes the text to `write` as it streams. Calls `promptDone` once the
    /// prompt is evaluated. Returns the number of tokens generated.
    static func continueText(
        _ prompt: [Int], session: InferenceSession, tokenizer: Tokenizer, sampler: inout Sampler, maxTokens n: Int,
        promptDone: () -> Void = {}, write: (String) -> Void
    ) throws -> Int {
        for t in prompt { sampler.accept(t) }
        var detok = StreamingDetokenizer(tokenizer: tokenizer)
        try session.evaluate(prompt)
        promptDone()
        var generated = 0
        while generated < n, session.position < session.contextLength {
            guard let next = sampler.sample(session.logits) else { break }
            if tokenizer.isEndOfGeneration(TokenID(next)) { break }
            sampler.accept(next)
            write(detok.append(TokenID(next)))
            generated += 1
            if generated == n || session.position >= session.contextLength { break }
            try session.evaluate([next])
        }
        write(detok.finish())
        return generated
    }
}
