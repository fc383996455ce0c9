import Foundation
import LeapSDKCore

/// The served model's state: loading (the server already answers `/health` with 503),
/// ready, or failed to load.
public final class ModelState: @unchecked Sendable {
    /// Where the model is.
    public enum Phase: Sendable {
        case loading
        case ready(ServingEngine)
        case failed(String)
    }

    private let lock = NSLock()
    private var current: Phase

    public init(_ phase: Phase = .loading) { current = phase }

    /// The current phase; the loader sets it.
    public var phase: Phase {
        get { lock.withLock { current } }
        set { lock.withLock { current = newValue } }
    }

    /// The engine, or the 503 that a request gets while there is none.
    func engine() throws(APIError) -> ServingEngine {
        switch phase {
        case .ready(let engine): return engine
        case .loading: throw APIError(status: 503, message: "Loading model", retryAfter: 1)
        case .failed(let m): throw APIError(status: 503, message: "the model failed to load: \(m)")
        }
    }
}
