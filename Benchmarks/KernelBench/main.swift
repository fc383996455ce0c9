// KernelBench: throughput of the Kernels module, printed as markdown tables.
//
//     swift run -c release KernelBench [--quick] [--types q4_0,q6_K] [--seconds 0.3]
//     KernelBench --count CALLS [--types q4_K] [--shape 576x1536] [--batch B] [--interleaved]
//
// Measures, best of several timed runs each:
//   1. the machine's memory read bandwidth (SIMD sum over a 512 MiB buffer, 1 and 2
//      threads; prefetching ahead as the decode kernels do, and without): the ceiling for
//      a decode step that streams every weight once;
//   2. matvec GB/s of weight bytes per type and shape, on 1 and 2 threads, "hot" (the same
//      matrix again and again, cache-resident when it fits) and "cold" (cycling through
//      copies totalling >= 256 MiB, as a decode step that touches every layer does); for
//      Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q4_K on AVX2 also through decode's interleaved copy
//      (`WeightMatrix.interleavedForDecode()`), which is what the engine reads;
//   3. dequantization GB/s (bytes of blocks read) per type;
//   4. thread pool dispatch latency against DispatchQueue.concurrentPerform;
//   5. sgemm GFLOP/s, and both prefill paths per quantized type: dequantize + sgemm and
//      the 8-bit integer matmul;
//   6. decode attention (`CausalAttention.queryGroup`, one thread): one decoded token's
//      query heads of a KV group over blocks of cached keys and values, for the group
//      shapes of SmolLM2, LFM2 and Gemma 3, F32 and F16, hot (one block again and again)
//      and cold (cycling through 189 MB, SmolLM2-135M's F32 cache at llama-bench's -d
//      4096). `--attention` runs this section only.
//
// `--count CALLS` times nothing: it runs CALLS single-thread matvecs of one shape per type
// (B activation rows at once with `--batch B`, through decode's interleaved copy with
// `--interleaved`) inside `countedMatvecs`, for instruction counts that do not depend on
// the machine's load (scripts/kernel-instructions.sh runs it under callgrind).

import Dispatch
import Foundation
import GGUF
import Kernels

// MARK: - Options

var quick = false
var seconds = 0.25
var onlyTypes: [GGMLType]? = nil
var countCalls: Int? = nil
var countShape = (rows: 576, cols: 1536)
var countBatch = 1
var countInterleaved = false
var attentionOnly = false
var args = CommandLine.arguments.dropFirst()
while let a = args.popFirst() {
    switch a {
    case "--quick":
        quick = true
        seconds = 0.08
    case "--wall": break
    case "--seconds": seconds = Double(args.popFirst() ?? "") ?? seconds
    case "--types": onlyTypes = (args.popFirst() ?? "").split(separator: ",").compactMap { GGMLType(name: String($0)) }
    case "--count": countCalls = Int(args.popFirst() ?? "")
    case "--shape":
        let parts = (args.popFirst() ?? "").split(separator: "x").compactMap { Int($0) }
        if parts.count == 2 { countShape = (parts[0], parts[1]) }
    case "--batch": countBatch = max(1, Int(args.popFirst() ?? "") ?? 1)
    case "--interleaved": countInterleaved = true
    case "--attention": attentionOnly = true
    default:
        print("usage: KernelBench [--quick] [--wall] [--seconds S] [--types q4_0,q6_K,...] [--attention]")
        print("       KernelBench --count CALLS [--types ...] [--shape ROWSxCOLS] [--batch B] [--interleaved]")
        exit(2)
    }
}
let types = onlyTypes ?? GGMLType.kernelTypes

// MARK: - 0. Instruction counts (--count)

