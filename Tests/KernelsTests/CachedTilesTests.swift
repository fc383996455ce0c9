import Foundation
import GGUF
import TestSupport
import Testing

@testable import Kernels

/// The F32 product of short prompt chunks (`WeightMatrix.matmulByCachedTiles`): the weights
/// dequantized tile by tile into per-thread scratch and multiplied by one-thread OpenBLAS
/// products. It must equal the product of the reference-dequantized weights up to float
/// summation order, cover every row whatever the tiles, and not depend on the threads.
@Suite struct CachedTilesTests {
    static let types: [GGMLType] = [.q4_0, .q4_1, .q5_0, .q8_0, .q4_K, .q6_K]

    @Test(arguments: types)
    func cachedTilesEqualTheReferenceProduct(_ type: GGMLType) throws {
        // 150 rows: several tiles and a partial last one (and, for the interleaved
        // formats, 6 tail rows past the last group of 8).
        let cols = type.blockSize == 256 ? 1024 : 32 * 24, rows = 150, tokens = 7
        let tileRows = WeightMatrix.cachedTileRows(cols: cols)
        #expect(rows > 2 * tileRows && rows % tileRows != 0, "the shape must cut several tiles")
        let bytes = randomWeights(type, rows: rows, cols: cols, seed: 23)
        let reference = dequantizeReference(type, bytes, count: rows * cols)
        var rng = SeededRandom(seed: 8)
        let x = rng.normal(tokens * cols, scale: 0.8)
        var expected = [Double](repeating: 0, count: tokens * rows), scale = expected
        for t in 0..<tokens {
            for r in 0..<rows {
                for j in 0..<cols {
                    let p = Double(x[t * cols + j]) * Double(reference[r * cols + j])
                    expected[t * rows + r] += p
                    scale[t * rows + r] += abs(p)
                }
            }
        }
        var results: [[Float]] = []
        try bytes.withUnsafeBytes { raw in
            let stored = try WeightMatrix(type: type, rows: rows, cols: cols, data: raw.baseAddress!)
            for matrix in [stored, stored.interleavedForDecode()] {
                for threads in [1, 2] {
                    let pool = ThreadPool(threads: threads)
                    let tiles = UnsafeMutablePointer<Float>.allocate(
                        capacity: WeightMatrix.cachedTilesScratchCount(cols: cols, threads: threads))
                    defer { tiles.deallocate() }
                    var y = [Float](repeating: .nan, count: tokens * rows)
                    x.withUnsafeBufferPointer {
                        matrix.matmulByCachedTiles($0.baseAddress!, count: tokens, into: &y, scratch: tiles, pool: pool)
                    }
                    results.append(y)
                }
            }
        }
        for (i, y) in results.enumerated() {
            for k in 0..<y.count {
                let error = abs(Double(y[k]) - expected[k])
                #expect(error <= 1e-5 * scale[k] + 1e-30, "\(type) result \(i) [\(k)]: \(y[k]) vs \(expected[k])")
                if error > 1e-5 * scale[k] + 1e-30 { return }
            }
        }
        // Each tile is one single-threaded product: the threads change who computes it, not
        // its bits; the interleaved copy dequantizes to the same floats.
        for y in results.dropFirst() { #expect(sameBits(y, results[0]), "\(type): \(firstDifference(y, results[0]))") }
    }
}

extension CachedTilesTests {
    /// A row's result does not depend on how many rows the chunk has (a prompt split into
    /// pieces must give the logits of the whole prompt, ConsistencyTests).
    @Test(arguments: [GGMLType.q4_0, .q4_1, .q5_0, .q5_1, .q8_0, .q4_K])
    func aRowsResultDoesNotDependOnTheChunk(_ type: GGMLType) throws {
        let rows = 128, cols = type.blockSize == 256 ? 512 : 384, pool = ThreadPool(threads: 2)
        let bytes = randomWeights(type, rows: rows, cols: cols, seed: 5)
        var rng = SeededRandom(seed: 9)
        let x = rng.normal(18 * cols, scale: 0.8)
        let tiles = UnsafeMutablePointer<Float>.allocate(capacity: WeightMatrix.cachedTilesScratchCount(cols: cols, threads: 2))
        defer { tiles.deallocate() }
        try bytes.withUnsafeBytes { raw in
            let m = try WeightMatrix(type: type, rows: rows, cols: cols, data: raw.baseAddress!).interleavedForDecode()
            var whole = [Float](repeating: .nan, count: 18 * rows), piece = [Float](repeating: .nan, count: 5 * rows)
            x.withUnsafeBufferPointer { m.matmulByCachedTiles($0.baseAddress!, count: 18, into: &whole, scratch: tiles, pool: pool) }
            x.withUnsafeBufferPointer { m.matmulByCachedTiles($0.baseAddress!, count: 5, into: &piece, scratch: tiles, pool: pool) }
            // Relative to the largest result of the row: OpenBLAS may take another kernel
            // for another number of rows (on Zen, 5 and 18 sum in different orders), which
            // moves a result near 0 by far more than its own size, but a row read from the
            // wrong place moves every result by about the row's scale.
            func rowScale(_ y: [Float], _ i: Int) -> Float { max(1e-6, y[(i * rows)..<((i + 1) * rows)].map(abs).max()!) }
            var worst: Float = 0
            for k in 0..<(5 * rows) { worst = max(worst, abs(whole[k] - piece[k]) / rowScale(whole, k / rows)) }
            #expect(worst < 1e-4, "\(type): \(worst)")
            // And the last rows of the chunk against a chunk of their own.
            var tail = [Float](repeating: .nan, count: 5 * rows)
            x.withUnsafeBufferPointer {
                m.matmulByCachedTiles($0.baseAddress! + 13 * cols, count: 5, into: &tail, scratch: tiles, pool: pool)
            }
            worst = 0
            for k in 0..<(5 * rows) { worst = max(worst, abs(whole[13 * rows + k] - tail[k]) / rowScale(tail, k / rows)) }
            #expect(worst < 1e-4, "\(type) last rows: \(worst)")
        }
    }
}
