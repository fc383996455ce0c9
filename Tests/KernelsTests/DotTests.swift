import Foundation
import GGUF
import TestSupport
import Testing

@testable import Kernels

/// Odd sizes: an odd number of blocks, and rows that do not split evenly over threads.
func testCols(_ type: GGMLType) -> Int { type.blockSize == 256 ? 256 * 3 : 32 * 7 }

@Suite struct DotTests {
    /// Fast dot == scalar reference, up to float summation order (1e-5 of the sum of
    /// |terms|), and the reference is within the activation-quantization bound of the exact
    /// float dot product: |sum w (x - q da)| <= sum |w| da / 2.
    @Test(arguments: GGMLType.kernelTypes)
    func fastDotMatchesReference(_ type: GGMLType) {
        let cols = testCols(type), rows = 5
        let weights = randomWeights(type, rows: rows, cols: cols, seed: UInt64(type.rawValue) + 11)
        let rowBytes = type.rowBytes(count: cols)!
        var rng = SeededRandom(seed: 3)
        let x = rng.normal(cols, scale: 1.5)
        let acts = QuantizedActivations(capacity: cols)
        acts.quantize(x)
        for r in 0..<rows {
            let rowData = Array(weights[(r * rowBytes)..<((r + 1) * rowBytes)])
            let w = dequantizeReference(type, rowData, count: cols)
            let (fast, reference) = rowData.withUnsafeBytes { (type.dot($0.baseAddress!, acts), type.dotReference($0.baseAddress!, acts)) }
            var exact = 0.0, magnitude = 0.0, quantBound = 0.0
            for j in 0..<cols {
                exact += Double(w[j]) * Double(x[j])
                magnitude += abs(Double(w[j]) * Double(x[j]))
                quantBound += abs(Double(w[j])) * Double(acts.d[j / 32]) / 2
            }
            #expect(magnitude > 0)
            #expect(
                abs(Double(fast) - Double(reference)) <= 1e-5 * magnitude,
                "\(type) row \(r): fast \(fast) vs reference \(reference)")
            if type.usesQuantizedActivations {
                #expect(
                    abs(Double(reference) - exact) <= quantBound * 1.001 + 1e-5 * magnitude,
                    "\(type) row \(r): reference \(reference) vs exact \(exact), bound \(quantBound)")
            } else {
                #expect(abs(Double(reference) - exact) <= 1e-5 * magnitude, "\(type) row \(r): \(reference) vs \(exact)")
            }
        }
    }

    /// The real K-quant and Q5/Q8 rows from the sample file through the dot kernels.
    @Test(arguments: Fixtures.dequantizeCases)
    func dotOnRealRows(_ c: FixtureCase) {
        let type = c.ggmlType
        let rowBytes = type.rowBytes(count: c.cols)!
        let blocks = c.blocks, w = c.floats
        var rng = SeededRandom(seed: 17)
        let x = rng.normal(c.cols)
        let acts = QuantizedActivations(capacity: c.cols)
        acts.quantize(x)
        for r in 0..<c.rows {
            let (fast, reference) = blocks.withUnsafeBytes {
                (type.dot($0.baseAddress! + r * rowBytes, acts), type.dotReference($0.baseAddress! + r * rowBytes, acts))
            }
            var exact = 0.0, magnitude = 0.0, quantBound = 0.0
            for j in 0..<c.cols {
                let wj = Double(w[r * c.cols + j])
                exact += wj * Double(x[j])
                magnitude += abs(wj * Double(x[j]))
                quantBound += abs(wj) * Double(acts.d[j / 32]) / 2
            }
            #expect(abs(Double(fast) - Double(reference)) <= 1e-5 * magnitude, "\(c) row \(r): \(fast) vs \(reference)")
            let bound = type.usesQuantizedActivations ? quantBound * 1.001 + 1e-5 * magnitude : 1e-5 * magnitude
            #expect(abs(Double(reference) - exact) <= bound, "\(c) row \(r): \(reference) vs exact \(exact)")
        }
    }
}

