// The public face of the kernels: row operations on GGMLType, the WeightMatrix view with
// matvec / matmul, and the errors at the boundary.
//
// Fast paths are chosen here and only here: `dequantizeRow`, `dot` and `matvec` call each
// format's fast kernel (x86 intrinsics when the build defines LEAP_X86_AVX2, portable
// Swift otherwise); the `...Reference` variants call the scalar references.

import GGUF

/// Errors for weights the kernels cannot use, raised when a ``WeightMatrix`` is described.
public enum KernelError: Error, Equatable, CustomStringConvertible {
    /// The kernels have no implementation for this type.
    case unsupportedType(GGMLType)
    /// A row of `cols` values is not a whole number of blocks of `type`.
    case rowNotWholeBlocks(type: GGMLType, cols: Int)
    /// Negative or overflowing dimensions.
    case badShape(rows: Int, cols: Int)

    public var description: String {
        switch self {
        case .unsupportedType(let type):
            return
                "tensor type \(type) is not supported by the kernels (supported: \(GGMLType.kernelTypes.map(\.name).joined(separator: ", "))); re-quantize the model to one of them"
        case .rowNotWholeBlocks(let type, let cols):
            return "a row of \(cols) values is not a whole number of \(type) blocks of \(type.blockSize)"
        case .badShape(let rows, let cols):
            return "bad matrix shape \(rows) x \(cols)"
        }
    }
}

extension GGMLType {
    /// The types the kernels can dequantize and multiply.
    public static let kernelTypes: [GGMLType] = [.f32, .f16, .bf16, .q8_0, .q4_0, .q4_1, .q5_0, .q5_1, .q4_K, .q5_K, .q6_K]

    /// Whether the kernels can dequantize rows of this type and multiply them.
    public var hasKernels: Bool { blockFormat(for: self) != nil }

    /// Whether ``quantizeRow(_:into:count:)`` supports this type (every type with kernels:
    /// F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K).
    public var canQuantize: Bool { quantizableFormat(for: self) != nil }

    /// Whether dot products with this type use the 8-bit activation blocks (true for the
    /// quantized types) or the float activations (F32, F16, BF16).
    public var usesQuantizedActivations: Bool { blockSize > 1 }

    /// Dequantizes `count` values (a whole number of blocks) from `src` into `dst`.
    /// Bit-identical to ``dequantizeRowReference(_:into:count:)``.
    public func dequantizeRow(_ src: UnsafeRawPointer, into dst: UnsafeMutablePointer<Float>, count: Int) {
        let format = checkedFormat(count)
        format.dequantize(src, dst, nb: count / blockSize)
    }

    /// The scalar reference dequantization (ggml's `dequantize_row_*`).
    public func dequantizeRowReference(_ src: UnsafeRawPointer, into dst: UnsafeMutablePointer<Float>, count: Int) {
        let format = checkedFormat(count)
        format.dequantizeReference(src, dst, nb: count / blockSize)
    }

    /// Quantizes `count` floats (a whole number of blocks) into `type.rowBytes(count:)`
    /// bytes at `dst`, bit-identical to ggml's `quantize_row_*_ref`. Requires ``canQuantize``.
    public func quantizeRow(_ src: UnsafePointer<Float>, into dst: UnsafeMutableRawPointer, count: Int) {
        guard let format = quantizableFormat(for: self) else {
            preconditionFailure("quantizeRow: no quantizer for \(self)")
        }
        precondition(count >= 0 && count % blockSize == 0, "quantizeRow: \(count) values are not whole \(self) blocks")
        format.quantizeReference(src, dst, nb: count / blockSize)
    }

    /// Dot product of one row (`x.count` values of this type at `row`) with the
    /// activations. Fast path; equals ``dotReference(_:_:)`` up to float summation order.
    public func dot(_ row: UnsafeRawPointer, _ x: QuantizedActivations) -> Float {
        let format = checkedFormat(x.count)
        checkActivations(x)
        return format.dot(row, x.view, nb: x.count / blockSize)
    }

    /// The scalar reference dot product (the integer sums of ggml's `vec_dot_*` generic
    /// code, on leap-ref's activation blocks).
    public func dotReference(_ row: UnsafeRawPointer, _ x: QuantizedActivations) -> Float {
        let format = checkedFormat(x.count)
        checkActivations(x)
        return format.dotReference(row, x.view, nb: x.count / blockSize)
    }

