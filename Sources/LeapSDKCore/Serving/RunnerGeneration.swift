import Foundation
import LeapJSON

// Generations of a `LiquidInferenceEngineRunner`: each becomes a `ServingRequest` on the
// runner's `ServingEngine` (whose rounds step every running generation in one forward
// pass), and its events become the `MessageResponse`s that
// `generate(_:onResponse:onError:)` promises: the one place where engine events become
// the SDK's responses, and engine errors the SDK's (`LeapError.init(_:)`).

extension ServingTool {
    /// The tool of a registered `LeapFunction` (its name, description and the JSON Schema
    /// of its parameters, as the chat template receives it).
    init(_ function: LeapFunction) {
        self.init(name: function.name, description: function.description, parameters: function.parametersSchema)
    }
}

extension LiquidInferenceEngineRunner {
    /// The serving request for `request`: its conversation and functions, sampling
    /// options, constraint, call handling and speech (`speaks`: whether the model has its
    /// speech files).
    static func servingRequest(_ request: GenerationRequest, speaks: Bool) throws(LeapError) -> ServingRequest {
        let options = request.options
        if let max = options.maxOutputTokens, max < 0 {
            throw .generationFailure("maxOutputTokens is \(max); pass a positive number or nil")
        }
        var constraint = ServingOutputConstraint.none
        if let schema = options.jsonSchemaConstraint {
            do {
                constraint = .jsonSchema(try JSONValue.parse(schema))
            } catch {
                throw .generationFailure("jsonSchemaConstraint cannot be used: \(error)")
            }
        }
        var toolChoice = ServingToolChoice.auto
        switch options.functionCallMode ?? .auto {
        case .auto: toolChoice = .auto
        case .none: toolChoice = .none
        case .required: toolChoice = .required
        }
        // A schema constrains the whole reply; the functions are still shown to the model.
        if case .jsonSchema = constraint { toolChoice = .none }
        if request.functions.isEmpty { toolChoice = .auto }
        let parser = options.functionCallParser
        var speech: SpeechRequest?
        switch options.speech ?? .automatic {
        case .off: speech = nil
        case .automatic:
            let system = request.messages.first { $0.role == .system }.map(\.textContent)
            speech = speaks ? system.flatMap(SpeechMode.init(systemPrompt:)).map { SpeechRequest(mode: $0) } : nil
        case .speak(let mode):
            guard speaks else {
                throw .unsupportedContent(
                    "this model cannot speak: speech needs a speech model (LFM2.5-Audio) with its vocoder-*.gguf and tokenizer-*.gguf files"
                )
            }
            speech = SpeechRequest(mode: mode)
        }
        speech?.audioTemperature = options.audioTemperature
        speech?.audioTopK = options.audioTopK
        // A spoken reply is not constrained; its calls are not parsed.
        if speech != nil, constraint != .none {
            throw .generationFailure(
                "jsonSchemaConstraint and speech cannot go together: turn speech off (GenerationOptions.speech = .off)")
        }
        var serving = ServingRequest(
            prompt: .chat(messages: request.messages, tools: request.functions.map(ServingTool.init)), sampling: options.sampling,
            maxTokens: options.maxOutputTokens, constraint: constraint, toolChoice: toolChoice,
            cachePrompt: options.cacheControl != .noCache, enableThinking: options.enableThinking,
            callParser: parser ?? LFMFunctionCallParser(), parsesCalls: parser != nil && speech == nil,
            contextLimit: options.sequenceLength,
            continuesAfterToolCalls: true, speech: speech)
        serving.schemaPropertyOrder = options.jsonSchemaPropertyOrder ?? .schema
        return serving
    }

