import GGUF
import Kernels

/// A weight matrix `W` of `rows x cols` (`y = W x` maps `cols` inputs to `rows` outputs),
/// viewed in place in the mapped file in its stored type. GGUF's shape is `[cols, rows]`.
/// When the model loads, the rows are copied once into large pages for the decode step
/// (`WeightMatrix.copiedForDecode()`): Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q4_K matrices into the decode
/// kernels' interleaved layout, others as they are. The copy then serves every read of
/// those rows, and the file's pages of the tensor leave resident memory.
public struct Linear: Sendable {
    public let name: String
    let matrix: WeightMatrix

    /// `forDecode: false` skips the copy (for a token embedding that is not
    /// also the output head: it is only read row by row).
    init(file: GGUFFile, name: String, rows: Int, cols: Int, forDecode: Bool = true) throws(ModelError) {
        let t: GGUFTensorInfo
        do { t = try file.requireTensor(name) } catch { throw .file(error) }
        guard t.shape == [cols, rows] || (rows == 1 && t.shape == [cols]) else {
            throw .tensorShapeMismatch(name: name, expected: [cols, rows], found: t.shape)
        }
        guard t.type.hasKernels else { throw .unsupportedTensorType(name: name, type: t.type) }
        do {
            let stored = try WeightMatrix(type: t.type, rows: rows, cols: cols, data: file.data(for: t).baseAddress!)
            // The file's pages leave as the copy is made: the matrix is never held twice.
            matrix = forDecode ? stored.copiedForDecode { file.releaseResidentPages(of: t, prefix: $0) } : stored
        } catch {
            throw .unsupportedTensorType(name: name, type: t.type)
        }
        self.name = name
        if matrix.decodeCopyByteCount > 0 { file.releaseResidentPages(of: t) }
    }

    /// A view of `matrix` (one expert's slice of a 3-D tensor) named `name`.
    init(name: String, matrix: WeightMatrix) {
        self.name = name
        self.matrix = matrix
    }

    /// The `count` matrices of `rows x cols` stacked in the 3-D tensor `name` (GGUF shape
    /// `[cols, rows, count]`, the experts of a mixture-of-experts layer), as views named
    /// `name[e]`.
    static func stacked(file: GGUFFile, name: String, count: Int, rows: Int, cols: Int) throws(ModelError) -> [Linear] {
        let t: GGUFTensorInfo
        do { t = try file.requireTensor(name) } catch { throw .file(error) }
        guard t.shape == [cols, rows, count] else { throw .tensorShapeMismatch(name: name, expected: [cols, rows, count], found: t.shape) }
        guard t.type.hasKernels, let rowBytes = t.type.rowBytes(count: cols) else { throw .unsupportedTensorType(name: name, type: t.type) }
        let base = file.data(for: t).baseAddress!
        var slices: [Linear] = []
        for e in 0..<count {
            do {
                let offset = e * rows * rowBytes
                let matrix = try WeightMatrix(type: t.type, rows: rows, cols: cols, data: base + offset).copiedForDecode {
                    file.releaseResidentPages(of: t, prefix: offset + $0)
                }
                slices.append(Linear(name: "\(name)[\(e)]", matrix: matrix))
                // The experts before this one are copied: their pages leave as the next are read.
                if matrix.decodeCopyByteCount > 0 { file.releaseResidentPages(of: t, prefix: offset + rows * rowBytes) }
            } catch {
                throw .unsupportedTensorType(name: name, type: t.type)
            }
        }
        if slices.allSatisfy({ $0.matrix.decodeCopyByteCount > 0 }) { file.releaseResidentPages(of: t) }
        return slices
    }

    public var type: GGMLType { matrix.type }
    public var rows: Int { matrix.rows }
    public var cols: Int { matrix.cols }
    /// Bytes of weights read by one matrix-vector product (of the decode copy, where the
    /// matrix has one in another layout).
    public var byteCount: Int { matrix.streamedByteCount }

    /// Dequantizes row `r` into `out[0..<cols]` (an embedding lookup).
    func row(_ r: Int, into out: UnsafeMutablePointer<Float>) {
        matrix.dequantize(rows: r..<(r + 1), into: out)
    }

    /// `y_t = W x_t` for activation rows `rows` of `x` (already quantized; row `t`'s output
    /// at `y + t * rows`): the decode path, one matvec per row with the weights read once
    /// for all of them (`WeightMatrix.matvec(_:rows:into:pool:)`).
    func apply(_ x: QuantizedActivations, rows: Range<Int>, _ y: UnsafeMutablePointer<Float>, pool: ThreadPool) {
        matrix.matvec(x, rows: rows, into: y, pool: pool)
    }

    /// `apply(_:rows:_:pool:)` of each of `products` (matrices with the same columns), in
    /// one parallel loop (`WeightMatrix.matvec(_:_:rows:pool:)`).
    static func apply(
        _ products: [(Linear, UnsafeMutablePointer<Float>)], _ x: QuantizedActivations, rows: Range<Int>, pool: ThreadPool
    ) {
        WeightMatrix.matvec(products.map { (matrix: $0.0.matrix, y: $0.1) }, x, rows: rows, pool: pool)
    }

    /// `apply(_:rows:_:pool:)` of each of `products` over its own activation rows of `x`,
    /// in one parallel loop (`WeightMatrix.matvec(_:_:pool:)`): a mixture's experts.
    static func apply(_ products: [(Linear, rows: Range<Int>, UnsafeMutablePointer<Float>)], _ x: QuantizedActivations, pool: ThreadPool) {
        WeightMatrix.matvec(products.map { (matrix: $0.0.matrix, rows: $0.rows, y: $0.2) }, x, pool: pool)
    }

