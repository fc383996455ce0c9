import Foundation
import GGUF
import TestSupport
import Testing

@testable import Kernels

/// The 8-bit integer matmul of prompt processing (IntegerMatmul.swift): packing, batch
/// quantization, the scalar reference of the packed kernel, and the products against the
/// scalar reference dot product, on shapes whose rows are not a multiple of the 8-row
/// groups and whose activation rows are not a multiple of the 4-row tiles or of the 64-row
/// chunks.
@Suite struct IntegerMatmulTests {
    static let integerTypes: [GGMLType] = [.q8_0, .q4_0, .q4_1, .q5_0, .q5_1, .q4_K, .q5_K, .q6_K]

    /// Columns for the packing tests: several blocks, and two super-blocks for the K-quants.
    static func packCols(_ type: GGMLType) -> Int { type.blockSize == 256 ? 512 : 32 * 7 }

    /// The fast packing (AVX2 transposition) equals the scalar packing byte for byte,
    /// including the zeroed lanes of a last group of 5 rows.
    @Test(arguments: integerTypes)
    func packingMatchesReference(_ type: GGMLType) {
        let rows = 13, cols = Self.packCols(type), nb = cols / 32
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

    /// The packed levels and scales give back the weights: `d * u + m` (affine and
    /// symmetric layouts) or `d0 * (u - 32)` / `d1 * (u - 32)` (Q6_K's halves) equals the
    /// reference dequantization up to one rounding.
    @Test(arguments: integerTypes)
    func packedLevelsReproduceWeights(_ type: GGMLType) {
        let rows = 8, cols = Self.packCols(type), nb = cols / 32
        let bytes = randomWeights(type, rows: rows, cols: cols, seed: 9)
        let w = dequantizeReference(type, bytes, count: rows * cols)
        var packed = [UInt8](repeating: 0, count: nb * IntegerMatmul.groupBlockBytes)
        bytes.withUnsafeBytes { src in
            packed.withUnsafeMutableBytes {
                IntegerMatmul.packGroupReference(
                    type, src.baseAddress!, rowBytes: type.rowBytes(count: cols)!, rows: 0..<rows, nb: nb, $0.baseAddress!)
            }
        }
        let halves = IntegerMatmul.layout(type) == .halves
        packed.withUnsafeBytes { p in
            for r in 0..<rows {
                for i in 0..<nb {
                    let g = p.baseAddress! + i * IntegerMatmul.groupBlockBytes
                    let d = g.loadUnaligned(fromByteOffset: 256 + 4 * r, as: Float.self)
                    let m = g.loadUnaligned(fromByteOffset: 288 + 4 * r, as: Float.self)
                    for j in 0..<32 {
                        let u = Float(g.load(fromByteOffset: 32 * (j / 4) + 4 * r + j % 4, as: UInt8.self))
                        let value = halves ? (j < 16 ? d : m) * (u - 32) : d * u + m
                        let expected = w[r * cols + 32 * i + j]
                        #expect(
                            abs(value - expected) <= 1e-6 * (abs(d) * 256 + abs(m) * 64),
                            "\(type) row \(r) value \(32 * i + j): \(value) vs \(expected)")
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

    /// The scalar reference of the packed kernel, run on the reference packing, equals the
    /// reference dot product of each weight row with each activation row, up to float
    /// rounding: the packed layout and the three block maps (symmetric, affine, halves)
    /// describe the formats.
    @Test(arguments: integerTypes)
    func packedReferenceMatchesReferenceDots(_ type: GGMLType) {
        let rows = 6, cols = Self.packCols(type), tokens = 5, nb = cols / 32
        let bytes = randomWeights(type, rows: rows, cols: cols, seed: 13 + UInt64(type.rawValue))
        let rowBytes = type.rowBytes(count: cols)!
        var rng = SeededRandom(seed: 21)
        let x = rng.normal(tokens * cols, scale: 0.7)
        let batch = QuantizedActivations(capacity: tokens * cols)
        batch.quantizeRows(x, rows: tokens, cols: cols)
        var packed = [UInt8](repeating: 0, count: nb * IntegerMatmul.groupBlockBytes)
        var y = [Float](repeating: .nan, count: tokens * 8)
        bytes.withUnsafeBytes { w in
            packed.withUnsafeMutableBytes {
                IntegerMatmul.packGroupReference(type, w.baseAddress!, rowBytes: rowBytes, rows: 0..<rows, nb: nb, $0.baseAddress!)
            }
        }
        packed.withUnsafeBytes { p in
            IntegerMatmul.multiplyGroupReference(type, p.baseAddress!, nb: nb, batch.view, count: tokens, &y, ldy: 8, valid: rows)
        }
        let w = dequantizeReference(type, bytes, count: rows * cols)
        let one = QuantizedActivations(capacity: cols)
        for t in 0..<tokens {
            x.withUnsafeBufferPointer { one.quantize($0.baseAddress! + t * cols, count: cols) }
            for r in 0..<rows {
                let reference = bytes.withUnsafeBytes { type.dotReference($0.baseAddress! + r * rowBytes, one) }
                var magnitude: Float = 0
                for j in 0..<cols { magnitude += abs(w[r * cols + j] * Float(one.qs[j]) * one.d[j / 32]) }
                #expect(
                    abs(y[t * 8 + r] - reference) <= 1e-5 * magnitude + 1e-30,
                    "\(type) token \(t) row \(r): \(y[t * 8 + r]) vs \(reference)")
            }
            for r in rows..<8 { #expect(y[t * 8 + r].isNaN, "lane \(r) of a group of \(rows) rows was written") }
        }
    }

    /// Every product equals the scalar reference dot of the weight row with the activation
    /// row (quantized alone), up to float rounding: 19 weight rows (2 groups and 3),
    /// 70 activation rows (a 64-row chunk and 6 more: 4 + 1 + 1), on 1 and 2 threads.
    /// Formats without the integer kernels in this build take the row-by-row fallback and
    /// must agree too.
    @Test(arguments: integerTypes)
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
                #expect(m.hasIntegerMatmul == IntegerMatmul.supports(type))
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

    /// On x86 builds every format with 4-, 5- or 6-bit levels has the integer matmul
    /// (AVX2), and Q8_0 has it exactly when the build has VNNI; portable builds have none.
    @Test func integerMatmulCoverage() {
        let x86 = KernelBuild.description.contains("AVX2"), vnni = KernelBuild.description.contains("VNNI")
        for type in Self.integerTypes {
            #expect(IntegerMatmul.supports(type) == (type == .q8_0 ? vnni : x86), "\(type)")
        }
        for type in [GGMLType.f32, .f16, .bf16] { #expect(!IntegerMatmul.supports(type)) }
    }

    /// Weights with integer values and activations with unit scales make every float step
    /// exact, so the product must equal the integer dot product exactly, and the packed
    /// reference kernel must give the same: Q8_0 and Q4_0 (the symmetric path with its
    /// integer offset), Q4_1 with min -8 (the float min path), Q4_K and Q5_K with small
    /// integer scales and mins (a different scale and min per sub-block), Q6_K with small
    /// signed integer scales (a different scale per half of each block).
    @Test(arguments: [GGMLType.q8_0, .q4_0, .q4_1, .q4_K, .q5_K, .q6_K])
    func unitScalesGiveExactIntegerSums(_ type: GGMLType) throws {
        let rows = 11, cols = type.blockSize == 256 ? 512 : 32 * 9, tokens = 9, nb = cols / 32
        let bytes = integerValuedWeights(type, rows: rows, cols: cols, seed: 77 + UInt64(type.rawValue))
        let values = dequantizeReference(type, bytes, count: rows * cols)
        #expect(values.allSatisfy { $0 == $0.rounded() && abs($0) <= 128 }, "\(type): weights are not small integers")
        // Activations: integers with a 127 in every block, so the scale is exactly 1.
        var rng = SeededRandom(seed: 5)
        var x = [Float](repeating: 0, count: tokens * cols)
        for k in 0..<x.count { x[k] = k % 32 == 5 ? (k % 64 == 5 ? 127 : -127) : Float(Int.random(in: -127...127, using: &rng)) }
        let batch = QuantizedActivations(capacity: tokens * cols)
        batch.quantizeRows(x, rows: tokens, cols: cols)
        var y = [Float](repeating: .nan, count: tokens * rows)
        try bytes.withUnsafeBytes { raw in
            let m = try WeightMatrix(type: type, rows: rows, cols: cols, data: raw.baseAddress!)
            m.matmul(batch, rows: tokens, into: &y, pool: ThreadPool(threads: 2))
        }
        // The packed reference on the first group.
        let rowBytes = type.rowBytes(count: cols)!
        var packed = [UInt8](repeating: 0, count: nb * IntegerMatmul.groupBlockBytes)
        var yReference = [Float](repeating: .nan, count: tokens * 8)
        bytes.withUnsafeBytes { w in
            packed.withUnsafeMutableBytes {
                IntegerMatmul.packGroupReference(type, w.baseAddress!, rowBytes: rowBytes, rows: 0..<8, nb: nb, $0.baseAddress!)
            }
        }
        packed.withUnsafeBytes { p in
            IntegerMatmul.multiplyGroupReference(type, p.baseAddress!, nb: nb, batch.view, count: tokens, &yReference, ldy: 8, valid: 8)
        }
        for t in 0..<tokens {
            for r in 0..<rows {
                var sum = 0
                for j in 0..<cols { sum += Int(values[r * cols + j]) * Int(x[t * cols + j]) }
                #expect(y[t * rows + r] == Float(sum), "\(type) token \(t) row \(r): \(y[t * rows + r]) vs \(sum)")
                if r < 8 { #expect(yReference[t * 8 + r] == Float(sum), "\(type) reference, token \(t) row \(r)") }
            }
        }
    }
}

/// Rows of `type` whose values are small integers (so that products with integer
/// activations are exact in Float): fp16 scales of 1 and integer mins/sub-block scales
/// small enough that no partial sum of 512 products with |a| <= 127 reaches 2^24.
func integerValuedWeights(_ type: GGMLType, rows: Int, cols: Int, seed: UInt64) -> [UInt8] {
    var rng = SeededRandom(seed: seed)
    let one = FloatBits.floatToHalf(1), minusEight = FloatBits.floatToHalf(-8)
    func half(_ h: UInt16) -> [UInt8] { [UInt8(h & 0xFF), UInt8(h >> 8)] }
    func random(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &rng) }
    var bytes: [UInt8] = []
    for _ in 0..<(rows * cols / type.blockSize) {
        switch type {
        case .q8_0:
            bytes += half(one)
            for _ in 0..<32 { bytes.append(UInt8(bitPattern: Int8(random(-128...127)))) }
        case .q4_0, .q4_1:
            bytes += half(one)
            if type == .q4_1 { bytes += half(minusEight) }
            for _ in 0..<16 { bytes.append(UInt8(random(0...255))) }
        case .q4_K, .q5_K:
            // d = dmin = 1, sub-block scales 1...3 and mins 0...20 (6-bit packed fields).
            bytes += half(one) + half(one)
            let sc = (0..<8).map { _ in UInt8(random(1...3)) }, m = (0..<8).map { _ in UInt8(random(0...20)) }
            var packed = [UInt8](repeating: 0, count: 12)
            for j in 0..<4 {
                packed[j] = sc[j]
                packed[j + 4] = m[j]
                packed[j + 8] = (sc[j + 4] & 0x0F) | (m[j + 4] & 0x0F) << 4
                packed[j] |= (sc[j + 4] >> 4) << 6
                packed[j + 4] |= (m[j + 4] >> 4) << 6
            }
            bytes += packed
            let body = type == .q5_K ? 160 : 128
            for _ in 0..<body { bytes.append(UInt8(random(0...255))) }
        case .q6_K:
            // Levels and high bits at random, int8 scales -3...3, d = 1 (at the end).
            for _ in 0..<192 { bytes.append(UInt8(random(0...255))) }
            for _ in 0..<16 { bytes.append(UInt8(bitPattern: Int8(random(-3...3)))) }
            bytes += half(one)
        default:
            fatalError("no integer-valued generator for \(type)")
        }
    }
    return bytes
}
