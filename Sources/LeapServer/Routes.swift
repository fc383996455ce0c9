import Foundation
import Hummingbird
import LeapJSON
import LeapSDKCore
import NIOCore
import OpenAIWire

/// The request context of the server's routes: Hummingbird's core context plus the
/// connection, whose closing cancels the request's completion.
public struct ServerContext: RequestContext {
    /// Hummingbird's per-request storage.
    public var coreContext: CoreRequestContextStorage
    let channel: any Channel

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }
}

/// The routes of `leap-ref serve`: the OpenAI endpoints, llama-server's extras, health
/// and metrics.
public enum ServerRoutes {
    /// A router serving `state`'s model under `configuration`; the chat page (unless
    /// `configuration.webUI` is off) from `webUIAssets`.
    public static func router(
        state: ModelState, configuration: ServerConfiguration, metrics: ServerMetrics,
        webUIAssets: Result<WebUIAssets, WebUIError> = WebUIAssets.bundled
    ) -> Router<ServerContext> {
        let router = Router(context: ServerContext.self)
        router.middlewares.add(ErrorMiddleware(metrics: metrics))
        router.middlewares.add(APIKeyMiddleware(keys: configuration.apiKeys))
        let handlers = Handlers(state: state, configuration: configuration, metrics: metrics)

        for path in ["/health", "/v1/health"] {
            router.get(RouterPath(path)) { _, _ in try handlers.health() }
        }
        router.get("/metrics") { _, _ in try handlers.metricsText() }
        for path in ["/v1/models", "/models"] {
            router.get(RouterPath(path)) { _, _ in try handlers.models() }
        }
        for path in ["/v1/chat/completions", "/chat/completions"] {
            router.post(RouterPath(path)) { request, context in try await handlers.chat(request, context) }
        }
        for path in ["/v1/completions", "/completions"] {
            router.post(RouterPath(path)) { request, context in try await handlers.text(request, context) }
        }
        for path in ["/v1/audio/speech", "/audio/speech"] {
            router.post(RouterPath(path)) { request, context in try await handlers.speech(request, context) }
        }
        router.post("/tokenize") { request, _ in try await handlers.tokenize(request) }
        router.post("/detokenize") { request, _ in try await handlers.detokenize(request) }
        if configuration.webUI { addWebUI(to: router, assets: webUIAssets) }
        return router
    }
}

/// Turns every error into an OpenAI error object and counts answered requests.
struct ErrorMiddleware: RouterMiddleware {
    typealias Context = ServerContext
    let metrics: ServerMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let endpoint = request.uri.path
        do {
            let response = try await next(request, context)
            metrics.request(endpoint: endpoint, status: response.status.code)
            return response
        } catch let error as APIError {
            metrics.request(endpoint: endpoint, status: error.body.status)
            throw error
        } catch let error as HTTPError {
            let status = error.status.code
            metrics.request(endpoint: endpoint, status: status)
            let message: String
            switch status {
            case 404: message = "no route for \(request.method) \(endpoint)"
            case 405: message = "\(request.method) is not allowed on \(endpoint)"
            case 413: message = "the request body is larger than this server accepts"
            default: message = error.body ?? error.status.reasonPhrase
            }
            throw APIError(status: status, message: message)
        } catch {
            metrics.request(endpoint: endpoint, status: 500)
            throw APIError(status: 500, message: "internal error: \(error)")
        }
    }
}

/// Checks the API key, except on `/health`, `/metrics` and the chat page (`/` and
/// `/webui/...`, which hold no data: the page asks for the key and sends it).
struct APIKeyMiddleware: RouterMiddleware {
    typealias Context = ServerContext
    let keys: Set<String>

    static let openPaths: Set<String> = ["/health", "/v1/health", "/metrics", "/"]

