import Foundation
import LeapJSON
import LeapSDKCore
import OpenAIWire

/// Translations between the OpenAI wire types and the SDK's serving types.
enum WireMapping {
    /// The request's sampling fields; those it leaves out take the server's defaults
    /// (`leap-ref serve`'s sampling flags), and those still nil the model's.
    static func sampling(_ s: SamplingFields, defaults: SamplingOverrides = SamplingOverrides()) -> SamplingOverrides {
        SamplingOverrides(
            temperature: s.temperature.map(Float.init), topP: s.topP.map(Float.init), topK: s.topK, minP: s.minP.map(Float.init),
            repetitionPenalty: s.repeatPenalty.map(Float.init), frequencyPenalty: s.frequencyPenalty.map(Float.init),
            presencePenalty: s.presencePenalty.map(Float.init), seed: s.seed.map { UInt64(bitPattern: Int64($0)) },
            dryMultiplier: s.dryMultiplier.map(Float.init), dryBase: s.dryBase.map(Float.init),
            dryAllowedLength: s.dryAllowedLength, dryPenaltyLastN: s.dryPenaltyLastN, drySequenceBreakers: s.drySequenceBreakers
        ).overriding(defaults)
    }

    /// A spoken reply's audio as the OpenAI API sends it: a 16-bit PCM WAV file (mono, the
    /// reply's rate), or the raw 16-bit little-endian samples.
    static func spokenAudio(_ reply: ServingReply, asWAV: Bool) -> Data {
        asWAV
            ? WAVAudio.encodePCM16WAV(samples: reply.audio, sampleRate: reply.audioSampleRate, channelCount: 1)
            : WAVAudio.encodePCM16(samples: reply.audio)
    }

    /// `max_tokens` checked against the server's limit (which is also the default).
    static func maxTokens(_ asked: Int?, limit: Int?) throws(APIError) -> Int? {
        guard let limit else { return asked }
        guard let asked else { return limit }
        guard asked <= limit else {
            throw APIError(status: 400, message: "'max_tokens' is \(asked), more than this server allows (\(limit))", param: "max_tokens")
        }
        return asked
    }

    /// A wire message as a `ChatMessage`: text-only content as one text part (the text
    /// parts joined), else each part in order (adjacent text parts joined), images and
    /// audio as `.image` / `.audio` with their decoded bytes.
    static func message(_ m: WireMessage) -> ChatMessage {
        let role: ChatMessageRole
        switch m.role {
        case .system: role = .system
        case .user: role = .user
        case .assistant: role = .assistant
        case .tool: role = .tool
        }
        var content: [ChatMessageContent] = []
        if m.hasMedia {
            for part in m.parts {
                switch part {
                case .text(let t):
                    if case .text(let before)? = content.last {
                        content[content.count - 1] = .text(before + t)
                    } else {
                        content.append(.text(t))
                    }
                case .image(let bytes, _): content.append(.image(Data(bytes)))
                case .audio(let bytes): content.append(.audio(Data(bytes)))
                }
            }
        } else {
            content = [.text(m.content)]
        }
        let calls = m.toolCalls.map { LeapFunctionCall(name: $0.name, argumentsJSON: $0.arguments) }
        return ChatMessage(
            role: role, content: content, reasoningContent: m.reasoningContent,
            functionCalls: calls.isEmpty ? nil : calls)
    }

    /// What the served model reads besides text (its mmproj file's encoder).
    struct MediaInputs: Sendable {
        var images: Bool
        var audio: Bool

        init(images: Bool, audio: Bool) {
            self.images = images
            self.audio = audio
        }

        init(_ engine: ServingEngine) {
            self.init(images: engine.takesImages, audio: engine.takesAudio)
        }

        /// `/v1/models`' `input_modalities`.
        var modalities: [String] { ["text"] + (images ? ["image"] : []) + (audio ? ["audio"] : []) }
    }

