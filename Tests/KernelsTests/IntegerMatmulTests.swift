import Foundation
import GGUF
import Testing

@testable import Kernels

/// The 8-bit integer matmul of prompt processing (IntegerMatmul.swift): packing, batch
/// quantization, and the products against the scalar reference dot product, on shapes
/// whose rows are not a multiple of the 8-row groups and whose activation rows are not a
/// multiple of the 4-row tiles or of the 64-row chunks.
@Suite struct IntegerMatmulTests {
    static let integerTypes: [GGMLType] = [.q8_0, .q4_0, .q4_1, .q5_0, .q5_1]

    /// The fast packing (AVX2 transposition) equals the scalar packing byte for byte,
    /// including the zeroed lanes of a last group of 5 rows.
    @Test(arguments: integerTypes)
    func packingMatchesReference(_ type: GGMLType) {
        let rows = 13, cols = 32 * 7, nb = cols / 32
        let bytes = randomWeights(type, rows: rows, cols: cols, seed: 5 + UInt64(type.rawValue))
        let rowBytes = type.rowBytes(count: cols)!
        let size = nb * IntegerMatmul.groupBlockBytes
        var fast = [UInt8](repeating: 0xAA, count: size), reference = [UInt8](repeating: 0x55, count: size)
        for range in [0..<8, 8..<13] {
            bytes.withUnsafeBytes { w in
                fast.withUnsafeMutableBytes {
                    IntegerMatmul.packGroup(type, w.baseAddress!, rowBytes: rowBytes, rows: range, nb: nb, $0.baseAddress!)
                }
                reference.withUnsafeMutableBytes {
                    IntegerMatmul.packGroupReference(type, w.baseAddress!, rowBytes: rowBytes, rows: range, nb: nb, $0.baseAddress!)
                }
            }
            #expect(fast == reference, "\(type) rows \(range)")
        }
    }

