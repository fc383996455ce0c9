/// A wait that did not end in time.
public struct TimedOut: Error, CustomStringConvertible {
    public let what: String
    public let seconds: Double
    public var description: String { "timed out after \(seconds) s waiting for \(what)" }
}

/// Runs `body` and returns its result, or throws `TimedOut` (cancelling `body`) when it
/// takes longer than `seconds`. For waits on events: the timeout only bounds a test that
/// would otherwise hang, it is never the expected outcome, so make it generous.
public func within<T: Sendable>(
    _ seconds: Double, _ what: String, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else { throw TimedOut(what: what, seconds: seconds) }
        return value
    }
}
