import Foundation
import Hummingbird
import LeapJSON
import LeapSDKCore
import LeapServer
import TestSupport
import Testing

/// Images and audio over the chat API (issues #25, #26): `image_url` data URLs and
/// `input_audio` WAV parts reach the tiny LFM2-VL and LFM2-Audio fixtures (their mmproj
/// files found beside them), `/v1/models` says what the model reads, the media positions
/// count in `prompt_tokens`, and every bad part is a 400 that names what is wrong, after
/// which the next request is served.
@Suite(.serialized) struct MediaServingTests {
    static let vision = TestFixtures.path("models/lfm2-vl-tiny.gguf")
    static let audio = TestFixtures.path("models/lfm2-audio-tiny.gguf")

    /// An in-process server of `model` (its companion mmproj file loaded) within `limits`.
    static func server(_ model: String, limits: MediaLimits = MediaLimits()) async throws -> (ServingEngine, InProcessClient) {
        let runner = try await Leap.load(
            path: model, options: LiquidInferenceEngineOptions(cpuThreads: 2, contextSize: 2048, mediaLimits: limits))
        let engine = try ServingEngine(runner: runner, configuration: .init(slots: 1, contextSize: 2048, queueLimit: 8))
        let router = ServerRoutes.router(state: ModelState(.ready(engine)), configuration: ServerConfiguration(), metrics: ServerMetrics())
        return (engine, InProcessClient(responder: router.buildResponder()))
    }

