import Foundation
import Hummingbird
import LeapJSON
import LeapSDKCore
import LeapServer
import NIOCore
import TestSupport
import Testing

/// `POST /v1/audio/speech` in process (issue 43): the tiny LFM2.5-Audio fixture (its F32
/// language model, the vocoder in `.float32`) speaks the reference's `tts-thanks` golden
/// as a 16-bit WAV and as raw PCM, OpenAI's voice names map onto the model's voices,
/// `/v1/models` lists audio output, and every refusal is a 400 after which the server
/// still speaks; a text-only model answers that it cannot speak.
@Suite(.serialized) struct SpeechServingTests {
    static var model: String { TestFixtures.modelCache + "/lfm2-audio-out-tiny.F32.gguf" }
    static let thanks = "Thank you for calling. How can I help?"

    /// An in-process server of the speech fixture under `configuration`.
    static func server(_ configuration: ServerConfiguration = ServerConfiguration()) async throws -> InProcessClient {
        let runner = try await Leap.load(
            path: try TestFixtures.require(model),
            options: LiquidInferenceEngineOptions(
                cpuThreads: 2, contextSize: 1024, vocoderPath: TestFixtures.path("models/vocoder-lfm2-audio-tiny.gguf"),
                audioTokenizerPath: TestFixtures.path("models/tokenizer-lfm2-audio-tiny.gguf"), vocoderWeights: .float32))
        let engine = try ServingEngine(runner: runner, configuration: .init(slots: 1, contextSize: 1024, queueLimit: 8))
        #expect(engine.speaks)
        let router = ServerRoutes.router(state: ModelState(.ready(engine)), configuration: configuration, metrics: ServerMetrics())
        return InProcessClient(responder: router.buildResponder())
    }

    /// The golden waveform of `tts-thanks` (the reference's float32 samples).
    static func golden() throws -> [Float] {
        let bytes = try Data(
            contentsOf: URL(fileURLWithPath: TestFixtures.path("golden/audio-out/lfm2-audio-out-tiny.tts-thanks.sequential.wave.f32")))
        return bytes.withUnsafeBytes { raw in (0..<(bytes.count / 4)).map { raw.loadUnaligned(fromByteOffset: 4 * $0, as: Float.self) } }
    }

    static func body(voice: String = "uk_female", format: String? = nil, extra: String = "") -> String {
        let f = format.map { #", "response_format": "\#($0)""# } ?? ""
        return #"{"model": "tts", "input": "\#(thanks)", "voice": "\#(voice)"\#(f)\#(extra)}"#
    }

    @Test func speaksTheGoldenAsWAVAndPCM() async throws {
        let client = try await Self.server()
        let golden = try Self.golden()
        // The golden's turn ends (<|im_end|>) at step 24 of its 40: the default limit ends it the same way.
        var wavBytes = Data()
        for extra in [#", "max_steps": 40"#, ""] {
            let response = try await client.post("/v1/audio/speech", Self.body(extra: extra))
            #expect(response.status == .ok, "\(response.text.prefix(300))")
            #expect(response.headers[.contentType] == "audio/wav")
            let wav = try WAVAudio(data: Data(response.body.readableBytesView))
            #expect(wav.sampleRate == 24_000 && wav.sampleFormat == .int16)
            #expect(wav.samples.count == golden.count)
            let worst = zip(wav.samples, golden).map { abs($0 - $1) }.max() ?? 1
            #expect(worst <= 0.5 / 32768 + 1e-5, "largest difference \(worst)")
            wavBytes = Data(response.body.readableBytesView)
        }
        let pcm = try await client.post("/v1/audio/speech", Self.body(format: "pcm", extra: #", "max_steps": 40"#))
        #expect(pcm.status == .ok && pcm.headers[.contentType] == "audio/pcm")
        #expect(pcm.body.readableBytes == 2 * golden.count)
        #expect(Data(pcm.body.readableBytesView) == wavBytes.dropFirst(44))  // the WAV's data chunk

        // An OpenAI voice name: alloy is US female, the same reply as us_female.
        let alloy = try await client.post("/v1/audio/speech", Self.body(voice: "alloy", extra: #", "max_steps": 40"#))
        let usFemale = try await client.post("/v1/audio/speech", Self.body(voice: "US female", extra: #", "max_steps": 40"#))
        #expect(alloy.status == .ok && alloy.headers[.contentType] == "audio/wav")
        #expect(alloy.body == usFemale.body)

        let models = try await client.get("/v1/models")
        #expect(models.json["data"]?.arrayValue?.first?["architecture"]?["output_modalities"] == ["text", "audio"])
    }

    @Test func refusalsAre400sAndTheServerStillSpeaks() async throws {
        let client = try await Self.server(ServerConfiguration(maxTokensLimit: 100))
        let cases: [(String, String, String?)] = [
            ("not json", "the request body is not valid JSON", nil),
            (#"{"input": "Hi", "voice": "robot"}"#, "the voices are us_female, us_male, uk_female, uk_male", "voice"),
            (Self.body(format: "mp3"), "'response_format' 'mp3' is not supported: this server writes 'wav' or 'pcm'", "response_format"),
            (Self.body(extra: #", "speed": 2"#), "'speed' must be 1", "speed"),
            (#"{"input": "", "voice": "uk_female"}"#, "'input' is empty", "input"),
            (Self.body(extra: #", "max_steps": 101"#), "'max_steps' is 101, more than this server allows (100", "max_steps"),
            // Within 4096 characters but not within the slot's 1024 positions.
            (#"{"input": "\#(String(repeating: "ab ", count: 1300))", "voice": "uk_male"}"#, "does not fit in the context", "input")
        ]
        for (body, message, param) in cases {
            let response = try await client.post("/v1/audio/speech", body)
            #expect(response.status == .badRequest, "\(body.prefix(60)): \(response.status)")
            #expect(response.json["error"]?["message"]?.stringValue?.contains(message) == true, "\(response.text.prefix(300))")
            #expect(response.json["error"]?["param"]?.stringValue == param, "\(body.prefix(60))")
            #expect(response.json["error"]?["type"] == "invalid_request_error")
        }
        // Within the limit (and by default, at most the limit) the server speaks.
        let ok = try await client.post("/v1/audio/speech", Self.body(format: "pcm"))
        #expect(ok.status == .ok && ok.body.readableBytes > 0)
    }

    @Test func aTextModelCannotSpeak() async throws {
        let server = try await TestServer()
        try await server.test { client in
            let response = try await client.post("/v1/audio/speech", Self.body())
            #expect(response.status == .badRequest)
            #expect(response.json["error"]?["message"]?.stringValue?.contains("cannot speak") == true, "\(response.text)")
            #expect(response.json["error"]?["param"] == "model")
            let models = try await client.get("/v1/models")
            #expect(models.json["data"]?.arrayValue?.first?["architecture"]?["output_modalities"] == ["text"])
        }
    }
}
