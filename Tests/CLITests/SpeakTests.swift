import Foundation
import LeapJSON
import LeapSDKCore
import TestSupport
import Testing

@testable import leap_ref

/// `leap-ref speak` reproduces the reference's speech-out goldens: every step (text
/// tokens, frames' codes), and the waveform within 1e-5 per sample, both from generation
/// and from the golden's own frames (`--decode-frames`); bad requests are refused with a
/// message.
@Suite(.serialized) struct SpeakTests {
    static let vocoder = TestFixtures.path("models/vocoder-lfm2-audio-tiny.gguf")
    static let tokenizer = TestFixtures.path("models/tokenizer-lfm2-audio-tiny.gguf")
    /// The F32 form of the speech-out language model (its Q4_0 values widened, as the
    /// goldens compute; scripts/make-test-models.sh).
    static var model: String { TestFixtures.modelCache + "/lfm2-audio-out-tiny.F32.gguf" }

    static func golden(_ name: String) throws -> (json: JSONValue, waveform: [Float]) {
        let base = TestFixtures.path("golden/audio-out/lfm2-audio-out-tiny.\(name)")
        let json = try JSONValue.parse(String(contentsOfFile: base + ".json", encoding: .utf8))
        return (json, try Self.samples(Data(contentsOf: URL(fileURLWithPath: base + ".wave.f32"))))
    }

    static func samples(_ bytes: Data) -> [Float] {
        bytes.withUnsafeBytes { raw in (0..<(bytes.count / 4)).map { raw.loadUnaligned(fromByteOffset: 4 * $0, as: Float.self) } }
    }

    static func maxDifference(_ a: [Float], _ b: [Float]) -> Float { zip(a, b).map { abs($0 - $1) }.max() ?? .infinity }

    @Test(arguments: ["tts-thanks.sequential", "hello.interleaved"]) func speakReproducesTheGolden(_ name: String) throws {
        let (golden, waveform) = try Self.golden(name)
        let messages = golden["messages"]?.arrayValue ?? []
        let system = try #require(messages.first?.arrayValue?[1].stringValue)
        let user = try #require(messages.last?.arrayValue?[1].stringValue)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("leap-ref-speak-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let json = folder.appendingPathComponent("out.json").path, wav = folder.appendingPathComponent("out.wav").path
        let run = try LeapRefBinary.run([
            "speak", "--model", try TestFixtures.require(Self.model), "--vocoder", Self.vocoder, "--audio-tokenizer", Self.tokenizer,
            "--system", system, "--user", user, "-n", String(golden["max_new_tokens"]?.intValue ?? 0), "--json", json, "--wav", wav
        ])
        #expect(run.status == 0, "\(run.stderr)")
        let ours = try JSONValue.parse(String(contentsOfFile: json, encoding: .utf8))
        #expect(ours["outputs"] == golden["outputs"], "\(name)")
        #expect(ours["waveform"]?["n_samples"]?.intValue == waveform.count)
        #expect(ours["waveform"]?["sample_rate"]?.intValue == 24_000)
        let decoded = try WAVAudio(data: Data(contentsOf: URL(fileURLWithPath: wav)))
        #expect(decoded.sampleRate == 24_000 && decoded.samples.count == waveform.count)
        #expect(Self.maxDifference(decoded.samples, waveform) <= 1e-5)
    }

