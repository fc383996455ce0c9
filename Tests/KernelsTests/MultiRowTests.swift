import Foundation
import GGUF
import Testing

@testable import Kernels

/// The products of several activation rows at once (batched decoding): each row's result
/// must be bit for bit what that row gets alone, whatever the other rows are, however many
/// there are, and wherever the row sits.
@Suite struct MultiRowTests {
    /// 37 weight rows (tiles of 8-row groups and a tail), 5 activation rows with
    /// outliers, 1 and 2 threads, every kernel type (the float types read the floats kept
    /// beside the 8-bit blocks).
    @Test(arguments: GGMLType.kernelTypes)
    func multiRowMatvecEqualsMatvecOfEachRow(_ type: GGMLType) throws {
        let rows = 37, cols = testCols(type), tokens = 5
        let bytes = randomWeights(type, rows: rows, cols: cols, seed: 50 + UInt64(type.rawValue))
        var rng = SeededRandom(seed: 9)
        var x = rng.normal(tokens * cols, scale: 1.3)
        for j in stride(from: 1, to: x.count, by: 89) { x[j] *= 30 }
        let batch = QuantizedActivations(capacity: tokens * cols)
        batch.quantizeRows(x, rows: tokens, cols: cols, keepingFloats: true)
        #expect(batch.holdsFloats && batch.count == tokens * cols)
        let one = QuantizedActivations(capacity: cols)
        for pool in [nil, ThreadPool(threads: 2)] {
            try bytes.withUnsafeBytes { raw in
                let m = try WeightMatrix(type: type, rows: rows, cols: cols, data: raw.baseAddress!)
                var all = [Float](repeating: .nan, count: tokens * rows)
                m.matvec(batch, rows: 0..<tokens, into: &all, pool: pool)
                // Rows 2..<4 only: the others stay untouched.
                var some = [Float](repeating: .nan, count: tokens * rows)
                m.matvec(batch, rows: 2..<4, into: &some, pool: pool)
                for t in 0..<tokens {
                    x.withUnsafeBufferPointer { one.quantize($0.baseAddress! + t * cols, count: cols) }
                    var alone = [Float](repeating: .nan, count: rows)
                    m.matvec(one, into: &alone, pool: pool)
                    let multi = Array(all[(t * rows)..<((t + 1) * rows)])
                    #expect(sameBits(multi, alone), "\(type) row \(t): \(firstDifference(multi, alone))")
                    let partial = Array(some[(t * rows)..<((t + 1) * rows)])
                    if (2..<4).contains(t) {
                        #expect(sameBits(partial, alone), "\(type) row \(t) of 2..<4")
                    } else {
                        let untouched = partial.allSatisfy { $0.isNaN }
                        #expect(untouched, "\(type) row \(t) is outside 2..<4")
                    }
                }
            }
        }
    }

    /// The matmul of a range of activation rows gives those rows exactly what the matmul
    /// of all of them gives (on VNNI builds the packed integer kernel, elsewhere the
    /// multi-row matvec).
    @Test(arguments: [GGMLType.q8_0, .q4_0, .q4_1, .q5_0, .q5_1, .q4_K])
    func matmulOfARowRangeEqualsThoseRowsOfTheWhole(_ type: GGMLType) throws {
        let rows = 19, cols = testCols(type), tokens = 13
        let bytes = randomWeights(type, rows: rows, cols: cols, seed: 70 + UInt64(type.rawValue))
        var rng = SeededRandom(seed: 10)
        let x = rng.normal(tokens * cols, scale: 1.1)
        let batch = QuantizedActivations(capacity: tokens * cols)
        batch.quantizeRows(x, rows: tokens, cols: cols, pool: ThreadPool(threads: 2))
        let pool = ThreadPool(threads: 2)
        try bytes.withUnsafeBytes { raw in
            let m = try WeightMatrix(type: type, rows: rows, cols: cols, data: raw.baseAddress!)
            var whole = [Float](repeating: .nan, count: tokens * rows)
            m.matmul(batch, rows: tokens, into: &whole, pool: pool)
            for range in [0..<1, 3..<8, 5..<13] {
                var part = [Float](repeating: .nan, count: tokens * rows)
                m.matmul(batch, rows: range, into: &part, pool: pool)
                let inside = Array(part[(range.lowerBound * rows)..<(range.upperBound * rows)])
                let expected = Array(whole[(range.lowerBound * rows)..<(range.upperBound * rows)])
                #expect(sameBits(inside, expected), "\(type) rows \(range): \(firstDifference(inside, expected))")
                let outside = part[..<(range.lowerBound * rows)] + part[(range.upperBound * rows)...]
                let untouched = outside.allSatisfy { $0.isNaN }
                #expect(untouched, "\(type) rows outside \(range)")
            }
        }
    }

    /// Rows of a width that is not whole blocks keep only their floats, as one row does.
    @Test func rowsOfFloatsOnly() {
        let cols = 20, rows = 3
        let x = (0..<(rows * cols)).map { Float($0) }
        let a = QuantizedActivations(capacity: rows * cols)
        a.quantizeRows(x, rows: rows, cols: cols, keepingFloats: true)
        #expect(a.holdsFloats && a.blockCount == 0 && a.count == rows * cols)
        for i in 0..<(rows * cols) { #expect(a.x[i] == x[i]) }
    }
}
