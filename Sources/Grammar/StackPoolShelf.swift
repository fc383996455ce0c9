import Foundation

/// The stack pools of a grammar's finished matchers, kept for its next matcher.
///
/// A pool interns return stacks and caches whole token masks per matcher state
/// (`StackPool.maskCache`). Both are pure functions of the grammar, so a matcher that starts
/// after another one of the same grammar has finished can take over its pool: the masks of
/// the states they share are then computed once, not once per generation. This is the common
/// case of a server answering many requests with one schema (it keeps compiled grammars,
/// `ServingEngine.grammarCacheLimit`), and of MaskBench's instances of one schema. A pool is
/// lent to one matcher at a time, so matchers alive together (continuous batching, or
/// threads) never share one.
///
/// What is kept is bounded for the whole process by `retainedBytesLimit`: a pool that does not
/// fit is dropped when its matcher ends.
final class StackPoolShelf: @unchecked Sendable {
    private var pool: StackPool?
    private var poolBytes = 0

    /// The bytes that pools resting on shelves may hold in all (default 32 MiB; 0 keeps none).
    static var retainedBytesLimit: Int {
        get { global.withLock { global.limit } }
        set { global.withLock { global.limit = max(0, newValue) } }
    }

    /// One lock for every shelf: it guards the shelves' contents and the process-wide total.
    private static let global = Budget()

    private final class Budget: @unchecked Sendable {
        let lock = NSLock()
        var limit = 32 << 20
        var retained = 0
        func withLock<T>(_ body: () -> T) -> T {
            lock.lock()
            defer { lock.unlock() }
            return body()
        }
    }

    /// The resting pool, if any (the caller has it to itself until it gives it back).
    func take() -> StackPool? {
        Self.global.withLock {
            guard let p = pool else { return nil }
            pool = nil
            Self.global.retained -= poolBytes
            poolBytes = 0
            return p
        }
    }

    /// Puts a finished matcher's pool on the shelf, if the shelf is empty and it fits.
    func give(_ p: StackPool) {
        let bytes = p.approximateBytes
        Self.global.withLock {
            guard pool == nil, Self.global.retained + bytes <= Self.global.limit else { return }
            pool = p
            poolBytes = bytes
            Self.global.retained += bytes
        }
    }
}
