// A small persistent thread pool for the kernels.
//
// A decode step issues a few hundred matrix-vector products, each worth tens of
// microseconds, so the cost of handing work to other threads matters. The workers here
// spin for a short while after each job (a new job is picked up within ~100 ns), then
// sleep on a condition variable so an idle pool costs nothing. The calling thread takes
// part in the work. Work is handed out in chunks through an atomic counter, so a thread
// slowed down by something else on the machine just takes fewer chunks.

import Foundation
import Synchronization

/// A fixed set of worker threads running `parallelFor` loops.
///
/// ```swift
/// let pool = ThreadPool(threads: 2)
/// pool.parallelFor(count: rows) { range in
///     for r in range { y[r] = ... }
/// }
/// ```
///
/// `parallelFor` blocks until every index is done. Calls from several threads at once (or
/// from inside a running body) are safe: a call that finds the pool busy runs serially
/// on its own thread.
public final class ThreadPool: @unchecked Sendable {
    // @unchecked: all mutable state is in `Shared` (atomics, or guarded by `lock`); the
    // job closure is only read by workers between the generation bump that publishes it
    // and the completion count that retires it.

    /// Number of threads taking part in a loop, the caller included.
    public let threads: Int

    private let shared: Shared
    private var workers: [Thread] = []

    /// Creates a pool of `threads` threads in all: `threads - 1` workers plus the caller.
    /// `threads` is clamped to at least 1.
    public init(threads: Int) {
        let n = max(1, threads)
        self.threads = n
        shared = Shared()
        for index in 1..<n {
            let shared = self.shared
            let thread = Thread { shared.workerLoop(index: index) }
            thread.name = "leap-ref.kernels.\(index)"
            thread.stackSize = 1 << 20
            workers.append(thread)
            thread.start()
        }
    }

    /// A pool with one thread per active processor.
    public static func defaultThreads() -> Int { ProcessInfo.processInfo.activeProcessorCount }

    deinit {
        shared.stop.store(true, ordering: .sequentiallyConsistent)
        shared.generation.add(1, ordering: .sequentiallyConsistent)
        shared.lock.lock()
        shared.lock.broadcast()
        shared.lock.unlock()
    }

    /// Calls `body` on consecutive sub-ranges covering `0..<count`, on all the pool's
    /// threads, and returns when all are done.
    ///
    /// - Parameters:
    ///   - count: number of indices.
    ///   - minChunk: the smallest range worth handing to a thread (default 1).
    ///   - body: work for one sub-range. It runs concurrently on several threads, so it
    ///     must only write to disjoint memory for disjoint ranges.
    public func parallelFor(count: Int, minChunk: Int = 1, _ body: (Range<Int>) -> Void) {
        guard count > 0 else { return }
        // Aim for ~4 chunks per thread so a preempted thread does not stall the loop.
        let chunk = max(minChunk, (count + 4 * threads - 1) / (4 * threads), 1)
        if threads == 1 || count <= chunk || !shared.busy.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged {
            body(0..<count)
            return
        }
        withoutActuallyEscaping(body) { escapable in
            let job = Job(body: escapable, count: count, chunk: chunk)
            shared.job = job
            shared.pending.store(threads - 1, ordering: .relaxed)
            // Publish the job, then wake sleepers (see workerLoop for the handshake).
            shared.generation.add(1, ordering: .sequentiallyConsistent)
            if shared.sleepers.load(ordering: .sequentiallyConsistent) > 0 {
                shared.lock.lock()
                shared.lock.broadcast()
                shared.lock.unlock()
            }
            job.run()
            // Wait for the workers to leave the job (they may still be between chunks).
            var spins = 0
            while shared.pending.load(ordering: .acquiring) > 0 {
                spins += 1
                if spins > 1 << 16 { sched_yield() } else { spinPause() }
            }
            shared.job = nil
        }
        shared.busy.store(false, ordering: .releasing)
    }

    /// One parallel loop: an atomic cursor handing out chunks of `0..<count`.
    final class Job: @unchecked Sendable {
        let body: (Range<Int>) -> Void
        let count: Int
        let chunk: Int
        let next = Atomic<Int>(0)

        init(body: @escaping (Range<Int>) -> Void, count: Int, chunk: Int) {
            self.body = body; self.count = count; self.chunk = chunk
        }

        func run() {
            while true {
                let start = next.add(chunk, ordering: .relaxed).oldValue
                if start >= count { return }
                body(start..<min(count, start + chunk))
            }
        }
    }

    final class Shared: @unchecked Sendable {
        let generation = Atomic<Int>(0)
        let pending = Atomic<Int>(0)
        let sleepers = Atomic<Int>(0)
        let busy = Atomic<Bool>(false)
        let stop = Atomic<Bool>(false)
        let lock = NSCondition()
        // Written by the dispatching thread before the generation bump (release), read
        // by workers after seeing the new generation (acquire).
        var job: Job?

        func workerLoop(index: Int) {
            var seen = 0
            while true {
                // Spin a little for the next job; then sleep.
                var spins = 0
                while generation.load(ordering: .acquiring) == seen && spins < 20_000 {
                    spinPause()
                    spins += 1
                }
                if generation.load(ordering: .acquiring) == seen {
                    lock.lock()
                    // Announce the sleep before the final check: a dispatcher bumps the
                    // generation before reading `sleepers`, so either it sees us and
                    // broadcasts under the lock, or we see its bump here.
                    sleepers.add(1, ordering: .sequentiallyConsistent)
                    while generation.load(ordering: .sequentiallyConsistent) == seen {
                        lock.wait()
                    }
                    sleepers.subtract(1, ordering: .sequentiallyConsistent)
                    lock.unlock()
                }
                seen = generation.load(ordering: .acquiring)
                if stop.load(ordering: .acquiring) { return }
                if let job = job {
                    job.run()
                }
                pending.subtract(1, ordering: .releasing)
            }
        }
    }
}

/// One step of a spin-wait loop. (x86's `pause` would be the polite hint, but Swift
/// cannot call `_mm_pause`: it is a clang builtin without a body to import. The loops
/// around this re-load an atomic each time, which keeps them from being optimized away.)
@inline(__always)
func spinPause() {}