    private func checkedFormat(_ count: Int) -> any BlockFormat.Type {
        guard let format = blockFormat(for: self) else {
            preconditionFailure("no kernels for \(self); check GGMLType.hasKernels first")
        }
        precondition(count >= 0 && count % blockSize == 0, "\(count) values are not whole \(self) blocks")
        return format
    }

    fileprivate func checkActivations(_ x: QuantizedActivations) {
        if usesQuantizedActivations {
            precondition(
                x.blockCount * QuantizedActivations.blockSize == x.count,
                "activations of \(x.count) values are not whole blocks of 32")
        }
    }
}

/// A read-only view of a row-major weight matrix in one of the ggml formats: `rows` rows of
/// `cols` values, each row `type.rowBytes(count: cols)` bytes, the first at `data` (for
/// example a tensor in a memory-mapped GGUF file, which must outlive the view).
///
/// In ggml's terms this is a tensor with `ne[0] = cols`, `ne[1] = rows`; `matvec` computes
/// `y = W x` with `x` of `cols` values and `y` of `rows` values.
public struct WeightMatrix: @unchecked Sendable {
    // @unchecked: a view of immutable bytes; the owner keeps them alive and unchanged.

    /// The storage type.
    public let type: GGMLType
    /// Number of rows (outputs of a matvec).
    public let rows: Int
    /// Number of values per row (inputs of a matvec).
    public let cols: Int
    /// Bytes per row.
    public let rowBytes: Int
    /// The first byte of row 0.
    public private(set) var data: UnsafeRawPointer
    /// The decode kernels' copy of the rows, when ``interleavedForDecode()`` made one.
    private(set) var interleaved: InterleavedRows?
    /// The memory `data` points into when ``copiedForDecode()`` copied the rows.
    private var ownRows: LargePageMemory?

    /// Describes a matrix, checking that the kernels support its type and shape.
    public init(type: GGMLType, rows: Int, cols: Int, data: UnsafeRawPointer) throws(KernelError) {
        guard type.hasKernels else { throw .unsupportedType(type) }
        guard rows >= 0, cols >= 0 else { throw .badShape(rows: rows, cols: cols) }
        guard let rowBytes = type.rowBytes(count: cols) else { throw .rowNotWholeBlocks(type: type, cols: cols) }
        guard !rows.multipliedReportingOverflow(by: rowBytes).overflow else { throw .badShape(rows: rows, cols: cols) }
        self.type = type
        self.rows = rows
        self.cols = cols
        self.rowBytes = rowBytes
        self.data = data
    }

    /// Total size in bytes.
    public var byteCount: Int { rows * rowBytes }

    /// This matrix with its matrix-vector products (``matvec(_:into:pool:)`` and the
    /// multi-row ``matvec(_:rows:into:pool:)``) reading a copy of its rows repacked once,
    /// now, into groups of 8 interleaved rows with their scales inline, streamed with
    /// software prefetch (InterleavedRows.swift): for Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 on x86 with AVX2,
    /// where it takes decode from ~60% to ~85% of the machine's read bandwidth. The copy
    /// takes about as many bytes as the rows (``interleavedByteCount``). Dequantized rows
    /// and the prompt matmuls then read the copy too, so the owner of `data` may release
    /// its pages (`GGUFFile.releaseResidentPages(of:)`). Returns `self` for other types, other builds and
    /// matrices of fewer than 8 rows. The results of the copy differ from those of `data`
    /// in float rounding only (each row's sum runs in another order).
    public func interleavedForDecode() -> WeightMatrix { interleavedForDecode(sourceDone: nil) }

    /// ``interleavedForDecode()``, calling `sourceDone` as in ``copiedForDecode(sourceDone:)``.
    func interleavedForDecode(sourceDone: ((Int) -> Void)?) -> WeightMatrix {
        guard interleaved == nil, InterleavedRows.supports(type), rows >= InterleavedRows.groupRows, cols > 0 else { return self }
        var copy = self
        copy.interleaved = InterleavedRows(self, sourceDone: sourceDone)
        return copy
    }

