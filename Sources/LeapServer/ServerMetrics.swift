import Foundation
import LeapSDKCore

/// Counters of the server, exposed at `/metrics` in Prometheus' text format (version
/// 0.0.4), written directly: the handful of series below do not need a metrics library.
public final class ServerMetrics: @unchecked Sendable {
    private let lock = NSLock()
    private var requests: [String: Int] = [:]  // "endpoint status" -> count
    private var promptTokens = 0
    private var cachedTokens = 0
    private var generatedTokens = 0
    private var promptSeconds = 0.0
    private var generationSeconds = 0.0
    private var completions = 0
    private var rejected = 0
    private var cancelled = 0

    public init() {}

    /// One answered request.
    func request(endpoint: String, status: Int) {
        lock.withLock { requests["\(endpoint) \(status)", default: 0] += 1 }
    }

    /// One finished completion (usage nil: dropped while it waited for a slot). Pass this
    /// to `ServingEngine.Configuration.onFinish`.
    public func completion(_ reason: ServingFinishReason, _ usage: ServingUsage?) {
        lock.withLock {
            completions += 1
            if reason == .cancelled { cancelled += 1 }
            guard let usage else { return }
            promptTokens += usage.promptTokens
            cachedTokens += usage.cachedTokens
            generatedTokens += usage.completionTokens
            promptSeconds += usage.promptSeconds
            generationSeconds += usage.generationSeconds
        }
    }

    /// A request turned away because the queue was full.
    func rejectedBusy() { lock.withLock { rejected += 1 } }

    /// The exposition text, with the engine's current slot and queue state.
    func render(status: ServingEngine.Status?) -> String {
        lock.lock()
        defer { lock.unlock() }
        var out = ""
        func metric(_ name: String, _ type: String, _ help: String, _ samples: [(labels: String, value: String)]) {
            out += "# HELP leapref_\(name) \(help)\n# TYPE leapref_\(name) \(type)\n"
            for s in samples { out += "leapref_\(name)\(s.labels) \(s.value)\n" }
        }
        func number(_ d: Double) -> String { String(format: "%.6f", d) }
        metric(
            "requests_total", "counter", "HTTP requests answered, by endpoint and status code.",
            requests.keys.sorted().map { key in
                let parts = key.split(separator: " ")
                return ("{endpoint=\"\(parts[0])\",code=\"\(parts[1])\"}", String(requests[key]!))
            })
        metric("completions_total", "counter", "Completions finished (including cancelled ones).", [("", String(completions))])
        metric("completions_cancelled_total", "counter", "Completions cancelled by their client.", [("", String(cancelled))])
        metric("requests_rejected_total", "counter", "Requests refused with 503 because the queue was full.", [("", String(rejected))])
        metric("prompt_tokens_total", "counter", "Prompt tokens of finished completions.", [("", String(promptTokens))])
        metric("prompt_tokens_cached_total", "counter", "Prompt tokens taken from a slot's prompt cache.", [("", String(cachedTokens))])
        metric("tokens_predicted_total", "counter", "Generated tokens.", [("", String(generatedTokens))])
        metric("prompt_seconds_total", "counter", "Seconds spent processing prompts.", [("", number(promptSeconds))])
        metric("tokens_predicted_seconds_total", "counter", "Seconds spent generating.", [("", number(generationSeconds))])
        metric(
            "prompt_tokens_per_second", "gauge", "Average prompt throughput (uncached tokens per second of prompt processing).",
            [("", number(promptSeconds > 0 ? Double(promptTokens - cachedTokens) / promptSeconds : 0))])
        metric(
            "predicted_tokens_per_second", "gauge", "Average generation throughput (tokens per second of generation).",
            [("", number(generationSeconds > 0 ? Double(generatedTokens) / generationSeconds : 0))])
        if let status {
            metric("slots", "gauge", "Slots (sequences served at once).", [("", String(status.slots))])
            metric("slots_busy", "gauge", "Slots running a completion.", [("", String(status.busySlots))])
            metric("requests_deferred", "gauge", "Requests waiting for a slot.", [("", String(status.queuedRequests))])
        }
        return out
    }
}
