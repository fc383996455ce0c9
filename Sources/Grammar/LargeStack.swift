#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs compilations where the stack is large enough.
///
/// The schema compiler recurses once per level of subschema nesting (bounded by
/// `JSONSchemaCompiler.Limits.maxDepth`; measured at up to 8 KB a level in a debug build,
/// 3 KB optimized), and JSON values are hashed and compared recursively (up to the parser's
/// 512 levels). Every public entry point runs its work through `run`: on the calling thread
/// when its stack has room (the main thread, and Linux's 8 MB threads), otherwise on a new
/// thread with a large stack (macOS gives secondary threads 512 KB), so that the limits, not
/// the caller's stack, bound the recursion. A new thread costs tens of microseconds on an
/// idle machine, and a scheduling delay on a busy one, which is why it is the fallback.
enum LargeStack {
    /// The stack a compilation needs with `maxDepth` levels.
    static func bytesNeeded(maxDepth: Int) -> Int { (2 << 20) + max(0, maxDepth) * (16 << 10) }

    /// Runs `body` on this thread if at least `bytes` of stack remain below the caller,
    /// otherwise on a new thread with twice that (and at least 16 MB), waiting for it.
    static func run<T, E: Error>(needing bytes: Int, _ body: () throws(E) -> T) throws(E) -> T {
        if let left = remainingStack(), left >= bytes { return try body() }
        return try withoutActuallyEscaping(body) { (escapable: @escaping () throws(E) -> T) throws(E) -> T in
            let box = Box<T, E>(escapable)
            guard box.runOnThread(stackBytes: max(16 << 20, 2 * bytes)), let result = box.result else { return try escapable() }
            return try result.get()
        }
    }

    /// The bytes of stack left below this point on the current thread (nil if unknown).
    static func remainingStack() -> Int? {
        guard let low = stackLowAddress() else { return nil }
        var marker: UInt8 = 0
        let here = withUnsafeMutablePointer(to: &marker) { UInt(bitPattern: $0) }
        return here > low ? Int(here - low) : 0
    }

    /// Per thread: the lowest address of its stack, cached.
    static let stackKey: pthread_key_t? = {
        var key = pthread_key_t()
        return pthread_key_create(&key, nil) == 0 ? key : nil
    }()

    static func stackLowAddress() -> UInt? {
        guard let key = stackKey else { return nil }
        if let cached = pthread_getspecific(key) { return UInt(bitPattern: cached) }
        #if canImport(Darwin)
        let top = UInt(bitPattern: pthread_get_stackaddr_np(pthread_self()))
        let low = top - UInt(pthread_get_stacksize_np(pthread_self()))
        #else
        var attributes = pthread_attr_t()
        guard threadAttributes(pthread_self(), &attributes) == 0 else { return nil }
        defer { pthread_attr_destroy(&attributes) }
        var address: UnsafeMutableRawPointer?
        var size = 0
        guard pthread_attr_getstack(&attributes, &address, &size) == 0, let address else { return nil }
        let low = UInt(bitPattern: address)
        #endif
        pthread_setspecific(key, UnsafeRawPointer(bitPattern: low))
        return low
    }

    /// Work for the thread (a class, so that a C thread entry point can call it).
    class Job: @unchecked Sendable {
        func execute() {}

        /// Creates the thread, runs `execute` on it, joins it. False when no thread could be made.
        func runOnThread(stackBytes: Int) -> Bool {
            var attributes = pthread_attr_t()
            guard pthread_attr_init(&attributes) == 0 else { return false }
            defer { pthread_attr_destroy(&attributes) }
            guard pthread_attr_setstacksize(&attributes, stackBytes) == 0 else { return false }
            let context = Unmanaged.passRetained(self)
            #if canImport(Darwin)
            var thread: pthread_t?
            #else
            var thread = pthread_t()
            #endif
            let created = pthread_create(
                &thread, &attributes,
                { raw in
                    #if !canImport(Darwin)
                    guard let raw else { return nil }
                    #endif
                    Unmanaged<Job>.fromOpaque(raw).takeRetainedValue().execute()
                    return nil
                }, context.toOpaque())
            guard created == 0 else {
                context.release()
                return false
            }
            #if canImport(Darwin)
            guard let thread else { return false }
            #endif
            pthread_join(thread, nil)
            return true
        }
    }

    /// The work and its result, shared with the thread (which ends before `run` returns).
    final class Box<T, E: Error>: Job, @unchecked Sendable {
        let body: () throws(E) -> T
        var result: Result<T, E>?

        init(_ body: @escaping () throws(E) -> T) { self.body = body }

        override func execute() {
            do throws(E) { result = .success(try body()) } catch { result = .failure(error) }
        }
    }
}

#if !canImport(Darwin)
/// glibc's and musl's `pthread_getattr_np` (a GNU extension the Glibc module does not export):
/// the attributes, stack included, of a running thread.
@_silgen_name("pthread_getattr_np")
private func threadAttributes(_ thread: pthread_t, _ attributes: UnsafeMutablePointer<pthread_attr_t>) -> Int32
#endif