    /// Refuses, naming the part, an image for a model without a vision encoder and audio
    /// for one without an audio encoder.
    static func checkMedia(_ messages: [WireMessage], takes inputs: MediaInputs) throws(APIError) {
        for (i, m) in messages.enumerated() where m.hasMedia {
            for (j, part) in m.parts.enumerated() {
                let param = "messages[\(i)].content[\(j)]"
                switch part {
                case .text: break
                case .image where !inputs.images:
                    let why =
                        inputs.audio
                        ? "its mmproj file is an audio encoder; send text or audio"
                        : "it was loaded without a vision projector (leap-ref serve --mmproj FILE, or an mmproj-*.gguf beside the model)"
                    throw APIError(status: 400, message: "'\(param)': this model does not read images: \(why)", param: param)
                case .audio where !inputs.audio:
                    let why =
                        inputs.images
                        ? "its mmproj file is a vision encoder; send text or images"
                        : "it was loaded without an audio projector (leap-ref serve --mmproj FILE, or an mmproj-*.gguf beside the model)"
                    throw APIError(status: 400, message: "'\(param)': this model does not read audio: \(why)", param: param)
                case .image, .audio: break
                }
            }
        }
    }

    static func chatRequest(
        _ r: ChatCompletionRequest, maxTokensLimit: Int?, defaults: SamplingOverrides = SamplingOverrides(),
        takes inputs: MediaInputs = MediaInputs(images: false, audio: false)
    ) throws(APIError) -> ServingRequest {
        try checkMedia(r.messages, takes: inputs)
        let tools = r.tools.map { ServingTool(name: $0.name, description: $0.description, parameters: $0.parameters) }
        let choice: ServingToolChoice
        switch r.toolChoice {
        case .auto: choice = .auto
        case .none: choice = .none
        case .required: choice = .required
        case .function(let name): choice = .function(name)
        }
        let constraint: ServingOutputConstraint
        switch r.responseFormat {
        case .text: constraint = .none
        case .jsonObject: constraint = .jsonSchema(["type": "object"])
        case .jsonSchema(let s): constraint = .jsonSchema(s)
        }
        var messages = r.messages.map(message)
        var speech: SpeechRequest?
        if r.audioOutput != nil {
            let mode: SpeechMode
            (mode, messages) = spokenChat(messages)
            speech = SpeechRequest(mode: mode)
        }
        var request = ServingRequest(
            prompt: .chat(messages: messages, tools: tools), sampling: sampling(r.sampling, defaults: defaults),
            maxTokens: try maxTokens(r.sampling.maxTokens, limit: maxTokensLimit), stop: r.sampling.stop,
            logprobs: r.topLogprobs, constraint: constraint, toolChoice: choice, cachePrompt: r.sampling.cachePrompt,
            enableThinking: r.enableThinking, ignoreEndOfGeneration: r.sampling.ignoreEOS, deliversEventsAsGenerated: r.sampling.stream,
            speech: speech)
        request.schemaPropertyOrder = r.anyPropertyOrder ? .any : .schema
        return request
    }

    /// The mode of a spoken chat reply and the conversation it is asked of: a system prompt
    /// the model was trained on chooses (`SpeechMode(systemPrompt:)`: a TTS prompt is
    /// sequential, in its voice); any other conversation gets an interleaved reply, and one
    /// without a system message gets the interleaved system prompt first (the prompt the
    /// model was trained on for it).
    static func spokenChat(_ messages: [ChatMessage]) -> (SpeechMode, [ChatMessage]) {
        guard let system = messages.first(where: { $0.role == .system }) else {
            return (.interleaved, [ChatMessage(role: .system, textContent: SpeechMode.interleavedSystemPrompt)] + messages)
        }
        let text = system.content.map { part -> String in if case .text(let t) = part { return t } else { return "" } }.joined()
        return (SpeechMode(systemPrompt: text) ?? .interleaved, messages)
    }

    static func textRequest(
        _ r: TextCompletionRequest, maxTokensLimit: Int?, defaults: SamplingOverrides = SamplingOverrides()
    ) throws(APIError) -> ServingRequest {
        let prompt: ServingPrompt
        switch r.prompt {
        case .text(let t): prompt = .text(t)
        case .tokens(let ids): prompt = .tokens(ids)
        }
        return ServingRequest(
            prompt: prompt, sampling: sampling(r.sampling, defaults: defaults),
            maxTokens: try maxTokens(r.sampling.maxTokens, limit: maxTokensLimit),
            stop: r.sampling.stop, logprobs: r.logprobs, cachePrompt: r.sampling.cachePrompt,
            ignoreEndOfGeneration: r.sampling.ignoreEOS, deliversEventsAsGenerated: r.sampling.stream)
    }