@Suite struct MatvecTests {
    /// Threaded matvec equals single-threaded matvec bit for bit (each row is computed by
    /// the same kernel) and the per-row reference within tolerance; also at sizes that do
    /// not divide evenly over the threads.
    @Test(arguments: GGMLType.kernelTypes)
    func matvecMatchesReference(_ type: GGMLType) throws {
        let pool = ThreadPool(threads: 3)
        let cols = testCols(type)
        // 301 rows: more than one chunk for every type (chunks hold >= 16 KiB of weights),
        // with chunk boundaries that split the 8-row groups differently.
        for rows in [1, 37, 301] {
            let bytes = randomWeights(type, rows: rows, cols: cols, seed: 42 + UInt64(rows))
            var rng = SeededRandom(seed: 8)
            let x = rng.normal(cols)
            let acts = QuantizedActivations(capacity: cols + 64)
            try bytes.withUnsafeBytes { raw in
                let stored = try WeightMatrix(type: type, rows: rows, cols: cols, data: raw.baseAddress!)
                for (layout, w) in decodeLayouts(stored) {
                    var single = [Float](repeating: .nan, count: rows)
                    var threaded = single, reference = single, viaFloats = single
                    x.withUnsafeBufferPointer { xp in
                        w.matvec(xp.baseAddress!, into: &viaFloats, scratch: acts, pool: pool)
                    }
                    w.matvec(acts, into: &single)
                    w.matvec(acts, into: &threaded, pool: pool)
                    w.matvecReference(acts, into: &reference)
                    #expect(sameBits(single, threaded), "\(type) \(layout) \(rows) rows: \(firstDifference(single, threaded))")
                    #expect(sameBits(single, viaFloats))
                    let rowBytes = type.rowBytes(count: cols)!
                    for r in 0..<rows {
                        // Tolerance from the magnitude of the terms, not of the result (which may cancel).
                        let w = dequantizeReference(type, Array(bytes[(r * rowBytes)..<((r + 1) * rowBytes)]), count: cols)
                        var magnitude: Float = 0
                        for j in 0..<cols { magnitude += abs(w[j] * acts.x[j]) }
                        #expect(
                            abs(single[r] - reference[r]) <= 1e-5 * magnitude, "\(type) \(layout) row \(r): \(single[r]) vs \(reference[r])"
                        )
                    }
                }
            }
        }
    }

    /// The decode kernels' interleaved copy: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q4_K get one on x86 builds
    /// with AVX2 (where the integer matmul exists too) and no other type or build does; it
    /// holds the whole groups of 8 rows in chunks of two blocks (an odd block count padded
    /// to a whole chunk) or, for Q4_K, of one super-block, and never a matrix of fewer rows.
    @Test func interleavedCopyHoldsTheWholeGroupsOfRows() throws {
        #expect(InterleavedRows.supports(.q4_0) == KernelBuild.hasIntegerMatmul)
        #expect(InterleavedRows.supports(.q4_1) == KernelBuild.hasIntegerMatmul)
        for type in GGMLType.kernelTypes {
            let interleavedTypes: [GGMLType] = [.q4_0, .q4_1, .q5_0, .q5_1, .q8_0, .q4_K]
            #expect(InterleavedRows.supports(type) == (KernelBuild.hasIntegerMatmul && interleavedTypes.contains(type)), "\(type)")
            for rows in [5, 8, 37] {
                let cols = testCols(type)
                let bytes = randomWeights(type, rows: rows, cols: cols, seed: 3 + UInt64(rows))
                try bytes.withUnsafeBytes { raw in
                    let m = try WeightMatrix(type: type, rows: rows, cols: cols, data: raw.baseAddress!).interleavedForDecode()
                    // Chunks of two blocks: 2 x (16 bytes of d [+ 16 of m] + 128, 160 or 256 of levels);
                    // Q4_K's of one super-block: 32 bytes of d and dmin, 128 of scales and mins, 1,024 of levels.
                    let chunkBytes = [GGMLType.q4_0: 288, .q4_1: 320, .q5_0: 352, .q5_1: 384, .q8_0: 544, .q4_K: 1184][type] ?? 0
                    let nb = cols / 32, chunks = type == .q4_K ? nb / 8 : (nb + 1) / 2
                    let expected = InterleavedRows.supports(type) && rows >= 8 ? (rows / 8) * chunks * chunkBytes : 0
                    #expect(m.interleavedByteCount == expected, "\(type) \(rows) rows")
                    #expect(m.interleavedForDecode().interleavedByteCount == expected, "\(type): a second call keeps the copy")
                }
            }
        }
    }

    @Test func weightMatrixRejectsBadShapes() {
        let bytes = [UInt8](repeating: 0, count: 1024)
        bytes.withUnsafeBytes { raw in
            #expect(throws: KernelError.rowNotWholeBlocks(type: .q4_0, cols: 40)) {
                try WeightMatrix(type: .q4_0, rows: 2, cols: 40, data: raw.baseAddress!)
            }
            #expect(throws: KernelError.unsupportedType(.iq2_xs)) {
                try WeightMatrix(type: .iq2_xs, rows: 1, cols: 256, data: raw.baseAddress!)
            }
            #expect(throws: KernelError.badShape(rows: -1, cols: 32)) {
                try WeightMatrix(type: .f32, rows: -1, cols: 32, data: raw.baseAddress!)
            }
        }
        #expect(KernelError.unsupportedType(.iq2_xs).description.contains("iq2_xs"))
    }
}