    /// The packed levels, scales and mins give back the weights: d * u + m equals the
    /// reference dequantization up to one rounding of the affine form.
    @Test(arguments: integerTypes)
    func packedLevelsReproduceWeights(_ type: GGMLType) {
        let rows = 8, cols = 32 * 3, nb = cols / 32
        let bytes = randomWeights(type, rows: rows, cols: cols, seed: 9)
        let w = dequantizeReference(type, bytes, count: rows * cols)
        var packed = [UInt8](repeating: 0, count: nb * IntegerMatmul.groupBlockBytes)
        bytes.withUnsafeBytes { src in
            packed.withUnsafeMutableBytes {
                IntegerMatmul.packGroupReference(
                    type, src.baseAddress!, rowBytes: type.rowBytes(count: cols)!, rows: 0..<rows, nb: nb, $0.baseAddress!)
            }
        }
        packed.withUnsafeBytes { p in
            for r in 0..<rows {
                for i in 0..<nb {
                    let g = p.baseAddress! + i * IntegerMatmul.groupBlockBytes
                    let d = g.loadUnaligned(fromByteOffset: 256 + 4 * r, as: Float.self)
                    let m = g.loadUnaligned(fromByteOffset: 288 + 4 * r, as: Float.self)
                    for j in 0..<32 {
                        let u = Float(g.load(fromByteOffset: 32 * (j / 4) + 4 * r + j % 4, as: UInt8.self))
                        let expected = w[r * cols + 32 * i + j]
                        #expect(
                            abs(d * u + m - expected) <= 1e-6 * (abs(d) * 256 + abs(m)),
                            "\(type) row \(r) value \(32 * i + j): \(d) * \(u) + \(m) vs \(expected)")
                    }
                }
            }
        }
    }

    /// quantizeRows gives each row exactly the blocks `quantize` gives it alone.
    @Test func quantizeRowsMatchesPerRowQuantization() {
        let rows = 11, cols = 32 * 5
        var rng = SeededRandom(seed: 4)
        let x = rng.normal(rows * cols, scale: 2)
        let batch = QuantizedActivations(capacity: rows * cols)
        batch.quantizeRows(x, rows: rows, cols: cols, pool: ThreadPool(threads: 2))
        #expect(batch.count == rows * cols && batch.blockCount == rows * 5 && !batch.holdsFloats)
        let one = QuantizedActivations(capacity: cols)
        for t in 0..<rows {
            x.withUnsafeBufferPointer { one.quantize($0.baseAddress! + t * cols, count: cols) }
            for j in 0..<cols { #expect(batch.qs[t * cols + j] == one.qs[j]) }
            for i in 0..<5 {
                #expect(batch.d[t * 5 + i].bitPattern == one.d[i].bitPattern)
                #expect(batch.s[t * 5 + i].bitPattern == one.s[i].bitPattern)
                #expect(batch.bsums[2 * (t * 5 + i)] == one.bsums[2 * i] && batch.bsums[2 * (t * 5 + i) + 1] == one.bsums[2 * i + 1])
            }
        }
    }

    /// Every product equals the scalar reference dot of the weight row with the activation
    /// row (quantized alone), up to float summation order: 19 weight rows (2 groups and 3),
    /// 70 activation rows (a 64-row chunk and 6 more: 4 + 1 + 1), on 1 and 2 threads. The
    /// K-quants take the row-by-row fallback and must agree too.
    @Test(arguments: integerTypes + [.q4_K, .q6_K])
    func matmulMatchesReferenceDots(_ type: GGMLType) throws {
        let rows = 19, cols = testCols(type), tokens = 70
        let bytes = randomWeights(type, rows: rows, cols: cols, seed: 31 + UInt64(type.rawValue))
        let rowBytes = type.rowBytes(count: cols)!
        let w = dequantizeReference(type, bytes, count: rows * cols)
        var rng = SeededRandom(seed: 8)
        var x = rng.normal(tokens * cols, scale: 1.2)
        for j in stride(from: 3, to: x.count, by: 97) { x[j] *= 40 }  // outliers, as in real residual streams
        let batch = QuantizedActivations(capacity: tokens * cols)
        batch.quantizeRows(x, rows: tokens, cols: cols)
        let one = QuantizedActivations(capacity: cols)
        for pool in [nil, ThreadPool(threads: 2)] {
            var y = [Float](repeating: .nan, count: tokens * rows)
            try bytes.withUnsafeBytes { raw in
                let m = try WeightMatrix(type: type, rows: rows, cols: cols, data: raw.baseAddress!)
                #expect(m.hasIntegerMatmul == (IntegerMatmul.isAvailable && Self.integerTypes.contains(type)))
                m.matmul(batch, rows: tokens, into: &y, pool: pool)
            }
            for t in 0..<tokens {
                x.withUnsafeBufferPointer { one.quantize($0.baseAddress! + t * cols, count: cols) }
                for r in 0..<rows {
                    let reference = bytes.withUnsafeBytes { type.dotReference($0.baseAddress! + r * rowBytes, one) }
                    var magnitude: Double = 0
                    for j in 0..<cols { magnitude += abs(Double(w[r * cols + j]) * Double(one.qs[j]) * Double(one.d[j / 32])) }
                    #expect(
                        abs(Double(y[t * rows + r]) - Double(reference)) <= 1e-5 * magnitude + 1e-30,
                        "\(type) token \(t) row \(r): \(y[t * rows + r]) vs reference \(reference)")
                }
            }
        }
    }

    /// Integer weights and activations with unit scales make every float step exact, so
    /// the product must equal the integer dot product exactly (Q8_0 and Q4_0: the
    /// symmetric path with its integer offset; Q4_1 with min -8: the float min path).
    @Test(arguments: [GGMLType.q8_0, .q4_0, .q4_1])
    func unitScalesGiveExactIntegerSums(_ type: GGMLType) throws {
        let rows = 11, cols = 32 * 9, tokens = 9, nb = cols / 32
        var rng = SeededRandom(seed: 77 + UInt64(type.rawValue))
        let one = FloatBits.floatToHalf(1), minusEight = FloatBits.floatToHalf(-8)
        var bytes: [UInt8] = [], levels: [Int] = []  // levels: the weight values
        for _ in 0..<(rows * nb) {
            switch type {
            case .q8_0:
                bytes += [UInt8(one & 0xFF), UInt8(one >> 8)]
                for _ in 0..<32 {
                    let q = Int.random(in: -128...127, using: &rng)
                    bytes.append(UInt8(bitPattern: Int8(q)))
                    levels.append(q)
                }
            default:
                bytes += [UInt8(one & 0xFF), UInt8(one >> 8)]
                if type == .q4_1 { bytes += [UInt8(minusEight & 0xFF), UInt8(minusEight >> 8)] }
                let u = (0..<32).map { _ in Int.random(in: 0...15, using: &rng) }
                for j in 0..<16 { bytes.append(UInt8(u[j] | u[j + 16] << 4)) }
                levels += u.map { $0 - 8 }
            }
        }
        // Activations: integers with a 127 in every block, so the scale is exactly 1.
        var x = [Float](repeating: 0, count: tokens * cols)
        for k in 0..<x.count { x[k] = k % 32 == 5 ? (k % 64 == 5 ? 127 : -127) : Float(Int.random(in: -127...127, using: &rng)) }
        let batch = QuantizedActivations(capacity: tokens * cols)
        batch.quantizeRows(x, rows: tokens, cols: cols)
        var y = [Float](repeating: .nan, count: tokens * rows)
        try bytes.withUnsafeBytes { raw in
            let m = try WeightMatrix(type: type, rows: rows, cols: cols, data: raw.baseAddress!)
            m.matmul(batch, rows: tokens, into: &y, pool: ThreadPool(threads: 2))
        }
        for t in 0..<tokens {
            for r in 0..<rows {
                var sum = 0
                for j in 0..<cols { sum += levels[r * cols + j] * Int(x[t * cols + j]) }
                #expect(y[t * rows + r] == Float(sum), "\(type) token \(t) row \(r)")
            }
        }
    }
}
