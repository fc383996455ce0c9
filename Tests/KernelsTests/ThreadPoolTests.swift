import Foundation
import Synchronization
import Testing

@testable import Kernels

@Suite struct ThreadPoolTests {
    /// Every index is visited exactly once, over many consecutive loops (which exercises
    /// the spin -> sleep -> wake hand-off), for several thread counts and sizes.
    @Test(arguments: [1, 2, 3, 5])
    func everyIndexRunsExactlyOnce(_ threads: Int) {
        let pool = ThreadPool(threads: threads)
        #expect(pool.threads == threads)
        let counts = UnsafeMutableBufferPointer<Int>.allocate(capacity: 1000)
        defer { counts.deallocate() }
        let hits = Atomic<Int>(0)
        for (iteration, n) in [0, 1, 2, 7, 64, 999, 1000].enumerated() {
            for round in 0..<40 {
                counts.initialize(repeating: 0)
                hits.store(0, ordering: .relaxed)
                pool.parallelFor(count: n) { range in
                    for i in range { counts[i] += 1 }
                    hits.add(range.count, ordering: .relaxed)
                }
                #expect(hits.load(ordering: .relaxed) == n)
                #expect(counts[0..<n].allSatisfy { $0 == 1 }, "iteration \(iteration) round \(round) n \(n)")
                if round == 20 { Thread.sleep(forTimeInterval: 0.002) }  // let workers fall asleep
            }
        }
    }

    /// `chunksPerThread` cuts the indices into that many sub-ranges per thread (a
    /// matvec's one contiguous run per thread), each index still visited exactly once; no
    /// sub-range is shorter than `minChunk` but the last.
    @Test(arguments: [1, 2, 4, 0])
    func chunksPerThreadSetsTheSubRanges(_ perThread: Int) {
        let pool = ThreadPool(threads: 2)
        let lock = NSLock()
        for n in [1, 2, 9, 100, 1001] {
            for minChunk in [1, 30] {
                var ranges: [Range<Int>] = []
                pool.parallelFor(count: n, minChunk: minChunk, chunksPerThread: perThread) { range in
                    lock.withLock { ranges.append(range) }
                }
                ranges.sort { $0.lowerBound < $1.lowerBound }
                #expect(ranges.first?.lowerBound == 0 && ranges.last?.upperBound == n, "n \(n)")
                #expect(zip(ranges, ranges.dropFirst()).allSatisfy { $0.upperBound == $1.lowerBound }, "n \(n): \(ranges)")
                // The pieces: ceil(n / (perThread x 2)) indices each (perThread 0 counts as 1),
                // at least minChunk, and the whole loop on the caller when one piece covers it.
                let pieces = max(1, perThread) * 2
                let chunk = max(minChunk, (n + pieces - 1) / pieces)
                let expected = chunk >= n ? 1 : (n + chunk - 1) / chunk
                #expect(ranges.count == expected, "n \(n), minChunk \(minChunk): \(ranges)")
                #expect(ranges.dropLast().allSatisfy { $0.count == chunk }, "n \(n), minChunk \(minChunk): \(ranges)")
            }
        }
    }

    @Test func usesSeveralThreadsAndSurvivesNestedCalls() {
        let pool = ThreadPool(threads: 2)
        let inner = Atomic<Int>(0)
        let chunks = Atomic<Int>(0)
        let threadIDs = Mutex<Set<UInt>>([])
        pool.parallelFor(count: 8) { range in
            // A nested call on a busy pool runs serially on this thread.
            pool.parallelFor(count: 10) { r in inner.add(r.count, ordering: .relaxed) }
            chunks.add(1, ordering: .relaxed)
            let id = UInt(bitPattern: ObjectIdentifier(Thread.current).hashValue)
            threadIDs.withLock { _ = $0.insert(id) }
            // Hold this chunk until the other thread has joined (it may be asleep, or
            // descheduled on a busy machine), at most 5 s.
            let deadline = Date().addingTimeInterval(5)
            while threadIDs.withLock({ $0.count }) < 2 && Date() < deadline { Thread.sleep(forTimeInterval: 0.0005) }
        }
        #expect(chunks.load(ordering: .relaxed) >= 2)
        #expect(inner.load(ordering: .relaxed) == 10 * chunks.load(ordering: .relaxed))
        #expect(threadIDs.withLock { $0.count } == 2)
    }

    @Test func concurrentCallersFromOtherThreadsAreSafe() async {
        let pool = ThreadPool(threads: 2)
        let total = Counter()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    for _ in 0..<50 {
                        pool.parallelFor(count: 100) { r in total.value.add(r.count, ordering: .relaxed) }
                    }
                }
            }
        }
        #expect(total.value.load(ordering: .relaxed) == 4 * 50 * 100)
    }
}

final class Counter: Sendable {
    let value = Atomic<Int>(0)
}

@Suite struct ThreadPoolSleepTests {
    /// After `sleepWorkers`, the next loops still run every index once, on both threads.
    @Test func loopsAfterSleepWorkers() {
        let pool = ThreadPool(threads: 2)
        let total = Atomic<Int>(0)
        for round in 0..<20 {
            pool.sleepWorkers()
            if round % 5 == 0 { Thread.sleep(forTimeInterval: 0.001) }
            pool.parallelFor(count: 64) { r in total.add(r.count, ordering: .relaxed) }
        }
        #expect(total.load(ordering: .relaxed) == 20 * 64)
    }
}
