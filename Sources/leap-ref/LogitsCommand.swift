import ArgumentParser
import Checksums
import Foundation
import GGUF
import Images
import LeapJSON
@_spi(Tools) import LeapSDKCore
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
            With --image or --audio (and --user, --system), one user turn (the media, then the \
            --user text) is rendered through the model's chat template and read by its mmproj \
            file (--mmproj, or the mmproj-*.gguf beside the model), as libmtmd's goldens: \
            n_vocab, n_embd, image or audio (the file's name), decoded (an image's width, height \
            and the SHA-256 of its decoded 8-bit RGB), prompt_tokens (the prompt's chunks: \
            {"text": [ids]}, {"image": positions, "slice": i} or {"audio": positions}), n_prompt, \
            embeddings ({"shape": [rows, width], "values": rows}, every media chunk's encoder rows \
            in prompt order), top (the --top highest logits after the prompt's last position), \
            greedy and greedy_top.
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

    @Option(help: "The model's media encoder, an mmproj-*.gguf file (default: the one beside the model, if any).")
    var mmproj: String?

    @Option(help: "An image (JPEG or PNG) for the user turn; needs a vision mmproj file.")
    var image: String?

    @Option(help: "A WAV file for the user turn; needs an audio mmproj file.")
    var audio: String?

    @Option(help: "A system message before the user turn (with --image, --audio or --user).")
    var system: String?

    @Option(help: "The user turn's text, after its media (with --image or --audio; alone: a text-only turn).")
    var user: String?

    /// A chat turn (rendered through the template) rather than raw prompt text or ids.
    var isConversation: Bool { image != nil || audio != nil || user != nil || system != nil }

    func run() async throws {
        try await runReportingErrors {
            let path = try ModelCache.resolve(model)
            if isConversation {
                writeOut(try await conversationReport(modelPath: path).serialized(.compact) + "\n")
                return
            }
            if mmproj != nil { throw CLIError("--mmproj goes with --image or --audio") }
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
        let continuation = try GreedyProbe(session: session, after: rows[rows.count - 1], steps: steps, follow: follow, top: top)
        let greedyTokens = continuation.tokens.map { JSONValue.integer($0) }
        let greedyTop = continuation.topAfterEach.map { row in
            JSONValue.array(row.map { .array([.integer($0.id), .double(Double($0.logit))]) })
        }
        out["greedy"] = .array(greedyTokens)
        out["greedy_top"] = .array(greedyTop)
        return .object(out)
    }

    /// The media turn's report (see the discussion): loads the model with its mmproj file
    /// and probes the conversation with `PromptProbe`.
    func conversationReport(modelPath: String) async throws -> JSONValue {
        guard promptFile == nil, tokens == nil else {
            throw CLIError("give either a prompt (--prompt-file or --tokens) or a chat turn (--image, --audio, --user, --system), not both")
        }
        guard top > 0 else { throw CLIError("--top must be positive") }
        if image != nil, audio != nil { throw MediaFlagError.bothKinds }
        let choice = try ProjectorChoice.resolve(mmproj, model: modelPath)
        var media: MediaAttachment?
        if let image {
            _ = try ProjectorChoice.require(choice, .image, model: modelPath)
            media = try MediaAttachment.read(image, as: .image)
        } else if let audio {
            _ = try ProjectorChoice.require(choice, .audio, model: modelPath)
            media = try MediaAttachment.read(audio, as: .audio)
        }
        let forced = try follow.map(Logits.parseIDs)
        let loaded: ModelRunner
        do {
            loaded = try await Leap.load(path: modelPath, options: LiquidInferenceEngineOptions(mmProjPath: choice?.path))
        } catch let error as LeapError {
            throw CLIError(error.description)
        }
        guard let runner = loaded as? LiquidInferenceEngineRunner else { throw CLIError("\(modelPath) did not load as a local model") }
        var messages: [ChatMessage] = []
        if let system { messages.append(ChatMessage(role: .system, content: [.text(system)])) }
        var content: [ChatMessageContent] = media.map { [$0.content] } ?? []
        if let user, !user.isEmpty { content.append(.text(user)) }
        guard !content.isEmpty else { throw CLIError("the user turn is empty: give --image, --audio or --user") }
        messages.append(ChatMessage(role: .user, content: content))
        let report: PromptProbe.Report
        do {
            report = try PromptProbe(runner: runner).run(
                messages: messages, top: top, greedy: forced?.count ?? max(0, greedy), follow: forced)
        } catch let error as LeapError {
            throw CLIError(error.description)
        }
        let file = try GGUFFile(path: modelPath)
        let vocabulary = (try? file.metadata.array("tokenizer.ggml.tokens").count) ?? 0
        return try Logits.conversationJSON(report, media: media, vocabularySize: vocabulary)
    }

    /// The golden files' object for a probed turn.
    static func conversationJSON(_ report: PromptProbe.Report, media: MediaAttachment?, vocabularySize: Int) throws -> JSONValue {
        var out = JSONObject()
        out["n_vocab"] = .integer(vocabularySize)
        out["n_embd"] = .integer(report.width)
        if let media {
            out[media.kind.rawValue] = .string(URL(fileURLWithPath: media.path).lastPathComponent)
            if case .image(let data) = media.content {
                let decoded = try ImageDecoder.decode([UInt8](data))
                out["decoded"] = .object(
                    JSONObject([
                        ("width", .integer(decoded.width)), ("height", .integer(decoded.height)),
                        ("rgb_sha256", .string(SHA256.hex(decoded.rgb)))
                    ]))
            }
        }
        var slice = 0
        out["prompt_tokens"] = .array(
            report.chunks.map { chunk in
                switch chunk {
                case .text(let ids): return .object(JSONObject([("text", .array(ids.map { .integer($0) }))]))
                case .media(let kind, let positions):
                    guard kind == "image" else { return .object(JSONObject([(kind, .integer(positions))])) }
                    slice += 1
                    return .object(JSONObject([(kind, .integer(positions)), ("slice", .integer(slice - 1))]))
                }
            })
        out["n_prompt"] = .integer(
            report.chunks.reduce(0) {
                switch $1 {
                case .text(let ids): return $0 + ids.count
                case .media(_, let n): return $0 + n
                }
            })
        let width = max(1, report.width)
        let rows = report.embeddings.count / width
        out["embeddings"] = .object(
            JSONObject([
                ("shape", .array([.integer(rows), .integer(report.width)])),
                (
                    "values",
                    .array(
                        (0..<rows).map { r in .array(report.embeddings[(r * width)..<((r + 1) * width)].map { shortest($0) }) })
                )
            ]))
        func topJSON(_ row: [(id: Int, logit: Float)]) -> JSONValue {
            .array(row.map { .array([.integer($0.id), shortest($0.logit)]) })
        }
        out["top"] = topJSON(report.top)
        out["greedy"] = .array(report.greedy.map { .integer($0) })
        out["greedy_top"] = .array(report.greedyTop.map(topJSON))
        return .object(out)
    }

    /// A Float as the Double its shortest decimal names (so JSON prints `0.1161`, not the
    /// binary expansion).
    static func shortest(_ x: Float) -> JSONValue {
        x.isFinite ? .double(Double("\(x)") ?? Double(x)) : .null
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

    /// The `k` highest logits of a row as `[[id, logit], ...]`, best first.
    static func topJSON(_ logits: [Float], _ k: Int) -> JSONValue {
        let best = logits.withUnsafeBufferPointer { GreedyProbe.best($0, k) }
        return .array(best.map { .array([.integer($0.id), .double(Double($0.logit))]) })
    }
}
