import Foundation
import Hummingbird
import HummingbirdCore
import LeapSDKCore
import Logging
import NIOCore
import ServiceLifecycle

/// Runs `leap-ref serve`: the HTTP server starts first (answering `/health` with 503),
/// the model loads in the background, and SIGTERM or SIGINT shut down gracefully: no new
/// connections, waiting requests refused, running completions finished (or cancelled
/// after `shutdownGraceSeconds`), then `run` returns.
public enum LeapHTTPServer {
    /// Serves the model at `modelPath`. `onListening` receives the bound port (useful with
    /// port 0), `onReady` the engine once the model is loaded. Throws if the model fails to
    /// load or the address cannot be bound.
    public static func run(
        configuration: ServerConfiguration, modelPath: String, loadOptions: LiquidInferenceEngineOptions,
        serving: ServingEngine.Configuration, logger: Logger,
        onListening: @escaping @Sendable (Int) -> Void = { _ in },
        onReady: @escaping @Sendable (ServingEngine) -> Void = { _ in }
    ) async throws {
        let state = ModelState()
        let metrics = ServerMetrics()
        let router = ServerRoutes.router(state: state, configuration: configuration, metrics: metrics)
        let app = Application(
            router: router,
            server: .http1(
                configuration: HTTP1Channel.Configuration(
                    additionalChannelHandlers: [ContinueHandler(maxBodyBytes: configuration.maxBodyBytes), ClientGoneHandler()],
                    idleTimeout: configuration.idleTimeoutSeconds.map { .nanoseconds(Int64($0 * 1e9)) })),
            configuration: ApplicationConfiguration(
                address: .hostname(configuration.host, port: configuration.port), serverName: "leap-ref",
                availableConnectionsDelegate: MaximumAvailableConnections(configuration.maxConnections)),
            onServerRunning: { channel in onListening(channel.localAddress?.port ?? configuration.port) },
            logger: logger)
        var serving = serving
        let log = logger
        serving.onFinish = { reason, usage in
            metrics.completion(reason, usage)
            if reason == .cancelled {
                let tokens = usage.map { "after \($0.completionTokens) tokens" } ?? "while it waited for a slot"
                log.info("completion cancelled (the client went away) \(tokens)")
            }
        }
        let loader = ModelLoader(
            state: state, path: modelPath, options: loadOptions, serving: serving, logger: logger, onReady: onReady)
        let drain = Drain(state: state, graceSeconds: configuration.shutdownGraceSeconds, logger: logger)
        // Graceful shutdown runs in reverse order: the drain first (no more queued work, a
        // deadline for running completions), then the server (no new connections, waits
        // for the open requests).
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: app), .init(service: loader), .init(service: drain)],
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }
}

/// Loads the model into `state`, then waits for shutdown. A load failure ends the server
/// with that error.
struct ModelLoader: Service {
    let state: ModelState
    let path: String
    let options: LiquidInferenceEngineOptions
    let serving: ServingEngine.Configuration
    let logger: Logger
    let onReady: @Sendable (ServingEngine) -> Void

    func run() async throws {
        do {
            let runner = try await Leap.load(path: path, options: options)
            let engine = try ServingEngine(runner: runner, configuration: serving)
            state.phase = .ready(engine)
            onReady(engine)
            logger.info(
                "model loaded: \(engine.modelId), \(serving.slots) slot(s) of \(engine.contextSize) tokens, queue \(serving.queueLimit)")
        } catch {
            state.phase = .failed("\(error)")
            throw error
        }
        try? await gracefulShutdown()
    }
}

/// On graceful shutdown: refuses queued requests, lets running completions finish for
/// `graceSeconds`, then cancels them.
struct Drain: Service {
    let state: ModelState
    let graceSeconds: Double
    let logger: Logger

    func run() async throws {
        try? await gracefulShutdown()
        guard case .ready(let engine) = state.phase else { return }
        logger.info("shutting down: finishing running completions (up to \(graceSeconds) s)")
        let grace = graceSeconds
        Task {
            try? await Task.sleep(nanoseconds: UInt64(max(0, grace) * 1e9))
            engine.cancelAll()
        }
        Task { await engine.shutdown(cancelRunning: false) }
    }
}
