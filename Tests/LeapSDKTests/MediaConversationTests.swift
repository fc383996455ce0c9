import Foundation
import TestSupport
import Testing

@testable import LeapSDKCore

/// Images and audio through the LEAP API: a `Conversation` with `.image` / `.audio` parts on
/// the tiny LFM2-VL and LFM2-Audio fixtures (their mmproj files found beside them), the
/// prompt cache across turns, the token count, and every kind of bad input.
@Suite(.serialized) struct MediaConversationTests {
    static let vision = TestFixtures.path("models/lfm2-vl-tiny.gguf")
    static let audio = TestFixtures.path("models/lfm2-audio-tiny.gguf")

    static func file(_ path: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: TestFixtures.path(path))) }

    static func load(_ path: String, _ options: LiquidInferenceEngineOptions = .init(contextSize: 2048, defaultRNGSeed: 7))
        async throws -> LiquidInferenceEngineRunner
    {
        try #require(try await Leap.load(path: path, options: options) as? LiquidInferenceEngineRunner)
    }

    /// The LeapError a generation throws.
    static func failure(_ conversation: Conversation, _ message: ChatMessage) async -> LeapError? {
        do {
            _ = try await collect(conversation.generateResponse(message: message, generationOptions: GenerationOptions(maxOutputTokens: 4)))
            return nil
        } catch let error as LeapError {
            return error
        } catch {
            return .generationFailure("\(error)")
        }
    }

    @Test func anImageIsReadAndItsPrefixIsReusedOnTheNextTurn() async throws {
        let runner = try await Self.load(Self.vision)
        let message = ChatMessage(role: .user, content: [.image(try Self.file("images/small-40x30.png")), .text("Describe this picture.")])
        // libmtmd's golden for this image and text: 70 image positions, 86 in all.
        #expect(try runner.getPromptTokensSize(messages: [message]) == 86)
        let conversation = runner.createConversation(systemPrompt: nil)
        let first = try await collect(
            conversation.generateResponse(message: message, generationOptions: GenerationOptions(rngSeed: 1, maxOutputTokens: 6)))
        let stats = try #require(first.completion?.stats)
        #expect(stats.promptTokens == 86)
        #expect(stats.completionTokens > 0)
        #expect(!first.chunks.joined().isEmpty)
        #expect(conversation.history.count == 2)
        #expect(conversation.history[0].content.contains { if case .image = $0 { return true } else { return false } })

        let second = try await collect(
            conversation.generateResponse(
                userTextMessage: "And the colours?", generationOptions: GenerationOptions(rngSeed: 1, maxOutputTokens: 4)))
        let again = try #require(second.completion?.stats)
        // The first turn, image included, comes from the cache: the image is not encoded again.
        #expect(again.cachedPromptTokens >= 86)
        #expect(again.promptTokens > again.cachedPromptTokens)
    }

    @Test func anotherImageIsNotTakenFromTheCache() async throws {
        let runner = try await Self.load(Self.vision)
        let options = GenerationOptions(rngSeed: 1, maxOutputTokens: 2)
        func ask(_ image: String) async throws -> GenerationStats {
            let conversation = runner.createConversation(systemPrompt: nil)
            let message = ChatMessage(role: .user, content: [.image(try Self.file("images/\(image)")), .text("Describe this picture.")])
            return try #require(
                try await collect(conversation.generateResponse(message: message, generationOptions: options)).completion?.stats)
        }
        _ = try await ask("medium-500x375.png")
        // The same size and text, other pixels: only the text before the image is reused.
        let other = try await ask("medium-500x375.jpg")
        #expect(other.cachedPromptTokens < 10)
        let same = try await ask("medium-500x375.jpg")
        #expect(same.cachedPromptTokens == same.promptTokens)
    }

    @Test func audioIsHeard() async throws {
        let runner = try await Self.load(Self.audio)
        let wav = try Self.file("audio/lfm2-audio-chirp-1s-16k.wav")
        let message = ChatMessage(role: .user, content: [.audio(wav), .text("Transcribe this audio.")])
        // libmtmd: 4 + 13 audio + 12 text positions.
        #expect(try runner.getPromptTokensSize(messages: [message]) == 29)
        let conversation = runner.createConversation(systemPrompt: nil)
        let reply = try await collect(
            conversation.generateResponse(message: message, generationOptions: GenerationOptions(rngSeed: 3, maxOutputTokens: 5)))
        #expect(reply.completion?.stats?.promptTokens == 29)
        #expect(reply.completion?.stats?.completionTokens ?? 0 > 0)
        // fromFloatSamples at another rate is resampled to 16 kHz as llama.cpp does.
        let samples = (0..<22050).map { Float(sin(Double($0) * 2 * .pi * 440 / 22050)) * 0.3 }
        let resampled = ChatMessage(role: .user, content: [.fromFloatSamples(samples, sampleRate: 22050, channelCount: 1)])
        #expect(try runner.getPromptTokensSize(messages: [resampled]) > 10)
    }

    @Test func badMediaIsATypedErrorAndTheConversationGoesOn() async throws {
        let runner = try await Self.load(Self.vision)
        let conversation = runner.createConversation(systemPrompt: nil)
        let png = try Self.file("images/small-40x30.png")
        let cases: [(String, ChatMessageContent, String)] = [
            ("truncated PNG", .image(png.prefix(png.count / 2)), "cannot be read"),
            ("not an image", .image(Data("GIF89a, but not really".utf8)), "cannot be read"),
            ("empty image", .image(Data()), "cannot be read"),
            ("audio for a vision model", .audio(try Self.file("audio/lfm2-audio-chirp-1s-16k.wav")), "encodes images")
        ]
        for (label, part, expected) in cases {
            let error = await Self.failure(conversation, ChatMessage(role: .user, content: [part, .text("Hi")]))
            guard case .unsupportedContent(let message) = error else {
                Issue.record("\(label): \(String(describing: error))")
                continue
            }
            #expect(message.contains(expected), "\(label): \(message)")
        }
        #expect(conversation.history.isEmpty)
        let ok = try await collect(
            conversation.generateResponse(userTextMessage: "Hi", generationOptions: GenerationOptions(maxOutputTokens: 2)))
        #expect(ok.completion != nil)
    }

    /// What a part's header says it takes is what reading it gives, for every fixture image
    /// (untiled and tiled) and clip (16 kHz, and 22.05 kHz resampled).
    @Test func positionsFromTheHeaderAreThoseOfTheDecodedPart() async throws {
        for (model, parts) in [
            (Self.vision, ["images/small-40x30.png", "images/medium-500x375.jpg", "images/large-900x800.png", "images/tall-300x900.png"]),
            (Self.audio, ["audio/lfm2-audio-chirp-1s-16k.wav", "audio/lfm2-audio-tones-22k-f32.wav"])
        ] {
            let runner = try await Self.load(model)
            let reader = try #require(runner.loaded.mediaReader)
            for path in parts {
                let content: ChatMessageContent = path.hasPrefix("images") ? .image(try Self.file(path)) : .audio(try Self.file(path))
                let pieces = try reader.pieces(content)
                let decoded = pieces.reduce(0) { total, piece in
                    switch piece {
                    case .tokens(let ids): return total + ids.count
                    case .media(let chunk): return total + chunk.positions
                    }
                }
                #expect(reader.positions(content) == decoded, "\(path)")
                #expect(decoded > 10, "\(path)")
            }
        }
    }

    /// A prompt that cannot fit is refused from the parts' headers: the same count as the
    /// decoded prompt's, and before decoding (a part whose pixel data is cut short, which
    /// decoding would refuse as truncated, is counted from its header).
    @Test func aPromptThatCannotFitIsRefusedBeforeItsImagesAreDecoded() async throws {
        let runner = try await Self.load(Self.vision)
        let engine = runner.loaded
        let large = try Self.file("images/large-900x800.png")
        func prompt(_ image: Data, limit: Int?) throws(ServingError) -> PromptSequence {
            let content: [ChatMessageContent] = [.image(image), .text("Compare."), .image(image)]
            return try engine.prompt(
                messages: [ChatMessage(role: .user, content: content)], tools: [], callFormat: runner.functionCallParser,
                enableThinking: nil, positionLimit: limit)
        }
        let count = try prompt(large, limit: nil).count
        #expect(try prompt(large, limit: count + 1).count == count)
        #expect(throws: ServingError.promptTooLong(tokens: count, limit: count)) { try prompt(large, limit: count) }
        let cut = large.prefix(large.count / 2)
        #expect(throws: ServingError.promptTooLong(tokens: count, limit: count)) { try prompt(cut, limit: count) }
        #expect {
            try prompt(cut, limit: count + 1)
        } throws: { error in
            guard case ServingError.unsupportedContent(let message) = error else { return false }
            return message.hasPrefix("the image cannot be read: truncated PNG")
        }
    }

    @Test func limitsAreConfigurable() async throws {
        var options = LiquidInferenceEngineOptions(contextSize: 2048)
        options.mediaLimits.maxImagePixels = 100_000  // the 500x375 image has 187,500
        let runner = try await Self.load(Self.vision, options)
        let big = ChatMessage(role: .user, content: [.image(try Self.file("images/medium-500x375.png"))])
        #expect(throws: LeapError.self) { try runner.getPromptTokensSize(messages: [big]) }
        let small = ChatMessage(role: .user, content: [.image(try Self.file("images/small-40x30.png"))])
        #expect(try runner.getPromptTokensSize(messages: [small]) > 70)

        options = LiquidInferenceEngineOptions(contextSize: 512)
        options.mediaLimits.maxAudioSeconds = 0.5
        let audio = try await Self.load(Self.audio, options)
        let clip = ChatMessage(role: .user, content: [.audio(try Self.file("audio/lfm2-audio-chirp-1s-16k.wav"))])
        // Refused from the WAV header, before the samples are decoded.
        #expect(
            throws: LeapError.unsupportedContent(
                "the audio cannot be read: " + WAVError.tooLong(seconds: 1, maximumSeconds: 0.5).description)
        ) { try audio.getPromptTokensSize(messages: [clip]) }
    }

    @Test func badAudioIsATypedError() async throws {
        let runner = try await Self.load(Self.audio)
        let conversation = runner.createConversation(systemPrompt: nil)
        let wav = try Self.file("audio/lfm2-audio-chirp-1s-16k.wav")
        let stereo = WAVBuilder.simple(fmt: WAVBuilder.fmt(tag: 1, channels: 2, bits: 16), samples: [UInt8](repeating: 0, count: 64_000))
        let mp3 = Data(Array("ID3".utf8) + [0x03, 0, 0, 0, 0, 0x0F, 0x76, 0xFF, 0xFB, 0x90, 0x64] + [UInt8](repeating: 0, count: 400))
        let tenMilliseconds = ChatMessageContent.fromFloatSamples([Float](repeating: 0.1, count: 160), sampleRate: 16000, channelCount: 1)
        let cases: [(String, ChatMessageContent)] = [
            ("stereo", .audio(stereo.data)), ("mp3", .audio(mp3)), ("truncated RIFF", .audio(wav.prefix(30))),
            ("0.01 s", tenMilliseconds), ("an image for an audio model", .image(try Self.file("images/small-40x30.png")))
        ]
        for (label, part) in cases {
            let error = await Self.failure(conversation, ChatMessage(role: .user, content: [part]))
            guard case .unsupportedContent(let message) = error else {
                Issue.record("\(label): \(String(describing: error))")
                continue
            }
            #expect(!message.isEmpty, "\(label)")
        }
        #expect(conversation.history.isEmpty)
    }

    @Test func aTextOnlyModelRefusesMedia() async throws {
        let runner = try await Self.load(TestFixtures.path("models/lfm2-tiny.gguf"))
        let message = ChatMessage(role: .user, content: [.image(try Self.file("images/small-40x30.png")), .text("Hi")])
        let error = await Self.failure(runner.createConversation(systemPrompt: nil), message)
        guard case .unsupportedContent(let text) = error else {
            Issue.record("\(String(describing: error))")
            return
        }
        #expect(text.contains("no vision encoder"))
    }

    @Test func aProjectorThatDoesNotFitIsRefusedAtLoad() async throws {
        // SmolLM2 is 576 wide, the tiny vision projector writes 128.
        let smol = try TestFixtures.require(TestFixtures.smolLM2Q4_1)
        do {
            _ = try await Leap.load(path: smol, options: .init(mmProjPath: TestFixtures.path("models/mmproj-lfm2-vl-tiny.gguf")))
            Issue.record("a 128-wide projector loaded with a 576-wide model")
        } catch let LeapError.modelLoadingFailure(message) {
            #expect(message.contains("576") && message.contains("128"), "\(message)")
        }
        // A language model is not a projector.
        do {
            _ = try await Leap.load(path: Self.vision, options: .init(mmProjPath: TestFixtures.path("models/lfm2-tiny.gguf")))
            Issue.record("a language model loaded as an mmproj file")
        } catch let LeapError.modelLoadingFailure(message) {
            #expect(message.contains("lfm2-tiny.gguf"), "\(message)")
        }
    }

    @Test func theCompanionFileIsFoundBesideTheModel() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("leap-ref-mmproj-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        func touch(_ name: String) throws { try Data().write(to: folder.appendingPathComponent(name)) }
        func companion(_ model: String) -> String? {
            MultimodalProjectorFile.companion(of: folder.appendingPathComponent(model).path).map {
                URL(fileURLWithPath: $0).lastPathComponent
            }
        }
        try touch("LFM2-VL-450M-Q8_0.gguf")
        try touch("mmproj-LFM2-VL-450M-F16.gguf")
        #expect(companion("LFM2-VL-450M-Q8_0.gguf") == "mmproj-LFM2-VL-450M-F16.gguf")  // the longest shared start
        try touch("tiny.gguf")
        try touch("mmproj-tiny.gguf")
        #expect(companion("tiny.gguf") == "mmproj-tiny.gguf")  // the exact name
        try touch("other.gguf")
        #expect(companion("other.gguf") == nil)  // several models and projectors, none matching
        #expect(companion("mmproj-tiny.gguf") == nil)  // a projector has none
    }

    /// LFM2.5-Audio's release: the language model and its three siblings, each found by its
    /// prefix; the siblings are not models (a folder with one model finds its only
    /// candidates).
    @Test func theSpeechFilesAreFoundBesideTheModel() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("leap-ref-speech-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        for name in [
            "LFM2.5-Audio-1.5B-Q4_0.gguf", "mmproj-audio-encoder-Q8_0.gguf", "vocoder-LFM2.5-Audio-1.5B-Q4_0.gguf",
            "tokenizer-LFM2.5-Audio-1.5B-F16.gguf"
        ] {
            try Data().write(to: folder.appendingPathComponent(name))
        }
        let model = folder.appendingPathComponent("LFM2.5-Audio-1.5B-Q4_0.gguf").path
        func name(_ path: String?) -> String? { path.map { URL(fileURLWithPath: $0).lastPathComponent } }
        #expect(name(CompanionFile.mmproj.companion(of: model)) == "mmproj-audio-encoder-Q8_0.gguf")  // the folder's only model
        #expect(name(CompanionFile.vocoder.companion(of: model)) == "vocoder-LFM2.5-Audio-1.5B-Q4_0.gguf")
        #expect(name(CompanionFile.audioTokenizer.companion(of: model)) == "tokenizer-LFM2.5-Audio-1.5B-F16.gguf")
        #expect(CompanionFile.vocoder.companion(of: folder.appendingPathComponent("vocoder-LFM2.5-Audio-1.5B-Q4_0.gguf").path) == nil)
        // The tiny fixtures: the speech-out model finds the vocoder and the tokenizer by the
        // start it shares with them.
        let tiny = TestFixtures.path("models/lfm2-audio-out-tiny.gguf")
        #expect(name(CompanionFile.vocoder.companion(of: tiny)) == "vocoder-lfm2-audio-tiny.gguf")
        #expect(name(CompanionFile.audioTokenizer.companion(of: tiny)) == "tokenizer-lfm2-audio-tiny.gguf")
    }

    @Test func jpegContentIsCheckedAtCreation() throws {
        let jpeg = try Self.file("images/medium-500x375.jpg")
        #expect(try ChatMessageContent.fromJPEGData(jpeg) == .image(jpeg))
        #expect(throws: ImageError.self) { try ChatMessageContent.fromJPEGData(Data("not a picture".utf8)) }
        #expect(throws: ImageError.self) { try ChatMessageContent.fromJPEGData(jpeg, limits: ImageLimits(maxPixels: 1000)) }
    }
}
