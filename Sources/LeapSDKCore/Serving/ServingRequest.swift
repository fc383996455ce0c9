import LeapJSON
import Models

// The request and event types of `ServingEngine`: the generation entry point below
// `Conversation` that an HTTP server (or any multi-client front end) drives. They carry
// what the OpenAI protocol can ask for, in the SDK's own terms.

/// A tool the model may call: its name, description and the JSON Schema of its arguments
/// (any schema the grammar compiler accepts; not limited to `LeapFunction`'s types).
public struct ServingTool: Sendable, Equatable {
    /// The function's name, as the model writes it in a call.
    public var name: String
    /// What the function does, shown to the model.
    public var description: String
    /// The JSON Schema of the arguments object.
    public var parameters: JSONValue

    public init(name: String, description: String = "", parameters: JSONValue = ["type": "object", "properties": [:]]) {
        self.name = name
        self.description = description
        self.parameters = parameters
    }

    /// The tool as chat templates receive it (`{"name", "description", "parameters"}`),
    /// the same shape as `LeapFunction.toolJSON`.
    var templateJSON: JSONValue {
        .object(
            JSONObject([("name", .string(name)), ("description", .string(description)), ("parameters", parameters)]))
    }
}

/// What the model continues from.
public enum ServingPrompt: Sendable {
    /// A conversation, rendered with the model's chat template (tools included) and
    /// followed by the assistant's generation prompt.
    case chat(messages: [ChatMessage], tools: [ServingTool])
    /// Raw text, tokenized with special tokens parsed and BOS added as the model asks.
    case text(String)
    /// Token ids, used as they are.
    case tokens([Int])
}

/// Whether and how the reply may call tools (`ServingPrompt.chat`'s tools).
public enum ServingToolChoice: Sendable, Equatable {
    /// The model decides; a call it opens is constrained to the tools' schemas.
    case auto
    /// No call: the tools are shown to the model but the call-start marker is masked out.
    case none
    /// The reply is a call to one of the tools (constrained from the first token).
    case required
    /// The reply is a call to the named tool.
    case function(String)
}

/// A constraint on the whole reply.
public enum ServingOutputConstraint: Sendable, Equatable {
    /// Free text.
    case none
    /// A JSON document satisfying this JSON Schema.
    case jsonSchema(JSONValue)
}

/// The order in which a JSON Schema constraint lets an object's properties come
/// (`GenerationOptions.jsonSchemaPropertyOrder`, `ServingRequest.schemaPropertyOrder`).
public enum JSONSchemaPropertyOrder: String, Sendable, Equatable, CaseIterable {
    /// The schema's order (the default): generated documents read like the schema, and it
    /// is what OpenAI's strict mode writes.
    case schema
    /// Any order, as JSON Schema allows: each property at most once, every required one.
    case any
}

/// One completion to run.
public struct ServingRequest: Sendable {
    /// What the model continues from.
    public var prompt: ServingPrompt
    /// How tokens are drawn: the settings the request sets over the model's defaults.
    public var sampling: SamplingOverrides
    /// The most tokens to generate; nil runs until the end of the turn or the context.
    public var maxTokens: Int?
    /// Generation stops before the first occurrence of any of these strings (which are
    /// not part of the output).
    public var stop: [String]
    /// Report log-probabilities: nil for none, else the number of most likely
    /// alternatives per token (0 reports the chosen token's alone).
    public var logprobs: Int?
    /// A constraint on the whole reply (a JSON Schema), or none.
    public var constraint: ServingOutputConstraint
    /// The order of the properties of the objects of `constraint`'s schema.
    public var schemaPropertyOrder: JSONSchemaPropertyOrder = .schema
    /// Whether the reply may, must or must not call the prompt's tools.
    public var toolChoice: ServingToolChoice
    /// Reuse the slot's cached prefix (llama-server's `cache_prompt`, default true).
    public var cachePrompt: Bool
    /// For thinking models: let the model reason or not (the template's `enable_thinking`).
    public var enableThinking: Bool?
    /// Never end the turn: end-of-generation tokens are masked out, so generation runs to
    /// `maxTokens` (llama-server's `ignore_eos`, for benchmarks).
    public var ignoreEndOfGeneration: Bool
    /// The call syntax the tools are rendered in and the reply's calls are constrained to
    /// and parsed with (LFM2's Pythonic calls, or Hermes JSON); nil: the model's own, as
    /// its chat template shows it (`LiquidInferenceEngineRunner.functionCallFormat`). A
    /// parser of another kind parses the reply's calls without constraining them (leap-ref
    /// does not know its grammar).
    public var callParser: (any LeapFunctionCallParserProtocol)?
    /// Whether the reply's call blocks are parsed into `.toolCalls` (and constrained); when
    /// false, the reply is text only (`GenerationOptions.functionCallParser` nil).
    public var parsesCalls: Bool
    /// The most tokens the sequence may hold, prompt included, when fewer than the
    /// context (`GenerationOptions.sequenceLength`); nil: the context.
    public var contextLimit: Int?
    /// Whether generation goes on after a call block closes (the model may write more text
    /// or calls until it ends its turn, as in the LEAP SDK) rather than ending the reply
    /// with `.toolCalls` there (OpenAI's `tool_calls`, the default).
    public var continuesAfterToolCalls: Bool
    /// Whether the reply's events are delivered as they are generated (the default, for a
    /// streamed response). False holds them until the reply ends and delivers them together
    /// (`.started` still comes when the prompt is processed): for a client that waits for
    /// the whole reply, so that its task wakes once per completion rather than once per
    /// token, on the cores the engine's threads compute on.
    public var deliversEventsAsGenerated: Bool
    /// A spoken reply (a model with speech files: `ServingEngine.speaks`), or nil for text.
    public var speech: SpeechRequest?

