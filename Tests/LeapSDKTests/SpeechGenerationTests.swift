import Foundation
import LeapJSON
import Models
import TestSupport
import Testing
import Tokenizers

@testable import LeapSDKCore

/// Speech out through the SDK, as LiquidAI's audio demo uses it: a `Conversation` whose
/// system prompt chooses the mode, `generateResponse`, `.audioSample`s as the model talks
/// and the reply's WAV in `.complete`. Against the reference's goldens (liquid-audio
/// 1.3.0, greedy, on the files' stored values in float32): the same prompt, the same steps
/// (up to a near tie, where the golden's margin is under 1e-3), the same text and the same
/// waveform within 1e-5 per sample, streamed in chunks.
///
/// The language model is the fixture's F32 form (its Q4_0 values widened, as the goldens
/// compute; `scripts/make-test-models.sh`): the Q4_0 file's products round activations to
/// 8 bits, which moves its logits by up to 0.24 on these prompts, enough to part from the
/// reference at its closer steps.
@Suite(.serialized) struct SpeechGenerationTests {
    static var model: String { TestFixtures.modelCache + "/lfm2-audio-out-tiny.F32.gguf" }
    /// The text-in cases (the audio-in one starts from another golden's embeddings).
    static let cases = ["hello.interleaved", "weather.interleaved", "tts-thanks.sequential", "tts-rain.sequential", "tts-gap.sequential"]

    /// Greedy and nothing else, as the reference decodes: no penalty, no DRY.
    static func greedy(_ limit: Int) -> GenerationOptions {
        var options = GenerationOptions(temperature: 0, repetitionPenalty: 1, maxOutputTokens: limit, dryMultiplier: 0)
        options.functionCallParser = nil
        return options
    }

    static func load() async throws -> LiquidInferenceEngineRunner {
        let runner = try await Leap.load(
            path: try TestFixtures.require(model),
            options: .init(
                contextSize: 1024, vocoderPath: TestFixtures.path("models/vocoder-lfm2-audio-tiny.gguf"),
                audioTokenizerPath: TestFixtures.path("models/tokenizer-lfm2-audio-tiny.gguf"), vocoderWeights: .float32))
        return try #require(runner as? LiquidInferenceEngineRunner)
    }

    struct Golden {
        var messages: [ChatMessage]
        var limit: Int
        var promptTokens: [Int]
        var steps: [SpeechStep]
        var waveform: [Float]
        var specialIDs: Set<Int>
        /// The first step where the golden's choice wins by less than 1e-3 (a near tie that
        /// any rounding may decide), or nil.
        var nearTie: Int?
    }

    static func golden(_ name: String) throws -> Golden {
        let base = "golden/audio-out/lfm2-audio-out-tiny.\(name)"
        let json = try JSONValue.parse(String(contentsOfFile: TestFixtures.path(base + ".json"), encoding: .utf8))
        let messages = (json["messages"]?.arrayValue ?? []).compactMap { item -> ChatMessage? in
            let pair = item.arrayValue ?? []
            guard pair.count == 2, let role = pair[0].stringValue.flatMap(ChatMessageRole.init(rawValue:)), let text = pair[1].stringValue
            else { return nil }
            return ChatMessage(role: role, textContent: text)
        }
        let steps = (json["outputs"]?.arrayValue ?? []).map { output -> SpeechStep in
            if let id = output["text"]?.intValue { return .text(id) }
            return .frame(output["audio"]?.arrayValue?.compactMap(\.intValue) ?? [])
        }
        let bytes = try Data(contentsOf: URL(fileURLWithPath: TestFixtures.path(base + ".wave.f32")))
        let waveform = bytes.withUnsafeBytes { raw in
            (0..<(bytes.count / 4)).map { raw.loadUnaligned(fromByteOffset: 4 * $0, as: Float.self) }
        }
        let ids = Set(["im_end", "text_end", "audio_start"].compactMap { json["special_ids"]?[$0]?.intValue })
        // Text margins per text step, frame margins per frame (8 codebooks), in step order.
        var textMargins = (json["text_margins"]?.arrayValue ?? []).compactMap(\.doubleValue).makeIterator()
        var frameMargins = (json["audio_steps"]?.arrayValue ?? []).map { $0["margins"]?.arrayValue?.compactMap(\.doubleValue) ?? [] }
            .makeIterator()
        var nearTie: Int?
        for (index, step) in steps.enumerated() where nearTie == nil {
            switch step {
            case .text: if (textMargins.next() ?? 1) < 1e-3 { nearTie = index }
            case .frame: if (frameMargins.next() ?? []).contains(where: { $0 < 1e-3 }) { nearTie = index }
            }
        }
        return Golden(
            messages: messages, limit: json["max_new_tokens"]?.intValue ?? 0,
            promptTokens: json["prompt_tokens"]?.arrayValue?.first?["text"]?.arrayValue?.compactMap(\.intValue) ?? [], steps: steps,
            waveform: waveform, specialIDs: ids, nearTie: nearTie)
    }

