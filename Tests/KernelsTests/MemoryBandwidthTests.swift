import Foundation
import Testing

@testable import Kernels

/// The read loop behind the memory read ceiling (`MemoryBandwidth`, MemoryBandwidth.swift)
/// that `leap-ref bench` and KernelBench print.
@Suite struct MemoryBandwidthTests {
    /// The loop sums every float it is given, in the same order with or without
    /// prefetching, and prefetching past the end of the buffer (the last 256 bytes prefetch
    /// up to 4 KiB beyond it) neither faults nor changes the sum.
    @Test func sumsEveryFloatWithOrWithoutPrefetching() {
        let count = 64 * 37
        let values = UnsafeMutablePointer<Float>.allocate(capacity: count)
        defer { values.deallocate() }
        var expected = 0.0
        for i in 0..<count {
            values[i] = Float(i % 97) - 48  // small integers: every partial sum is exact
            expected += Double(values[i])
        }
        let p = UnsafeRawPointer(values)
        let plain = MemoryBandwidth.sumFloats(p, count: count)
        #expect(Double(plain) == expected)
        for distance in [64, 2048, 4096] {
            let prefetched = MemoryBandwidth.sumFloats(p, count: count, prefetchDistance: distance)
            #expect(prefetched.bitPattern == plain.bitPattern, "prefetching \(distance) bytes ahead")
        }
        // A count under one 64-float step reads nothing.
        #expect(MemoryBandwidth.sumFloats(p, count: 63, prefetchDistance: 2048) == 0)
    }

    /// A read pass over the pool's threads sums every float of its chunks, on one thread
    /// and on two, with prefetching and without.
    @Test func aReadPassSumsEveryChunk() {
        let count = 64 * MemoryBandwidth.readChunks * 3
        let values = UnsafeMutablePointer<Float>.allocate(capacity: count)
        defer { values.deallocate() }
        for i in 0..<count { values[i] = Float(i % 5) }  // each chunk's and the total's sums exact
        let expected = Float((0..<count).reduce(0) { $0 + $1 % 5 })
        for threads in [1, 2] {
            let pool = ThreadPool(threads: threads)
            for distance in [0, InterleavedRows.prefetchDistance] {
                let sum = MemoryBandwidth.readPass(values, count: count, pool: pool, prefetchDistance: distance)
                #expect(sum == expected, "\(threads) threads, prefetch \(distance)")
            }
        }
    }

    /// The rate is the bytes of one pass over the best timed pass: the page-touching first
    /// pass is not timed, the fastest of `runs` passes counts, and the buffer is whole
    /// chunks. A clock that the test advances stands in for the wall clock.
    @Test func theRateIsTheBytesOverTheBestTimedPass() {
        for threads in [1, 2] {
            let pool = ThreadPool(threads: threads)
            // Passes that take 5, 2 and 3 ms: the clock is read before and after each.
            var readings: [UInt64] = [0, 5_000_000, 10_000_000, 12_000_000, 20_000_000, 23_000_000]
            let rate = MemoryBandwidth.measureRead(bytes: 4 << 20, pool: pool, runs: 3, prefetchDistance: 0) {
                readings.removeFirst()
            }
            #expect(readings.isEmpty, "the clock is read twice per timed pass, and for nothing else")
            #expect(rate == Double(4 << 20) / 0.002, "\(threads) threads")
        }
        // Sizes are cut to whole read passes, and never below one chunk of every thread's.
        #expect(MemoryBandwidth.readableCount(bytes: 4 << 20) == (4 << 20) / 4)
        #expect(MemoryBandwidth.readableCount(bytes: (4 << 20) + 100) == (4 << 20) / 4)
        #expect(MemoryBandwidth.readableCount(bytes: 1) == 64 * MemoryBandwidth.readChunks)
    }
}
