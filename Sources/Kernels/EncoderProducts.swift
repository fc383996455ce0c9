// The media encoders' products with fewer passes over the activations: several weight
// matrices that read the same rows as one set of blocks (a block's q, k and v products in
// one call), products that add into their output (a residual, or a bias written first)
// instead of OpenBLAS clearing it, and attention whose softmax leaves its rows unnormalized
// (the heads' outputs are scaled instead: 64 values a query rather than n).

import GGUF
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension WeightMatrix {
    /// `Y[:, c_i ..< c_i + rows_i] (+)= X W_iᵀ` for matrices `parts` of the same `cols`:
    /// `x` is `count x cols` row-major, `y` has rows of `stride` floats and part `i`'s
    /// columns start where the earlier parts' end (`c_i = rows_0 + ... + rows_{i-1}`): the
    /// product of `X` with the parts stacked as one matrix, without stacking them.
    /// With `accumulate`, the products are added to what `y` holds (OpenBLAS's `beta = 1`:
    /// no pass that clears `y`); otherwise `y` is overwritten.
    ///
    /// The stacked rows are cut into ``encoderBlockRows(rows:threads:)``-row blocks of a
    /// multiple of 16 rows, which may span parts: each of the pool's threads takes blocks
    /// from a shared cursor, dequantizes a block's rows (from one part or two) into its own
    /// tile and multiplies it with one single-threaded OpenBLAS product, so each block packs
    /// `X` once (a fused q, k and v as few times as one matrix of their rows). A block of
    /// F32 weights within one part is read in place. Each block is one product whatever the
    /// threads, so the result does not depend on them. `tiles` (at least
    /// ``encoderTilesCount(_:threads:)`` floats) is allocated per call when nil.
    public static func matmulByRowBlocks(
        _ parts: [WeightMatrix], _ x: UnsafePointer<Float>, count: Int, into y: UnsafeMutablePointer<Float>, stride: Int,
        accumulate: Bool, tiles: UnsafeMutablePointer<Float>? = nil, pool: ThreadPool?
    ) {
        precondition(count >= 0 && !parts.isEmpty)
        let cols = parts[0].cols, total = parts.reduce(0) { $0 + $1.rows }
        precondition(parts.allSatisfy { $0.cols == cols } && stride >= total, "matmulByRowBlocks: parts of different widths")
        if count == 0 || total == 0 { return }
        let threads = max(1, pool?.threads ?? 1)
        let blockRows = encoderBlockRows(rows: total, threads: threads), blocks = (total + blockRows - 1) / blockRows
        let parallel = threads > 1 && blocks > 1
        let owned: UnsafeMutablePointer<Float>? = tiles == nil ? .allocate(capacity: encoderTilesCount(parts, threads: threads)) : nil
        defer { owned?.deallocate() }
        let tileBase = tiles ?? owned!
        // The first stacked row of each part, and an end.
        var starts = [0]
        for w in parts { starts.append(starts[starts.count - 1] + w.rows) }
        let cursor = Atomic<Int>(0)
        let body: (Range<Int>) -> Void = { range in
            for slot in range {
                while true {
                    let b = cursor.add(1, ordering: .relaxed).oldValue
                    if b >= blocks { break }
                    let r0 = b * blockRows, r1 = min(total, r0 + blockRows)
                    var part = 0
                    while starts[part + 1] <= r0 { part += 1 }
                    let w = parts[part], local = r0 - starts[part]
                    let weights: UnsafePointer<Float>
                    if r1 <= starts[part + 1] && w.type == .f32 && Int(bitPattern: w.data) % MemoryLayout<Float>.alignment == 0 {
                        weights = w.data.assumingMemoryBound(to: Float.self) + local * cols
                    } else {
                        let tile = tileBase + slot * blockRows * cols
                        var r = r0
                        while r < r1 {
                            while starts[part + 1] <= r { part += 1 }
                            let end = min(r1, starts[part + 1])
                            parts[part].dequantize(rows: (r - starts[part])..<(end - starts[part]), into: tile + (r - r0) * cols)
                            r = end
                        }
                        weights = UnsafePointer(tile)
                    }
                    BLAS.sgemm(
                        transB: true, m: count, n: r1 - r0, k: cols, a: x, lda: cols, b: weights, ldb: cols,
                        beta: accumulate ? 1 : 0, c: y + r0, ldc: stride)
                }
            }
        }
        if parallel, let pool {
            BLAS.withOneThread(when: true) { pool.parallelFor(count: threads, body) }
        } else {
            pool?.sleepWorkers()
            body(0..<1)
        }
    }

    /// Blocks per thread in ``matmulByRowBlocks(_:_:count:into:stride:accumulate:tiles:pool:)``:
    /// one, since every block packs all of `X` again (in A/B runs of the SigLIP2 tower on
    /// this project's 2-thread machine, two a thread were no faster and noisier).
    public static let encoderBlocksPerThread = 1

    /// Rows per block of a product of `rows` stacked weight rows on `threads` threads:
    /// ``encoderBlocksPerThread`` blocks a thread, a multiple of 16 rows.
    public static func encoderBlockRows(rows: Int, threads: Int) -> Int {
        let blocks = max(1, threads) * encoderBlocksPerThread
        return max(16, ((rows + blocks - 1) / blocks + 15) / 16 * 16)
    }

    /// Floats of `tiles` ``matmulByRowBlocks(_:_:count:into:stride:accumulate:tiles:pool:)`` needs.
    public static func encoderTilesCount(_ parts: [WeightMatrix], threads: Int) -> Int {
        encoderTilesCount(rows: parts.reduce(0) { $0 + $1.rows }, cols: parts.first?.cols ?? 0, threads: threads)
    }

    /// ``encoderTilesCount(_:threads:)`` for parts of `rows` stacked rows of `cols`.
    public static func encoderTilesCount(rows: Int, cols: Int, threads: Int) -> Int {
        max(1, max(1, threads) * min(rows, encoderBlockRows(rows: rows, threads: threads)) * cols)
    }
}

