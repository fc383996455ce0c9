import LeapSDKCore

/// What `leap-ref serve` is told: where to listen, who may call, and the limits that keep
/// a client from exhausting the server. Every limit has a default and a flag.
public struct ServerConfiguration: Sendable {
    /// Address to bind (default loopback only).
    public var host: String
    /// Port to bind; 0 picks a free one (the bound port is reported when the server runs).
    public var port: Int
    /// Accepted API keys (`Authorization: Bearer KEY` or `X-Api-Key: KEY`); empty: no key
    /// is needed. `/health` and `/metrics` never need one.
    public var apiKeys: Set<String>
    /// Largest request body in bytes; larger bodies get 413.
    public var maxBodyBytes: Int
    /// How much of a refused (over `maxBodyBytes`) body is read and dropped before the 413,
    /// so that a client sending all of it before reading gets its answer. A body declared
    /// larger is answered at once, and such a client then waits until it gives up.
    public var maxDiscardedBodyBytes: Int
    /// Largest `max_tokens` a request may ask for (and the default when it asks for none);
    /// nil: up to the context.
    public var maxTokensLimit: Int?
    /// Most open connections; further connections wait in the listen backlog.
    public var maxConnections: Int
    /// Seconds a connection may go without sending while its request is incomplete, or stay
    /// idle between requests, before it is closed (nil: never). A request that has been read
    /// is never cut, however long its answer or its wait for a slot takes. Without it, clients
    /// that open connections and send nothing (or a byte a minute) hold all of
    /// `maxConnections`.
    public var idleTimeoutSeconds: Double?
    /// Serve `/metrics` (Prometheus text); otherwise it answers 501, as llama-server does.
    public var metricsEnabled: Bool
    /// On SIGTERM: how long running completions may go on before they are cancelled.
    public var shutdownGraceSeconds: Double
    /// Serve the chat page at `/` (`WebUIAssets`); off, `/` is 404.
    public var webUI: Bool
    /// Sampling for the fields a request leaves out (`leap-ref serve`'s sampling flags);
    /// fields nil here too take the model's defaults.
    public var defaultSampling: SamplingOverrides

    public init(
        host: String = "127.0.0.1", port: Int = 8080, apiKeys: Set<String> = [], maxBodyBytes: Int = 8 << 20,
        maxTokensLimit: Int? = nil, maxConnections: Int = 256, metricsEnabled: Bool = false, shutdownGraceSeconds: Double = 10,
        webUI: Bool = true, defaultSampling: SamplingOverrides = SamplingOverrides(), maxDiscardedBodyBytes: Int = 256 << 20,
        idleTimeoutSeconds: Double? = 60
    ) {
        self.host = host
        self.port = port
        self.apiKeys = apiKeys
        self.maxBodyBytes = maxBodyBytes
        self.maxDiscardedBodyBytes = maxDiscardedBodyBytes
        self.maxTokensLimit = maxTokensLimit
        self.maxConnections = maxConnections
        self.idleTimeoutSeconds = idleTimeoutSeconds
        self.metricsEnabled = metricsEnabled
        self.shutdownGraceSeconds = shutdownGraceSeconds
        self.webUI = webUI
        self.defaultSampling = defaultSampling
    }
}