    static func file(_ path: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: TestFixtures.path(path))) }

    static func imagePart(_ url: String) -> JSONValue { ["type": "image_url", "image_url": ["url": .string(url)]] }

    static func imagePart(_ data: Data, _ type: String = "image/png") -> JSONValue {
        imagePart("data:\(type);base64," + data.base64EncodedString())
    }

    static func audioPart(_ data: Data, format: String = "wav") -> JSONValue {
        ["type": "input_audio", "input_audio": ["data": .string(data.base64EncodedString()), "format": .string(format)]]
    }

    /// A chat request body of one user message: `parts`, then `text`.
    static func body(_ parts: [JSONValue], text: String = "Describe this picture.", extra: JSONValue = [:]) -> String {
        var o = JSONObject([
            ("messages", [["role": "user", "content": .array(parts + [["type": "text", "text": .string(text)]])]]),
            ("max_tokens", 6), ("temperature", 0)
        ])
        for (k, v) in extra.objectValue ?? JSONObject() { o[k] = v }
        return JSONValue.object(o).serialized()
    }

    /// Posts each bad body, expecting a 400 whose message holds the expected text; after
    /// each, a good request (`good`) is served and the slot is free again.
    static func expectRefusals(
        _ client: InProcessClient, _ engine: ServingEngine, _ cases: [(String, String, String)], good: String
    ) async throws {
        for (label, body, expected) in cases {
            let bad = try await client.post("/v1/chat/completions", body)
            #expect(bad.status == .badRequest, "\(label): \(bad.status) \(bad.text.prefix(300))")
            let message = bad.json["error"]?["message"]?.stringValue ?? ""
            #expect(message.contains(expected), "\(label): \(message)")
            #expect(bad.json["error"]?["type"] == "invalid_request_error", "\(label)")
            #expect(bad.json["error"]?["code"] == 400, "\(label)")
            let ok = try await client.post("/v1/chat/completions", good)
            #expect(ok.status == .ok, "after \(label): \(ok.text.prefix(300))")
            #expect(ok.json["usage"]?["completion_tokens"]?.intValue ?? 0 > 0, "after \(label)")
            #expect(engine.status.busySlots == 0 && engine.status.queuedRequests == 0, "after \(label)")
        }
    }

    @Test func modelsSayWhatTheModelReads() async throws {
        // The tiny LFM2-Audio fixture also speaks: its vocoder-* and tokenizer-* files are beside it.
        for (model, inputs, outputs) in [(Self.vision, ["text", "image"], ["text"]), (Self.audio, ["text", "audio"], ["text", "audio"])] {
            let (_, client) = try await Self.server(model)
            let entry = try await client.get("/v1/models").json["data"]?.arrayValue?.first
            #expect(entry?["input_modalities"] == .array(inputs.map { .string($0) }), "\(model)")
            #expect(entry?["architecture"]?["input_modalities"] == .array(inputs.map { .string($0) }))
            #expect(entry?["architecture"]?["output_modalities"] == .array(outputs.map { .string($0) }), "\(model)")
        }
        let text = try await TestServer()
        try await text.test { client in
            let models = try await client.get("/v1/models")
            #expect(models.json["data"]?.arrayValue?.first?["input_modalities"] == ["text"])
        }
    }

    @Test func anImageReachesTheModelAndItsPositionsAreCounted() async throws {
        let (_, client) = try await Self.server(Self.vision)
        let png = try Self.file("images/small-40x30.png")
        let reply = try await client.post("/v1/chat/completions", Self.body([Self.imagePart(png)]))
        #expect(reply.status == .ok, "\(reply.text.prefix(300))")
        // libmtmd's count for this image and text: 70 image positions, 86 in all.
        #expect(reply.json["usage"]?["prompt_tokens"] == 86)
        #expect(reply.json["timings"]?["prompt_n"] == 86)
        #expect(reply.json["usage"]?["completion_tokens"]?.intValue ?? 0 > 0)

        // Streamed, the same image comes from the slot's prompt cache.
        let streamed = try await client.post(
            "/v1/chat/completions",
            Self.body([Self.imagePart(png)], extra: ["stream": true, "stream_options": ["include_usage": true]]))
        #expect(streamed.status == .ok)
        #expect(streamed.events.last == "[DONE]")
        let usage = try #require(streamed.events.dropLast().compactMap { try? JSONValue.parse($0) }.last?["usage"])
        #expect(usage["prompt_tokens"] == 86)
        #expect(usage["prompt_tokens_details"]?["cached_tokens"]?.intValue ?? 0 >= 70)

        // A JPEG, and a data URL with no media type (the bytes say what they are).
        let jpeg = try Self.file("images/medium-500x375.jpg")
        let j = try await client.post("/v1/chat/completions", Self.body([Self.imagePart(jpeg, "image/jpeg")]))
        #expect(j.status == .ok, "\(j.text.prefix(300))")
        #expect(j.json["usage"]?["prompt_tokens"]?.intValue ?? 0 > 86)
        let untyped = try await client.post("/v1/chat/completions", Self.body([Self.imagePart(png, "")]))
        #expect(untyped.json["usage"]?["prompt_tokens"] == 86)
    }

    @Test func audioReachesTheModelAndItsPositionsAreCounted() async throws {
        let (_, client) = try await Self.server(Self.audio)
        let wav = try Self.file("audio/lfm2-audio-chirp-1s-16k.wav")
        let reply = try await client.post("/v1/chat/completions", Self.body([Self.audioPart(wav)], text: "Transcribe this audio."))
        #expect(reply.status == .ok, "\(reply.text.prefix(300))")
        // libmtmd: 4 + 13 audio + 12 text positions.
        #expect(reply.json["usage"]?["prompt_tokens"] == 29)
        #expect(reply.json["usage"]?["completion_tokens"]?.intValue ?? 0 > 0)
    }

    @Test func badImagesAre400AndTheNextRequestIsServed() async throws {
        var limits = MediaLimits()
        limits.maxImagePixels = 100_000  // medium-500x375 has 187,500
        limits.maxImageBytes = 40_000  // big-640x600.png has 53,336, medium-500x375.png 30,732
        let (engine, client) = try await Self.server(Self.vision, limits: limits)
        let png = try Self.file("images/small-40x30.png")
        let good = Self.body([Self.imagePart(png)])
        let gif = Data("GIF89a".utf8 + [0x28, 0, 0x1E, 0, 0, 0, 0] + [UInt8](repeating: 0, count: 64))
        let cases: [(String, String, String)] = [
            (
                "remote URL", Self.body([Self.imagePart("https://example.com/cat.png")]),
                "remote image URLs are not fetched; send a data: URL"
            ),
            ("bad base64", Self.body([Self.imagePart("data:image/png;base64,iVBORw0K!!!")]), "base64 is not valid"),
            ("WebP", Self.body([Self.imagePart(png, "image/webp")]), "image/webp images are not supported"),
            ("truncated PNG", Self.body([Self.imagePart(png.prefix(png.count / 2))]), "the image cannot be read: truncated PNG"),
            (
                // Counted from their headers (72 positions each), refused before one is decoded.
                "forty truncated PNGs", Self.body([JSONValue](repeating: Self.imagePart(png.prefix(png.count / 2)), count: 40)),
                "which does not fit in the context of 2048 tokens"
            ),
            ("GIF bytes", Self.body([Self.imagePart(gif)]), "GIF images are not supported: send a PNG or a JPEG"),
            (
                "too many pixels", Self.body([Self.imagePart(try Self.file("images/medium-500x375.png"))]),
                "187500 pixels, over the limit of 100000 pixels"
            ),
            (
                "too many bytes", Self.body([Self.imagePart(try Self.file("images/big-640x600.png"))]),
                "the image has 53336 bytes, more than the limit of 40000"
            ),
            (
                "streamed, remote URL",
                Self.body([Self.imagePart("http://127.0.0.1/cat.jpg")], extra: ["stream": true]),
                "remote image URLs are not fetched"
            ),
            (
                "streamed, GIF bytes", Self.body([Self.imagePart(gif)], extra: ["stream": true]),
                "GIF images are not supported"
            ),
            (
                "audio for a vision model", Self.body([Self.audioPart(try Self.file("audio/lfm2-audio-chirp-1s-16k.wav"))]),
                "'messages[0].content[0]': this model does not read audio: its mmproj file is a vision encoder"
            )
        ]
        try await Self.expectRefusals(client, engine, cases, good: good)
    }

    @Test func badAudioIs400AndTheNextRequestIsServed() async throws {
        var limits = MediaLimits()
        limits.maxAudioSeconds = 0.5
        let (engine, client) = try await Self.server(Self.audio, limits: limits)
        let short = try Self.file("audio/lfm2-audio-short-0.25s-16k.wav")
        let good = Self.body([Self.audioPart(short)], text: "Transcribe this audio.")
        let stereo = WAVBuilder.simple(fmt: WAVBuilder.fmt(tag: 1, channels: 2, bits: 16), samples: [UInt8](repeating: 0, count: 64_000))
        let tenMilliseconds = WAVBuilder.simple(fmt: WAVBuilder.fmt(tag: 1, bits: 16), samples: [UInt8](repeating: 1, count: 320))
        let mp3 = Data(Array("ID3".utf8) + [0x03, 0, 0, 0, 0, 0x0F, 0x76, 0xFF, 0xFB, 0x90, 0x64] + [UInt8](repeating: 0, count: 400))
        let cases: [(String, String, String)] = [
            ("format mp3", Self.body([Self.audioPart(mp3, format: "mp3")]), "WAV only"),
            ("MP3 bytes called wav", Self.body([Self.audioPart(mp3)]), "the audio is not a WAV file (it looks like MP3"),
            ("stereo", Self.body([Self.audioPart(stereo.data)]), "stereo/multi-channel audio is not supported: convert it to mono"),
            ("0.01 s", Self.body([Self.audioPart(tenMilliseconds.data)]), "the audio is too short"),
            (
                "longer than --max-audio-seconds", Self.body([Self.audioPart(try Self.file("audio/lfm2-audio-chirp-1s-16k.wav"))]),
                "the audio is too long"
            ),
            (
                "bad base64",
                Self.body([["type": "input_audio", "input_audio": ["data": "UklGR#", "format": "wav"]]]),
                "'messages[0].content[0].input_audio.data' is not valid base64"
            ),
            (
                "an image for an audio model", Self.body([Self.imagePart(try Self.file("images/small-40x30.png"))]),
                "this model does not read images: its mmproj file is an audio encoder"
            )
        ]
        try await Self.expectRefusals(client, engine, cases, good: good)
    }

    @Test func aTextOnlyModelRefusesMediaAndGoesOn() async throws {
        let server = try await TestServer()
        let png = try Self.file("images/small-40x30.png")
        let wav = try Self.file("audio/lfm2-audio-chirp-1s-16k.wav")
        try await server.test { client in
            let image = try await client.post("/v1/chat/completions", Self.body([Self.imagePart(png)]))
            #expect(image.status == .badRequest)
            #expect(
                image.json["error"]?["message"]
                    == "'messages[0].content[0]': this model does not read images: it was loaded without a vision projector (leap-ref serve --mmproj FILE, or an mmproj-*.gguf beside the model)"
            )
            #expect(image.json["error"]?["param"] == "messages[0].content[0]")
            let audio = try await client.post("/v1/chat/completions", Self.body([Self.audioPart(wav)]))
            #expect(audio.status == .badRequest)
            #expect(
                audio.json["error"]?["message"]?.stringValue?.contains("does not read audio: it was loaded without an audio projector")
                    == true)
            let ok = try await client.post("/v1/chat/completions", #"{"messages": \#(userHello), "max_tokens": 4}"#)
            #expect(ok.status == .ok)
        }
    }
}
