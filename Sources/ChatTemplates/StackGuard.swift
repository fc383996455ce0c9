#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

#if os(Linux)
// glibc declares this only under _GNU_SOURCE, which the Glibc module does not set.
@_silgen_name("pthread_getattr_np")
private func pthreadGetattrNP(_ thread: pthread_t, _ attributes: UnsafeMutablePointer<pthread_attr_t>) -> Int32
#endif

#if canImport(Darwin) || canImport(Glibc) || canImport(Musl)
/// Per-thread cache of the computed limit (reading a main thread's bounds parses
/// /proc/self/maps on Linux, too slow to repeat for every render).
private let stackLimitKey: pthread_key_t? = {
    var key = pthread_key_t()
    return pthread_key_create(&key, nil) == 0 ? key : nil
}()
#endif

/// Watches the current thread's stack so that deeply nested templates fail with a
/// `.limit` error instead of overflowing it. The depth limits in `RenderLimits` bound
/// the work, but how much stack a level takes depends on the build (a debug build
/// takes several times what a release build does) and threads differ in stack size
/// (512 KB for secondary threads on Apple platforms), so the parser and the evaluator
/// also check the stack that is actually left.
struct StackGuard {
    /// Lowest address the stack may grow to, with a safety margin; nil when unknown.
    private let limit: UInt?

    /// Captures the bounds of the calling thread's stack. Checks must run on that thread.
    init() {
        #if canImport(Darwin) || canImport(Glibc) || canImport(Musl)
        if let key = stackLimitKey, let cached = pthread_getspecific(key) {
            let value = UInt(bitPattern: cached)
            limit = value == 1 ? nil : value
            return
        }
        limit = StackGuard.computeLimit(margin: 96 * 1024)
        if let key = stackLimitKey {
            _ = pthread_setspecific(key, UnsafeRawPointer(bitPattern: limit ?? 1))
        }
        #else
        limit = nil
        #endif
    }

    private static func computeLimit(margin preferredMargin: UInt) -> UInt? {
        #if canImport(Darwin)
        let thread = pthread_self()
        let top = UInt(bitPattern: pthread_get_stackaddr_np(thread))
        let size = UInt(pthread_get_stacksize_np(thread))
        let margin = min(preferredMargin, size / 3)
        return top - size + margin
        #elseif os(Linux)
        var attributes = pthread_attr_t()
        guard pthreadGetattrNP(pthread_self(), &attributes) == 0 else {
            return nil
        }
        defer { pthread_attr_destroy(&attributes) }
        var base: UnsafeMutableRawPointer?
        var size = 0
        guard pthread_attr_getstack(&attributes, &base, &size) == 0, let base else {
            return nil
        }
        let margin = min(preferredMargin, UInt(size) / 3)
        return UInt(bitPattern: base) + margin
        #else
        return nil
        #endif
    }

    /// Whether the stack has grown into the margin.
    @inline(__always)
    func isExhausted() -> Bool {
        guard let limit else { return false }
        var marker: UInt8 = 0
        let here = withUnsafeMutablePointer(to: &marker) { UInt(bitPattern: $0) }
        return here < limit
    }
}