@Suite struct BLASTests {
    @Test func sgemmMatchesNaiveProduct() {
        var rng = SeededRandom(seed: 1)
        let m = 5, n = 7, k = 9
        let a = rng.normal(m * k), b = rng.normal(k * n), bt = (0..<(n * k)).map { i in b[(i % k) * n + i / k] }
        var c = [Float](repeating: 1, count: m * n), ct = c
        BLAS.sgemm(m: m, n: n, k: k, a: a, lda: k, b: b, ldb: n, c: &c, ldc: n)
        BLAS.sgemm(transB: true, m: m, n: n, k: k, alpha: 2, a: a, lda: k, b: bt, ldb: k, beta: 1, c: &ct, ldc: n)
        for i in 0..<m {
            for j in 0..<n {
                var s: Float = 0
                for l in 0..<k { s += a[i * k + l] * b[l * n + j] }
                #expect(abs(c[i * n + j] - s) <= 1e-5 * max(1, abs(s)))
                #expect(abs(ct[i * n + j] - (2 * s + 1)) <= 1e-5 * max(1, abs(2 * s + 1)))
            }
        }
    }

    /// matmul (dequantized tiles through sgemm) equals the float product of the
    /// dequantized weights, for more rows than one tile.
    @Test(arguments: [GGMLType.f32, .q4_0, .q6_K])
    func matmulMatchesDequantizedProduct(_ type: GGMLType) throws {
        let rows = WeightMatrix.matmulTileRows + 3, cols = testCols(type), tokens = 3
        let bytes = randomWeights(type, rows: rows, cols: cols, seed: 77)
        var rng = SeededRandom(seed: 2)
        let x = rng.normal(tokens * cols)
        var y = [Float](repeating: .nan, count: tokens * rows)
        let pool = ThreadPool(threads: 2)
        let w = try bytes.withUnsafeBytes { raw in
            let w = try WeightMatrix(type: type, rows: rows, cols: cols, data: raw.baseAddress!)
            w.matmul(x, count: tokens, into: &y, pool: pool)
            var all = [Float](repeating: 0, count: rows * cols)
            w.dequantize(rows: 0..<rows, into: &all)
            return all
        }
        for t in 0..<tokens {
            for r in 0..<rows {
                var s: Double = 0, mag: Double = 0
                for c in 0..<cols {
                    s += Double(x[t * cols + c]) * Double(w[r * cols + c])
                    mag += abs(Double(x[t * cols + c]) * Double(w[r * cols + c]))
                }
                #expect(abs(Double(y[t * rows + r]) - s) <= 1e-5 * mag + 1e-12, "token \(t) row \(r)")
            }
        }
    }
}