/// `calls` matvecs of `m` with activation rows `0..<batch` of `acts`, one thread. Not
/// inlined: callgrind collects inside this function only (`--toggle-collect`).
@inline(never)
func countedMatvecs(_ m: WeightMatrix, _ acts: QuantizedActivations, batch: Int, calls: Int, _ y: UnsafeMutablePointer<Float>) {
    for _ in 0..<calls {
        if batch == 1 {
            m.matvec(acts, into: y)
        } else {
            m.matvec(acts, rows: 0..<batch, into: y)
        }
    }
}

if let calls = countCalls {
    let (rows, cols) = countShape
    for type in types {
        guard type.rowBytes(count: cols) != nil else {
            print("\(type): \(cols) columns are not whole blocks")
            continue
        }
        let w = makeWeights(type, rows: rows, cols: cols, seed: 1)
        var m = try! WeightMatrix(type: type, rows: rows, cols: cols, data: w)
        if countInterleaved { m = m.interleavedForDecode() }
        let x = (0..<(countBatch * cols)).map { Float(sin(Double($0))) }
        let acts = QuantizedActivations(capacity: countBatch * cols)
        acts.quantizeRows(x, rows: countBatch, cols: cols, keepingFloats: true)
        let y = UnsafeMutablePointer<Float>.allocate(capacity: countBatch * rows)
        countedMatvecs(m, acts, batch: countBatch, calls: calls, y)
        var check: Float = 0
        for k in 0..<(countBatch * rows) { check += y[k] }
        let layout = countInterleaved ? " interleaved" : ""
        print("\(type) \(rows)x\(cols) batch \(countBatch)\(layout): \(calls) calls, sum of results \(check)")
        y.deallocate()
        w.deallocate()
    }
    exit(0)
}
let shapes: [(rows: Int, cols: Int)] = [(576, 1536), (1536, 576), (1024, 4608), (49152, 576)]

// MARK: - Timing

@inline(never)
func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

/// Busy-waits for `ns` nanoseconds (a stand-in for a chunk of kernel work).
@inline(never)
func busyWork(_ ns: UInt64) {
    let start = now()
    while now() - start < ns {}
}

/// CPU time consumed by the calling thread, in nanoseconds.
@inline(never)
func threadCPUTime() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// Runs `body` repeatedly for about `seconds`, in `runs` separate timed runs, and returns
/// the best time per call in seconds. With `cpuTime`, the time is the calling thread's
/// CPU time rather than wall time: for single-threaded work on a machine shared with
/// other processes, this leaves out the time the thread spent preempted.
@MainActor func bestTime(runs: Int = 5, seconds: Double = seconds, cpuTime: Bool = false, _ body: () -> Void) -> Double {
    body()  // warm up
    var best = Double.infinity
    for _ in 0..<runs {
        var calls = 0
        let start = now(), cpuStart = threadCPUTime()
        var elapsed: UInt64 = 0
        repeat {
            body()
            calls += 1
            elapsed = now() - start
        } while Double(elapsed) < seconds * 1e9 / Double(runs)
        let measured = cpuTime ? threadCPUTime() - cpuStart : elapsed
        best = min(best, Double(measured) / 1e9 / Double(calls))
    }
    return best
}

/// Single-threaded measurements use CPU time unless `--wall` is given.
let singleThreadCPUTime = !CommandLine.arguments.contains("--wall")

func fmt(_ v: Double, _ digits: Int = 1) -> String { String(format: "%.\(digits)f", v) }

let pools = [1: ThreadPool(threads: 1), 2: ThreadPool(threads: 2)]

// MARK: - Machine