    /// How many bytes of the original rows a copy for decode reads between two calls of its
    /// `sourceDone` (``copiedForDecode(sourceDone:)``): the most of a matrix's original
    /// pages that are resident beside its copy while it is made.
    static let releaseStepBytes = 4 << 20

    /// Bytes of the decode copy made by ``interleavedForDecode()`` (0 without one).
    public var interleavedByteCount: Int { interleaved?.byteCount ?? 0 }

    /// Bytes one matrix-vector product reads: the interleaved copy and the rows after its
    /// last group where there is a copy (a little more than ``byteCount``: odd block
    /// counts' padding, Q4_K's unpacked scales), else the rows.
    public var streamedByteCount: Int {
        guard let interleaved else { return byteCount }
        return interleaved.byteCount + (rows - interleaved.groups * InterleavedRows.groupRows) * rowBytes
    }

    /// This matrix with its rows in memory of its own, in large pages (LargePages.swift),
    /// for the decode step that streams them once a token: ``interleavedForDecode()`` where
    /// this build has interleaved kernels for the type (rows past the last whole group of
    /// 8 stay in `data`), else a plain copy of the rows, which `data` then points to. Either
    /// way the owner of the original bytes may release their pages
    /// (`GGUFFile.releaseResidentPages(of:)`). Products of the plain copy are those of the
    /// original, bit for bit (the same bytes).
    ///
    /// `sourceDone`, when given, is called while the copy is made with the bytes of `data`
    /// read so far (a growing prefix of whole rows, every `releaseStepBytes` or so), which
    /// the copy does not read again: an owner that releases them as they come
    /// (`GGUFFile.releaseResidentPages(of:prefix:)`) holds at most that much of the
    /// original beside the copy, instead of the whole matrix twice until the end.
    public func copiedForDecode(sourceDone: ((Int) -> Void)? = nil) -> WeightMatrix {
        let interleavedCopy = interleavedForDecode(sourceDone: sourceDone)
        guard interleavedCopy.interleaved == nil, ownRows == nil, byteCount > 0 else { return interleavedCopy }
        let memory = LargePages.allocate(byteCount: byteCount)
        let step = max(rowBytes, Self.releaseStepBytes / rowBytes * rowBytes)
        var done = 0
        while done < byteCount {
            let n = min(step, byteCount - done)
            (memory.pointer + done).copyMemory(from: data + done, byteCount: n)
            done += n
            if done < byteCount { sourceDone?(done) }
        }
        var copy = self
        copy.data = UnsafeRawPointer(memory.pointer)
        copy.ownRows = memory
        return copy
    }

    /// Bytes of the rows held by this matrix in memory of its own (``copiedForDecode()``):
    /// its interleaved copy or its plain copy, 0 for a view of the original bytes.
    public var decodeCopyByteCount: Int { interleaved?.byteCount ?? ownRows?.byteCount ?? 0 }

    /// The first byte of row `r` in `data`. (With an interleaved copy whose owner released
    /// the pages of `data`, reading a row brings its pages back; ``dequantize(rows:into:)``
    /// and the matmuls read the copy instead.)
    @inline(__always)
    public func row(_ r: Int) -> UnsafeRawPointer { data + r * rowBytes }

    /// Calls `body` with row `r`'s bytes in the stored format: from the interleaved copy
    /// when it holds the row, else in place in `data`.
    @inline(__always)
    func withStoredRow<R>(_ r: Int, _ body: (UnsafeRawPointer) -> R) -> R {
        if let interleaved, r < interleaved.groups * InterleavedRows.groupRows {
            return withUnsafeTemporaryAllocation(byteCount: rowBytes, alignment: 64) { buffer in
                interleaved.copyRow(r, into: buffer.baseAddress!)
                return body(UnsafeRawPointer(buffer.baseAddress!))
            }
        }
        return body(row(r))
    }

    /// `y[r] = dot(row r, x)` for every row, split over the pool's threads (on the calling
    /// thread when `pool` is nil). `x` must hold `cols` values; `y` room for `rows`.
    public func matvec(_ x: QuantizedActivations, into y: UnsafeMutablePointer<Float>, pool: ThreadPool? = nil) {
        precondition(x.count == cols, "matvec: \(x.count) activations for \(cols) columns")
        matvecWork(x, rows: 0..<1, into: y).run(on: pool)
    }

