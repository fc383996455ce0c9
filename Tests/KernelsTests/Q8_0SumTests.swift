import Foundation
import GGUF
import TestSupport
import Testing

@testable import Kernels

/// Q8_0's decode kernels add exact integer block sums (Σ w·a of 4 values per lane, or of
/// the block per row in the interleaved copy) in the order the kernels document, bit for
/// bit, on every build. So the VNNI kernels (`vpdpbusd`) give the bits of the AVX2 ones
/// (`vpmaddubsw` + `vpmaddwd`): a VNNI build decodes as an AVX2 build does. Levels over the
/// whole Int8 range (-128 too), signed fp16 scales, activations with outliers (large block
/// sums Σa, which a bias taken off in floats would round differently).
@Suite struct Q8_0SumTests {
    static let rows = 37, cols = 32 * 7, tokens = 3  // 4 groups of 8 and a tail; odd block count

    static func weights() -> [UInt8] {
        var rng = SeededRandom(seed: 23)
        let nb = cols / 32
        var bytes = [UInt8](repeating: 0, count: rows * nb * 34)
        let scales = rng.normal(rows * nb, scale: 0.05)
        bytes.withUnsafeMutableBytes { p in
            for b in 0..<(rows * nb) {
                storeHalf(p.baseAddress! + 34 * b, 0, scales[b])
                for j in 0..<32 { p[34 * b + 2 + j] = UInt8(truncatingIfNeeded: rng.next()) }
            }
        }
        return bytes
    }

    /// The documented order: x86 row-major rows (and a copy's tail rows), 8 lanes of 4
    /// values each, `acc += (d·da) · sum` fused, then `hsum`'s tree; x86 interleaved rows,
    /// one FMA per block; portable builds, `sumf += sum · (d·da)` unfused.
    static func expected(_ w: [UInt8], row r: Int, _ a: QuantizedActivations, activationRow t: Int, interleaved: Bool) -> Float {
        let nb = cols / 32, x86 = InterleavedRows.supports(.q8_0)
        var lanes = [Float](repeating: 0, count: 8), sequential: Float = 0
        w.withUnsafeBytes { p in
            for i in 0..<nb {
                let block = p.baseAddress! + 34 * (r * nb + i), ab = t * nb + i
                let scale = loadHalfReference(block, 0) * a.d[ab]
                var sums = [Int32](repeating: 0, count: 8)
                for j in 0..<32 {
                    sums[j / 4] += Int32(Int8(bitPattern: block.load(fromByteOffset: 2 + j, as: UInt8.self))) * Int32(a.qs[32 * ab + j])
                }
                let sum = sums.reduce(0, +)
                if !x86 {
                    sequential += Float(sum) * scale
                } else if interleaved {
                    sequential = sequential.addingProduct(scale, Float(sum))
                } else {
                    for k in 0..<8 { lanes[k] = lanes[k].addingProduct(scale, Float(sums[k])) }
                }
            }
        }
        if !x86 || interleaved { return sequential }
        return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))
    }

    @Test func decodeKernelsSumExactIntegersInTheDocumentedOrder() throws {
        let w = Self.weights(), rows = Self.rows, cols = Self.cols, tokens = Self.tokens
        var rng = SeededRandom(seed: 5)
        var x = rng.normal(tokens * cols, scale: 0.5)
        for j in stride(from: 3, to: x.count, by: 41) { x[j] = 40 + Float(j % 7) }  // outliers, mostly one sign
        let batch = QuantizedActivations(capacity: tokens * cols)
        batch.quantizeRows(x, rows: tokens, cols: cols)
        let one = QuantizedActivations(capacity: cols)
        try w.withUnsafeBytes { raw in
            for (layout, m) in decodeLayouts(try WeightMatrix(type: .q8_0, rows: rows, cols: cols, data: raw.baseAddress!)) {
                let copied = 8 * (m.interleaved?.groups ?? 0)
                var all = [Float](repeating: .nan, count: tokens * rows)
                m.matvec(batch, rows: 0..<tokens, into: &all)  // the multi-row kernels
                for t in 0..<tokens {
                    x.withUnsafeBufferPointer { one.quantize($0.baseAddress! + t * cols, count: cols) }
                    var alone = [Float](repeating: .nan, count: rows)
                    m.matvec(one, into: &alone)  // the one-row kernels
                    let expected = (0..<rows).map { Self.expected(w, row: $0, batch, activationRow: t, interleaved: $0 < copied) }
                    let multi = Array(all[(t * rows)..<((t + 1) * rows)])
                    let oneRowSame = sameBits(alone, expected), multiRowSame = sameBits(multi, expected)
                    #expect(oneRowSame, "\(layout) activation row \(t), one row: \(firstDifference(alone, expected))")
                    #expect(multiRowSame, "\(layout) activation row \(t), multi-row: \(firstDifference(multi, expected))")
                }
            }
        }
    }
}
