import ArgumentParser
import Foundation
import LeapSDKCore
import Models
import RunAnywhere

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `leap-ref chat`: an interactive (or scripted) chat through the LeapSDK API.
struct Chat: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Chat with a model, using its chat template and the prompt cache.",
        discussion: """
            Interactive on a terminal: type a message, the reply streams, tokens/s follow. Commands: \
            /reset (start over), /save FILE (the conversation as OpenAI-style JSON), /load FILE, \
            /image FILE and /audio FILE.wav (attach to the next message; a model with an mmproj file: \
            --mmproj, or the mmproj-*.gguf beside the model), /help, /quit.
            When stdin is not a terminal, each line is one user message (commands work too); after each \
            reply one JSON line of that reply's GenerationStats goes to stderr.
            """
    )

    @Option(help: "The GGUF model (default: the model installed by scripts/setup.sh).")
    var model: String?

    @Option(help: "A system prompt.")
    var system: String?

    @Option(help: "The model's media encoder, an mmproj-*.gguf file (default: the one beside the model, if any).")
    var mmproj: String?

    @Option(help: "Random seed (the same seed gives the same replies).")
    var seed: UInt64?

    @Option(name: .customLong("max-tokens"), help: "Most tokens per reply.")
    var maxTokens: Int = 512

    @Option(name: .customLong("ctx"), help: "Context window in tokens (default: the model's, capped at 4096).")
    var contextSize: Int?

    @Option(
        name: .customLong("cache-type"),
        help: "The attention cache's type: f32 (exact; the default) or f16 (half the memory; llama.cpp's default).")
    var cacheType: KVCacheType = .f32

    @Option(name: .shortAndLong, help: "Threads (default: the cores granted to the process: its affinity mask and CPU quota).")
    var threads: Int?

    @Option(help: "Tools the model may call: 'demo' (calculate, get_current_time, get_weather); each call and result is printed.")
    var tools: ChatTools?

    @OptionGroup(title: "Sampling")
    var sampling: SamplingFlags

    @Flag(
        name: .customLong("force-call"),
        help: "With --tools: the first reply to each message must call a tool (for small models that do not call on their own).")
    var forceCall = false

    @Option(help: "A speech model's vocoder-*.gguf file (default: the one beside the model).")
    var vocoder: String?

    @Option(name: .customLong("audio-tokenizer"), help: "A speech model's tokenizer-*.gguf file (default: the one beside the model).")
    var audioTokenizer: String?

    @Option(
        name: .customLong("audio-out"),
        help: "A folder where each spoken reply of a speech model is saved as reply-N.wav (24 kHz, 32-bit float).")
    var audioOut: String?

    func run() async throws {
        try await runReportingErrors {
            let path = try ModelCache.resolve(model)
            let projector = try ProjectorChoice.resolve(mmproj, model: path)
            let runner: ModelRunner
            do {
                runner = try await Leap.load(path: path, options: loadOptions)
            } catch let error as LeapError {
                throw CLIError(error.description)
            }
            let interactive = isatty(STDIN_FILENO) != 0
            var session = makeSession(runner: runner, interactive: interactive)
            session.media = projector?.kind
            if let audioOut {
                do {
                    try FileManager.default.createDirectory(atPath: audioOut, withIntermediateDirectories: true)
                } catch {
                    throw CLIError("--audio-out: cannot make the folder '\(audioOut)': \(error.localizedDescription)")
                }
                session.audioFolder = URL(fileURLWithPath: audioOut)
            }
            session.toolSession = try await tools?.makeSession(runner: runner)
            if forceCall {
                guard let toolSession = session.toolSession else { throw CLIError("--force-call needs --tools") }
                await toolSession.setFirstRoundCallMode(.required)
            }
            if interactive {
                let attach = projector.map { " /\($0.kind.rawValue) FILE," } ?? ""
                print("leap-ref chat with \(runner.modelId).\(attach) /reset, /save FILE, /load FILE, /help, /quit.")
            }
            while true {
                if interactive { writeOut("\n> ") }
                guard let line = readLine(strippingNewline: true) else { break }
                if try await !session.handle(line) { break }
            }
            await runner.unload()
        }
    }
}