    /// Audio in, end to end: the chirp clip through leap-ref's own audio encoder (the
    /// mmproj fixture), then an interleaved reply: every step and the waveform are the
    /// reference's (whose prompt took the F32-mmproj golden's embeddings).
    @Test func speakAnswersAClipAsTheReferenceDoes() throws {
        let (golden, waveform) = try Self.golden("chirp-1s.interleaved")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("leap-ref-speak-clip-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let json = folder.appendingPathComponent("out.json").path, wav = folder.appendingPathComponent("out.wav").path
        let run = try LeapRefBinary.run([
            "speak", "--model", try TestFixtures.require(Self.model), "--vocoder", Self.vocoder, "--audio-tokenizer", Self.tokenizer,
            "--mmproj", TestFixtures.path("models/mmproj-lfm2-audio-tiny.gguf"), "--audio",
            TestFixtures.path("audio/lfm2-audio-chirp-1s-16k.wav"), "-n", String(golden["max_new_tokens"]?.intValue ?? 0),
            "--json", json, "--wav", wav
        ])
        #expect(run.status == 0, "\(run.stderr)")
        let ours = try JSONValue.parse(String(contentsOfFile: json, encoding: .utf8))
        #expect(ours["outputs"] == golden["outputs"])
        let decoded = try WAVAudio(data: Data(contentsOf: URL(fileURLWithPath: wav)))
        #expect(decoded.samples.count == waveform.count)
        #expect(Self.maxDifference(decoded.samples, waveform) <= 1e-5)
    }

    /// `--decode-frames`: the golden's frames alone (end-of-audio frames skipped) give its
    /// waveform, for a sequential turn of several audio runs.
    @Test func decodeFramesGivesTheGoldensWaveform() throws {
        let (_, waveform) = try Self.golden("tts-gap.sequential")
        let wav = FileManager.default.temporaryDirectory.appendingPathComponent("leap-ref-frames-\(UUID().uuidString).wav").path
        defer { try? FileManager.default.removeItem(atPath: wav) }
        let run = try LeapRefBinary.run([
            "speak", "--model", TestFixtures.path("models/lfm2-audio-out-tiny.gguf"), "--vocoder", Self.vocoder,
            "--audio-tokenizer", Self.tokenizer, "--decode-frames",
            TestFixtures.path("golden/audio-out/lfm2-audio-out-tiny.tts-gap.sequential.json"), "--wav", wav
        ])
        #expect(run.status == 0, "\(run.stderr)")
        let decoded = try WAVAudio(data: Data(contentsOf: URL(fileURLWithPath: wav)))
        #expect(decoded.samples.count == waveform.count)
        #expect(Self.maxDifference(decoded.samples, waveform) <= 1e-5)
    }

    @Test func badRequestsAreRefused() throws {
        // A model without speech files.
        let text = try LeapRefBinary.run(["speak", "--model", TestFixtures.path("models/lfm2-tiny.gguf"), "--user", "Hi", "-n", "4"])
        #expect(text.status != 0)
        #expect(text.stderr.contains("cannot speak"), "\(text.stderr)")
        // A system prompt the model was not trained on, without --mode.
        let prompt = try LeapRefBinary.run([
            "speak", "--model", TestFixtures.path("models/lfm2-audio-out-tiny.gguf"), "--system", "Be nice.", "--user", "Hi"
        ])
        #expect(prompt.status != 0)
        #expect(prompt.stderr.contains("--mode"), "\(prompt.stderr)")
        // Neither --user nor --audio.
        let none = try LeapRefBinary.run(["speak", "--model", TestFixtures.path("models/lfm2-audio-out-tiny.gguf")])
        #expect(none.status != 0)
        #expect(none.stderr.contains("--user"), "\(none.stderr)")
        // Frames that are not 8 codes.
        let bad = FileManager.default.temporaryDirectory.appendingPathComponent("leap-ref-bad-\(UUID().uuidString).json")
        try Data(#"{"frames": [[1, 2, 3]]}"#.utf8).write(to: bad)
        defer { try? FileManager.default.removeItem(at: bad) }
        let frames = try LeapRefBinary.run([
            "speak", "--model", TestFixtures.path("models/lfm2-audio-out-tiny.gguf"), "--decode-frames", bad.path, "--wav", "/tmp/x.wav"
        ])
        #expect(frames.status != 0)
        #expect(frames.stderr.contains("8 codes"), "\(frames.stderr)")
    }

    /// `chat --audio-out DIR` with a speech model (its vocoder and tokenizer found beside
    /// it) under the interleaved system prompt: each spoken reply is saved as a WAV, and a
    /// text-only system prompt saves none.
    @Test func chatSavesSpokenReplies() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("leap-ref-chat-audio-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let model = TestFixtures.path("models/lfm2-audio-out-tiny.gguf")
        let run = try LeapRefBinary.run(
            [
                "chat", "--model", model, "--system", "Respond with interleaved text and audio.", "--max-tokens", "30", "--temp", "0",
                "--audio-out", folder.path
            ], stdin: "Hello! How are you today?\n")
        #expect(run.status == 0, "\(run.stderr)")
        let saved = folder.appendingPathComponent("reply-1.wav")
        let wav = try WAVAudio(data: Data(contentsOf: saved))
        #expect(wav.sampleRate == 24_000)
        #expect(wav.samples.count > 0 && wav.samples.count % 320 == 0, "\(wav.samples.count) samples")
        #expect(run.stderr.contains("spoken reply saved"), "\(run.stderr)")

        let quiet = folder.appendingPathComponent("quiet")
        let text = try LeapRefBinary.run(
            ["chat", "--model", model, "--system", "You are helpful.", "--max-tokens", "4", "--audio-out", quiet.path], stdin: "Hi\n")
        #expect(text.status == 0, "\(text.stderr)")
        #expect((try? FileManager.default.contentsOfDirectory(atPath: quiet.path))?.isEmpty == true)
    }

    /// `--follow`: the golden's steps fed back; "outputs" holds leap-ref's greedy choice at
    /// each step. On the LM's F32 form every choice is the golden's wherever its margin
    /// exceeds 1e-3; on the Q4_0 file (8-bit activations) wherever it exceeds 1 (measured
    /// parting at margins up to 0.83); the waveform is the fed frames', the golden's.
    @Test(arguments: [("tts-gap.sequential", true), ("weather.interleaved", true), ("tts-rain.sequential", false)])
    func followRecordsTheChoicesAlongTheGolden(_ name: String, _ exact: Bool) throws {
        let (golden, waveform) = try Self.golden(name)
        let messages = golden["messages"]?.arrayValue ?? []
        let system = try #require(messages.first?.arrayValue?[1].stringValue)
        let user = try #require(messages.last?.arrayValue?[1].stringValue)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("leap-ref-follow-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let json = folder.appendingPathComponent("out.json").path, wav = folder.appendingPathComponent("out.wav").path
        let model = exact ? try TestFixtures.require(Self.model) : TestFixtures.path("models/lfm2-audio-out-tiny.gguf")
        let run = try LeapRefBinary.run([
            "speak", "--model", model, "--vocoder", Self.vocoder, "--audio-tokenizer", Self.tokenizer, "--system", system, "--user", user,
            "--follow", TestFixtures.path("golden/audio-out/lfm2-audio-out-tiny.\(name).json"), "--json", json, "--wav", wav
        ])
        #expect(run.status == 0, "\(run.stderr)")
        let ours = try JSONValue.parse(String(contentsOfFile: json, encoding: .utf8))["outputs"]?.arrayValue ?? []
        let theirs = golden["outputs"]?.arrayValue ?? []
        #expect(ours.count == theirs.count)
        let bound = exact ? 1e-3 : 1.0
        var textMargins = (golden["text_margins"]?.arrayValue ?? []).compactMap(\.doubleValue).makeIterator()
        var frameMargins = (golden["audio_steps"]?.arrayValue ?? []).map { $0["margins"]?.arrayValue?.compactMap(\.doubleValue) ?? [] }
            .makeIterator()
        var compared = 0, parted = 0
        for (index, (mine, reference)) in zip(ours, theirs).enumerated() {
            if let id = reference["text"]?.intValue {
                let margin = textMargins.next() ?? 0
                guard margin > bound else { continue }
                compared += 1
                if mine["text"]?.intValue != id { parted += 1 }
                #expect(mine["text"]?.intValue == id, "\(name) step \(index): margin \(margin)")
            } else {
                let codes = reference["audio"]?.arrayValue?.compactMap(\.intValue) ?? []
                let chosen = mine["audio"]?.arrayValue?.compactMap(\.intValue) ?? []
                let margins = frameMargins.next() ?? []
                let endOfAudio = codes.first == 2048
                for c in 0..<min(8, codes.count, chosen.count, margins.count) where margins[c] > bound && (!endOfAudio || c == 0) {
                    compared += 1
                    #expect(chosen[c] == codes[c], "\(name) step \(index) codebook \(c): margin \(margins[c])")
                }
            }
        }
        print("speak --follow \(name) (\(exact ? "F32" : "Q4_0") LM): \(compared) choices compared, \(parted) text parted")
        #expect(compared > theirs.count)
        let decoded = try WAVAudio(data: Data(contentsOf: URL(fileURLWithPath: wav)))
        #expect(decoded.samples.count == waveform.count)
        #expect(Self.maxDifference(decoded.samples, waveform) <= 1e-5)
    }
}