func loadAverage() -> String {
    (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(separator: " ") ?? "?"
}

print("# KernelBench")
print("")
#if arch(x86_64)
let arch = "x86_64"
#else
let arch = "arm64"
#endif
print("- \(ProcessInfo.processInfo.activeProcessorCount) cores, \(arch), load average before: \(loadAverage())")
print("- kernels: \(KernelBuild.description)")
print(
    "- timing: best of several runs; single-thread numbers use \(singleThreadCPUTime ? "the thread's CPU time (time preempted by other processes left out; --wall for wall time)" : "wall time"), two-thread numbers wall time"
)
print("")

// MARK: - 6. Decode attention (defined here, run here with --attention, else at the end)

/// `x`, hidden from the optimizer (it depends on the command line).
func opaque(_ x: Int) -> Int { CommandLine.arguments.count > 1000 ? x + 16 : x }

/// One thread's time for the query heads of a KV group over blocks of
/// `CausalAttention.decodeKeyBlock` cached keys and values, per key, for the group shapes of
/// SmolLM2-135M (3 heads of 64), the LFM2-350M shape (2 of 64), the LFM2-MoE shape (4 of 64)
/// and Gemma 3 270M (4 of 256): hot (the same block again and again, in the core's cache)
/// and cold (cycling through blocks totalling 189 MB of F32, SmolLM2's cache at -d 4096:
/// 30 layers x 3 KV heads x 4,096 positions), F32 and F16 rows, and F16 widened into an F32
/// copy first. Prints ns per key (for the whole group) and GB/s of cache bytes.
@MainActor func decodeAttention() {
    print("## Decode attention (one thread; the query heads of one KV group over blocks of \(CausalAttention.decodeKeyBlock) keys)")
    print("")
    print("| heads x width | cache | hot ns/key | hot GB/s | cold ns/key | cold GB/s |")
    print("|---|---|---:|---:|---:|---:|")
    for (heads0, width) in [(3, 64), (2, 64), (4, 64), (4, 256)] {
        // The shape through `opaque`, so that the kernel is compiled for run-time sizes, as
        // the engine compiles it (constants here let the compiler specialize the inlined
        // kernel for them, 1.3-1.45x faster than the engine's code).
        decodeAttention(heads: opaque(heads0), headDim: opaque(width))
    }
    print("")
}

@MainActor func decodeAttention(heads: Int, headDim hd: Int) {
    let keys = CausalAttention.decodeKeyBlock, blocks = 189_000_000 / (2 * keys * hd * 4)
    var state: UInt64 = 7
    func random() -> Float {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return Float(Int32(truncatingIfNeeded: state >> 33)) / Float(Int32.max)
    }
    let q = UnsafeMutablePointer<Float>.allocate(capacity: heads * hd)
    for i in 0..<(heads * hd) { q[i] = random() }
    let scores = UnsafeMutablePointer<Float>.allocate(capacity: heads * keys)
    let out = UnsafeMutablePointer<Float>.allocate(capacity: heads * hd)
    let floats = 2 * blocks * keys * hd  // keys and values of every block
    let f32 = UnsafeMutablePointer<Float>.allocate(capacity: floats)
    for i in 0..<floats { f32[i] = random() }
    let f16 = UnsafeMutableRawPointer.allocate(byteCount: 2 * floats, alignment: 64)
    GGMLType.f16.quantizeRow(f32, into: f16, count: floats)
    let copy = UnsafeMutablePointer<Float>.allocate(capacity: 2 * keys * hd)
    for (name, bytesPerValue) in [("f32", 4), ("f16", 2), ("f16 widened into an F32 copy first", 2)] {
        var next = 0
        func run(_ b: Int) {
            let k = b * 2 * keys * hd, v = k + keys * hd
            let record: (Int, Float, Float) -> Void = { _, _, _ in }
            if name.hasSuffix("first") {
                GGMLType.f16.dequantizeRow(f16 + 2 * k, into: copy, count: 2 * keys * hd)
                CausalAttention.queryGroup(
                    q, heads: heads, keys: FloatRows(copy, width: hd), values: FloatRows(copy + keys * hd, width: hd), span: keys,
                    headDim: hd, scale: 0.125, scores: scores, scoreStride: keys, out: out, outStride: hd, record: record)
            } else if bytesPerValue == 4 {
                CausalAttention.queryGroup(
                    q, heads: heads, keys: FloatRows(f32 + k, width: hd), values: FloatRows(f32 + v, width: hd), span: keys, headDim: hd,
                    scale: 0.125, scores: scores, scoreStride: keys, out: out, outStride: hd, record: record)
            } else {
                CausalAttention.queryGroup(
                    q, heads: heads, keys: HalfRows(f16 + 2 * k, width: hd), values: HalfRows(f16 + 2 * v, width: hd), span: keys,
                    headDim: hd, scale: 0.125, scores: scores, scoreStride: keys, out: out, outStride: hd, record: record)
            }
        }
        let hot = bestTime(cpuTime: singleThreadCPUTime) { run(0) }
        let cold = bestTime(cpuTime: singleThreadCPUTime) {
            run(next)
            next = (next + 1) % blocks
        }
        let blockBytes = Double(2 * keys * hd * bytesPerValue)
        print(
            "| \(heads) x \(hd) | \(name) | \(fmt(hot / Double(keys) * 1e9, 2)) | \(fmt(blockBytes / hot / 1e9)) | "
                + "\(fmt(cold / Double(keys) * 1e9, 2)) | \(fmt(blockBytes / cold / 1e9)) |")
    }
    for p in [q, scores, out, f32, copy] { p.deallocate() }
    f16.deallocate()
}

if attentionOnly {
    decodeAttention()
    exit(0)
}

// MARK: - 1. Memory bandwidth

/// GB/s that `threads` threads read from a buffer of `bytes` in `MemoryBandwidth.readPass`,
/// prefetching `prefetchDistance` bytes ahead (0: the hardware prefetchers alone).
@MainActor func memoryBandwidth(threads: Int, bytes: Int, largePages: Bool, prefetchDistance: Int) -> Double {
    let count = bytes / 4 / (64 * MemoryBandwidth.readChunks) * (64 * MemoryBandwidth.readChunks)
    let memory = largePages ? LargePages.allocate(byteCount: 4 * count) : nil
    let raw = memory?.pointer ?? UnsafeMutableRawPointer.allocate(byteCount: 4 * count, alignment: 4096)
    defer { if memory == nil { raw.deallocate() } }
    let buffer = raw.bindMemory(to: Float.self, capacity: count)
    // Touch every page first (and give it non-zero content).
    for i in stride(from: 0, to: count, by: 1024) { buffer[i] = 1 }
    let pool = pools[threads]!
    let t = bestTime(runs: 3, seconds: quick ? 0.5 : 2, cpuTime: threads == 1 && singleThreadCPUTime) {
        _ = MemoryBandwidth.readPass(buffer, count: count, pool: pool, prefetchDistance: prefetchDistance)
    }
    return Double(4 * count) / t / 1e9
}

let bandwidthBytes = quick ? 128 << 20 : 512 << 20
// The ceiling (bw1, bw2) reads as the kernels do: large pages, prefetching ahead.
let ahead = InterleavedRows.prefetchDistance
let bw1 = memoryBandwidth(threads: 1, bytes: bandwidthBytes, largePages: true, prefetchDistance: ahead)
let bw2 = memoryBandwidth(threads: 2, bytes: bandwidthBytes, largePages: true, prefetchDistance: ahead)
let plain1 = memoryBandwidth(threads: 1, bytes: bandwidthBytes, largePages: true, prefetchDistance: 0)
let plain2 = memoryBandwidth(threads: 2, bytes: bandwidthBytes, largePages: true, prefetchDistance: 0)
let smallPages1 = memoryBandwidth(threads: 1, bytes: bandwidthBytes, largePages: false, prefetchDistance: 0)
let smallPages2 = memoryBandwidth(threads: 2, bytes: bandwidthBytes, largePages: false, prefetchDistance: 0)
print("## Memory read bandwidth (SIMD sum over \(bandwidthBytes >> 20) MiB)")
print("")
let hugePages = LargePages.areRequested ? "requested" : "not available"
print("Large pages: LargePages.allocate, where the weights' decode copies live (huge pages \(hugePages));")
print("4 KiB pages: an ordinary allocation. Prefetched: \(ahead) bytes ahead, as the decode kernels")
print("read; the first column is the ceiling the cold matvec columns below are divided by.")
print("")
print("| threads | GB/s, large pages, prefetched | GB/s, large pages | GB/s, 4 KiB pages |")
print("|---:|---:|---:|---:|")
print("| 1 | \(fmt(bw1)) | \(fmt(plain1)) | \(fmt(smallPages1)) |")
print("| 2 | \(fmt(bw2)) | \(fmt(plain2)) | \(fmt(smallPages2)) |")
print("")

// MARK: - Weights

/// Random weights of `type`, quantized from random floats (64 distinct rows, repeated).
func makeWeights(_ type: GGMLType, rows: Int, cols: Int, seed: UInt64) -> UnsafeMutableRawPointer {
    let rowBytes = type.rowBytes(count: cols)!
    let bytes = UnsafeMutableRawPointer.allocate(byteCount: rows * rowBytes, alignment: 64)
    var state = seed
    func next() -> UInt64 {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return state >> 11
    }
    let row = UnsafeMutablePointer<Float>.allocate(capacity: cols)
    defer { row.deallocate() }
    // Quantizing is slow-ish (the K-quants search their scales); make 64 distinct rows.
    let distinct = min(rows, 64)
    for r in 0..<distinct {
        for j in 0..<cols { row[j] = Float(Int(next() % 2001) - 1000) / 50_000 }
        type.quantizeRow(row, into: bytes + r * rowBytes, count: cols)
    }
    for r in distinct..<rows { (bytes + r * rowBytes).copyMemory(from: bytes + (r % distinct) * rowBytes, byteCount: rowBytes) }
    return bytes
}

// MARK: - 2. Matvec

print("## Matvec throughput (GB/s of weight bytes; hot = same matrix repeated, cold = cycling through >= 256 MiB of copies)")
print("")
print("| type | rows x cols | MiB | 1T hot | 2T hot | 1T cold | 2T cold | 1T cold / 1T bandwidth | 2T cold / 2T bandwidth |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
var summary: [(GGMLType, String, Double)] = []
for type in types {
    for shape in shapes {
        guard let rowBytes = type.rowBytes(count: shape.cols) else {
            print("| \(type) | \(shape.rows) x \(shape.cols) | | n/a: \(shape.cols) is not a multiple of \(type.blockSize) | | | | | |")
            continue
        }
        let matrixBytes = shape.rows * rowBytes
        let copies = max(2, (quick ? 64 << 20 : 256 << 20) / matrixBytes)
        let first = makeWeights(type, rows: shape.rows, cols: shape.cols, seed: 1)
        var buffers = [first]
        for _ in 1..<copies {
            let b = UnsafeMutableRawPointer.allocate(byteCount: matrixBytes, alignment: 64)
            b.copyMemory(from: first, byteCount: matrixBytes)
            buffers.append(b)
        }
        let stored = buffers.map { try! WeightMatrix(type: type, rows: shape.rows, cols: shape.cols, data: $0) }
        let x = (0..<shape.cols).map { Float(sin(Double($0))) }
        let acts = QuantizedActivations(capacity: shape.cols)
        acts.quantize(x)
        let y = UnsafeMutablePointer<Float>.allocate(capacity: shape.rows)
        // The row-major kernels, then (where `InterleavedRows.supports` the type) decode's interleaved copy.
        for interleaved in InterleavedRows.supports(type) ? [false, true] : [false] {
            let matrices = interleaved ? stored.map { $0.interleavedForDecode() } : stored
            var results: [Double] = []
            for cold in [false, true] {
                for threads in [1, 2] {
                    let pool = pools[threads]!
                    var k = 0
                    let t = bestTime(cpuTime: threads == 1 && singleThreadCPUTime) {
                        let m = cold ? matrices[k % matrices.count] : matrices[0]
                        k += 1
                        m.matvec(acts, into: y, pool: pool)
                    }
                    results.append(Double(matrixBytes) / t / 1e9)
                }
            }
            let shapeText = "\(shape.rows) x \(shape.cols)"
            print(
                "| \(type)\(interleaved ? " interleaved" : "") | \(shapeText) | \(fmt(Double(matrixBytes) / 1048576, 2)) | \(fmt(results[0])) | \(fmt(results[1])) | \(fmt(results[2])) | \(fmt(results[3])) | \(fmt(100 * results[2] / bw1, 0))% | \(fmt(100 * results[3] / bw2, 0))% |"
            )
            summary.append((type, shapeText + (interleaved ? " interleaved" : ""), results[3]))
        }
        y.deallocate()
        buffers.forEach { $0.deallocate() }
    }
}
print("")

// MARK: - 2b. A decode step's matvecs

// The matrices of SmolLM2-135M (Llama: 30 layers, d = 576, 9 heads of 64 with 3 kv heads,
// ffn 1536, vocab 49152, untied output here) in one type, each used once per token in
// forward order, with the activations quantized once per matrix input as a model would.
print(
    "## A decode step's matvecs (SmolLM2-135M shapes: 30 x [q 576x576, k 192x576, v 192x576, o 576x576, gate/up 1536x576, down 576x1536] + output 49152x576)"
)
print("")
print("| type | weights MiB | threads | ms per token | GB/s | tokens/s (matvecs only) |")
print("|---|---:|---:|---:|---:|---:|")
for type in [GGMLType.q4_0, .q4_1, .q8_0, .f16] where types.contains(type) {
    var layerShapes: [(Int, Int)] = []
    for _ in 0..<30 { layerShapes += [(576, 576), (192, 576), (192, 576), (576, 576), (1536, 576), (1536, 576), (576, 1536)] }
    layerShapes.append((49152, 576))
    var buffers: [UnsafeMutableRawPointer] = []
    var matrices: [WeightMatrix] = []
    var totalBytes = 0
    for (k, (rows, cols)) in layerShapes.enumerated() {
        let b = makeWeights(type, rows: rows, cols: cols, seed: UInt64(k))
        buffers.append(b)
        // As the engine reads them: through the interleaved copy where the type has one.
        matrices.append(try! WeightMatrix(type: type, rows: rows, cols: cols, data: b).interleavedForDecode())
        totalBytes += rows * type.rowBytes(count: cols)!
    }
    let x = UnsafeMutablePointer<Float>.allocate(capacity: 1536)
    for j in 0..<1536 { x[j] = Float(sin(Double(j))) }
    let y = UnsafeMutablePointer<Float>.allocate(capacity: 49152)
    let acts = QuantizedActivations(capacity: 1536)
    for threads in [1, 2] {
        let pool = pools[threads]!
        let t = bestTime(runs: 3, seconds: quick ? 0.5 : 2, cpuTime: threads == 1 && singleThreadCPUTime) {
            for (k, m) in matrices.enumerated() {
                // q, k, v share one quantization; gate and up too.
                let position = k % 7
                if k == matrices.count - 1 || position == 0 || position == 3 || position == 4 || position == 6 {
                    acts.quantize(x, count: m.cols)
                }
                m.matvec(acts, into: y, pool: pool)
            }
        }
        print(
            "| \(type) | \(fmt(Double(totalBytes) / 1048576, 1)) | \(threads) | \(fmt(t * 1e3, 2)) | \(fmt(Double(totalBytes) / t / 1e9)) | \(fmt(1 / t, 0)) |"
        )
    }
    x.deallocate()
    y.deallocate()
    buffers.forEach { $0.deallocate() }
}
print("")

// MARK: - 3. Dequantization

print("## Dequantization (1024 x 4608, one thread; GB/s of blocks read, G values/s written)")
print("")
print("| type | GB/s | Gvalues/s |")
print("|---|---:|---:|")
for type in types {
    let rows = 1024, cols = 4608
    let rowBytes = type.rowBytes(count: cols)!
    let w = makeWeights(type, rows: rows, cols: cols, seed: 3)
    let m = try! WeightMatrix(type: type, rows: rows, cols: cols, data: w)
    let out = UnsafeMutablePointer<Float>.allocate(capacity: cols * 8)
    let t = bestTime(cpuTime: singleThreadCPUTime) {
        for r in stride(from: 0, to: rows, by: 8) { m.dequantize(rows: r..<(r + 8), into: out) }
    }
    print("| \(type) | \(fmt(Double(rows * rowBytes) / t / 1e9)) | \(fmt(Double(rows * cols) / t / 1e9, 2)) |")
    out.deallocate()
    w.deallocate()
}
print("")

// MARK: - 4. Dispatch latency

print("## Dispatch cost (median over 2000 parallel loops of 2 chunks: empty, and of 2 µs of work each)")
print("")
print("| mechanism | empty loop, µs | 2 x 2 µs of work, µs (ideal 2, serial 4) |")
print("|---|---:|---:|")
do {
    /// Median wall time of `body` over `calls` calls, in seconds.
    func medianTime(calls: Int = 2000, _ body: () -> Void) -> Double {
        for _ in 0..<100 { body() }
        var times: [UInt64] = []
        times.reserveCapacity(calls)
        for _ in 0..<calls {
            let start = now()
            body()
            times.append(now() - start)
        }
        times.sort()
        return Double(times[calls / 2]) / 1e9
    }
    let pool = pools[2]!
    let tPool = medianTime { pool.parallelFor(count: 2) { _ in } }
    let tDispatch = medianTime { DispatchQueue.concurrentPerform(iterations: 2) { _ in } }
    let wPool = medianTime { pool.parallelFor(count: 2) { r in for _ in r { busyWork(2000) } } }
    let wDispatch = medianTime { DispatchQueue.concurrentPerform(iterations: 2) { _ in busyWork(2000) } }
    print("| ThreadPool(threads: 2).parallelFor | \(fmt(tPool * 1e6, 2)) | \(fmt(wPool * 1e6, 2)) |")
    print("| DispatchQueue.concurrentPerform | \(fmt(tDispatch * 1e6, 2)) | \(fmt(wDispatch * 1e6, 2)) |")
}
print("")

// MARK: - 5. Prompt processing

print("## sgemm and matmul (prompt processing)")
print("")
print("| operation | GFLOP/s |")
print("|---|---:|")
do {
    let n = 1024
    let a = UnsafeMutablePointer<Float>.allocate(capacity: n * n)
    a.initialize(repeating: 0.5, count: n * n)
    let b = UnsafeMutablePointer<Float>.allocate(capacity: n * n)
    b.initialize(repeating: 0.25, count: n * n)
    let c = UnsafeMutablePointer<Float>.allocate(capacity: n * n)
    let t = bestTime(runs: 3) { BLAS.sgemm(m: n, n: n, k: n, a: a, lda: n, b: b, ldb: n, c: c, ldc: n) }
    print("| sgemm 1024 x 1024 x 1024 | \(fmt(2 * Double(n * n * n) / t / 1e9)) |")
    a.deallocate()
    b.deallocate()
    c.deallocate()
    do {
        let rows = 576, cols = 1536, tokens = 128
        let w = makeWeights(.f32, rows: rows, cols: cols, seed: 4)
        let m = try! WeightMatrix(type: .f32, rows: rows, cols: cols, data: w)
        let x = UnsafeMutablePointer<Float>.allocate(capacity: tokens * cols)
        x.initialize(repeating: 0.1, count: tokens * cols)
        let y = UnsafeMutablePointer<Float>.allocate(capacity: tokens * rows)
        let t = bestTime(runs: 3) { m.matmul(x, count: tokens, into: y, pool: pools[2]!) }
        print("| matmul f32 \(rows) x \(cols), \(tokens) tokens, 2T | \(fmt(2 * Double(rows * cols * tokens) / t / 1e9)) |")
        x.deallocate()
        y.deallocate()
        w.deallocate()
    }
}
print("")

// The prefill paths for each quantized type: dequantized tiles through OpenBLAS sgemm, the
// 8-bit integer matmul and (Q8_0) the matmul with 16-bit activations (activations quantized
// once per batch and weights packed per call, both inside the time). 1T: one thread
// (OpenBLAS too), CPU time; 2T: wall time.
print("## Prefill products, 512 tokens (GFLOP/s: 2 per multiply-add)")
print("")
print("| type | rows x cols | dequantize + sgemm 1T | int8 1T | int16 1T | dequantize + sgemm 2T | int8 2T | int16 2T |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for type in [GGMLType.q4_0, .q4_1, .q5_0, .q5_1, .q8_0, .q4_K, .q5_K, .q6_K] where types.contains(type) {
    for (rows, cols) in [(1536, 576), (576, 1536), (640, 2048), (4608, 1024)] where cols % type.blockSize == 0 {
        let tokens = 512
        let w = makeWeights(type, rows: rows, cols: cols, seed: 4)
        let m = try! WeightMatrix(type: type, rows: rows, cols: cols, data: w)
        let x = UnsafeMutablePointer<Float>.allocate(capacity: tokens * cols)
        for k in 0..<(tokens * cols) { x[k] = Float(k % 23) * 0.1 - 1 }
        let y = UnsafeMutablePointer<Float>.allocate(capacity: tokens * rows)
        let tile = UnsafeMutablePointer<Float>.allocate(capacity: rows * cols)
        let acts = QuantizedActivations(capacity: tokens * cols), wide = WideActivations(capacity: tokens * cols)
        let bytes = max(m.integerMatmulScratchBytes(rows: tokens), m.wideMatmulScratchBytes)
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: bytes, alignment: 64)
        var cells: [String] = []
        for threads in [1, 2] {
            let pool = pools[threads]!
            BLAS.setThreads(threads)
            let tBLAS = bestTime(runs: 3, cpuTime: threads == 1 && singleThreadCPUTime) {
                m.matmul(x, count: tokens, into: y, scratch: tile, scratchCount: rows * cols, pool: pool)
            }
            cells.append(fmt(2 * Double(rows * cols * tokens) / tBLAS / 1e9))
            if m.hasIntegerMatmul {
                let tInt = bestTime(runs: 3, cpuTime: threads == 1 && singleThreadCPUTime) {
                    acts.quantizeRows(x, rows: tokens, cols: cols, pool: pool)
                    m.matmul(acts, rows: tokens, into: y, scratch: scratch, scratchBytes: bytes, pool: pool)
                }
                cells.append(fmt(2 * Double(rows * cols * tokens) / tInt / 1e9))
            } else {
                cells.append("n/a")
            }
            if m.hasWideIntegerMatmul {
                let tWide = bestTime(runs: 3, cpuTime: threads == 1 && singleThreadCPUTime) {
                    wide.quantizeRows(x, rows: tokens, cols: cols, pool: pool)
                    m.matmul(wide, rows: 0..<tokens, into: y, scratch: scratch, scratchBytes: bytes, pool: pool)
                }
                cells.append(fmt(2 * Double(rows * cols * tokens) / tWide / 1e9))
            } else {
                cells.append("n/a")
            }
        }
        BLAS.setThreads(ThreadPool.defaultThreads)
        print("| \(type) | \(rows) x \(cols) | \(cells.joined(separator: " | ")) |")
        x.deallocate()
        y.deallocate()
        tile.deallocate()
        scratch.deallocate()
        w.deallocate()
    }
}
print("")
decodeAttention()
print("load average after: \(loadAverage())")
