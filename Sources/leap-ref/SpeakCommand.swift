import ArgumentParser
import Foundation
import Kernels
import LeapJSON
@_spi(Tools) import LeapSDKCore
import Models

/// `leap-ref speak`: one spoken turn of a speech model (LFM2.5-Audio), scripted, as the
/// reference's goldens record it: every step (a text token or an audio frame's 8 codes),
/// the text and the waveform. It runs on the serving engine as every generation does.
struct Speak: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Speak one turn with a speech model (LFM2.5-Audio): steps as JSON, the waveform as a WAV file.",
        discussion: """
            The conversation is --system, then the user's --user text or --audio clip (with the model's \
            mmproj file). Decoding is the reference's: greedy text and audio unless --temp is above 0 (then \
            --audio-temp and --audio-top-k, default the mode's), no repetition penalty, no DRY. --json writes \
            {"outputs": [{"text": id} | {"audio": [8 codes]}, ...], "text": ..., "waveform": {"sample_rate", \
            "n_samples"}}; --wav the turn's waveform (mono, 24 kHz, 32-bit float). --decode-frames G.json \
            skips generation and decodes the "frames" of a golden-like file into --wav.
            """
    )

    @Option(help: "The language model (default: the model installed by scripts/setup.sh).")
    var model: String?

    @Option(help: "The vocoder-*.gguf file (default: the one beside the model).")
    var vocoder: String?

    @Option(name: .customLong("audio-tokenizer"), help: "The tokenizer-*.gguf audio detokenizer (default: the one beside the model).")
    var audioTokenizer: String?

    @Option(help: "The audio encoder for --audio, an mmproj file (default: the one beside the model).")
    var mmproj: String?

    @Option(help: "interleaved or sequential (default: as the system prompt says).")
    var mode: SpeechMode?

    @Option(help: "The system prompt (e.g. 'Perform TTS. Use the UK female voice.').")
    var system = SpeechMode.interleavedSystemPrompt

    @Option(help: "The user's text.")
    var user: String?

    @Option(help: "The user's audio clip (a WAV file), instead of --user.")
    var audio: String?

    @Option(name: .short, help: "Most steps (text tokens and audio frames) to generate.")
    var n = 512

    @Option(help: "Text temperature; 0 (the default) is greedy for text and audio.")
    var temp: Float = 0

    @Option(name: .customLong("audio-temp"), help: "Audio temperature (with --temp above 0; default: the mode's).")
    var audioTemp: Float?

    @Option(name: .customLong("audio-top-k"), help: "Audio top-k (with --temp above 0; default: the mode's).")
    var audioTopK: Int?

    @Option(help: "Random seed.")
    var seed: UInt64 = 0

    @Option(help: "Write the steps, text and waveform summary as JSON here.")
    var json: String?

    @Option(help: "Write the waveform here (WAV, mono, 24 kHz, 32-bit float).")
    var wav: String?

    @Option(
        help: """
            Feed the steps of this golden-like JSON file's "outputs" (text tokens, whole frames, and within a frame \
            the earlier codebooks' codes) instead of the model's own choices; "outputs" then holds the greedy \
            choice made at each step given that history, and --wav the waveform of the frames fed.
            """)
    var follow: String?

    @Option(name: .customLong("decode-frames"), help: "Decode the frames of this golden-like JSON file into --wav, without generating.")
    var decodeFrames: String?

    @Option(name: .customLong("vocoder-weights"), help: "f32 (the reference's numbers, the default) or stored (8-bit products).")
    var vocoderWeights = "f32"

    func run() async throws {
        try await runReportingErrors {
            let weights = try SpeechVocoder.WeightStorage(flag: vocoderWeights)
            if let decodeFrames {
                try decode(decodeFrames, weights: weights)
                return
            }
            guard (user == nil) != (audio == nil) else { throw CLIError("give the user's turn with --user TEXT or --audio FILE.wav") }
            guard n > 0 else { throw CLIError("-n must be positive") }
            let path = try ModelCache.resolve(model)
            let speechMode =
                try mode
                ?? SpeechMode(systemPrompt: system).orThrow(
                    CLIError("the system prompt is not one the model was trained to speak with; give --mode interleaved or sequential"))
            var content: [ChatMessageContent] = []
            var projector: String?
            if let audio {
                let choice = try ProjectorChoice.require(try ProjectorChoice.resolve(mmproj, model: path), .audio, model: path)
                projector = choice.path
                content.append(try MediaAttachment.read(audio, as: .audio).content)
            }
            if let user { content.append(.text(user)) }
            let runner: ModelRunner
            do {
                runner = try await Leap.load(
                    path: path,
                    options: LiquidInferenceEngineOptions(
                        mmProjPath: projector, vocoderPath: vocoder, audioTokenizerPath: audioTokenizer, vocoderWeights: weights))
            } catch let error as LeapError {
                throw CLIError(error.description)
            }
            let messages = [ChatMessage(role: .system, textContent: system), ChatMessage(role: .user, content: content)]
            if let follow {
                guard let local = runner as? LiquidInferenceEngineRunner else { throw CLIError("\(path) did not load as a local model") }
                let report: SpeechProbe.Report
                do {
                    report = try SpeechProbe(runner: local).run(messages: messages, follow: try Self.steps(follow))
                } catch let error as LeapError {
                    throw CLIError(error.description)
                }
                writeOut(report.text + "\n")
                try write(steps: report.choices, text: report.text, waveform: report.waveform)
                return
            }
            let engine = try ServingEngine(runner: runner, configuration: .init(prefillChunk: 512))
            guard engine.speaks else {
                throw CLIError("\(path) cannot speak: give its --vocoder and --audio-tokenizer files (or put them beside it)")
            }
            let request = ServingRequest(
                prompt: .chat(
                    messages: [ChatMessage(role: .system, textContent: system), ChatMessage(role: .user, content: content)], tools: []),
                sampling: SamplingOverrides(temperature: temp, repetitionPenalty: 1, seed: seed, dryMultiplier: 0), maxTokens: n,
                parsesCalls: false, speech: SpeechRequest(mode: speechMode, audioTemperature: audioTemp, audioTopK: audioTopK))
            var reply = ServingReply(), steps: [SpeechStep] = []
            do {
                for try await event in try engine.submit(request).events {
                    reply.add(event)
                    switch event {
                    case .speechStep(let step): steps.append(step)
                    case .text(let text, _): writeOut(text)
                    default: break
                    }
                }
            } catch let error as ServingError {
                throw CLIError(error.description)
            }
            writeOut("\n")
            await engine.shutdown(cancelRunning: true)
            try write(steps: steps, text: reply.text, waveform: reply.audio)
        }
    }

    /// Writes `--json` and `--wav`.
    func write(steps: [SpeechStep], text: String, waveform: [Float]) throws {
        if let json {
            let outputs = steps.map { step -> JSONValue in
                switch step {
                case .text(let id): return ["text": .integer(id)]
                case .frame(let codes): return ["audio": .array(codes.map { .integer($0) })]
                }
            }
            let object: JSONValue = .object(
                JSONObject([
                    ("outputs", .array(outputs)), ("text", .string(text)),
                    (
                        "waveform",
                        .object(
                            JSONObject([("sample_rate", .integer(AudioDetokenizer.sampleRate)), ("n_samples", .integer(waveform.count))]))
                    )
                ]))
            try Data((object.serialized(.compact) + "\n").utf8).write(to: URL(fileURLWithPath: json))
        }
        if let wav {
            try WAVAudio.encodeFloat32WAV(samples: waveform, sampleRate: AudioDetokenizer.sampleRate, channelCount: 1)
                .write(to: URL(fileURLWithPath: wav))
        }
    }

    /// The steps of a golden-like file's `outputs` (`{"text": id}` or `{"audio": [8 codes]}`).
    static func steps(_ file: String) throws -> [SpeechStep] {
        guard let text = try? String(contentsOfFile: file, encoding: .utf8), let parsed = try? JSONValue.parse(text) else {
            throw CLIError("--follow: cannot read '\(file)' as JSON")
        }
        guard let outputs = parsed["outputs"]?.arrayValue else { throw CLIError("--follow: '\(file)' has no \"outputs\" list") }
        return try outputs.enumerated().map { index, output -> SpeechStep in
            if let id = output["text"]?.intValue { return .text(id) }
            if let codes = output["audio"]?.arrayValue?.compactMap(\.intValue), codes.count == AudioFrame.codebookCount {
                return .frame(codes)
            }
            throw CLIError("--follow: output \(index) is neither {\"text\": id} nor {\"audio\": [8 codes]}")
        }
    }

    /// `--decode-frames`: the golden-like file's `frames` (end-of-audio frames skipped)
    /// through the detokenizer in one call.
    func decode(_ file: String, weights: SpeechVocoder.WeightStorage) throws {
        guard wav != nil else { throw CLIError("--decode-frames writes its waveform to --wav FILE") }
        guard let text = try? String(contentsOfFile: file, encoding: .utf8), let parsed = try? JSONValue.parse(text) else {
            throw CLIError("--decode-frames: cannot read '\(file)' as JSON")
        }
        guard let rows = parsed["frames"]?.arrayValue else { throw CLIError("--decode-frames: '\(file)' has no \"frames\" list") }
        let codes = try rows.map { row -> [Int] in
            guard let codes = row.arrayValue?.compactMap(\.intValue), codes.count == AudioFrame.codebookCount else {
                throw CLIError("--decode-frames: every frame is a list of \(AudioFrame.codebookCount) codes")
            }
            return codes
        }
        let path = try ModelCache.resolve(model)
        let (vocoderPath, tokenizerPath) = try Self.speechFiles(
            vocoder: vocoder, audioTokenizer: audioTokenizer, model: path, for: "--decode-frames")
        do {
            let vocoder = try SpeechVocoder(path: vocoderPath, pool: ThreadPool(threads: ThreadPool.defaultThreads), weights: weights)
            let detokenizer = try AudioDetokenizer(path: tokenizerPath, vocoder: vocoder, maxFrames: max(1, codes.count))
            let waveform = try detokenizer.decode(try AudioDetokenizer.frames(fromCodes: codes))
            try write(steps: [], text: "", waveform: waveform)
            FileHandle.standardError.write(Data("[decoded \(codes.count) frames: \(waveform.count) samples]\n".utf8))
        } catch let error as CLIError {
            throw error
        } catch {
            throw CLIError("\(error)")
        }
    }
}

extension Speak {
    /// The vocoder and audio tokenizer of a command's flags, else the ones beside `model`;
    /// `option` names the command's flag in the error when either is missing.
    static func speechFiles(vocoder: String?, audioTokenizer: String?, model: String, for option: String) throws -> (String, String) {
        guard let vocoderPath = vocoder ?? CompanionFile.vocoder.companion(of: model),
            let tokenizerPath = audioTokenizer ?? CompanionFile.audioTokenizer.companion(of: model)
        else { throw CLIError("\(option) needs --vocoder and --audio-tokenizer (or a model with them beside it)") }
        return (vocoderPath, tokenizerPath)
    }
}

extension SpeechMode: ExpressibleByArgument {}

extension Optional {
    /// The value, or `error` thrown.
    fileprivate func orThrow(_ error: some Error) throws -> Wrapped {
        guard let value = self else { throw error }
        return value
    }
}