    static func isOpen(_ path: String) -> Bool {
        openPaths.contains(path) || path.hasPrefix("/webui/")
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard !keys.isEmpty, !Self.isOpen(request.uri.path) else { return try await next(request, context) }
        var given: String?
        if let auth = request.headers[.authorization] {
            let parts = auth.split(separator: " ", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "bearer" { given = String(parts[1]).trimmingCharacters(in: .whitespaces) }
        }
        if given == nil { given = request.headers.first { $0.name.canonicalName == "x-api-key" }?.value }
        guard let given else {
            throw APIError(status: 401, message: "an API key is required: send 'Authorization: Bearer KEY'")
        }
        guard keys.contains(where: { constantTimeEqual($0, given) }) else {
            throw APIError(status: 401, message: "invalid API key")
        }
        return try await next(request, context)
    }

    /// Compares without stopping at the first difference (no timing hint of the prefix).
    func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        var diff = UInt8(x.count == y.count ? 0 : 1)
        for i in 0..<max(x.count, y.count) { diff |= (i < x.count ? x[i] : 0) ^ (i < y.count ? y[i] : 0) }
        return diff == 0
    }
}

/// The endpoint handlers.
struct Handlers: Sendable {
    let state: ModelState
    let configuration: ServerConfiguration
    let metrics: ServerMetrics