    /// `y_t = W x_t` for the activation rows `rows` of `x` (quantized by
    /// ``QuantizedActivations/quantizeRows(_:rows:cols:keepingFloats:pool:)`` in rows of
    /// `cols`, the floats kept for F32/F16/BF16 weights): row `t`'s result goes to
    /// `y + t * self.rows`. Each row's result is bit-identical to ``matvec(_:into:pool:)``
    /// of that row alone, whatever the other rows: every (weight row, activation row) pair
    /// gets the float operations of the one-row kernel in the same order. The weights are
    /// read from memory once for all rows: each thread takes tiles of weight rows (about
    /// 16 KB, which stay in its L1 cache) and multiplies every activation row with a tile
    /// before the next; on AVX2 builds the quantized formats unpack each weight block once
    /// for four (or two) activation rows (SteppedDots.swift). This is how several
    /// sequences decode in one step.
    public func matvec(_ x: QuantizedActivations, rows: Range<Int>, into y: UnsafeMutablePointer<Float>, pool: ThreadPool? = nil) {
        matvecWork(x, rows: rows, into: y).run(on: pool)
    }

    /// ``matvec(_:rows:into:pool:)`` of every product in `products`, which read the same
    /// activations (their matrices have `x`'s columns), in **one** parallel loop: the
    /// threads take tiles of all the matrices' rows from one queue, so they meet once for
    /// the lot instead of once per matrix (a decode step's q/k/v and gate/up products).
    /// Each result is bit-identical to the product's own ``matvec(_:rows:into:pool:)``.
    public static func matvec(
        _ products: [(matrix: WeightMatrix, y: UnsafeMutablePointer<Float>)], _ x: QuantizedActivations, rows: Range<Int>,
        pool: ThreadPool? = nil
    ) {
        run(products.map { $0.matrix.matvecWork(x, rows: rows, into: $0.y) }, pool: pool)
    }

    /// ``matvec(_:_:rows:pool:)`` where each product reads its own activation rows of `x`
    /// (a mixture's experts, each over the tokens routed to it).
    public static func matvec(
        _ products: [(matrix: WeightMatrix, rows: Range<Int>, y: UnsafeMutablePointer<Float>)], _ x: QuantizedActivations,
        pool: ThreadPool? = nil
    ) {
        run(products.map { $0.matrix.matvecWork(x, rows: $0.rows, into: $0.y) }, pool: pool)
    }

    /// The units of all of `works` in one parallel loop, in order: a chunk may run from the
    /// end of one matrix into the next.
    private static func run(_ works: [MatvecWork], pool: ThreadPool?) {
        let units = works.reduce(0) { $0 + $1.units }, minChunk = works.reduce(Int.max) { Swift.min($0, $1.minChunk) }
        let body: (Range<Int>) -> Void = { range in
            var first = 0
            for work in works {
                let lower = Swift.max(range.lowerBound - first, 0), upper = Swift.min(range.upperBound - first, work.units)
                if lower < upper { work.run(lower..<upper) }
                first += work.units
            }
        }
        guard let pool, units > 1 else {
            body(0..<units)
            return
        }
        pool.parallelFor(count: units, minChunk: minChunk, chunksPerThread: MatvecWork.chunksPerThread, body)
    }

    /// The products of one matvec as units of work for a parallel loop: whole groups of 8
    /// rows of the interleaved copy (the rows after the last group are one more unit, from
    /// `data`), or rows of `data`. A unit's results never depend on how the units are split.
    private func matvecWork(_ x: QuantizedActivations, rows: Range<Int>, into y: UnsafeMutablePointer<Float>) -> MatvecWork {
        precondition(
            rows.lowerBound >= 0 && x.count >= rows.upperBound * cols, "matvec: \(x.count) activations for rows \(rows) of \(cols)")
        type.checkActivations(x)
        precondition(type.usesQuantizedActivations || x.holdsFloats, "matvec: \(type) weights need the float activations")
        // One activation row goes through the one-row kernels, on a view of that row.
        let (view, activationRows, output) =
            rows.count == 1
            ? (x.view.row(rows.lowerBound, cols: cols), 0..<1, y + rows.lowerBound * self.rows) : (x.view, rows, y)
        if rows.isEmpty || self.rows == 0 {
            return MatvecWork(matrix: self, view: view, activationRows: 0..<0, y: y, units: 0, minChunk: 1)
        }
        #if LEAP_X86_AVX2
        if let interleaved {
            let groups = interleaved.groups
            return MatvecWork(
                matrix: self, view: view, activationRows: activationRows, y: output,
                units: groups + (self.rows > groups * InterleavedRows.groupRows ? 1 : 0),
                minChunk: Swift.max(1, 16_384 / Swift.max(1, interleaved.groupBytes)))
        }
        #endif
        // Chunks of at least ~16 KiB of weights: smaller ones cost more to hand out than
        // they take to compute.
        return MatvecWork(
            matrix: self, view: view, activationRows: activationRows, y: output, units: self.rows,
            minChunk: Swift.max(1, 16_384 / Swift.max(1, rowBytes)))
    }