    /// `Y = X Wᵀ` for `n` row vectors (`X` is `n x cols`, `Y` is `n x rows`, both
    /// row-major): the prefill path, OpenBLAS `sgemm` over the weights dequantized into
    /// `tile` (the whole matrix when it fits in `tileCapacity` floats: one sgemm call).
    func apply(
        batch x: UnsafePointer<Float>, count n: Int, _ y: UnsafeMutablePointer<Float>,
        tile: UnsafeMutablePointer<Float>, tileCapacity: Int, pool: ThreadPool
    ) {
        matrix.matmul(x, count: n, into: y, scratch: tile, scratchCount: tileCapacity, pool: pool)
    }

    /// `Y = X Wᵀ` for a short chunk of `n` rows (at most `shortChunkRows`): the F32 product
    /// tile by tile in cache (`WeightMatrix.matmulByCachedTiles`), one tile per thread in `tiles`.
    func apply(
        shortBatch x: UnsafePointer<Float>, count n: Int, _ y: UnsafeMutablePointer<Float>, tiles: UnsafeMutablePointer<Float>,
        pool: ThreadPool
    ) {
        matrix.matmulByCachedTiles(x, count: n, into: y, scratch: tiles, pool: pool)
    }

    /// The most rows of a chunk whose F32 product goes tile by tile in cache rather than
    /// through the whole dequantized matrix. Measured on SmolLM2 Q4_1 and Q8_0 (2 threads,
    /// docs/performance-log.md, "Short prompt chunks"): tiles are twice as fast at 8 rows,
    /// even at 64, and slower from 128 rows on, where one OpenBLAS product over the
    /// whole matrix packs the activations once and runs at its peak.
    static let shortChunkRows = 64

    /// Whether batches go through the 8-bit integer matmul: every format this build
    /// multiplies so (`WeightMatrix.hasIntegerMatmul`) except Q4_1, Q5_1 and Q8_0
    /// (`noEightBitPrefillTypes`). Q4_1 and Q5_1 stay on the exact F32 path (dequantized
    /// weights, OpenBLAS sgemm): rounding a prompt's activations to 8 bits puts the shipped
    /// SmolLM2 Q4_1 file 1.05-1.36 times as far from its stored weights' logits as
    /// llama.cpp, against 0.36-0.44 times in F32 (docs/numerics.md), and prompt processing
    /// stays well ahead of llama.cpp either way. Q8_0 has an 8-bit matmul only on VNNI
    /// builds; there it put the LFM2-MoE fixture 1.02 times as far as llama.cpp (one
    /// router's near tie flips) and Gemma 3 4.8% of range from the reference past the
    /// window (2.7% in F32), so Q8_0 batches take 16-bit activations instead
    /// (`hasWideIntegerMatmul`), the same bits on AVX2 and VNNI builds (the decode kernels
    /// too: see Q8_0's `accumulate`).
    var hasIntegerMatmul: Bool { matrix.hasIntegerMatmul && !Self.noEightBitPrefillTypes.contains(matrix.type) }

    /// Formats whose batches never take the 8-bit integer matmul, for accuracy: F32 for
    /// Q4_1 and Q5_1, 16-bit activations for Q8_0 where the build has them.
    static let noEightBitPrefillTypes: Set<GGMLType> = [.q4_1, .q5_1, .q8_0]

    /// Whether chunks (and a mixture's experts' rows of a chunk) go through the matmul
    /// with 16-bit activations (`WeightMatrix.hasWideIntegerMatmul`: Q8_0 on x86 builds
    /// with AVX2) instead of the F32 path: its activations are rounded 258 times finer than
    /// the 8-bit ones, so the products are nearly those of the F32 path (docs/numerics.md),
    /// at about twice its multiplications per instruction and without dequantizing the
    /// weights to floats.
    var hasWideIntegerMatmul: Bool { !hasIntegerMatmul && matrix.hasWideIntegerMatmul }

    /// Bytes of scratch the integer matmul needs for `n` rows.
    func integerScratchBytes(rows n: Int) -> Int { matrix.integerMatmulScratchBytes(rows: n) }

    /// `Y = X Wᵀ` for activation rows `rows` of `x` (already quantized,
    /// `QuantizedActivations.quantizeRows`; row `t`'s output at `y + t * rows`): the
    /// prefill path for the integer formats, 8-bit products with the weights' levels.
    func apply(
        batch x: QuantizedActivations, rows: Range<Int>, _ y: UnsafeMutablePointer<Float>,
        scratch: UnsafeMutableRawPointer, scratchBytes: Int, pool: ThreadPool
    ) {
        matrix.matmul(x, rows: rows, into: y, scratch: scratch, scratchBytes: scratchBytes, pool: pool)
    }

    /// `Y = X Wᵀ` for activation rows `rows` of `x` (rounded to 16 bits,
    /// `WideActivations.quantizeRows`; row `t`'s output at `y + t * rows`).
    func apply(
        wideBatch x: WideActivations, rows: Range<Int>, _ y: UnsafeMutablePointer<Float>,
        scratch: UnsafeMutableRawPointer, scratchBytes: Int, pool: ThreadPool
    ) {
        matrix.matmul(x, rows: rows, into: y, scratch: scratch, scratchBytes: scratchBytes, pool: pool)
    }

    /// Floats of tile that hold the whole matrix.
    var elementCount: Int { matrix.rows * matrix.cols }
}