extension Chat {
    /// How the command loads its model (the media encoder: --mmproj, else the library finds
    /// the companion as `ProjectorChoice.resolve` does).
    var loadOptions: LiquidInferenceEngineOptions {
        LiquidInferenceEngineOptions(
            cpuThreads: threads, contextSize: contextSize, kvCacheType: cacheType == .f16 ? .f16 : .f32, mmProjPath: mmproj,
            vocoderPath: vocoder, audioTokenizerPath: audioTokenizer)
    }

    /// The command's session over `runner`, with the flags' options.
    func makeSession(runner: ModelRunner, interactive: Bool) -> ChatSession {
        ChatSession(
            runner: runner, system: system, interactive: interactive,
            options: generationOptions)
    }

    /// Each reply's options: the sampling flags and the seed, `--max-tokens`.
    var generationOptions: GenerationOptions {
        var options = GenerationOptions(maxOutputTokens: maxTokens)
        options.sampling = sampling.overrides(seed: seed)
        return options
    }
}

/// The state of a chat in the CLI: the conversation and what to do with a line of input.
struct ChatSession {
    let runner: ModelRunner
    let system: String?
    let interactive: Bool
    let options: GenerationOptions
    var conversation: Conversation
    /// Tools the model may call (`--tools`); nil for a plain chat.
    var toolSession: ToolCallingSession?
    /// How the last plain reply ended (its finish reason and statistics).
    private(set) var lastCompletion: MessageCompletion?
    /// The media the model's mmproj file encodes (nil: a text-only model).
    var media: MediaKind?
    /// Images or audio attached (`/image`, `/audio`) to the next message.
    private(set) var attachments: [MediaAttachment] = []
    /// Where spoken replies are saved (`--audio-out`), and how many were.
    var audioFolder: URL?
    private(set) var savedReplies = 0

    /// The chat's commands, as /help lists them.
    static let help = """
        /image FILE      attach a JPEG or PNG image to the next message (a vision model)
        /audio FILE.wav  attach a WAV clip to the next message (an audio model)
        /reset           start over (drops attachments)
        /save FILE       save the conversation as OpenAI-style JSON
        /load FILE       continue a saved conversation
        /help            this list
        /quit            leave
        """

    init(runner: ModelRunner, system: String?, interactive: Bool, options: GenerationOptions) {
        self.runner = runner
        self.system = system
        self.interactive = interactive
        self.options = options
        conversation = runner.createConversation(systemPrompt: system)
    }

    /// Handles one line; false to quit.
    mutating func handle(_ line: String) async throws -> Bool {
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        if trimmed.isEmpty { return true }
        if trimmed.hasPrefix("/") {
            let parts = trimmed.split(separator: " ", maxSplits: 1).map(String.init)
            let argument = parts.count > 1 ? parts[1].trimmingCharacters(in: .whitespaces) : ""
            switch parts[0] {
            case "/quit", "/exit": return false
            case "/reset":
                conversation = runner.createConversation(systemPrompt: system)
                attachments = []
                note("conversation reset")
            case "/image", "/audio":
                attach(argument, as: parts[0] == "/image" ? .image : .audio)
            case "/help":
                if interactive { writeOut(Self.help + "\n") } else { note(Self.help) }
            case "/save":
                guard !argument.isEmpty else {
                    note("usage: /save FILE")
                    return true
                }
                do {
                    let json = try conversation.exportToJSON()
                    let data = try JSONSerialization.data(withJSONObject: json, options: [.prettyPrinted, .sortedKeys])
                    try data.write(to: URL(fileURLWithPath: argument))
                    note("saved \(json.count) messages to \(argument)")
                } catch {
                    note("cannot save to \(argument): \(error)")
                }
            case "/load":
                guard !argument.isEmpty else {
                    note("usage: /load FILE")
                    return true
                }
                do {
                    let data = try Data(contentsOf: URL(fileURLWithPath: argument))
                    guard let list = try JSONSerialization.jsonObject(with: data) as? [[String: Any]] else {
                        throw CLIError("the file is not a JSON array of messages")
                    }
                    let history = try list.map { try ChatMessage(from: $0) }
                    conversation = runner.createConversationFromHistory(history: history)
                    note("loaded \(history.count) messages from \(argument)")
                } catch {
                    note("cannot load \(argument): \(error)")
                }
            default:
                note("unknown command \(parts[0]); commands: /image FILE, /audio FILE, /reset, /save FILE, /load FILE, /help, /quit")
            }
            return true
        }
        // The attachments go with this message, whether or not its reply succeeds.
        let message = ChatMessage(role: .user, content: attachments.map(\.content) + [.text(trimmed)])
        attachments = []
        if let toolSession {
            conversation = try await replyWithTools(to: message, session: toolSession)
        } else {
            try await reply(to: message)
        }
        return true
    }