    /// A request with the given fields; every argument but the prompt has a default.
    public init(
        prompt: ServingPrompt, sampling: SamplingOverrides = SamplingOverrides(), maxTokens: Int? = nil,
        stop: [String] = [], logprobs: Int? = nil, constraint: ServingOutputConstraint = .none,
        toolChoice: ServingToolChoice = .auto, cachePrompt: Bool = true, enableThinking: Bool? = nil,
        ignoreEndOfGeneration: Bool = false, callParser: (any LeapFunctionCallParserProtocol)? = nil,
        parsesCalls: Bool = true, contextLimit: Int? = nil, continuesAfterToolCalls: Bool = false,
        deliversEventsAsGenerated: Bool = true, speech: SpeechRequest? = nil
    ) {
        self.speech = speech
        self.deliversEventsAsGenerated = deliversEventsAsGenerated
        self.prompt = prompt
        self.sampling = sampling
        self.maxTokens = maxTokens
        self.stop = stop
        self.logprobs = logprobs
        self.constraint = constraint
        self.toolChoice = toolChoice
        self.cachePrompt = cachePrompt
        self.enableThinking = enableThinking
        self.ignoreEndOfGeneration = ignoreEndOfGeneration
        self.callParser = callParser
        self.parsesCalls = parsesCalls
        self.contextLimit = contextLimit
        self.continuesAfterToolCalls = continuesAfterToolCalls
    }
}

/// A token's log-probability and the most likely alternatives at its position.
public struct ServingTokenLogprob: Sendable, Equatable {
    /// One candidate token: its id, its text (special tokens rendered), its bytes and
    /// log-probability.
    public struct Candidate: Sendable, Equatable {
        public var id: Int
        public var token: String
        public var bytes: [UInt8]
        public var logprob: Float
    }
    /// The generated token.
    public var chosen: Candidate
    /// Best first; as many as `ServingRequest.logprobs` asked for.
    public var top: [Candidate]
}

/// Why a completion ended.
public enum ServingFinishReason: String, Sendable, Equatable {
    /// The model ended its turn, a stop string was met, or a JSON document was complete.
    case stop
    /// `maxTokens` or the context was reached.
    case length
    /// The reply is one or more tool calls.
    case toolCalls = "tool_calls"
    /// Cancelled by the client (the stream was dropped or `cancel()` was called).
    case cancelled
}

/// Token counts and timings of a completion.
public struct ServingUsage: Sendable, Equatable {
    /// Tokens of the prompt, all of them (cached or processed).
    public var promptTokens: Int
    /// Prompt tokens whose state came from the slot's cache.
    public var cachedTokens: Int
    /// Tokens generated.
    public var completionTokens: Int
    /// Seconds spent waiting for a slot, processing the prompt, and generating.
    public var queueSeconds: Double
    public var promptSeconds: Double
    public var generationSeconds: Double
    /// Which slot ran the completion.
    public var slot: Int
    /// Audio frames a spoken reply generated (end-of-audio frames included), and the
    /// seconds from submission to its first audio sample (nil: none yet, or no speech).
    public var audioFrames = 0
    public var firstAudioSeconds: Double?
}