extension EncoderKernels {
    /// `y[r][offset + c] = bias[c]` for `rows` rows of `stride` floats and `c < width`: the
    /// bias written where an accumulating product will add to it. Split over `pool` by rows.
    public static func fillRows(
        _ bias: UnsafePointer<Float>, into y: UnsafeMutablePointer<Float>, rows: Int, width: Int, stride: Int, pool: ThreadPool? = nil
    ) {
        parallel(rows, minChunk: max(1, 16_384 / max(1, width)), pool) { range in
            for r in range { (y + r * stride).update(from: bias, count: width) }
        }
    }
}

extension BidirectionalAttention {
    /// Queries per block of ``attendDeferringNormalization(queries:keys:values:stride:tokens:heads:headDim:scale:scores:out:outStride:pool:)``
    /// over `n` tokens: as many as keep a block's `m x n` scores within 4 MiB (all of a
    /// 768-patch slice's), at least ``queryBlock``. OpenBLAS multiplies a 128-query block's
    /// `Q Kᵀ` (`k` = 64) at about 82% of its single-thread rate on this project's machine,
    /// a 768-query one at 96%.
    public static func deferredQueryBlock(tokens n: Int) -> Int {
        min(n, max(queryBlock, (1 << 20) / max(1, n) / 16 * 16))
    }

    /// Floats of `scores` scratch the deferred attention needs on `threads` threads: one
    /// block of scores per thread.
    public static func deferredScratchCount(tokens n: Int, threads: Int) -> Int {
        max(1, threads) * deferredQueryBlock(tokens: n) * n
    }

    /// ``attend(queries:keys:values:stride:tokens:heads:headDim:scale:scores:out:outStride:pool:)``
    /// in larger blocks of queries (``deferredQueryBlock(tokens:)``) and with one pass less
    /// over the scores: each block's `S = scale · Q Kᵀ` rows get their maximum subtracted and
    /// are exponentiated in place (not divided by their sums), `O = S V` is multiplied from
    /// them, and then the `headDim` values of each output row are divided by its row's sum
    /// (the same softmax, rounded differently). The pool's threads take heads from a shared
    /// cursor, each with its own block of `scores` (``deferredScratchCount(tokens:threads:)``
    /// floats) and single-threaded OpenBLAS products.
    public static func attendDeferringNormalization(
        queries q: UnsafePointer<Float>, keys k: UnsafePointer<Float>, values v: UnsafePointer<Float>, stride: Int, tokens n: Int,
        heads: Int, headDim hd: Int, scale: Float, scores: UnsafeMutablePointer<Float>, out: UnsafeMutablePointer<Float>,
        outStride: Int, pool: ThreadPool? = nil
    ) {
        precondition(n >= 0 && heads > 0 && hd > 0 && stride >= heads * hd && outStride >= heads * hd, "attend: bad shape")
        guard n > 0 else { return }
        let block = deferredQueryBlock(tokens: n)
        let head: (Int, UnsafeMutablePointer<Float>) -> Void = { h, s in
            var sums = [Float](repeating: 0, count: block)
            var i0 = 0
            while i0 < n {
                let m = min(block, n - i0)
                BLAS.sgemm(
                    transB: true, m: m, n: n, k: hd, alpha: scale,
                    a: q + i0 * stride + h * hd, lda: stride, b: k + h * hd, ldb: stride, c: s, ldc: n)
                for r in 0..<m { sums[r] = Elementwise.exponentiate(s + r * n, count: n).sum }
                let o = out + i0 * outStride + h * hd
                BLAS.sgemm(m: m, n: hd, k: n, a: s, lda: n, b: v + h * hd, ldb: stride, c: o, ldc: outStride)
                for r in 0..<m {
                    let inv = 1 / sums[r], row = o + r * outStride
                    for c in 0..<hd { row[c] *= inv }
                }
                i0 += m
            }
        }
        guard let pool, pool.threads > 1, heads > 1 else {
            for h in 0..<heads { head(h, scores) }
            return
        }
        let cursor = Atomic<Int>(0)
        BLAS.withOneThread(when: true) {
            pool.parallelFor(count: pool.threads) { slots in
                for slot in slots {
                    while true {
                        let h = cursor.add(1, ordering: .relaxed).oldValue
                        if h >= heads { break }
                        head(h, scores + slot * block * n)
                    }
                }
            }
        }
    }
}
