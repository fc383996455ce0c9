// Matrix-matrix products through OpenBLAS, for prompt processing (many tokens at once),
// where the weights are dequantized tile by tile into F32 and multiplied with sgemm.

import CBLAS
import GGUF
import Synchronization

/// Row-major wrappers of the BLAS routines the engine uses.
public enum BLAS {
    /// `C = alpha * op(A) * op(B) + beta * C`, all row-major, with `op(A)` of `m x k`,
    /// `op(B)` of `k x n` and `C` of `m x n`. `transA`/`transB` say that `A`/`B` are stored
    /// transposed (`A` as `k x m`, `B` as `n x k`). `lda`, `ldb`, `ldc` are the row strides
    /// of the matrices as stored.
    public static func sgemm(
        transA: Bool = false, transB: Bool = false,
        m: Int, n: Int, k: Int, alpha: Float = 1,
        a: UnsafePointer<Float>, lda: Int,
        b: UnsafePointer<Float>, ldb: Int,
        beta: Float = 0,
        c: UnsafeMutablePointer<Float>, ldc: Int
    ) {
        precondition(m >= 0 && n >= 0 && k >= 0, "sgemm: negative size")
        precondition(
            m <= Int(Int32.max) && n <= Int(Int32.max) && k <= Int(Int32.max)
                && lda <= Int(Int32.max) && ldb <= Int(Int32.max) && ldc <= Int(Int32.max),
            "sgemm: size exceeds the BLAS integer range")
        if m == 0 || n == 0 { return }
        cblas_sgemm(
            CblasRowMajor,
            transA ? CblasTrans : CblasNoTrans,
            transB ? CblasTrans : CblasNoTrans,
            blasint(m), blasint(n), blasint(k), alpha,
            a, blasint(lda), b, blasint(ldb), beta, c, blasint(ldc))
    }
}

extension WeightMatrix {
    /// Rows of weights dequantized per sgemm call in ``matmul(_:count:into:scratch:pool:)``.
    public static let matmulTileRows = 256

    /// Floats of scratch ``matmul(_:count:into:scratch:pool:)`` needs for this matrix.
    public var matmulScratchCount: Int { Swift.min(rows, Self.matmulTileRows) * cols }

    /// `Y = X W^T` for `count` activation vectors at once (prompt processing): `x` holds
    /// `count x cols` floats row-major, `y` receives `count x rows`. The weights are
    /// dequantized into `scratch` as many rows at a time as `scratchCount` floats hold
    /// (default ``matmulScratchCount``, i.e. ``matmulTileRows`` rows; allocated per call when
    /// `scratch` is nil), split over `pool`, and multiplied with OpenBLAS's sgemm (which
    /// uses its own threads). A scratch that holds the whole matrix makes it one sgemm
    /// call, so OpenBLAS packs the activations once. F32 weights are used in place.
    public func matmul(
        _ x: UnsafePointer<Float>, count: Int, into y: UnsafeMutablePointer<Float>,
        scratch: UnsafeMutablePointer<Float>? = nil, scratchCount: Int? = nil,
        pool: ThreadPool? = nil
    ) {
        precondition(count >= 0)
        if count == 0 || rows == 0 { return }
        if type == .f32 && (Int(bitPattern: data) % MemoryLayout<Float>.alignment == 0) {
            pool?.sleepWorkers()
            BLAS.sgemm(
                transB: true, m: count, n: rows, k: cols,
                a: x, lda: cols, b: data.assumingMemoryBound(to: Float.self), ldb: cols,
                c: y, ldc: rows)
            return
        }
        let owned: UnsafeMutablePointer<Float>? = scratch == nil ? .allocate(capacity: matmulScratchCount) : nil
        defer { owned?.deallocate() }
        let tile = scratch ?? owned!
        let tileRows =
            scratch == nil
            ? Self.matmulTileRows
            : Swift.max(1, Swift.min(rows, (scratchCount ?? matmulScratchCount) / Swift.max(1, cols)))
        var r0 = 0
        while r0 < rows {
            let r1 = Swift.min(rows, r0 + tileRows)
            let n = r1 - r0
            if let pool, pool.threads > 1 {
                let start = r0, columns = cols
                pool.parallelFor(count: n, minChunk: 16) { range in
                    self.dequantize(
                        rows: (start + range.lowerBound)..<(start + range.upperBound),
                        into: tile + range.lowerBound * columns)
                }
            } else {
                dequantize(rows: r0..<r1, into: tile)
            }
            // OpenBLAS runs its own threads: do not let ours spin against them.
            pool?.sleepWorkers()
            // Y[:, r0..<r1] = X (count x cols) * tile^T (cols x n)
            BLAS.sgemm(
                transB: true, m: count, n: n, k: cols,
                a: x, lda: cols, b: tile, ldb: cols,
                c: y + r0, ldc: rows)
            r0 = r1
        }
    }
}

