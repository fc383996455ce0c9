import Foundation
import GGUF
import TestSupport
import Testing

@testable import Kernels

/// Decode's interleaved copy of Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q4_K rows (InterleavedRows.swift,
/// InterleavedSuperBlocks.swift) serves
/// every read of the rows it holds, so it must give back the stored bytes exactly, and
/// everything that reads rows must get from it what it gets from the stored bytes. (Its
/// products: MatvecTests and MultiRowTests, which run both layouts.)
@Suite struct InterleavedRowsTests {
    static let types: [GGMLType] = [.q4_0, .q4_1, .q5_0, .q5_1, .q8_0, .q4_K]

    /// Odd and even block counts (an odd one ends in a half chunk), 5 tail rows; for the
    /// K-quants, odd and even super-block counts.
    static func shapes(_ type: GGMLType) -> [(rows: Int, cols: Int)] {
        type.blockSize == 256
            ? [(rows: 37, cols: 256 * 3), (rows: 37, cols: 256 * 2), (rows: 8, cols: 256)]
            : [(rows: 37, cols: 32 * 7), (rows: 37, cols: 32 * 8), (rows: 8, cols: 32)]
    }

    /// `copyRow` restores every row the copy holds, byte for byte.
    @Test(arguments: types)
    func copyRowRestoresTheStoredBytes(_ type: GGMLType) throws {
        for (rows, cols) in Self.shapes(type) {
            let bytes = randomWeights(type, rows: rows, cols: cols, seed: 11 + UInt64(cols))
            let rowBytes = type.rowBytes(count: cols)!
            try bytes.withUnsafeBytes { raw in
                let m = try WeightMatrix(type: type, rows: rows, cols: cols, data: raw.baseAddress!).interleavedForDecode()
                guard let interleaved = m.interleaved else {
                    #expect(!InterleavedRows.supports(type), "\(type): no copy made")
                    return
                }
                #expect(interleaved.groups == rows / 8)
                var restored = [UInt8](repeating: 0xAA, count: rowBytes)
                for r in 0..<(interleaved.groups * 8) {
                    restored.withUnsafeMutableBytes { interleaved.copyRow(r, into: $0.baseAddress!) }
                    #expect(restored == Array(bytes[(r * rowBytes)..<((r + 1) * rowBytes)]), "\(type) \(rows)x\(cols) row \(r)")
                }
            }
        }
    }

    /// Dequantized rows (embedding lookups, the F32 prompt path) and both prompt matmuls
    /// give the same bits from the copy as from the stored rows.
    @Test(arguments: types)
    func rowReadersGetTheSameBitsFromTheCopy(_ type: GGMLType) throws {
        let pool = ThreadPool(threads: 2)
        let (rows, cols) = (37, testCols(type)), tokens = 5
        let bytes = randomWeights(type, rows: rows, cols: cols, seed: 17)
        var rng = SeededRandom(seed: 4)
        let x = rng.normal(tokens * cols, scale: 0.9)
        let batch = QuantizedActivations(capacity: tokens * cols)
        batch.quantizeRows(x, rows: tokens, cols: cols, pool: pool)
        try bytes.withUnsafeBytes { raw in
            let stored = try WeightMatrix(type: type, rows: rows, cols: cols, data: raw.baseAddress!)
            let copy = stored.interleavedForDecode()
            var a = [Float](repeating: .nan, count: rows * cols), b = a
            stored.dequantize(rows: 0..<rows, into: &a)
            copy.dequantize(rows: 0..<rows, into: &b)
            #expect(sameBits(a, b), "\(type) dequantize: \(firstDifference(a, b))")
            // Ranges that start and end inside groups (whole groups are read straight from
            // the chunks, the rest row by row).
            for range in [3..<29, 8..<16, 5..<7, 30..<37] {
                var part = [Float](repeating: .nan, count: range.count * cols)
                copy.dequantize(rows: range, into: &part)
                let want = Array(a[(range.lowerBound * cols)..<(range.upperBound * cols)])
                #expect(sameBits(part, want), "\(type) dequantize \(range): \(firstDifference(part, want))")
            }

            var fa = [Float](repeating: .nan, count: tokens * rows), fb = fa
            x.withUnsafeBufferPointer {
                stored.matmul($0.baseAddress!, count: tokens, into: &fa, pool: pool)
                copy.matmul($0.baseAddress!, count: tokens, into: &fb, pool: pool)
            }
            #expect(sameBits(fa, fb), "\(type) F32 matmul: \(firstDifference(fa, fb))")

            // The integer matmul where this build has it for the type; elsewhere `matmul`
            // runs the matvecs, whose layouts differ in rounding only.
            guard stored.hasIntegerMatmul else { return }
            var ia = [Float](repeating: .nan, count: tokens * rows), ib = ia
            stored.matmul(batch, rows: tokens, into: &ia, pool: pool)
            copy.matmul(batch, rows: tokens, into: &ib, pool: pool)
            #expect(sameBits(ia, ib), "\(type) integer matmul: \(firstDifference(ia, ib))")
        }
    }
}