    static func json(_ value: JSONValue, status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: value.serialized())))
    }

    func health() throws -> Response {
        _ = try state.engine()
        return Self.json(["status": "ok"])
    }

    func metricsText() throws -> Response {
        guard configuration.metricsEnabled else {
            throw APIError(status: 501, message: "the metrics endpoint is off; start the server with --metrics")
        }
        var status: ServingEngine.Status?
        if case .ready(let engine) = state.phase { status = engine.status }
        return Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: metrics.render(status: status))))
    }

    func models() throws -> Response {
        let engine = try state.engine()
        let inputs = WireMapping.MediaInputs(engine).modalities
        let outputs = ["text"] + (engine.speaks ? ["audio"] : [])
        return Self.json(
            ModelList(ids: [engine.modelId], created: WireMapping.now, inputModalities: inputs, outputModalities: outputs).json)
    }

    /// The body as JSON, within the size limit.
    ///
    /// A body over the limit is refused (413) after it has been read to its end and thrown
    /// away, up to `maxDiscardedBodyBytes`: a client that sends its whole body before it
    /// reads the answer (urllib, a raw socket with `Connection: close`) would otherwise block
    /// forever on a server that stopped reading, and hold one of `maxConnections`. A client
    /// that asked `Expect: 100-continue` has sent nothing yet and is answered at once.
    func body(_ request: Request) async throws -> JSONValue {
        let limit = configuration.maxBodyBytes
        let declared = request.headers[.contentLength].flatMap(Int.init)
        if let declared, declared > limit {
            let waitsForContinue = request.headers[.expect]?.lowercased() == "100-continue"
            if !waitsForContinue && declared <= configuration.maxDiscardedBodyBytes { try await discard(request.body) }
            throw tooLarge()
        }
        // One pass over the body (it can be iterated once): kept up to the limit, then dropped.
        var buffer = ByteBuffer()
        var received = 0
        for try await var part in request.body {
            received += part.readableBytes
            if received <= limit {
                buffer.writeBuffer(&part)
            } else if received > configuration.maxDiscardedBodyBytes {
                break
            }
        }
        guard received <= limit else { throw tooLarge() }
        do {
            return try JSONValue.parseRequestBody(Array(buffer.readableBytesView))
        } catch {
            throw APIError(error)
        }
    }

    /// Reads a refused body and drops it, up to `maxDiscardedBodyBytes`.
    func discard(_ body: RequestBody) async throws {
        var read = 0
        for try await part in body {
            read += part.readableBytes
            if read > configuration.maxDiscardedBodyBytes { return }
        }
    }

    /// The body decoded as a `R`, a refusal becoming a 400 that names the field.
    func decode<R: WireRequest>(_ type: R.Type, _ request: Request) async throws -> R {
        let json = try await body(request)
        do { return try R(json: json) } catch { throw APIError(error) }
    }

    func tooLarge() -> APIError {
        APIError(status: 413, message: "the request body is larger than \(configuration.maxBodyBytes) bytes (--max-body-bytes)")
    }

    func tokenize(_ request: Request) async throws -> Response {
        let engine = try state.engine()
        let r = try await decode(TokenizeRequest.self, request)
        let ids = engine.tokenize(r.content, addSpecial: r.addSpecial, parseSpecial: r.parseSpecial)
        let tokens: [JSONValue] =
            r.withPieces
            ? ids.map { ["id": .integer($0), "piece": .string(engine.tokenPiece($0))] } : ids.map { .integer($0) }
        return Self.json(["tokens": .array(tokens)])
    }

    func detokenize(_ request: Request) async throws -> Response {
        let engine = try state.engine()
        let r = try await decode(DetokenizeRequest.self, request)
        do {
            return Self.json(["content": .string(try engine.detokenize(r.tokens))])
        } catch {
            throw APIError(status: 400, message: error.description, param: "tokens")
        }
    }

    /// Submits a request, turning refusals into API errors, and cancels it if the
    /// client's connection closes.
    func submit(_ request: ServingRequest, to engine: ServingEngine, context: ServerContext) throws -> ServingCompletion {
        let completion: ServingCompletion
        do {
            completion = try engine.submit(request)
        } catch {
            if case .queueFull = error { metrics.rejectedBusy() }
            throw APIError(error)
        }
        context.channel.closeFuture.whenComplete { _ in completion.cancel() }
        return completion
    }

    // MARK: Chat completions

    func chat(_ request: Request, _ context: ServerContext) async throws -> Response {
        let engine = try state.engine()
        let wire = try await decode(ChatCompletionRequest.self, request)
        if wire.audioOutput != nil && !engine.speaks {
            throw APIError(
                status: 400,
                message: "the model '\(engine.modelId)' cannot speak: audio output needs a speech model (LFM2.5-Audio) served with "
                    + "its vocoder and audio tokenizer (leap-ref serve --vocoder V.gguf --audio-tokenizer T.gguf, or the "
                    + "vocoder-*.gguf and tokenizer-*.gguf files beside the model); ask for 'modalities': [\"text\"]",
                param: "modalities")
        }
        let serving = try WireMapping.chatRequest(
            wire, maxTokensLimit: configuration.maxTokensLimit, defaults: configuration.defaultSampling,
            takes: WireMapping.MediaInputs(engine))
        let completion = try submit(serving, to: engine, context: context)
        let id = WireMapping.newID(prefix: "chatcmpl-"), created = WireMapping.now
        let model = wire.model ?? engine.modelId
        let withLogprobs = wire.topLogprobs != nil
        // A spoken reply's audio id (OpenAI's `audio_…`), the same in every chunk.
        let audioID = wire.audioOutput.map { _ in WireMapping.newID(prefix: "audio_") }
        if wire.sampling.stream {
            let includeUsage = wire.sampling.includeUsage
            return Self.eventStream(completion) { event in
                func chunk(_ delta: ChatCompletionChunk.Delta) -> String {
                    ServerSentEvents.event(ChatCompletionChunk(id: id, created: created, model: model, delta: delta).json)
                }
                switch event.kind {
                case .start: return [chunk(.role)]
                case .event(.text(let text, let logprobs)):
                    guard !text.isEmpty || !logprobs.isEmpty else { return [] }
                    let lp = withLogprobs ? logprobs.map(WireMapping.logprob) : nil
                    // A spoken reply's text streams as its transcript, as OpenAI streams it.
                    if let audioID { return [chunk(.audioTranscript(id: audioID, text, logprobs: lp))] }
                    return [chunk(.content(text, logprobs: lp))]
                case .event(.reasoning(let text)): return [chunk(.reasoning(text))]
                case .event(.toolCalls(let calls)):
                    let first = event.callsSoFar - calls.count
                    return [chunk(.toolCalls(calls.enumerated().map { (first + $0.offset, WireMapping.toolCall($0.element)) }))]
                case .event(.finished(let reason, let usage)):
                    var out = [chunk(.finish(WireMapping.finishReason(reason)))]
                    if includeUsage { out.append(chunk(.usage(WireMapping.usage(usage), WireMapping.timings(usage)))) }
                    return out
                case .event(.started): return []
                case .event(.audio(let samples, _)):
                    // Only a spoken reply (`modalities` with audio) has audio events.
                    guard let audioID, !samples.isEmpty else { return [] }
                    return [chunk(.audioData(id: audioID, WAVAudio.encodePCM16(samples: samples).base64EncodedString()))]
                case .event(.speechStep): return []
                }
            }
        }
        let (result, reason, usage) = try await Self.collect(completion)
        var audio: WireReplyAudio?
        if let audioID, let asked = wire.audioOutput {
            let bytes = WireMapping.spokenAudio(result, asWAV: asked.format == .wav)
            audio = WireReplyAudio(
                id: audioID, data: bytes.base64EncodedString(), transcript: result.text, expiresAt: WireMapping.now + 3600)
        }
        let response = ChatCompletionResponse(
            id: id, created: created, model: model, content: result.text,
            reasoningContent: result.reasoning.flatMap { $0.isEmpty ? nil : $0 }, toolCalls: result.toolCalls.map(WireMapping.toolCall),
            logprobs: withLogprobs ? result.logprobs.map(WireMapping.logprob) : nil, finishReason: WireMapping.finishReason(reason),
            usage: WireMapping.usage(usage), timings: WireMapping.timings(usage), audio: audio)
        return Self.json(response.json)
    }

    // MARK: Speech

    /// `POST /v1/audio/speech`: the whole reply's waveform as a 16-bit PCM WAV file
    /// (`audio/wav`) or raw 16-bit little-endian samples (`audio/pcm`), mono, 24 kHz. The
    /// text the model writes on its way to the audio is not returned. A client that goes
    /// away cancels the generation (`submit`).
    func speech(_ request: Request, _ context: ServerContext) async throws -> Response {
        let engine = try state.engine()
        let wire = try await decode(AudioSpeechRequest.self, request)
        guard engine.speaks else {
            throw APIError(
                status: 400,
                message: "the model '\(engine.modelId)' cannot speak: /v1/audio/speech needs a speech model (LFM2.5-Audio) served with "
                    + "its vocoder and audio tokenizer (leap-ref serve --vocoder V.gguf --audio-tokenizer T.gguf, or the "
                    + "vocoder-*.gguf and tokenizer-*.gguf files beside the model)",
                param: "model")
        }
        let serving = try WireMapping.speechRequest(wire, maxTokensLimit: configuration.maxTokensLimit)
        let completion: ServingCompletion
        do {
            completion = try submit(serving, to: engine, context: context)
        } catch let error as APIError where error.body.param == "messages" {
            // The prompt is the voice's system prompt and `input`: a prompt too long is the input's.
            throw APIError(status: error.body.status, message: error.body.message, param: "input")
        }
        let (reply, _, _) = try await Self.collect(completion)
        let bytes = WireMapping.spokenAudio(reply, asWAV: wire.responseFormat == .wav)
        let type = wire.responseFormat == .wav ? "audio/wav" : "audio/pcm"
        return Response(
            status: .ok, headers: [.contentType: type], body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    // MARK: Text completions

    func text(_ request: Request, _ context: ServerContext) async throws -> Response {
        let engine = try state.engine()
        let wire = try await decode(TextCompletionRequest.self, request)
        let serving = try WireMapping.textRequest(
            wire, maxTokensLimit: configuration.maxTokensLimit, defaults: configuration.defaultSampling)
        let completion = try submit(serving, to: engine, context: context)
        let id = WireMapping.newID(prefix: "cmpl-"), created = WireMapping.now
        let model = wire.model ?? engine.modelId
        let withLogprobs = wire.logprobs != nil
        if wire.sampling.stream {
            let includeUsage = wire.sampling.includeUsage
            return Self.eventStream(completion) { event in
                func piece(_ text: String, _ lp: [WireTokenLogprob]?, _ finish: String?) -> String {
                    ServerSentEvents.event(
                        TextCompletionResponse(
                            id: id, created: created, model: model, text: text, logprobs: lp, finishReason: finish, usage: nil
                        ).json)
                }
                switch event.kind {
                case .event(.text(let text, let logprobs)):
                    guard !text.isEmpty || !logprobs.isEmpty else { return [] }
                    return [piece(text, withLogprobs ? logprobs.map(WireMapping.logprob) : nil, nil)]
                case .event(.finished(let reason, let usage)):
                    var out = [piece("", withLogprobs ? [] : nil, WireMapping.finishReason(reason))]
                    if includeUsage {
                        let u = TextCompletionResponse(
                            id: id, created: created, model: model, text: "", logprobs: nil, finishReason: nil,
                            usage: WireMapping.usage(usage), timings: WireMapping.timings(usage), usageOnly: true)
                        out.append(ServerSentEvents.event(u.json))
                    }
                    return out
                default: return []
                }
            }
        }
        let (result, reason, usage) = try await Self.collect(completion)
        let response = TextCompletionResponse(
            id: id, created: created, model: model, text: result.text,
            logprobs: withLogprobs ? result.logprobs.map(WireMapping.logprob) : nil,
            finishReason: WireMapping.finishReason(reason), usage: WireMapping.usage(usage), timings: WireMapping.timings(usage))
        return Self.json(response.json)
    }

    /// Reads a completion to its end (for the non-streamed responses): the reply, how it
    /// ended, and its usage.
    static func collect(_ completion: ServingCompletion) async throws -> (ServingReply, ServingFinishReason, ServingUsage) {
        var reply = ServingReply()
        do {
            for try await event in completion.events {
                if case .finished(let reason, let usage) = event { return (reply, reason, usage) }
                reply.add(event)
            }
        } catch let error as ServingError {
            throw APIError(error)
        }
        throw APIError(status: 500, message: "the completion ended without a result")
    }

    // MARK: Server-sent events

    /// What the SSE renderer is shown: the stream's start, then each event (with the
    /// number of tool calls seen so far, for the calls' indices).
    struct StreamEvent {
        enum Kind {
            case start
            case event(ServingEvent)
        }
        let kind: Kind
        let callsSoFar: Int
    }

    /// A `text/event-stream` response that renders the completion's events, ends with
    /// `data: [DONE]`, reports a failure as an error event, and cancels the completion
    /// when the client goes away (a write fails) or the stream ends early.
    static func eventStream(_ completion: ServingCompletion, render: @escaping @Sendable (StreamEvent) -> [String]) -> Response {
        let body = ResponseBody { writer in
            defer { completion.cancel() }
            var calls = 0
            for text in render(StreamEvent(kind: .start, callsSoFar: 0)) { try await writer.write(ByteBuffer(string: text)) }
            do {
                for try await event in completion.events {
                    if case .toolCalls(let c) = event { calls += c.count }
                    for text in render(StreamEvent(kind: .event(event), callsSoFar: calls)) {
                        try await writer.write(ByteBuffer(string: text))
                    }
                }
                try await writer.write(ByteBuffer(string: ServerSentEvents.done))
            } catch let error as ServingError {
                let api = APIError(error)
                try await writer.write(ByteBuffer(string: ServerSentEvents.event(api.body.json)))
            }
            try await writer.finish(nil)
        }
        return Response(
            status: .ok, headers: [.contentType: "text/event-stream", .cacheControl: "no-cache"], body: body)
    }
}