    /// `/image PATH` and `/audio PATH`: reads the file for the next message and says what
    /// it holds, or why it cannot be attached (the chat goes on either way).
    private mutating func attach(_ argument: String, as kind: MediaKind) {
        var path = argument
        if path.count >= 2, let q = path.first, q == "\"" || q == "'", path.last == q { path = String(path.dropFirst().dropLast()) }
        guard !path.isEmpty else {
            note("usage: /\(kind.rawValue) FILE")
            return
        }
        guard let media else {
            note(
                "error: this model reads text only: it has no mmproj file (pass --mmproj FILE, or put mmproj-<model>.gguf beside the model); nothing attached"
            )
            return
        }
        guard media == kind else {
            note(
                "error: this model's mmproj file encodes \(media == .image ? "images" : "audio"), not \(kind == .image ? "images" : "audio"); use /\(media.rawValue) FILE"
            )
            return
        }
        do {
            let attachment = try MediaAttachment.read(path, as: kind)
            attachments.append(attachment)
            note("attached \(attachment.summary): \(path)")
        } catch {
            // The flag's error, named as the chat command that raised it.
            var text = error.description
            if text.hasPrefix(kind.flag + ":") { text = "/\(kind.rawValue)" + text.dropFirst(kind.flag.count) }
            note("error: \(text)")
        }
    }

    private mutating func reply(to message: ChatMessage) async throws {
        var reasoning = false
        do {
            for try await response in conversation.generateResponse(message: message, generationOptions: options) {
                switch response {
                case .chunk(let t):
                    if reasoning {
                        reasoning = false
                        if interactive { writeOut("\u{1B}[0m\n") }
                    }
                    writeOut(t)
                case .reasoningChunk(let t):
                    if interactive {
                        if !reasoning { writeOut("\u{1B}[2m") }
                        writeOut(t)
                    }
                    reasoning = true
                case .functionCall(let calls):
                    for call in calls { writeOut("\n[function call] \(call.name)(\(call.arguments))\n") }
                case .audioSample:
                    break
                case .complete(let completion):
                    lastCompletion = completion
                    if reasoning, interactive { writeOut("\u{1B}[0m") }
                    writeOut("\n")
                    saveSpokenReply(completion.message)
                    guard let s = completion.stats else { break }
                    if interactive {
                        note(
                            String(
                                format: "%d tokens, %.1f t/s; prompt %d tokens (%d from cache)%@",
                                s.completionTokens, s.tokenPerSecond, s.promptTokens, s.cachedPromptTokens,
                                completion.finishReason == .exceedContext ? "; context full" : ""))
                    } else {
                        FileHandle.standardError.write(Data((Self.statsJSON(s) + "\n").utf8))
                    }
                }
            }
        } catch let error as LeapError {
            note("error: \(error.description)")
        }
    }

    /// Writes a spoken reply's WAV part to the `--audio-out` folder as `reply-N.wav`.
    private mutating func saveSpokenReply(_ message: ChatMessage) {
        guard let folder = audioFolder else { return }
        for case .audio(let wav) in message.content {
            savedReplies += 1
            let file = folder.appendingPathComponent("reply-\(savedReplies).wav")
            do {
                try wav.write(to: file)
                note("spoken reply saved: \(file.path)")
            } catch {
                note("error: cannot save the spoken reply to \(file.path): \(error.localizedDescription)")
            }
        }
    }

    /// One line of JSON with the stats' fields.
    static func statsJSON(_ s: GenerationStats) -> String {
        String(
            format:
                #"{"promptTokens": %llu, "cachedPromptTokens": %llu, "completionTokens": %llu, "totalTokens": %llu, "tokenPerSecond": %.2f}"#,
            s.promptTokens, s.cachedPromptTokens, s.completionTokens, s.totalTokens, Double(s.tokenPerSecond))
    }

    private func note(_ text: String) {
        if interactive {
            writeOut("\u{1B}[2m[\(text)]\u{1B}[0m\n")
        } else {
            FileHandle.standardError.write(Data(("[\(text)]\n").utf8))
        }
    }
}
