import CBLAS
import GGUF
import Kernels

/// A weight matrix `W` of `rows x cols` (`y = W x` maps `cols` inputs to `rows` outputs),
/// viewed in place in the mapped file in its stored type. GGUF's shape is `[cols, rows]`.
public struct Linear: @unchecked Sendable {
    // Safety: `data` points into the read-only file mapping owned by the model's GGUFFile.
    public let name: String
    public let type: GGMLType
    public let rows: Int
    public let cols: Int
    let data: UnsafeRawPointer
    let rowBytes: Int

    init(file: GGUFFile, name: String, rows: Int, cols: Int) throws(ModelError) {
        let t: GGUFTensorInfo
        do { t = try file.requireTensor(name) } catch { throw .file(error) }
        guard t.shape == [cols, rows] || (rows == 1 && t.shape == [cols]) else {
            throw .tensorShapeMismatch(name: name, expected: [cols, rows], found: t.shape)
        }
        guard KernelSupport.canMultiply(t.type) else { throw .unsupportedTensorType(name: name, type: t.type) }
        self.name = name
        self.type = t.type
        self.rows = rows
        self.cols = cols
        self.rowBytes = t.byteCount / rows
        self.data = file.data(for: t).baseAddress!
    }

    /// Bytes of weights read by one matrix-vector product.
    public var byteCount: Int { rowBytes * rows }

    /// Dequantizes row `r` into `out[0..<cols]` (an embedding lookup).
    func row(_ r: Int, into out: UnsafeMutablePointer<Float>) {
        KernelSupport.dequantizeRows(type, data + r * rowBytes, rowCount: 1, cols: cols, out)
    }

    /// `y = W x` for one vector: the decode path.
    func apply(_ x: UnsafePointer<Float>, _ y: UnsafeMutablePointer<Float>, scratch: Scratch) {
        KernelSupport.matvec(type, data, rows: rows, cols: cols, rowBytes: rowBytes, x, y, scratch: scratch)
    }

    /// `Y = X Wᵀ` for `n` row vectors (`X` is `n x cols`, `Y` is `n x rows`, both
    /// row-major): the prefill path. Quantized weights are dequantized a tile of rows at a
    /// time into `scratch.tile` and multiplied with OpenBLAS `sgemm`.
    func apply(batch x: UnsafePointer<Float>, count n: Int, _ y: UnsafeMutablePointer<Float>, scratch: Scratch) {
        if n == 1 { apply(x, y, scratch: scratch); return }
        if type == .f32 {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Int32(n), Int32(rows), Int32(cols),
                        1, x, Int32(cols), data.assumingMemoryBound(to: Float.self), Int32(cols), 0, y, Int32(rows))
            return
        }
        let tileRows = max(1, min(rows, scratch.tileCapacity / cols))
        var r0 = 0
        while r0 < rows {
            let r1 = min(rows, r0 + tileRows)
            KernelSupport.dequantizeRows(type, data + r0 * rowBytes, rowCount: r1 - r0, cols: cols, scratch.tile)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Int32(n), Int32(r1 - r0), Int32(cols),
                        1, x, Int32(cols), scratch.tile, Int32(cols), 0, y + r0, Int32(rows))
            r0 = r1
        }
    }
}

/// Per-model scratch memory for the kernels: allocated once, reused by every call.
final class Scratch: @unchecked Sendable {
    // Safety: used by one forward pass at a time (the model serializes calls).
    /// Floats in `tile`: room for a dequantized tile of weight rows.
    let tileCapacity: Int
    let tile: UnsafeMutablePointer<Float>
    /// One dequantized row (for the reference matvec).
    let row: UnsafeMutablePointer<Float>

    init(maxCols: Int, tileBytes: Int = 8 << 20) {
        tileCapacity = max(maxCols, tileBytes / 4)
        tile = .allocate(capacity: tileCapacity)
        row = .allocate(capacity: maxCols)
    }

    deinit {
        tile.deallocate()
        row.deallocate()
    }
}

/// The bridge from the model to the kernels: which types can be multiplied, and how.
enum KernelSupport {
    static func canMultiply(_ type: GGMLType) -> Bool { type == .f32 }

    static func dequantizeRows(_ type: GGMLType, _ src: UnsafeRawPointer, rowCount: Int, cols: Int, _ dst: UnsafeMutablePointer<Float>) {
        precondition(type == .f32)
        dst.update(from: src.assumingMemoryBound(to: Float.self), count: rowCount * cols)
    }

    static func matvec(_ type: GGMLType, _ data: UnsafeRawPointer, rows: Int, cols: Int, rowBytes: Int,
                       _ x: UnsafePointer<Float>, _ y: UnsafeMutablePointer<Float>, scratch: Scratch)
    {
        for r in 0..<rows {
            dequantizeRows(type, data + r * rowBytes, rowCount: 1, cols: cols, scratch.row)
            y[r] = Elementwise.dot(scratch.row, x, count: cols)
        }
    }
}