    /// The most steps (text tokens and 80 ms audio frames) a speech request runs when it
    /// sets no `max_steps`: about 80 seconds of speech (at most the server's max tokens).
    static let defaultSpeechSteps = 1024

    /// The model's voice for a wire voice.
    static func voice(_ v: WireSpeechVoice) -> SpeechVoice {
        switch v {
        case .usFemale: return .usFemale
        case .usMale: return .usMale
        case .ukFemale: return .ukFemale
        case .ukMale: return .ukMale
        }
    }

    /// `/v1/audio/speech` as a serving request: sequential text-to-speech of `input` in the
    /// voice's system prompt (`Perform TTS. Use the UK female voice.`), decoded as the
    /// reference does (greedy text unless `temperature` is given, no repetition penalty, no
    /// DRY; the server's sampling defaults do not apply), `max_steps` within the server's
    /// max tokens (`defaultSpeechSteps` when absent, the limit when that is lower).
    static func speechRequest(_ r: AudioSpeechRequest, maxTokensLimit: Int?) throws(APIError) -> ServingRequest {
        let steps: Int
        if let asked = r.maxSteps {
            if let limit = maxTokensLimit, asked > limit {
                throw APIError(
                    status: 400, message: "'max_steps' is \(asked), more than this server allows (\(limit), --max-tokens)",
                    param: "max_steps")
            }
            steps = asked
        } else {
            steps = min(defaultSpeechSteps, maxTokensLimit ?? defaultSpeechSteps)
        }
        let messages = [
            ChatMessage(role: .system, textContent: voice(r.voice).systemPrompt), ChatMessage(role: .user, textContent: r.input)
        ]
        return ServingRequest(
            prompt: .chat(messages: messages, tools: []),
            sampling: SamplingOverrides(
                temperature: Float(r.temperature ?? 0), repetitionPenalty: 1, seed: r.seed.map { UInt64(bitPattern: Int64($0)) },
                dryMultiplier: 0),
            maxTokens: steps, parsesCalls: false, deliversEventsAsGenerated: false, speech: SpeechRequest(mode: .sequential))
    }

    static func logprob(_ l: ServingTokenLogprob) -> WireTokenLogprob {
        func candidate(_ c: ServingTokenLogprob.Candidate) -> WireTokenLogprob.Candidate {
            WireTokenLogprob.Candidate(token: c.token, bytes: c.bytes, logprob: Double(c.logprob))
        }
        return WireTokenLogprob(chosen: candidate(l.chosen), top: l.top.map(candidate))
    }

    static func toolCall(_ call: LeapFunctionCall) -> WireReplyToolCall {
        WireReplyToolCall(id: newID(prefix: "call_"), name: call.name, arguments: call.argumentsJSONString())
    }

    static func usage(_ u: ServingUsage) -> WireUsage {
        WireUsage(promptTokens: u.promptTokens, completionTokens: u.completionTokens, cachedTokens: u.cachedTokens)
    }

    static func timings(_ u: ServingUsage) -> WireTimings {
        WireTimings(
            promptTokens: u.promptTokens, promptMilliseconds: u.promptSeconds * 1000, predictedTokens: u.completionTokens,
            predictedMilliseconds: u.generationSeconds * 1000, cachedTokens: u.cachedTokens)
    }

    /// The OpenAI finish reason (a cancelled completion has no client left to read it).
    static func finishReason(_ r: ServingFinishReason) -> String {
        r == .cancelled ? "stop" : r.rawValue
    }

    private static let idAlphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")

    /// A random identifier such as `chatcmpl-…` or `call_…` (24 random characters).
    static func newID(prefix: String) -> String {
        var rng = SystemRandomNumberGenerator()
        return prefix + String((0..<24).map { _ in idAlphabet[Int(rng.next() % UInt64(idAlphabet.count))] })
    }

    static var now: Int { Int(Date().timeIntervalSince1970) }
}
