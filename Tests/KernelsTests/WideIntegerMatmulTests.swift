import Foundation
import GGUF
import TestSupport
import Testing

@testable import Kernels

/// The matmul with 16-bit activations (WideIntegerMatmul.swift), Q8_0's prompt product on
/// x86 builds: the rounding of the activations, the packing, the kernel against its scalar
/// reference bit for bit, and the products against the float product of the dequantized
/// weights with the unrounded activations.
@Suite struct WideIntegerMatmulTests {
    /// Activations with outliers (as in real residual streams), a block of zeros and one
    /// of exact ties (x / d = k + 0.5).
    static func activations(rows: Int, cols: Int, seed: UInt64) -> [Float] {
        var rng = SeededRandom(seed: seed)
        var x = rng.normal(rows * cols, scale: 1.3)
        for j in stride(from: 5, to: x.count, by: 89) { x[j] *= 300 }
        for j in 0..<32 { x[32 + j] = 0 }
        if x.count >= 96 {
            // max 32767 so that d = 1: every other value is a tie.
            for j in 0..<32 { x[64 + j] = j == 0 ? 32767 : Float(j) * 3 + 0.5 - 60 }
        }
        return x
    }

    /// The fast rounding equals the scalar reference bit for bit, and each value is within
    /// half a step of its level.
    @Test func quantizationMatchesReference() {
        let rows = 11, cols = 32 * 9
        let x = Self.activations(rows: rows, cols: cols, seed: 3)
        let fast = WideActivations(capacity: rows * cols), reference = WideActivations(capacity: rows * cols)
        x.withUnsafeBufferPointer {
            fast.quantizeRows($0.baseAddress!, rows: rows, cols: cols, pool: ThreadPool(threads: 2))
            reference.quantizeRowsReference($0.baseAddress!, rows: rows, cols: cols)
        }
        #expect(fast.rows == rows && fast.cols == cols)
        for k in 0..<(rows * cols) { #expect(fast.levels[k] == reference.levels[k], "value \(k)") }
        for b in 0..<(rows * cols / 32) { #expect(fast.scales[b].bitPattern == reference.scales[b].bitPattern, "block \(b)") }
        #expect(reference.scales[1] == 0 && (0..<32).allSatisfy { reference.levels[32 + $0] == 0 }, "the zero block")
        #expect(reference.scales[2] == 1, "the block of ties has unit scale")
        for j in 1..<32 {
            let v = x[64 + j]
            #expect(Float(reference.levels[64 + j]) == v.rounded(.toNearestOrEven), "tie \(v) rounds to even")
        }
        for k in 0..<(rows * cols) {
            let d = reference.scales[k / 32]
            #expect(abs(Float(reference.levels[k]) * d - x[k]) <= d * 0.5001 + 1e-30, "value \(k)")
        }
    }

    /// The 8-bit packing widened equals the scalar wide packing on every row of a group,
    /// from the stored rows and from the decode copy, including a last group of 5 rows.
    @Test(arguments: [32 * 7, 64 * 4])
    func packingMatchesReference(_ cols: Int) throws {
        let rows = 13, nb = cols / 32, type = GGMLType.q8_0
        let bytes = randomWeights(type, rows: rows, cols: cols, seed: 17 + UInt64(cols))
        let rowBytes = type.rowBytes(count: cols)!
        try bytes.withUnsafeBytes { raw in
            let stored = try WeightMatrix(type: type, rows: rows, cols: cols, data: raw.baseAddress!)
            for matrix in [stored, stored.interleavedForDecode()] {
                for (g, valid) in [(0, 8), (1, 5)] {
                    var fast = [UInt8](repeating: 0xAA, count: nb * WideIntegerMatmul.groupBlockBytes)
                    var reference = [UInt8](repeating: 0x55, count: nb * WideIntegerMatmul.groupBlockBytes)
                    reference.withUnsafeMutableBytes {
                        WideIntegerMatmul.packGroupReference(
                            raw.baseAddress!, rowBytes: rowBytes, rows: (8 * g)..<min(rows, 8 * g + 8), nb: nb, $0.baseAddress!)
                    }
                    if matrix.hasWideIntegerMatmul {
                        fast.withUnsafeMutableBytes { matrix.packWideGroup(g, into: $0.baseAddress!) }
                        // Lanes of missing rows hold no weights (their levels are unspecified).
                        for i in 0..<nb {
                            for lane in 0..<valid {
                                for j in 0..<16 {
                                    let at = i * WideIntegerMatmul.groupBlockBytes + 32 * j + 4 * lane
                                    #expect(fast[at..<(at + 4)] == reference[at..<(at + 4)], "group \(g) block \(i) lane \(lane) pair \(j)")
                                }
                                let at = i * WideIntegerMatmul.groupBlockBytes + 512 + 4 * lane
                                #expect(fast[at..<(at + 4)] == reference[at..<(at + 4)], "scale: group \(g) block \(i) lane \(lane)")
                            }
                            for lane in valid..<8 {
                                let at = i * WideIntegerMatmul.groupBlockBytes + 512 + 4 * lane
                                #expect(fast[at..<(at + 4)] == [0, 0, 0, 0], "missing row \(lane) has scale 0")
                            }
                        }
                    }
                    // The reference gives back the weights.
                    let w = dequantizeReference(type, bytes, count: rows * cols)
                    reference.withUnsafeBytes { p in
                        for lane in 0..<valid {
                            for i in 0..<nb {
                                let block = p.baseAddress! + i * WideIntegerMatmul.groupBlockBytes
                                let d = block.loadUnaligned(fromByteOffset: 512 + 4 * lane, as: Float.self)
                                for j in 0..<32 {
                                    let q = block.loadUnaligned(fromByteOffset: 32 * (j / 2) + 4 * lane + 2 * (j % 2), as: Int16.self)
                                    #expect(d * Float(q) == w[(8 * g + lane) * cols + 32 * i + j])
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Every product equals the scalar reference kernel (on the reference packing) bit for
    /// bit: the same integer sums, the same float steps. 19 weight rows (groups of 8, 8
    /// and 3), 70 activation rows (a 64-row chunk and 6 more: 4 + 1 + 1), 1 and 2 threads,
    /// with and without the decode copy.
    @Test(arguments: [32 * 9, 64 * 5])
    func matmulMatchesReferenceKernel(_ cols: Int) throws {
        guard WideIntegerMatmul.supports(.q8_0) else { return }
        let rows = 19, tokens = 70, nb = cols / 32, type = GGMLType.q8_0
        let bytes = randomWeights(type, rows: rows, cols: cols, seed: 41 + UInt64(cols))
        let rowBytes = type.rowBytes(count: cols)!
        let x = Self.activations(rows: tokens, cols: cols, seed: 12)
        let a = WideActivations(capacity: tokens * cols)
        x.withUnsafeBufferPointer { a.quantizeRows($0.baseAddress!, rows: tokens, cols: cols) }
        // The reference, group by group.
        var expected = [Float](repeating: .nan, count: tokens * rows)
        bytes.withUnsafeBytes { raw in
            var packed = [UInt8](repeating: 0, count: nb * WideIntegerMatmul.groupBlockBytes)
            var out = [Float](repeating: .nan, count: tokens * 8)
            for g in 0..<3 {
                let range = (8 * g)..<min(rows, 8 * g + 8)
                packed.withUnsafeMutableBytes {
                    WideIntegerMatmul.packGroupReference(raw.baseAddress!, rowBytes: rowBytes, rows: range, nb: nb, $0.baseAddress!)
                }
                packed.withUnsafeBytes {
                    WideIntegerMatmul.multiplyGroupReference($0.baseAddress!, nb: nb, a, rows: tokens, &out, ldy: 8, valid: range.count)
                }
                for t in 0..<tokens { for (lane, r) in range.enumerated() { expected[t * rows + r] = out[t * 8 + lane] } }
            }
        }
        try bytes.withUnsafeBytes { raw in
            let stored = try WeightMatrix(type: type, rows: rows, cols: cols, data: raw.baseAddress!)
            #expect(stored.hasWideIntegerMatmul)
            for matrix in [stored, stored.interleavedForDecode()] {
                for pool in [nil, ThreadPool(threads: 2)] {
                    var y = [Float](repeating: .nan, count: tokens * rows)
                    matrix.matmul(a, rows: 0..<tokens, into: &y, pool: pool)
                    for k in 0..<y.count {
                        #expect(y[k].bitPattern == expected[k].bitPattern, "token \(k / rows) row \(k % rows): \(y[k]) vs \(expected[k])")
                    }
                    // Some rows alone: the same bits (a row does not depend on the others).
                    var part = [Float](repeating: .nan, count: tokens * rows)
                    matrix.matmul(a, rows: 5..<12, into: &part, pool: pool)
                    for k in (5 * rows)..<(12 * rows) { #expect(part[k].bitPattern == y[k].bitPattern, "rows 5..<12 alone, \(k)") }
                    #expect(part[..<(5 * rows)].allSatisfy(\.isNaN) && part[(12 * rows)...].allSatisfy(\.isNaN), "rows outside written")
                }
            }
        }
    }

    /// Each product is the float product of the dequantized weights with the activations
    /// as given, to within the 16-bit rounding (half a step per value) and float rounding:
    /// the reason Q8_0 prompts may take this path (docs/numerics.md).
    @Test func matmulIsTheFloatProductToWithinTheRounding() throws {
        guard WideIntegerMatmul.supports(.q8_0) else { return }
        let rows = 24, cols = 64 * 6, tokens = 9, type = GGMLType.q8_0
        let bytes = randomWeights(type, rows: rows, cols: cols, seed: 5)
        let w = dequantizeReference(type, bytes, count: rows * cols)
        let x = Self.activations(rows: tokens, cols: cols, seed: 6)
        let a = WideActivations(capacity: tokens * cols)
        x.withUnsafeBufferPointer { a.quantizeRows($0.baseAddress!, rows: tokens, cols: cols) }
        var y = [Float](repeating: .nan, count: tokens * rows)
        try bytes.withUnsafeBytes { raw in
            let m = try WeightMatrix(type: type, rows: rows, cols: cols, data: raw.baseAddress!).interleavedForDecode()
            m.matmul(a, rows: 0..<tokens, into: &y, pool: ThreadPool(threads: 2))
        }
        // The same activations rounded to 8 bits (decode's and the 8-bit matmul's blocks).
        let narrow = QuantizedActivations(capacity: tokens * cols)
        narrow.quantizeRows(x, rows: tokens, cols: cols)
        var wideError = 0.0, narrowError = 0.0
        for t in 0..<tokens {
            for r in 0..<rows {
                var exact = 0.0, rounding = 0.0, magnitude = 0.0, eight = 0.0
                for j in 0..<cols {
                    let wj = Double(w[r * cols + j]), xj = Double(x[t * cols + j]), k = t * cols + j
                    exact += wj * xj
                    rounding += abs(wj) * Double(a.scales[k / 32]) / 2
                    magnitude += abs(wj * xj)
                    eight += wj * Double(narrow.qs[k]) * Double(narrow.d[k / 32])
                }
                let error = abs(Double(y[t * rows + r]) - exact)
                #expect(error <= rounding + 1e-6 * magnitude, "token \(t) row \(r): \(y[t * rows + r]) vs \(exact)")
                wideError += error
                narrowError += abs(eight - exact)
            }
        }
        // 16-bit steps are 258 times finer than 8-bit ones; with float rounding on top,
        // the total error is still over a hundred times smaller.
        #expect(wideError * 100 < narrowError, "16-bit error \(wideError) against 8-bit \(narrowError)")
    }

    /// Q8_0 has the path on x86 builds with AVX2 (VNNI or not); nothing else has it, and
    /// portable builds have none.
    @Test func coverage() {
        let x86 = KernelBuild.description.contains("AVX2")
        #expect(WideIntegerMatmul.supports(.q8_0) == x86)
        for type in [GGMLType.f32, .f16, .bf16, .q4_0, .q4_1, .q5_0, .q5_1, .q4_K, .q5_K, .q6_K] {
            #expect(!WideIntegerMatmul.supports(type), "\(type)")
        }
    }
}
