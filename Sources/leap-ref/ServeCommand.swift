import ArgumentParser
import Foundation
import Grammar
import Kernels
import LeapSDKCore
import LeapServer
import Logging
import Models

/// `leap-ref serve`: an OpenAI-compatible HTTP server (see docs/serving.md).
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve the model over the OpenAI HTTP API (chat and text completions, streaming, tools, JSON Schema).",
        discussion: """
            Endpoints: the chat page at / (unless --no-webui), POST /v1/chat/completions, POST /v1/completions, \
            GET /v1/models, GET /health, GET /metrics (with --metrics), POST /tokenize, POST /detokenize. The \
            sampling flags are the defaults of requests that leave those fields out. The server listens at once and \
            answers /health with 503 until the model is loaded. SIGTERM or SIGINT: stop accepting, finish \
            running completions (cancelled after --shutdown-grace seconds), exit 0. With a media encoder (--mmproj, or the \
            mmproj-*.gguf beside the model), chat messages may carry image_url parts (base64 data URLs of PNG or JPEG) or \
            input_audio parts (WAV). A speech model (LFM2.5-Audio with --vocoder and --audio-tokenizer, or its \
            vocoder-*.gguf and tokenizer-*.gguf beside it) speaks at POST /v1/audio/speech. See docs/serving.md.
            """
    )

    @Option(help: "The GGUF model (default: the model installed by scripts/setup.sh).")
    var model: String?

    @Option(help: "Address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "Port to listen on (0: any free port; the bound port is printed).")
    var port = 8080

    @Option(name: [.customLong("parallel"), .customShort("n")], help: "Slots: completions served at once, each with its own prompt cache.")
    var parallel = 1

    @Option(help: "Accepted API key (clients send 'Authorization: Bearer KEY'); /health and /metrics stay open.")
    var apiKey: String?

    @Option(help: "File of accepted API keys, one per line.")
    var apiKeyFile: String?

    @Option(
        name: [.customLong("ctx-size"), .customShort("c")],
        help: "Context window of each slot in tokens (default: the model's, capped at 4096).")
    var ctxSize: Int?

    @Option(
        name: .customLong("cache-type"),
        help: "The attention cache's type: f32 (exact; the default) or f16 (half the memory; llama.cpp's default).")
    var cacheType: KVCacheType = .f32

    @Option(help: "Requests that may wait for a slot; beyond, 503 with Retry-After.")
    var queue = 64

    @Flag(help: "Serve Prometheus metrics at /metrics.")
    var metrics = false

    @Option(help: "Largest request body in bytes (413 beyond).")
    var maxBodyBytes = 8 << 20

    @Option(help: "How much of a body over --max-body-bytes is read and dropped before its 413, for clients that send it all first.")
    var maxDiscardedBodyBytes = 256 << 20

    @Option(help: "Largest max_tokens a request may ask for, and the default (default: up to the context).")
    var maxTokens: Int?

    @Option(help: "Most open client connections.")
    var maxConnections = 256

    @Option(help: "Seconds a connection may stay silent mid-request or idle between requests before it is closed (0 = never).")
    var idleTimeout = 60.0

    @Option(help: "Seconds running completions may go on after SIGTERM before they are cancelled.")
    var shutdownGrace = 10.0

    @Option(
        name: .shortAndLong, help: "Threads for the kernels (default: the cores granted to the process: its affinity mask and CPU quota).")
    var threads: Int?

    @Flag(name: .customLong("no-webui"), help: "Do not serve the chat page at / (then / is 404).")
    var noWebUI = false

    // Images and audio (docs/serving.md): the media encoder, and the MediaLimits a request's
    // media must stay within (the defaults are MediaLimits' own).
    static let defaultMediaLimits = MediaLimits()

    @Option(
        help: ArgumentHelp(
            "The media encoder (vision or audio projector) for the model (default: the mmproj-*.gguf beside the model, when one goes with it).",
            valueName: "path"))
    var mmproj: String?

    // Speech out (POST /v1/audio/speech): a speech model's vocoder and audio tokenizer.
    @Option(help: ArgumentHelp("A speech model's vocoder-*.gguf (default: the one beside the model, when it speaks).", valueName: "path"))
    var vocoder: String?

    @Option(
        name: .customLong("audio-tokenizer"),
        help: ArgumentHelp("A speech model's tokenizer-*.gguf audio detokenizer (default: the one beside the model).", valueName: "path"))
    var audioTokenizer: String?

    @Option(
        name: .customLong("vocoder-weights"),
        help: "stored (the file's size in memory, 8-bit products; the default) or f32 (the reference's numbers, about 7x the memory).")
    var vocoderWeights = "stored"

    @Option(help: ArgumentHelp("Most pixels (width × height) of one image, read from its header before decoding.", valueName: "n"))
    var maxImagePixels = Serve.defaultMediaLimits.maxImagePixels

    @Option(help: ArgumentHelp("Most bytes of one encoded image (the request body limit applies first).", valueName: "n"))
    var maxImageBytes = Serve.defaultMediaLimits.maxImageBytes

    @Option(help: ArgumentHelp("Longest audio clip in seconds (the audio encoder may take less).", valueName: "seconds"))
    var maxAudioSeconds = Serve.defaultMediaLimits.maxAudioSeconds

    /// The media limits from the flags; throws for a value that is not positive.
    func mediaLimits() throws -> MediaLimits {
        guard maxImagePixels >= 1 else { throw CLIError("--max-image-pixels must be at least 1, not \(maxImagePixels)") }
        guard maxImageBytes >= 1 else { throw CLIError("--max-image-bytes must be at least 1, not \(maxImageBytes)") }
        guard maxAudioSeconds.isFinite, maxAudioSeconds > 0 else {
            throw CLIError("--max-audio-seconds must be a positive number of seconds, not \(maxAudioSeconds)")
        }
        return MediaLimits(maxImagePixels: maxImagePixels, maxImageBytes: maxImageBytes, maxAudioSeconds: maxAudioSeconds)
    }

    @OptionGroup(title: "Sampling (defaults for the fields a request leaves out)")
    var sampling: SamplingFlags

    // The JSON Schema compiler's limits for response_format and tool schemas (JSONSchemaCompiler.Limits;
    // the defaults are the compiler's own). A schema past one is a 400 with the compiler's message.
    static let defaultSchemaLimits = JSONSchemaCompiler.Limits()

    @Option(help: ArgumentHelp("JSON Schema: deepest nesting of subschemas (properties, items, combinators, $ref chains).", valueName: "n"))
    var schemaMaxDepth = Serve.defaultSchemaLimits.maxDepth

    @Option(help: ArgumentHelp("JSON Schema: largest grammar (rules, symbols and closure entries).", valueName: "n"))
    var schemaMaxGrammarSize = Serve.defaultSchemaLimits.maxGrammarSize

    @Option(help: ArgumentHelp("JSON Schema: most values of one enum.", valueName: "n"))
    var schemaMaxEnumValues = Serve.defaultSchemaLimits.maxEnumValues

    @Option(
        help: ArgumentHelp(
            "JSON Schema: largest count the grammar unrolls (minItems/maxItems, minProperties/maxProperties, {n,m}).", valueName: "n"))
    var schemaMaxRepetition = Serve.defaultSchemaLimits.maxRepetition

    @Option(help: ArgumentHelp("JSON Schema: most states of one string automaton (pattern, format, enum of strings).", valueName: "n"))
    var schemaMaxAutomatonStates = Serve.defaultSchemaLimits.maxAutomatonStates

    @Option(help: ArgumentHelp("JSON Schema: most alternatives made by distributing anyOf/oneOf/if over their siblings.", valueName: "n"))
    var schemaMaxCombinations = Serve.defaultSchemaLimits.maxCombinations

    @Option(help: ArgumentHelp("JSON Schema: most parses the matcher follows at once (bounds the work per byte).", valueName: "n"))
    var schemaMaxParseThreads = Serve.defaultSchemaLimits.maxParseThreads

    @Option(help: ArgumentHelp("JSON Schema: wall-clock milliseconds one schema may take to compile.", valueName: "ms"))
    var schemaCompileBudgetMs = Serve.milliseconds(Serve.defaultSchemaLimits.compileTimeBudget)

    /// Whole milliseconds of `d`.
    static func milliseconds(_ d: Duration) -> Int {
        Int(d.components.seconds) * 1000 + Int(d.components.attoseconds / 1_000_000_000_000_000)
    }

    /// The schema compiler's limits from the `--schema-*` flags; throws for a value below 1
    /// (or a depth above 4096, which only costs stack: JSON nests at most 512 deep).
    func schemaLimits() throws -> JSONSchemaCompiler.Limits {
        let values: [(String, Int)] = [
            ("--schema-max-depth", schemaMaxDepth), ("--schema-max-grammar-size", schemaMaxGrammarSize),
            ("--schema-max-enum-values", schemaMaxEnumValues), ("--schema-max-repetition", schemaMaxRepetition),
            ("--schema-max-automaton-states", schemaMaxAutomatonStates), ("--schema-max-combinations", schemaMaxCombinations),
            ("--schema-max-parse-threads", schemaMaxParseThreads), ("--schema-compile-budget-ms", schemaCompileBudgetMs)
        ]
        for (flag, value) in values where value < 1 { throw CLIError("\(flag) must be at least 1, not \(value)") }
        guard schemaMaxDepth <= 4096 else { throw CLIError("--schema-max-depth must be at most 4096, not \(schemaMaxDepth)") }
        var limits = JSONSchemaCompiler.Limits()
        limits.maxDepth = schemaMaxDepth
        limits.maxGrammarSize = schemaMaxGrammarSize
        limits.maxEnumValues = schemaMaxEnumValues
        limits.maxRepetition = schemaMaxRepetition
        limits.maxAutomatonStates = schemaMaxAutomatonStates
        limits.maxCombinations = schemaMaxCombinations
        limits.maxParseThreads = schemaMaxParseThreads
        limits.compileTimeBudget = .milliseconds(schemaCompileBudgetMs)
        return limits
    }

    func run() async throws {
        try await runReportingErrors {
            guard parallel >= 1, parallel <= 64 else { throw CLIError("--parallel must be between 1 and 64") }
            guard queue >= 0 else { throw CLIError("--queue must not be negative") }
            guard maxBodyBytes >= 1024 else { throw CLIError("--max-body-bytes must be at least 1024") }
            guard maxDiscardedBodyBytes >= 0 else { throw CLIError("--max-discarded-body-bytes must not be negative") }
            guard maxConnections >= 1 else { throw CLIError("--max-connections must be at least 1") }
            guard idleTimeout.isFinite, idleTimeout >= 0 else { throw CLIError("--idle-timeout must be 0 (never) or a number of seconds") }
            if let c = ctxSize, c < 16 { throw CLIError("--ctx-size must be at least 16") }
            if let m = maxTokens, m < 1 { throw CLIError("--max-tokens must be at least 1") }
            guard (0...65535).contains(port) else { throw CLIError("--port must be between 0 and 65535") }
            let schemaLimits = try schemaLimits()
            let mediaLimits = try mediaLimits()
            let path = try ModelCache.resolve(model)
            if let mmproj, !FileManager.default.fileExists(atPath: mmproj) {
                throw CLIError("--mmproj: no file at '\(mmproj)'")
            }
            for (flag, file) in [("--vocoder", vocoder), ("--audio-tokenizer", audioTokenizer)] {
                if let file, !FileManager.default.fileExists(atPath: file) { throw CLIError("\(flag): no file at '\(file)'") }
            }
            let weights = try SpeechVocoder.WeightStorage(flag: vocoderWeights)
            var keys = Set<String>()
            if let apiKey { keys.insert(apiKey) }
            if let file = apiKeyFile {
                guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
                    throw CLIError("cannot read the API key file '\(file)'")
                }
                let fromFile = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter {
                    !$0.isEmpty
                }
                guard !fromFile.isEmpty else { throw CLIError("the API key file '\(file)' holds no key") }
                keys.formUnion(fromFile)
            }
            let configuration = ServerConfiguration(
                host: host, port: port, apiKeys: keys, maxBodyBytes: maxBodyBytes, maxTokensLimit: maxTokens,
                maxConnections: maxConnections, metricsEnabled: metrics, shutdownGraceSeconds: shutdownGrace,
                webUI: !noWebUI, defaultSampling: sampling.overrides(), maxDiscardedBodyBytes: maxDiscardedBodyBytes,
                idleTimeoutSeconds: idleTimeout > 0 ? idleTimeout : nil)
            if !noWebUI, case .failure(let error) = WebUIAssets.bundled {
                FileHandle.standardError.write(Data("leap-ref serve: warning: \(error.description)\n".utf8))
            }
            var logger = Logger(label: "leap-ref.serve")
            logger.logLevel = .info
            let host = self.host
            let webUI = !noWebUI
            try await LeapHTTPServer.run(
                configuration: configuration, modelPath: path,
                loadOptions: LiquidInferenceEngineOptions(
                    cpuThreads: threads, contextSize: ctxSize, kvCacheType: cacheType == .f16 ? .f16 : .f32, mmProjPath: mmproj,
                    mediaLimits: mediaLimits, vocoderPath: vocoder, audioTokenizerPath: audioTokenizer,
                    vocoderWeights: weights),
                serving: ServingEngine.Configuration(
                    slots: parallel, contextSize: ctxSize, queueLimit: queue, schemaLimits: schemaLimits),
                logger: logger,
                onListening: { port in
                    writeOut("leap-ref serve: listening on http://\(host):\(port)\n")
                    if webUI { writeOut("leap-ref serve: chat page at http://\(host):\(port)/\n") }
                },
                onReady: { engine in
                    let inputs = ["text"] + (engine.takesImages ? ["image"] : []) + (engine.takesAudio ? ["audio"] : [])
                    writeOut("leap-ref serve: input: \(inputs.joined(separator: ", "))\n")
                    if engine.speaks {
                        writeOut("leap-ref serve: output: text, audio (POST /v1/audio/speech; chat with modalities text and audio)\n")
                    }
                    writeOut("leap-ref serve: ready: \(engine.modelId)\n")
                })
        }
    }
}
