import Foundation

/// A tool handler that may throw; non-throwing handlers are stored in this form too.
public typealias ToolHandler = @Sendable ([String: ToolValue]) async throws -> [String: ToolValue]

/// A registered tool: its definition and its handler.
struct RegisteredTool: Sendable {
    let definition: ToolDefinition
    let handler: ToolHandler
}

/// Runs tool handlers with a time limit.
enum ToolExecutor {
    /// Runs `tool`'s handler on `arguments`. A handler that throws gives a failed result
    /// with the error's text; one that has not returned after `timeout` gives a failed
    /// result saying so (its task is cancelled and its eventual result ignored, so a handler
    /// that ignores cancellation cannot hold up the loop).
    static func run(_ tool: RegisteredTool, arguments: [String: ToolValue], timeout: Duration) async -> ToolResult {
        let name = tool.definition.name
        let outcome = await firstOf(timeout: timeout) { try await tool.handler(arguments) }
        switch outcome {
        case .returned(let result): return .succeeded(name, result)
        case .threw(let error): return .failed(name, "tool '\(name)' failed: \(errorText(error))")
        case .timedOut: return .failed(name, "tool '\(name)' timed out after \(timeout.secondsText)")
        case .cancelled: return .failed(name, "tool '\(name)' was cancelled")
        }
    }

    enum Outcome<Value: Sendable>: Sendable {
        case returned(Value)
        case threw(any Error)
        case timedOut
        case cancelled
    }

    /// Runs `work` in its own task and returns whichever comes first: its result, the
    /// timeout, or the cancellation of the calling task.
    static func firstOf<Value: Sendable>(timeout: Duration, _ work: @escaping @Sendable () async throws -> Value)
        async -> Outcome<Value>
    {
        let once = ResumeOnce<Outcome<Value>>()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Outcome<Value>, Never>) in
                once.install(continuation)
                let worker = Task {
                    do {
                        once.resume(with: .returned(try await work()))
                    } catch {
                        once.resume(with: .threw(error))
                    }
                }
                let timer = Task {
                    try? await Task.sleep(for: timeout)
                    if !Task.isCancelled { once.resume(with: .timedOut) }
                    worker.cancel()
                }
                once.onResume {
                    timer.cancel()
                    worker.cancel()
                }
            }
        } onCancel: {
            once.resume(with: .cancelled)
        }
    }

    /// The message of an error: its localized description when it has one, else its
    /// `description` (`String(describing:)`).
    static func errorText(_ error: any Error) -> String {
        if let error = error as? LocalizedError, let text = error.errorDescription { return text }
        return String(describing: error)
    }
}

/// Resumes a continuation exactly once, whoever comes first; later results are dropped.
final class ResumeOnce<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var continuation: CheckedContinuation<Value, Never>?
    private var early: Value?
    private var done = false
    private var cleanups: [@Sendable () -> Void] = []

    func install(_ continuation: CheckedContinuation<Value, Never>) {
        let resumeNow: Value? = lock.withLock {
            if let early, !done {
                done = true
                return early
            }
            self.continuation = continuation
            return nil
        }
        if let resumeNow { continuation.resume(returning: resumeNow) }
    }

    /// Runs `cleanup` when the continuation resumes (at once if it already has).
    func onResume(_ cleanup: @escaping @Sendable () -> Void) {
        let runNow = lock.withLock {
            if done { return true }
            cleanups.append(cleanup)
            return false
        }
        if runNow { cleanup() }
    }

    func resume(with value: Value) {
        let (target, toRun): (CheckedContinuation<Value, Never>?, [@Sendable () -> Void]) = lock.withLock {
            if done || early != nil { return (nil, []) }
            guard let continuation else {
                // Cancelled before the continuation was installed.
                early = value
                return (nil, [])
            }
            done = true
            self.continuation = nil
            let run = cleanups
            cleanups = []
            return (continuation, run)
        }
        target?.resume(returning: value)
        toRun.forEach { $0() }
    }
}

extension Duration {
    /// E.g. `30 s` or `0.05 s`.
    var secondsText: String {
        let (seconds, attoseconds) = components
        let value = Double(seconds) + Double(attoseconds) / 1e18
        return value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
    }
}
