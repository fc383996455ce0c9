// A small persistent thread pool for the kernels.
//
// A decode step issues a few hundred matrix-vector products of tens of microseconds
// each, so handing work to other threads must cost well under a microsecond. Here:
//
// - Workers spin for a short while after each loop (a new loop is picked up within
//   ~100 ns), then sleep on a condition variable, so an idle pool costs nothing.
// - The calling thread works too. Work is handed out in chunks through an atomic
//   cursor, so a thread that is slow (preempted by another process on a shared machine)
//   simply takes fewer chunks.
// - A worker must *join* a loop before touching it, and the caller *closes* the loop
//   once every chunk is taken. The caller then waits only for workers that joined (and
//   are therefore running), never for one that is still asleep or descheduled: a late
//   worker finds the loop closed and goes back to waiting.
// - Nothing is allocated per loop.

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
    // @unchecked: the mutable state lives in `Shared`, made of atomics and of fields that
    // are only written while no worker can read them (see `Shared`).

    /// Number of threads taking part in a loop, the caller included.
    public let threads: Int

    private let shared: Shared

    /// Creates a pool of `threads` threads in all: `threads - 1` workers plus the caller.
    /// `threads` is clamped to at least 1.
    public init(threads: Int) {
        let n = max(1, threads)
        self.threads = n
        shared = Shared()
        for index in 1..<n {
            let shared = self.shared
            let thread = Thread { shared.workerLoop() }
            thread.name = "leap-ref.kernels.\(index)"
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    /// The cores this process is granted (``GrantedCores/count``: its affinity mask and
    /// CPU quota), the default for `threads`.
    public static var defaultThreads: Int { GrantedCores.count }

    deinit {
        // Workers hold `shared`, not the pool: tell them to exit.
        shared.stop.store(true, ordering: .sequentiallyConsistent)
        shared.generation.add(1, ordering: .sequentiallyConsistent)
        shared.lock.lock()
        shared.lock.broadcast()
        shared.lock.unlock()
    }

    /// Sends spinning workers to sleep now rather than after their usual spin. Call it
    /// before handing the CPUs to other threads (OpenBLAS's, for example), which spinning
    /// workers would otherwise slow down. The next `parallelFor` wakes them.
    public func sleepWorkers() {
        shared.sleepRequest.store(true, ordering: .releasing)
    }

    /// Calls `body` on consecutive sub-ranges covering `0..<count`, on the pool's
    /// threads and the calling one, and returns when all are done.
    ///
    /// - Parameters:
    ///   - count: number of indices.
    ///   - minChunk: the smallest range worth handing to a thread (default 1).
    ///   - chunksPerThread: how many sub-ranges per thread the indices are cut into
    ///     (default 4, so that a preempted thread holds up only a small part of the loop;
    ///     fewer for work whose sub-ranges each restart a memory stream).
    ///   - body: work for one sub-range. It runs concurrently on several threads, so it
    ///     must only write to disjoint memory for disjoint ranges.
    public func parallelFor(count: Int, minChunk: Int = 1, chunksPerThread: Int = 4, _ body: (Range<Int>) -> Void) {
        guard count > 0 else { return }
        let pieces = max(1, chunksPerThread) * threads
        let chunk = max(minChunk, (count + pieces - 1) / pieces, 1)
        if threads == 1 || count <= chunk
            || !shared.busy.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged
        {
            body(0..<count)
            return
        }
        withoutActuallyEscaping(body) { escapable in
            // No worker is inside a loop now (the last one was closed and drained), so
            // these plain fields can be written; opening the state publishes them.
            shared.body = escapable
            shared.count = count
            shared.chunk = chunk
            shared.next.store(0, ordering: .relaxed)
            shared.state.store(0, ordering: .releasing)
            shared.sleepRequest.store(false, ordering: .relaxed)
            // Announce the loop, then wake sleepers (see workerLoop for the handshake).
            shared.generation.add(1, ordering: .sequentiallyConsistent)
            if shared.sleepers.load(ordering: .sequentiallyConsistent) > 0 {
                shared.lock.lock()
                shared.lock.broadcast()
                shared.lock.unlock()
            }
            shared.runChunks()
            // Every chunk is taken: close the loop to latecomers, then wait for the
            // workers that joined to finish their last chunk.
            shared.state.bitwiseOr(Shared.closed, ordering: .acquiringAndReleasing)
            var spins = 0
            while shared.state.load(ordering: .acquiring) != Shared.closed {
                spins += 1
                if spins > 4096 { sched_yield() }
            }
            shared.body = nil
        }
        shared.busy.store(false, ordering: .releasing)
    }

    final class Shared: @unchecked Sendable {
        static let closed = 1 << 40

        let generation = Atomic<Int>(0)
        /// Number of workers inside the current loop, plus `closed` once the caller
        /// has closed it.
        let state = Atomic<Int>(Shared.closed)
        let next = Atomic<Int>(0)
        let sleepers = Atomic<Int>(0)
        let busy = Atomic<Bool>(false)
        let stop = Atomic<Bool>(false)
        let sleepRequest = Atomic<Bool>(false)
        let lock = NSCondition()

        // The current loop. Written by the caller only while `state` is closed with no
        // worker inside; read by workers only after joining (acquire on `state`).
        var body: ((Range<Int>) -> Void)?
        var count = 0
        var chunk = 1

        func runChunks() {
            guard let body else { return }
            while true {
                let start = next.add(chunk, ordering: .relaxed).oldValue
                if start >= count { return }
                body(start..<min(count, start + chunk))
            }
        }

        /// Enters the current loop unless it is closed.
        func join() -> Bool {
            var s = state.load(ordering: .relaxed)
            while s & Shared.closed == 0 {
                let (exchanged, original) = state.compareExchange(expected: s, desired: s + 1, ordering: .acquiring)
                if exchanged { return true }
                s = original
            }
            return false
        }

        func workerLoop() {
            // The generation counter starts at 0: a loop announced before this thread got
            // here has already bumped it, and must still be seen as new.
            var seen = 0
            while true {
                // Spin a little for the next loop; then sleep.
                var spins = 0
                while generation.load(ordering: .acquiring) == seen && spins < 50_000 {
                    spins += 1
                    if spins & 255 == 0 {
                        if sleepRequest.load(ordering: .relaxed) { break }
                        // Past the first few microseconds, let other runnable threads
                        // have the core (a shared machine, or more threads than cores).
                        if spins > 16_384 { sched_yield() }
                    }
                }
                if generation.load(ordering: .acquiring) == seen {
                    lock.lock()
                    // Announce the sleep before the last check: the caller bumps the
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
                if join() {
                    runChunks()
                    state.subtract(1, ordering: .releasing)
                }
            }
        }
    }
}