    /// Runs `request` on `scheduler`, delivering its responses: chunks, reasoning and calls
    /// as they come, then `.complete` with the assembled message and statistics (or one
    /// error).
    static func generate(
        _ request: ServingRequest, on scheduler: ServingEngine,
        onResponse: @escaping @Sendable (MessageResponse) -> Void,
        onError: @escaping @Sendable (LeapError) -> Void
    ) -> GenerationHandler {
        let completion: ServingCompletion
        do {
            completion = try scheduler.submit(request)
        } catch ServingError.invalidRequest(let message) where request.constraint != .none {
            // A schema the compiler refuses: say which option holds it.
            onError(.generationFailure("jsonSchemaConstraint cannot be used: \(message)"))
            return FlagGenerationHandler(flag: CancellationFlag())
        } catch {
            onError(LeapError(error))
            return FlagGenerationHandler(flag: CancellationFlag())
        }
        let maxTokens = request.maxTokens
        let stopped = CancellationFlag()
        Task {
            var reply = ServingReply()
            do {
                for try await event in completion.events {
                    // After stop(), what the engine produced before it noticed (the events
                    // this task had not delivered yet) is neither delivered nor kept: the
                    // reply ends where the caller stopped reading it.
                    if stopped.isCancelled {
                        guard case .finished = event else { continue }
                    }
                    reply.add(event)
                    switch event {
                    case .started: break
                    case .text(let t, _): onResponse(.chunk(t))
                    case .reasoning(let r): onResponse(.reasoningChunk(r))
                    case .toolCalls(let c): onResponse(.functionCall(c))
                    case .audio(let samples, let rate): onResponse(.audioSample(samples: samples, sampleRate: rate))
                    case .speechStep: break
                    case .finished(let reason, let usage):
                        // `.length` is maxOutputTokens (a normal stop) or the context.
                        let contextFull = reason == .length && usage.completionTokens < (maxTokens ?? Int.max)
                        onResponse(
                            .complete(
                                MessageCompletion(
                                    message: reply.message, finishReason: contextFull ? .exceedContext : .stop,
                                    stats: GenerationStats(usage))))
                    }
                }
            } catch {
                onError(LeapError(error))
            }
        }
        return ServingGenerationHandler(completion: completion, stopped: stopped)
    }
}

/// The handler of a generation running on a `ServingEngine`: `stop()` cancels the
/// completion (the engine ends it before its next token) and stops delivering at once.
struct ServingGenerationHandler: GenerationHandler {
    let completion: ServingCompletion
    let stopped: CancellationFlag
    func stop() {
        stopped.cancel()
        completion.cancel()
    }
}

extension GenerationStats {
    /// The statistics of a served completion.
    init(_ usage: ServingUsage) {
        let processed = usage.promptTokens - usage.cachedTokens
        self.init(
            promptTokens: UInt64(usage.promptTokens), completionTokens: UInt64(usage.completionTokens),
            totalTokens: UInt64(usage.promptTokens + usage.completionTokens),
            tokenPerSecond: usage.generationSeconds > 0 ? Float(Double(usage.completionTokens) / usage.generationSeconds) : 0,
            cachedPromptTokens: UInt64(usage.cachedTokens),
            promptTokenPerSecond: usage.promptSeconds > 0 ? Float(Double(processed) / usage.promptSeconds) : 0)
        audioFrames = UInt64(usage.audioFrames)
        secondsToFirstAudioSample = usage.firstAudioSeconds
    }
}

extension LeapError {
    /// The SDK's error for an engine error: errors go one way, from the engine's
    /// `ServingError` to the SDK's `LeapError`, never back.
    init(_ error: any Error) {
        switch error {
        case ServingError.promptTooLong(let tokens, let limit): self = .promptExceedContextLengthFailure(tokens: tokens, limit: limit)
        case ServingError.unsupportedContent(let m): self = .unsupportedContent(m)
        case ServingError.shuttingDown: self = .modelUnloaded
        case let e as ServingError: self = .generationFailure(e.description)
        case let e as LeapError: self = e
        default: self = .generationFailure("\(error)")
        }
    }
}
