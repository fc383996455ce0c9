import ArgumentParser
import Foundation
import LeapJSON
import Models

/// `leap-ref logits`: the model's raw predictions, in the golden files' JSON layout, so two
/// engines can be compared position by position.
struct Logits: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print top logits for every prompt position and a greedy continuation, as JSON.",
        discussion: """
            Output fields: n_vocab, tokens (the prompt's ids), top (for every prompt position, \
            the --top highest logits as [id, logit], best first, all positions computed in one \
            batch), greedy (--greedy tokens decoded one at a time through the cache), greedy_top \
            (after each greedy token is fed, the --top highest logits of the next step).
            """
    )

    @Option(help: "The GGUF model (default: the model installed by scripts/setup.sh).")
    var model: String?

    @Option(name: .customLong("prompt-file"), help: "Prompt text, tokenized with special tokens parsed and no BOS added.")
    var promptFile: String?

    @Option(help: "The prompt as comma-separated token ids instead of text.")
    var tokens: String?

    @Option(help: "How many logits to list per position.")
    var top = 10

    @Option(help: "How many greedy tokens to decode after the prompt.")
    var greedy = 32

    @Option(help: "Feed these comma-separated ids as the continuation instead of the model's own argmax.")
    var follow: String?

    func run() async throws {
        try await runReportingErrors {
            let path = try ModelCache.resolve(model)
            let lm = try TransformerModel(path: path)
            let prompt = try promptTokens(lm)
            let forced = try follow.map(Logits.parseIDs)
            writeOut(try Logits.report(lm, prompt: prompt, top: top, greedy: greedy, follow: forced).serialized(.compact) + "\n")
        }
    }

    /// The golden files' object for `prompt`: `n_vocab`, `tokens`, `top` (every prompt
    /// position, one batch), `greedy` (decoded one token at a time; `follow` replaces the
    /// model's own argmax) and `greedy_top`.
    static func report(_ lm: TransformerModel, prompt: [Int], top: Int, greedy: Int, follow: [Int]?) throws -> JSONValue {
        guard !prompt.isEmpty else { throw CLIError("the prompt is empty") }
        guard top > 0 else { throw CLIError("--top must be positive") }
        let steps = follow?.count ?? max(0, greedy)
        let session = InferenceSession(model: lm, contextLength: prompt.count + steps + 1)
        let rows = try session.evaluateAllLogits(prompt)
        var out = JSONObject()
        out["n_vocab"] = .integer(lm.hyperparameters.vocabularySize)
        out["tokens"] = .array(prompt.map { .integer($0) })
        out["top"] = .array(rows.map { topJSON($0, top) })
        var greedyTokens: [JSONValue] = []
        var greedyTop: [JSONValue] = []
        var next = argmax(rows[rows.count - 1])
        for step in 0..<steps {
            let token = follow?[step] ?? next
            greedyTokens.append(.integer(token))
            try session.evaluate([token])
            let logits = Array(session.logits)
            greedyTop.append(topJSON(logits, top))
            next = argmax(logits)
        }
        out["greedy"] = .array(greedyTokens)
        out["greedy_top"] = .array(greedyTop)
        return .object(out)
    }

    func promptTokens(_ lm: TransformerModel) throws -> [Int] {
        if let tokens { return try Logits.parseIDs(tokens) }
        guard let promptFile else { throw CLIError("give the prompt with --prompt-file FILE or --tokens IDS") }
        guard let text = try? String(contentsOfFile: promptFile, encoding: .utf8) else {
            throw CLIError("cannot read prompt file '\(promptFile)'")
        }
        return try tokenizePrompt(text, file: lm.file)
    }

    static func parseIDs(_ s: String) throws -> [Int] {
        try s.split(separator: ",").map {
            guard let id = Int($0.trimmingCharacters(in: .whitespaces)) else { throw CLIError("'\($0)' is not a token id") }
            return id
        }
    }

    static func argmax(_ xs: [Float]) -> Int {
        var best = 0
        for i in xs.indices where xs[i] > xs[best] { best = i }
        return best
    }

    static func topJSON(_ logits: [Float], _ k: Int) -> JSONValue {
        let idx = logits.indices.sorted { logits[$0] > logits[$1] || (logits[$0] == logits[$1] && $0 < $1) }.prefix(k)
        return .array(idx.map { .array([.integer($0), .double(Double(logits[$0]))]) })
    }
}
