import Foundation
import Hummingbird
import LeapJSON
import LeapSDKCore
import LeapServer
import NIOCore
import TestSupport
import Testing

/// Spoken chat replies in process (issue 43): `modalities: ["text", "audio"]` on the tiny
/// LFM2.5-Audio fixture. A TTS system prompt speaks the `tts-thanks` golden as
/// `message.audio` (a WAV or raw pcm16, base64; `content` null, the text its transcript);
/// streamed, `delta.audio` chunks carry base64 pcm16 that joins to the same bytes and the
/// text comes as `delta.audio.transcript`; a conversation without a trained system prompt
/// gets an interleaved reply; a text model cannot speak; text only is unchanged.
@Suite(.serialized) struct ChatSpeechServingTests {
    static let plain = #""temperature": 0, "repeat_penalty": 1, "dry_multiplier": 0, "max_tokens": 40"#
    static let tts =
        #"[{"role": "system", "content": "Perform TTS. Use the UK female voice."}, {"role": "user", "content": "\#(SpeechServingTests.thanks)"}]"#

    static func body(format: String = "wav", messages: String = tts, extra: String = "") -> String {
        #"{"model": "m", "messages": \#(messages), "modalities": ["text", "audio"], "audio": {"voice": "alloy", "format": "\#(format)"}, \#(plain)\#(extra)}"#
    }

    static func base64(_ value: JSONValue?) -> Data? { value?.stringValue.flatMap { Data(base64Encoded: $0) } }

    @Test func aTTSPromptSpeaksTheGoldenAndStreamsTheSameSamples() async throws {
        let client = try await SpeechServingTests.server()
        let golden = try SpeechServingTests.golden()
        let wavResponse = try await client.post("/v1/chat/completions", Self.body())
        #expect(wavResponse.status == .ok, "\(wavResponse.text.prefix(300))")
        let message = wavResponse.json["choices"]?.arrayValue?.first?["message"]
        #expect(message?["content"] == JSONValue.null)
        let audio = message?["audio"]
        #expect(audio?["id"]?.stringValue?.hasPrefix("audio_") == true)
        #expect((audio?["expires_at"]?.intValue ?? 0) > (wavResponse.json["created"]?.intValue ?? .max))
        let transcript = audio?["transcript"]?.stringValue ?? ""
        #expect(!transcript.isEmpty)
        let wavBytes = try #require(Self.base64(audio?["data"]))
        let wav = try WAVAudio(data: wavBytes)
        #expect(wav.sampleRate == 24_000 && wav.sampleFormat == .int16)
        #expect(wav.samples.count == golden.count)
        let worst = zip(wav.samples, golden).map { abs($0 - $1) }.max() ?? 1
        #expect(worst <= 1 / 32768 + 1e-5, "largest difference \(worst)")

        let pcmResponse = try await client.post("/v1/chat/completions", Self.body(format: "pcm16"))
        let pcm = try #require(Self.base64(pcmResponse.json["choices"]?.arrayValue?.first?["message"]?["audio"]?["data"]))
        #expect(pcm == wavBytes.dropFirst(44))

        let stream = try await client.post("/v1/chat/completions", Self.body(format: "pcm16", extra: #", "stream": true"#))
        #expect(stream.status == .ok)
        var chunks: [Data] = [], streamedText = "", ids = Set<String>()
        for event in stream.events.dropLast() {
            let delta = try JSONValue.parse(event)["choices"]?.arrayValue?.first?["delta"]
            if let a = delta?["audio"] {
                ids.insert(a["id"]?.stringValue ?? "")
                if let data = Self.base64(a["data"]) { chunks.append(data) }
                streamedText += a["transcript"]?.stringValue ?? ""
            }
            #expect(delta?["content"]?.stringValue?.isEmpty ?? true)
        }
        #expect(stream.events.last == "[DONE]")
        #expect(chunks.count > 1)
        #expect(chunks.reduce(Data(), +) == pcm)
        #expect(ids.count == 1)
        #expect(streamedText == transcript)

        // Text only, as before: no audio.
        let text = try await client.post("/v1/chat/completions", #"{"messages": \#(Self.tts), \#(Self.plain)}"#)
        #expect(text.json["choices"]?.arrayValue?.first?["message"]?["audio"] == nil)
        #expect(text.json["choices"]?.arrayValue?.first?["message"]?["content"]?.stringValue?.hasPrefix(transcript) == true)
    }

    @Test func aConversationWithoutATrainedPromptIsInterleaved() async throws {
        let client = try await SpeechServingTests.server()
        let response = try await client.post(
            "/v1/chat/completions", Self.body(messages: #"[{"role": "user", "content": "Hello there."}]"#))
        #expect(response.status == .ok, "\(response.text.prefix(300))")
        let audio = response.json["choices"]?.arrayValue?.first?["message"]?["audio"]
        let wav = try WAVAudio(data: try #require(Self.base64(audio?["data"])))
        #expect(wav.sampleRate == 24_000 && !wav.samples.isEmpty)
    }

    @Test func aTextModelCannotSpeak() async throws {
        let server = try await TestServer()
        try await server.test { client in
            let response = try await client.post(
                "/v1/chat/completions", Self.body(messages: #"[{"role": "user", "content": "Hi"}]"#))
            #expect(response.status == .badRequest)
            #expect(response.json["error"]?["message"]?.stringValue?.contains("cannot speak") == true, "\(response.text)")
            #expect(response.json["error"]?["param"] == "modalities")
            // Text only, as before.
            let text = try await client.post(
                "/v1/chat/completions", #"{"messages": [{"role": "user", "content": "Hi"}], "modalities": ["text"], "max_tokens": 4}"#)
            #expect(text.status == .ok)
        }
    }
}