    /// Quantizes `x` (`cols` floats) into `scratch`, then runs ``matvec(_:into:pool:)``.
    public func matvec(
        _ x: UnsafePointer<Float>, into y: UnsafeMutablePointer<Float>,
        scratch: QuantizedActivations, pool: ThreadPool? = nil
    ) {
        scratch.quantize(x, count: cols)
        matvec(scratch, into: y, pool: pool)
    }

    /// The scalar reference matvec: ``GGMLType/dotReference(_:_:)`` per row, one thread.
    public func matvecReference(_ x: QuantizedActivations, into y: UnsafeMutablePointer<Float>) {
        precondition(x.count == cols, "matvec: \(x.count) activations for \(cols) columns")
        for r in 0..<rows { y[r] = type.dotReference(row(r), x) }
    }

    /// Dequantizes rows `rows` into `dst` (`rows.count * cols` floats, row-major).
    public func dequantize(rows range: Range<Int>, into dst: UnsafeMutablePointer<Float>) {
        precondition(range.lowerBound >= 0 && range.upperBound <= rows, "dequantize: rows \(range) out of 0..<\(rows)")
        var r = range.lowerBound
        while r < range.upperBound {
            #if LEAP_X86_AVX2
            // Whole groups of the interleaved copy straight from its chunks.
            if let interleaved, r % InterleavedRows.groupRows == 0, r + InterleavedRows.groupRows <= range.upperBound,
                r < interleaved.groups * InterleavedRows.groupRows
            {
                interleaved.dequantize(group: r / InterleavedRows.groupRows, into: dst + (r - range.lowerBound) * cols, stride: cols)
                r += InterleavedRows.groupRows
                continue
            }
            #endif
            withStoredRow(r) { type.dequantizeRow($0, into: dst + (r - range.lowerBound) * cols, count: cols) }
            r += 1
        }
    }
}

/// Dispatches a run of rows to the fast dot of `type`; the switch makes each case a
/// specialized loop around that format's kernel.
func dotRows(
    _ type: GGMLType, _ base: UnsafeRawPointer, rowBytes: Int, rows: Range<Int>, nb: Int,
    _ a: ActivationView, _ y: UnsafeMutablePointer<Float>
) {
    switch type {
    case .f32: F32Format.dotRows(base, rowBytes: rowBytes, rows: rows, nb: nb, a, y)
    case .f16: F16Format.dotRows(base, rowBytes: rowBytes, rows: rows, nb: nb, a, y)
    case .bf16: BF16Format.dotRows(base, rowBytes: rowBytes, rows: rows, nb: nb, a, y)
    case .q8_0: Q8_0.dotRows(base, rowBytes: rowBytes, rows: rows, nb: nb, a, y)
    case .q4_0: Q4_0.dotRows(base, rowBytes: rowBytes, rows: rows, nb: nb, a, y)
    case .q4_1: Q4_1.dotRows(base, rowBytes: rowBytes, rows: rows, nb: nb, a, y)
    case .q5_0: Q5_0.dotRows(base, rowBytes: rowBytes, rows: rows, nb: nb, a, y)
    case .q5_1: Q5_1.dotRows(base, rowBytes: rowBytes, rows: rows, nb: nb, a, y)
    case .q4_K: Q4_K.dotRows(base, rowBytes: rowBytes, rows: rows, nb: nb, a, y)
    case .q5_K: Q5_K.dotRows(base, rowBytes: rowBytes, rows: rows, nb: nb, a, y)
    case .q6_K: Q6_K.dotRows(base, rowBytes: rowBytes, rows: rows, nb: nb, a, y)
    default: preconditionFailure("no kernels for \(type)")
    }
}