extension WeightMatrix {
    /// Rows of weights per tile in ``matmulByCachedTiles(_:count:into:scratch:pool:)``: about
    /// 64 KB of F32 (a tile and OpenBLAS's packed copy of it stay in the core's L2), at least
    /// 16 rows, a multiple of 16.
    public static func cachedTileRows(cols: Int) -> Int { Swift.max(16, (16_384 / Swift.max(1, cols)) / 16 * 16) }

    /// Floats of scratch ``matmulByCachedTiles(_:count:into:scratch:pool:)`` needs on `threads`
    /// threads: one tile per thread.
    public static func cachedTilesScratchCount(cols: Int, threads: Int) -> Int {
        Swift.max(1, threads) * cachedTileRows(cols: cols) * cols
    }

    /// `Y = X Wᵀ` for a few rows of `x` (`count x cols`, row-major; `y` is `count x rows`):
    /// the product of a short prompt chunk, in F32 like ``matmul(_:count:into:scratch:scratchCount:pool:)``
    /// but without writing the whole dequantized matrix to memory. Each of the pool's
    /// threads takes tiles of ``cachedTileRows(cols:)`` weight rows from a shared cursor,
    /// dequantizes a tile into its own part of `scratch` (``cachedTilesScratchCount(cols:threads:)``
    /// floats) and multiplies it with a one-thread OpenBLAS product; the tile is still in
    /// the core's cache when OpenBLAS reads it. For a chunk of 8 tokens the whole-matrix
    /// path spends most of its time writing and reading back the F32 copy (docs/performance-log.md,
    /// "Short prompt chunks"). F32 weights are multiplied in place.
    public func matmulByCachedTiles(
        _ x: UnsafePointer<Float>, count: Int, into y: UnsafeMutablePointer<Float>,
        scratch: UnsafeMutablePointer<Float>, pool: ThreadPool
    ) {
        precondition(count >= 0)
        if count == 0 || rows == 0 { return }
        if type == .f32 {
            matmul(x, count: count, into: y, pool: pool)
            return
        }
        productByRowBlocks(x, count: count, into: y, blockRows: Self.cachedTileRows(cols: cols), tiles: scratch, pool: pool)
    }

    /// `Y = X Wᵀ` by blocks of `blockRows` weight rows, the loop of
    /// ``matmulByCachedTiles(_:count:into:scratch:pool:)`` and ``matmulByRowBlocks(_:count:into:pool:)``:
    /// each of the pool's threads takes blocks from a shared cursor (a descheduled thread
    /// just takes fewer), dequantizes each into its own `blockRows x cols` part of `tiles`
    /// (`threads` parts; nil for F32 weights, read in place) and multiplies it with one
    /// OpenBLAS product, single-threaded when the pool's threads share the blocks. Each
    /// block is one product whatever the threads, so the result does not depend on them.
    func productByRowBlocks(
        _ x: UnsafePointer<Float>, count: Int, into y: UnsafeMutablePointer<Float>, blockRows: Int,
        tiles: UnsafeMutablePointer<Float>?, pool: ThreadPool?
    ) {
        let blocks = (rows + blockRows - 1) / blockRows, threads = pool?.threads ?? 1
        let parallel = threads > 1 && blocks > 1, columns = cols, total = rows
        let cursor = Atomic<Int>(0)
        BLAS.withOneThread(when: parallel) {
            let body: (Range<Int>) -> Void = { slots in
                for slot in slots {
                    while true {
                        let b = cursor.add(1, ordering: .relaxed).oldValue
                        if b >= blocks { break }
                        let r0 = b * blockRows, r1 = Swift.min(total, r0 + blockRows)
                        let w: UnsafePointer<Float>
                        if let tiles {
                            let tile = tiles + slot * blockRows * columns
                            dequantize(rows: r0..<r1, into: tile)
                            w = UnsafePointer(tile)
                        } else {
                            w = data.assumingMemoryBound(to: Float.self) + r0 * columns
                        }
                        BLAS.sgemm(
                            transB: true, m: count, n: r1 - r0, k: columns, a: x, lda: columns, b: w, ldb: columns,
                            c: y + r0, ldc: total)
                    }
                }
            }
            if parallel, let pool { pool.parallelFor(count: threads, body) } else { body(0..<1) }
        }
    }
}
