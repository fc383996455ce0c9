import Foundation

/// A value guarded by a lock, for state that tests share with callbacks and tasks.
public final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    public init(_ value: Value) { self.value = value }

    public func withLock<R>(_ body: (inout Value) -> R) -> R { lock.withLock { body(&value) } }
}