/// Which kernel implementations this build compiled in.
public enum KernelBuild {
    /// A one-line description, e.g. "x86-64 AVX2+FMA+F16C, AVX-512 VNNI".
    public static var description: String {
        #if LEAP_X86_AVX512VNNI
        return "x86-64 AVX2+FMA+F16C intrinsics, AVX-512 VNNI dot products"
        #elseif LEAP_X86_AVX2
        return "x86-64 AVX2+FMA+F16C intrinsics"
        #else
        return "portable Swift (LEAP_REF_PORTABLE or a CPU/OS without the x86 fast paths)"
        #endif
    }

    /// Whether this build multiplies batches of some quantized weights with the 8-bit
    /// integer matmul (x86 with AVX2, Q8_0 too with AVX-512 VNNI; which types:
    /// ``WeightMatrix/hasIntegerMatmul``).
    public static var hasIntegerMatmul: Bool {
        #if LEAP_X86_AVX2
        return true
        #else
        return false
        #endif
    }
}

/// One matrix's matvec as `units` units of work (``WeightMatrix``'s `matvecWork`): `run`
/// computes the outputs of a range of units for the activation rows `activationRows` of
/// `view` (row `t`'s results at `y + t * matrix.rows`).
private struct MatvecWork {
    let matrix: WeightMatrix
    let view: ActivationView
    let activationRows: Range<Int>
    let y: UnsafeMutablePointer<Float>
    /// Number of units: interleaved groups of 8 rows (plus one for the rows after them), or rows.
    let units: Int
    /// The fewest units worth handing to another thread (about 16 KiB of weights).
    let minChunk: Int
    /// Sub-ranges per thread of a parallel matvec: one, so each thread streams one
    /// contiguous run of the weights (a thread that finds the other's run untaken takes it
    /// too). Every sub-range a thread starts restarts its stream: the hardware prefetchers
    /// train again and the first lines arrive without the kernel's prefetch ahead. With
    /// the pool's usual four per thread, SmolLM2-135M Q4_0 decoded about 7% slower
    /// (docs/performance-log.md, "One run of weights per thread"); a loop that waits on a
    /// descheduled thread is `DecodeThreading`'s to notice.
    static let chunksPerThread = 1

    func run(_ range: Range<Int>) {
        let m = matrix, nb = m.cols / m.type.blockSize
        #if LEAP_X86_AVX2
        if let interleaved = m.interleaved {
            let groups = interleaved.groups
            interleaved.dotGroups(
                range.lowerBound..<Swift.min(range.upperBound, groups), view, cols: m.cols, activationRows: activationRows, y,
                outputs: m.rows)
            if range.upperBound > groups {
                dotRowsMulti(
                    m.type, m.data, rowBytes: m.rowBytes, rows: (groups * InterleavedRows.groupRows)..<m.rows, nb: nb, view,
                    cols: m.cols, activationRows: activationRows, y, outputs: m.rows)
            }
            return
        }
        #endif
        if activationRows.count == 1 {
            dotRows(m.type, m.data, rowBytes: m.rowBytes, rows: range, nb: nb, view, y + activationRows.lowerBound * m.rows)
            return
        }
        // Tiles of whole groups of 8 rows (the kernels reduce 8 rows at once).
        let tile = Swift.max(8, 16_384 / Swift.max(1, m.rowBytes) / 8 * 8)
        var r0 = range.lowerBound
        while r0 < range.upperBound {
            let r1 = Swift.min(range.upperBound, r0 + tile)
            dotRowsMulti(
                m.type, m.data, rowBytes: m.rowBytes, rows: r0..<r1, nb: nb, view, cols: m.cols, activationRows: activationRows, y,
                outputs: m.rows)
            r0 = r1
        }
    }

    /// All the units, on `pool` (on the calling thread when nil).
    func run(on pool: ThreadPool?) {
        guard let pool, pool.threads > 1, units > 1 else {
            run(0..<units)
            return
        }
        pool.parallelFor(count: units, minChunk: minChunk, chunksPerThread: Self.chunksPerThread, run)
    }
}