/// What a running completion reports, in order: `.started`, then text, reasoning and
/// tool calls as they are produced, then `.finished`.
public enum ServingEvent: Sendable {
    /// The prompt is processed (the first token follows).
    case started(promptTokens: Int, cachedTokens: Int, slot: Int)
    /// Reply text, with the log-probabilities of the tokens released with it (when asked for).
    case text(String, logprobs: [ServingTokenLogprob])
    /// Reasoning text (between `<think>` and `</think>`).
    case reasoning(String)
    /// Tool calls, parsed once their call block closed.
    case toolCalls([LeapFunctionCall])
    /// Speech: mono samples in [-1, 1] at `sampleRate` (24,000 Hz), each final when sent;
    /// the reply's chunks, in order, are its whole waveform.
    case audio(samples: [Float], sampleRate: Int)
    /// A spoken reply's step (a text token or a frame's codes), for tools that check the
    /// reply against the reference's (`leap-ref speak --json`).
    case speechStep(SpeechStep)
    case finished(ServingFinishReason, ServingUsage)
}

/// A reply as its events add up: the one place where a completion's events are
/// accumulated, for a client that wants the whole reply (the SDK's `.complete` message,
/// the server's non-streamed responses).
public struct ServingReply: Sendable {
    /// The reply text.
    public var text = ""
    /// The reasoning text; nil when the model wrote no reasoning block.
    public var reasoning: String?
    /// The tool calls, in order.
    public var toolCalls: [LeapFunctionCall] = []
    /// The log-probabilities of the reply's tokens (when the request asked for them).
    public var logprobs: [ServingTokenLogprob] = []
    /// A spoken reply's steps, in order (empty: no speech).
    public var speechSteps: [SpeechStep] = []
    /// A spoken reply's waveform and its sample rate (empty: no speech).
    public var audio: [Float] = []
    public var audioSampleRate = AudioDetokenizer.sampleRate

    /// An empty reply.
    public init() {}

    /// Adds a text, reasoning or tool-call event (`.started` and `.finished` add nothing).
    public mutating func add(_ event: ServingEvent) {
        switch event {
        case .text(let t, let lp):
            text += t
            logprobs += lp
        case .reasoning(let r): reasoning = (reasoning ?? "") + r
        case .toolCalls(let calls): toolCalls += calls
        case .audio(let samples, let rate):
            audio += samples
            audioSampleRate = rate
        case .speechStep(let step): speechSteps.append(step)
        case .started, .finished: break
        }
    }

    /// The reply as the assistant's message: its text, and a spoken reply's waveform as a
    /// 32-bit float WAV `.audio` part.
    public var message: ChatMessage {
        var content: [ChatMessageContent] = [.text(text)]
        if !audio.isEmpty { content.append(.fromFloatSamples(audio, sampleRate: audioSampleRate, channelCount: 1)) }
        var message = ChatMessage(
            role: .assistant, content: content, reasoningContent: reasoning, functionCalls: toolCalls.isEmpty ? nil : toolCalls)
        if !speechSteps.isEmpty { message.speechSteps = speechSteps }
        return message
    }
}

/// Why a completion could not be run. `ServingEngine.submit` throws the request errors
/// before anything is queued; the event stream throws the others.
public enum ServingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The request cannot be served as asked (a bad schema, an unknown tool, a bad value).
    case invalidRequest(String)
    /// The prompt holds content the model cannot take (an image for a model without a
    /// vision encoder, ...).
    case unsupportedContent(String)
    /// The prompt does not fit in a slot's context (`tokens` as in
    /// `LeapError.promptExceedContextLengthFailure`: a lower bound past
    /// `LeapError.promptCountingFactor` times the limit).
    case promptTooLong(tokens: Int, limit: Int)
    /// Every slot is busy and the wait queue is full.
    case queueFull(limit: Int)
    /// The engine is shutting down and takes no new work.
    case shuttingDown
    /// The model failed.
    case engineFailure(String)

    /// What went wrong and what to do, for the client.
    public var description: String {
        switch self {
        case .invalidRequest(let m), .unsupportedContent(let m): return m
        case .promptTooLong(let tokens, let limit):
            return "the prompt has \(LeapError.promptLength(tokens, limit: limit)), which does not fit in the context of \(limit) tokens"
        case .queueFull(let limit):
            return "the server is busy: every slot is in use and \(limit) requests are already waiting; retry later"
        case .shuttingDown: return "the server is shutting down"
        case .engineFailure(let m): return "the model failed: \(m)"
        }
    }
}
