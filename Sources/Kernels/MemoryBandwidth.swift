// The machine's memory read bandwidth: the ceiling a decode step runs against, since each
// decoded token reads every weight it uses once. `KernelBench` prints it beside the
// kernels' speeds, and `leap-ref bench` beside the bandwidth its tg rate implies.
//
// The read loop prefetches ahead as decode's kernels do (`InterleavedRows.prefetchDistance`):
// on this project's AVX-512 machine the hardware prefetchers alone keep too few lines in
// flight, and a plain loop reads 15-20% slower (2 threads: 32-33 against 37-40 GB/s in
// one run), so a ceiling measured without it is one the kernels exceed.

import CPUHints
import Foundation

/// Measures how fast the machine reads memory.
public enum MemoryBandwidth {
    /// Bytes per second that the pool's threads read from a buffer of `bytes` (larger
    /// than the caches: 256 MiB by default) in ``readPass(_:count:pool:prefetchDistance:)``;
    /// wall time (`clock`, nanoseconds), best of `runs` passes after one that touches every
    /// page. The buffer is in large pages, as the weights' decode copies are
    /// (``LargePages/allocate(byteCount:)``). `prefetchDistance` 0 measures the plain loop
    /// (the hardware prefetchers only).
    public static func measureRead(
        bytes: Int = 256 << 20, pool: ThreadPool, runs: Int = 3, prefetchDistance: Int = InterleavedRows.prefetchDistance,
        clock: () -> UInt64 = { DispatchTime.now().uptimeNanoseconds }
    ) -> Double {
        let count = readableCount(bytes: bytes)
        let memory = LargePages.allocate(byteCount: 4 * count)
        let buffer = memory.pointer.initializeMemory(as: Float.self, repeating: 1, count: count)
        // The first pass brings every page in; only the passes after it are timed.
        _ = readPass(buffer, count: count, pool: pool, prefetchDistance: prefetchDistance)
        var best = Double.infinity
        for _ in 0..<max(1, runs) {
            let start = clock()
            _ = readPass(buffer, count: count, pool: pool, prefetchDistance: prefetchDistance)
            best = min(best, Double(clock() - start) / 1e9)
        }
        return Double(4 * count) / best
    }

    /// The floats a measurement of `bytes` reads: whole read passes
    /// (``readPass(_:count:pool:prefetchDistance:)``), at least one `64 × readChunks` floats.
    static func readableCount(bytes: Int) -> Int {
        max(64 * readChunks, bytes / 4 / (64 * readChunks) * (64 * readChunks))
    }

    /// The chunks one ``readPass(_:count:pool:prefetchDistance:)`` cuts its buffer into.
    public static let readChunks = 64

    /// One read of `count` floats at `buffer` (a multiple of `64 * readChunks`) on the
    /// pool's threads: `readChunks` equal chunks, taken in order, each summed by
    /// ``sumFloats(_:count:prefetchDistance:)``. Returns the sum of the chunks' sums (so
    /// that the reads cannot be optimized away). The pass behind ``measureRead`` and
    /// KernelBench's bandwidth table.
    public static func readPass(_ buffer: UnsafePointer<Float>, count: Int, pool: ThreadPool, prefetchDistance: Int) -> Float {
        precondition(count % (64 * readChunks) == 0, "readPass: \(count) floats are not whole chunks")
        let per = count / readChunks
        return withUnsafeTemporaryAllocation(of: Float.self, capacity: readChunks) { partial in
            pool.parallelFor(count: readChunks) { range in
                for c in range {
                    partial[c] = sumFloats(UnsafeRawPointer(buffer + c * per), count: per, prefetchDistance: prefetchDistance)
                }
            }
            return partial.reduce(0, +)
        }
    }

    /// The sum of `count` floats (a multiple of 64) at `p`, with eight independent 8-lane
    /// accumulators: a read loop that memory, not arithmetic, limits. With a
    /// `prefetchDistance` above 0 each 256 bytes also prefetch the 256 that many bytes
    /// ahead (a prefetch never faults, so it may run past the buffer's end).
    @inline(never)
    public static func sumFloats(_ p: UnsafeRawPointer, count: Int, prefetchDistance: Int = 0) -> Float {
        var a0 = SIMD8<Float>(), a1 = SIMD8<Float>(), a2 = SIMD8<Float>(), a3 = SIMD8<Float>()
        var a4 = SIMD8<Float>(), a5 = SIMD8<Float>(), a6 = SIMD8<Float>(), a7 = SIMD8<Float>()
        var i = 0
        while i + 64 <= count {
            let o = 4 * i
            if prefetchDistance > 0 {
                let ahead = p + o + prefetchDistance
                leap_prefetch(ahead)
                leap_prefetch(ahead + 64)
                leap_prefetch(ahead + 128)
                leap_prefetch(ahead + 192)
            }
            a0 += p.loadUnaligned(fromByteOffset: o, as: SIMD8<Float>.self)
            a1 += p.loadUnaligned(fromByteOffset: o + 32, as: SIMD8<Float>.self)
            a2 += p.loadUnaligned(fromByteOffset: o + 64, as: SIMD8<Float>.self)
            a3 += p.loadUnaligned(fromByteOffset: o + 96, as: SIMD8<Float>.self)
            a4 += p.loadUnaligned(fromByteOffset: o + 128, as: SIMD8<Float>.self)
            a5 += p.loadUnaligned(fromByteOffset: o + 160, as: SIMD8<Float>.self)
            a6 += p.loadUnaligned(fromByteOffset: o + 192, as: SIMD8<Float>.self)
            a7 += p.loadUnaligned(fromByteOffset: o + 224, as: SIMD8<Float>.self)
            i += 64
        }
        return (((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))).sum()
    }
}