    @Test(arguments: cases) func aConversationSpeaksAsTheReferenceDoes(_ name: String) async throws {
        let golden = try Self.golden(name)
        let runner = try await Self.load()
        #expect(runner.loaded.speech != nil)
        // The prompt is the reference's, token for token.
        let engine = try runner.sharedScheduler()
        #expect(try engine.promptTokens(.chat(messages: golden.messages, tools: [])) == golden.promptTokens)

        // The steps, through the engine's events.
        let request = ServingRequest(
            prompt: .chat(messages: golden.messages, tools: []),
            sampling: SamplingOverrides(temperature: 0, repetitionPenalty: 1, dryMultiplier: 0), maxTokens: golden.limit,
            parsesCalls: false, speech: SpeechRequest(mode: try #require(SpeechMode(systemPrompt: golden.messages[0].textContent))))
        var steps: [SpeechStep] = []
        for try await event in try engine.submit(request).events {
            if case .speechStep(let step) = event { steps.append(step) }
        }
        let same = zip(steps, golden.steps).prefix { $0 == $1 }.count
        if let tie = golden.nearTie {
            // Equal up to the near tie; after it the two may part.
            #expect(same >= tie, "\(name): the steps part at \(same), before the near tie at \(tie)")
            await runner.unload()
            return
        }
        #expect(steps == golden.steps, "\(name): the steps part at \(same)")

        // The SDK's responses: text chunks, audio as it is made, the whole reply at the end.
        let conversation = runner.createConversation(systemPrompt: golden.messages[0].textContent)
        var chunks: [[Float]] = [], text = "", completion: MessageCompletion?
        for try await response in conversation.generateResponse(message: golden.messages[1], generationOptions: Self.greedy(golden.limit)) {
            switch response {
            case .chunk(let t): text += t
            case .audioSample(let samples, let rate):
                #expect(rate == 24_000)
                chunks.append(samples)
            case .complete(let c): completion = c
            default: break
            }
        }
        let audio = chunks.flatMap { $0 }
        #expect(audio.count == golden.waveform.count, "\(name): \(audio.count) samples, the reference \(golden.waveform.count)")
        let difference = zip(audio, golden.waveform).map { abs($0 - $1) }.max() ?? 0
        print("speech \(name): \(chunks.count) chunks, \(audio.count) samples, max |diff| \(difference)")
        #expect(difference <= 1e-5, "\(name)")
        // Streamed while the model talks: more than one chunk when the reply has frames.
        if golden.waveform.count > 2 * AudioDetokenizer.samplesPerFrame { #expect(chunks.count > 1) }
        // The text is the reference's text tokens without the steering ones.
        let spoken = golden.steps.compactMap { step -> Int? in
            if case .text(let id) = step, !golden.specialIDs.contains(id) { return id }
            return nil
        }
        let tokenizer = runner.loaded.tokenizer
        #expect(text == tokenizer.decode(spoken.map { TokenID($0) }, renderSpecial: true))
        // `.complete` holds the text and the audio as a 32-bit float WAV.
        let message = try #require(completion?.message)
        #expect(message.textContent == text)
        let wav = try #require(message.content.compactMap { if case .audio(let d) = $0 { return d } else { return nil } }.first)
        let decoded = try WAVAudio(data: wav)
        #expect(decoded.sampleRate == 24_000)
        #expect(decoded.samples == audio)
        #expect(completion?.stats?.completionTokens == UInt64(golden.steps.count))
        let frames = golden.steps.filter { if case .frame = $0 { return true } else { return false } }.count
        #expect(completion?.stats?.audioFrames == UInt64(frames))
        #expect((completion?.stats?.secondsToFirstAudioSample ?? -1) > 0)
        #expect(AudioDetokenizer.samplesPerFrame == GenerationStats.samplesPerAudioFrame)
        await runner.unload()
    }

    /// Speech asked of a model without speech files is a typed error; `.off` and other
    /// system prompts give text only.
    @Test func speechIsOnlyWhereTheModelCanSpeak() async throws {
        let text = try await Leap.load(path: TestFixtures.path("models/lfm2-tiny.gguf"))
        var options = GenerationOptions(maxOutputTokens: 2)
        options.speech = .speak(.interleaved)
        await #expect(throws: LeapError.self) {
            _ = try await collect(text.createConversation().generateResponse(userTextMessage: "Hi", generationOptions: options))
        }
        let runner = try await Self.load()
        var off = Self.greedy(12)
        off.speech = .off
        let quiet = try await collect(
            runner.createConversation(systemPrompt: SpeechMode.interleavedSystemPrompt).generateResponse(
                userTextMessage: "Hello!", generationOptions: off))
        #expect(quiet.completion?.message.content.count == 1)
        let plain = try await collect(
            runner.createConversation(systemPrompt: "You are helpful.").generateResponse(
                userTextMessage: "Hello!", generationOptions: Self.greedy(12)))
        #expect(plain.completion?.message.content.count == 1)
        // Forced on under another system prompt: audio arrives.
        var forced = Self.greedy(40)
        forced.speech = .speak(.interleaved)
        let spoken = try await collect(
            runner.createConversation(systemPrompt: "You are helpful.").generateResponse(
                userTextMessage: "Hello!", generationOptions: forced))
        #expect(spoken.completion?.message.content.count == 2)
        await runner.unload()
    }

    /// The next turn reads a spoken reply back as the reference's chat state does: the
    /// reply's steps in order (text tokens as tokens, each frame as one position of its
    /// summed code embeddings) in the assistant message's place, then `<|im_end|>`; and
    /// the turn finds them in the prompt cache, since they are keyed as generation keyed
    /// them.
    @Test func theNextTurnReadsTheSpokenReplyBack() async throws {
        let runner = try await Self.load()
        let conversation = runner.createConversation(systemPrompt: SpeechMode.interleavedSystemPrompt)
        let first = try await collect(
            conversation.generateResponse(userTextMessage: "Hello! How are you today?", generationOptions: Self.greedy(20)))
        let reply = try #require(first.completion?.message)
        let steps = try #require(reply.speechSteps)
        #expect(steps.count == 20)
        #expect(steps.contains { if case .frame = $0 { return true } else { return false } })
        #expect(conversation.history.last?.speechSteps == steps)

        // The second turn's prompt: the first turn's prompt, the steps, then the template's
        // `<|im_end|>\n<|im_start|>user...`.
        let engine = try runner.sharedScheduler()
        let firstPrompt = try engine.promptTokens(.chat(messages: Array(conversation.history.prefix(2)), tools: []))
        let next = ChatMessage(role: .user, textContent: "And tomorrow?")
        let keys = try engine.promptTokens(.chat(messages: conversation.history + [next], tools: []))
        let expected = steps.map { step -> Int in
            switch step {
            case .text(let id): return id
            case .frame(let codes): return SpeechGeneration.key(AudioFrame(codes))
            }
        }
        #expect(Array(keys.prefix(firstPrompt.count)) == firstPrompt)
        #expect(Array(keys[firstPrompt.count..<(firstPrompt.count + steps.count)]) == expected)
        let end = try #require(runner.loaded.tokenizer.tokenID(forText: "<|im_end|>"))
        #expect(keys[firstPrompt.count + steps.count] == Int(end))

        // The cache holds the first turn: its prompt and every step that was evaluated (all
        // but the last, which ended the reply at its limit before it was fed).
        let second = try await collect(conversation.generateResponse(message: next, generationOptions: Self.greedy(4)))
        let cached = try #require(second.completion?.stats?.cachedPromptTokens)
        #expect(cached == UInt64(firstPrompt.count + steps.count - 1), "\(cached) cached")
        await runner.unload()
    }

    /// A spoken reply ends when its detokenizer holds `maxAudioFramesPerReply` frames, as
    /// one that fills the context ends; a limit of 0 is refused at load.
    @Test func aReplyEndsAtItsFrameLimit() async throws {
        var options = LiquidInferenceEngineOptions(
            contextSize: 1024, vocoderPath: TestFixtures.path("models/vocoder-lfm2-audio-tiny.gguf"),
            audioTokenizerPath: TestFixtures.path("models/tokenizer-lfm2-audio-tiny.gguf"))
        options.maxAudioFramesPerReply = 3
        let runner = try await Leap.load(path: TestFixtures.path("models/lfm2-audio-out-tiny.gguf"), options: options)
        let reply = try await collect(
            runner.createConversation(systemPrompt: SpeechMode.interleavedSystemPrompt).generateResponse(
                userTextMessage: "Hello! How are you today?", generationOptions: Self.greedy(200)))
        let completion = try #require(reply.completion)
        let frames = (completion.message.speechSteps ?? []).filter { step in
            if case .frame(let codes) = step { return codes[0] != AudioFrame.endOfAudioCode }
            return false
        }
        #expect(frames.count == 3)
        #expect(completion.finishReason == .exceedContext)
        #expect((completion.stats?.completionTokens ?? 200) < 200)
        await runner.unload()
        options.maxAudioFramesPerReply = 0
        await #expect(throws: LeapError.self) {
            _ = try await Leap.load(path: TestFixtures.path("models/lfm2-audio-out-tiny.gguf"), options: options)
        }
    }
}
