import ArgumentParser
import Foundation
import GGUF
import Kernels
import LeapSDKCore
import Models
import Sampling
import Tokenizers

/// `leap-ref generate`: continues a raw prompt, streaming the text.
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
            let ids = try Generate.promptTokens(prompt, tokenizer)
            let context = contextLength ?? (ids.count + n)
            guard ids.count < context else {
                throw CLIError("the prompt has \(ids.count) tokens, more than the context length \(context); raise --ctx")
            }
            let session = InferenceSession(model: lm, contextLength: context)
            var sampler = Sampler(
                SamplingDefaults.applying(
                    sampling.generationOptions(seed: seed, maxTokens: nil), to: SamplingDefaults.parameters(lm.file.metadata),
                    breakers: DRYBreakerResolver(tokenizer: tokenizer)))
            writeOut(prompt)
            let t0 = DispatchTime.now().uptimeNanoseconds
            var t1 = t0
            let generated = try Generate.continuation(of: ids, in: session, count: n, sampler: &sampler, tokenizer: tokenizer) {
                t1 = DispatchTime.now().uptimeNanoseconds
            } emit: {
                writeOut($0)
            }.count
            writeOut("\n")
            let t2 = DispatchTime.now().uptimeNanoseconds
            let pp = Double(ids.count) / (Double(t1 - t0) / 1e9)
            let tg = generated > 0 ? Double(generated) / (Double(t2 - t1) / 1e9) : 0
            FileHandle.standardError.write(
                Data(String(format: "[prompt %d tokens, %.1f t/s; generated %d tokens, %.1f t/s]\n", ids.count, pp, generated, tg).utf8))
        }
    }

    /// The prompt's tokens: special tokens parsed, and the model's BOS added when its
    /// tokenizer says so (the BOS alone for an empty prompt).
    static func promptTokens(_ prompt: String, _ tokenizer: Tokenizer) throws -> [Int] {
        var ids = tokenizer.encode(prompt, addSpecial: true, parseSpecial: true).map(Int.init)
        if ids.isEmpty, let bos = tokenizer.bosID { ids = [Int(bos)] }
        guard !ids.isEmpty else { throw CLIError("the prompt is empty and the model has no BOS token") }
        return ids
    }

    /// Evaluates `prompt` in `session` (then calls `promptDone`) and generates up to `count`
    /// tokens with `sampler`, stopping early at an end-of-generation token or the end of
    /// the context; `emit` gets the text as it forms. Returns the generated tokens.
    static func continuation(
        of prompt: [Int], in session: InferenceSession, count: Int, sampler: inout Sampler, tokenizer: Tokenizer,
        promptDone: () -> Void = {}, emit: (String) -> Void
    ) throws -> [Int] {
        for t in prompt { sampler.accept(t) }
        var detok = StreamingDetokenizer(tokenizer: tokenizer)
        try session.evaluate(prompt)
        promptDone()
        var generated: [Int] = []
        while generated.count < count, session.position < session.contextLength {
            guard let next = sampler.sample(session.logits) else { break }
            if tokenizer.isEndOfGeneration(TokenID(next)) { break }
            sampler.accept(next)
            emit(detok.append(TokenID(next)))
            generated.append(next)
            if generated.count == count || session.position >= session.contextLength { break }
            try session.evaluate([next])
        }
        emit(detok.finish())
        return generated
    }
}
