import Foundation
import GGUF
import TestSupport
import Testing

@testable import Kernels

/// `WeightMatrix.copiedForDecode(sourceDone:)` reports growing prefixes of whole rows that
/// the copy has read for good, so that the owner of the original bytes can release them
/// while the copy is made (the model's file pages: a matrix is never resident twice).
@Suite struct DecodeCopyReleaseTests {
    /// For an interleaved type (Q4_0, Q8_0) and a plain-copy one (Q6_K, F16): the prefixes
    /// grow, are whole rows and stop short of the matrix; overwriting each reported prefix
    /// as it comes (as if its pages were gone) leaves the copy equal, byte for byte, to a
    /// copy made without the callback, and so are its products.
    @Test(arguments: [GGMLType.q4_0, .q8_0, .q6_K, .f16])
    func reportedPrefixesAreNotReadAgain(_ type: GGMLType) throws {
        let cols = 1024, rowBytes = type.rowBytes(count: cols)!
        let rows = (2 * WeightMatrix.releaseStepBytes + 3 * rowBytes) / rowBytes / 8 * 8 + 8
        let original = randomWeights(type, rows: rows, cols: cols, seed: 90 + UInt64(type.rawValue))
        var poisoned = original
        var prefixes: [Int] = []
        var copy: WeightMatrix?, reference: WeightMatrix?
        try original.withUnsafeBytes { raw in
            reference = try WeightMatrix(type: type, rows: rows, cols: cols, data: raw.baseAddress!).copiedForDecode()
        }
        try poisoned.withUnsafeMutableBytes { raw in
            let base = raw.baseAddress!
            let stored = try WeightMatrix(type: type, rows: rows, cols: cols, data: base)
            copy = stored.copiedForDecode { done in
                prefixes.append(done)
                memset(base, 0xA5, done)  // what a released page would be to the copy: gone
            }
        }
        let byteCount = rows * rowBytes
        #expect(prefixes.count >= 2, "\(type): \(prefixes.count) reports for \(byteCount) bytes")
        #expect(prefixes == prefixes.sorted() && Set(prefixes).count == prefixes.count)
        #expect(prefixes.allSatisfy { $0 > 0 && $0 < byteCount && $0 % rowBytes == 0 })
        let (c, r) = (try #require(copy), try #require(reference))
        #expect(c.decodeCopyByteCount == r.decodeCopyByteCount && c.decodeCopyByteCount > 0)
        // Every row as the copy gives it back equals the original row.
        var got = [Float](repeating: 0, count: rows * cols), expected = got
        c.dequantize(rows: 0..<rows, into: &got)
        r.dequantize(rows: 0..<rows, into: &expected)
        #expect(got.elementsEqual(expected) { $0.bitPattern == $1.bitPattern })
        var rng = SeededRandom(seed: 8)
        let activations = QuantizedActivations(capacity: cols)
        activations.quantize(rng.normal(cols, scale: 1))
        let pool = ThreadPool(threads: 2)
        var y = [Float](repeating: .nan, count: rows), yr = y
        c.matvec(activations, into: &y, pool: pool)
        r.matvec(activations, into: &yr, pool: pool)
        #expect(y.elementsEqual(yr) { $0.bitPattern == $1.bitPattern })
    }
}
