import Foundation
import GGUF
import TestSupport
import Testing

@testable import Kernels

@Suite struct FloatBitsTests {
    @Test func everyHalfConvertsExactlyAndRoundTrips() {
        for h in 0...UInt16.max {
            let reference = FloatBits.halfToFloatReference(h)
            let fast = FloatBits.halfToFloat(h)
            #expect(reference.bitPattern == fast.bitPattern || (reference.isNaN && fast.isNaN), "half 0x\(String(h, radix: 16))")
            // The portable conversion (what `fast` is on x86-64 without F16C), on every build.
            #expect(FloatBits.halfToFloatArithmetic(h).bitPattern == reference.bitPattern, "half 0x\(String(h, radix: 16))")
            if !reference.isNaN {
                #expect(FloatBits.floatToHalfReference(reference) == h, "round trip of 0x\(String(h, radix: 16))")
            } else {
                #expect(FloatBits.floatToHalfReference(reference) & 0x7E00 == 0x7E00)
            }
        }
    }

    #if !(os(macOS) && arch(x86_64))
    @Test func floatToHalfMatchesSwiftFloat16OnRandomBits() {
        var rng = SeededRandom(seed: 7)
        for _ in 0..<200_000 {
            // Random bit patterns concentrated on the exponents where halves live.
            let exponent = UInt32.random(in: 90...145, using: &rng)
            let bits = UInt32.random(in: 0...1, using: &rng) << 31 | exponent << 23 | UInt32.random(in: 0...0x7F_FFFF, using: &rng)
            let f = Float(bitPattern: bits)
            #expect(FloatBits.floatToHalfReference(f) == Float16(f).bitPattern, "float bits 0x\(String(bits, radix: 16))")
        }
    }
    #endif

    @Test func bf16RoundsToNearestEvenAndQuietsNaN() {
        #expect(FloatBits.floatToBF16(1.0) == 0x3F80)
        #expect(FloatBits.floatToBF16(Float(bitPattern: 0x3F80_8000)) == 0x3F80)  // tie, even stays
        #expect(FloatBits.floatToBF16(Float(bitPattern: 0x3F81_8000)) == 0x3F82)  // tie, odd rounds up
        #expect(FloatBits.floatToBF16(Float(bitPattern: 0x3F80_8001)) == 0x3F81)
        #expect(FloatBits.floatToBF16(Float(bitPattern: 0x7F80_0001)) == 0x7FC0)  // signalling NaN made quiet
        #expect(FloatBits.bf16ToFloat(0xC040) == -3.0)
    }
}

@Suite struct FixtureTests {
    @Test func fixturesArePresent() {
        let types = Set(Fixtures.dequantizeCases.map(\.ggmlType))
        #expect(types == [.f16, .bf16, .q8_0, .q4_0, .q4_1, .q5_0, .q5_1, .q4_K, .q5_K, .q6_K])
        #expect(Set(Fixtures.quantizeCases.map(\.ggmlType)) == [.f16, .bf16, .q8_0, .q4_0, .q4_1, .q5_0, .q5_1])
    }

    /// Dequantization, fast and reference, equals gguf-py's bit for bit.
    @Test(arguments: Fixtures.dequantizeCases)
    func dequantizeMatchesGGUFPy(_ c: FixtureCase) {
        let type = c.ggmlType
        let blocks = c.blocks
        let expected = c.floats
        let rowBytes = type.rowBytes(count: c.cols)!
        #expect(blocks.count == c.rows * rowBytes)
        var fast = [Float](repeating: .nan, count: c.rows * c.cols)
        var reference = fast
        blocks.withUnsafeBytes { src in
            for r in 0..<c.rows {
                fast.withUnsafeMutableBufferPointer {
                    type.dequantizeRow(src.baseAddress! + r * rowBytes, into: $0.baseAddress! + r * c.cols, count: c.cols)
                }
                reference.withUnsafeMutableBufferPointer {
                    type.dequantizeRowReference(src.baseAddress! + r * rowBytes, into: $0.baseAddress! + r * c.cols, count: c.cols)
                }
            }
        }
        #expect(sameBits(reference, expected), "reference: \(firstDifference(reference, expected))")
        #expect(sameBits(fast, expected), "fast: \(firstDifference(fast, expected))")
    }

    /// Quantization equals gguf-py's (ggml's `quantize_row_*_ref`) byte for byte.
    @Test(arguments: Fixtures.quantizeCases)
    func quantizeMatchesGGUFPy(_ c: FixtureCase) {
        let type = c.ggmlType
        let input = c.floats
        let expected = c.blocks
        let rowBytes = type.rowBytes(count: c.cols)!
        var out = [UInt8](repeating: 0xAA, count: c.rows * rowBytes)
        input.withUnsafeBufferPointer { src in
            out.withUnsafeMutableBytes { dst in
                for r in 0..<c.rows {
                    type.quantizeRow(src.baseAddress! + r * c.cols, into: dst.baseAddress! + r * rowBytes, count: c.cols)
                }
            }
        }
        let mismatch = zip(out, expected).enumerated().first { $0.element.0 != $0.element.1 }
        #expect(
            out == expected, "first mismatching byte: \(String(describing: mismatch)) (block \((mismatch?.offset ?? 0) / type.typeSize))")
    }
}

@Suite struct RoundTripTests {
    /// Per-type bound on |x - dequantize(quantize(x))| for one block, given the block's
    /// stored scale `d`, its min `m` (0 when none) and its largest magnitude `amax`.
    /// The 2^-10 terms cover rounding the scale (and min) to fp16; 2^-25 * levels the fp16
    /// underflow of tiny scales.
    static func bound(_ type: GGMLType, d: Float, m: Float, amax: Float) -> Float {
        let tiny = Float.ulpOfOne / 2 * 0.0001  // slack for float arithmetic
        switch type {
        case .q8_0: return 0.5 * abs(d) + amax * 0x1p-10 + 127 * 0x1p-25 + tiny
        // The clamp at level 15 (31) can cost a whole step for a value of the opposite sign
        // to the block's extreme.
        case .q4_0: return abs(d) + amax * 0x1p-10 + 8 * 0x1p-25 + tiny
        case .q5_0: return abs(d) + amax * 0x1p-10 + 16 * 0x1p-25 + tiny
        case .q4_1: return 0.5 * d + (abs(m) + amax) * 0x1p-10 + 16 * 0x1p-25 + tiny
        case .q5_1: return 0.5 * d + (abs(m) + amax) * 0x1p-10 + 32 * 0x1p-25 + tiny
        case .f16: return amax * 0x1p-11 + 0x1p-25
        case .bf16: return amax * 0x1p-8
        case .f32: return 0
        default: fatalError()
        }
    }

    @Test(arguments: [GGMLType.f32, .f16, .bf16, .q8_0, .q4_0, .q4_1, .q5_0, .q5_1])
    func quantizationErrorIsBounded(_ type: GGMLType) {
        var rng = SeededRandom(seed: 99)
        let cols = 32 * 24
        var worstRatio: Float = 0
        for scale: Float in [1e-6, 1e-3, 0.05, 1, 300] {
            let x = rng.normal(cols, scale: scale)
            var q = [UInt8](repeating: 0, count: type.rowBytes(count: cols)!)
            x.withUnsafeBufferPointer { src in
                q.withUnsafeMutableBytes { type.quantizeRow(src.baseAddress!, into: $0.baseAddress!, count: cols) }
            }
            let y = dequantizeReference(type, q, count: cols)
            let group = max(type.blockSize, 32)
            for g in 0..<(cols / group) {
                let values = x[(g * group)..<((g + 1) * group)]
                let amax = values.map { abs($0) }.max()!
                var d: Float = 0, m: Float = 0
                if type.blockSize == 32 {
                    let b = g * type.typeSize
                    d = FloatBits.halfToFloat(UInt16(q[b]) | UInt16(q[b + 1]) << 8)
                    if type == .q4_1 || type == .q5_1 { m = FloatBits.halfToFloat(UInt16(q[b + 2]) | UInt16(q[b + 3]) << 8) }
                }
                let limit = Self.bound(type, d: d, m: m, amax: amax)
                for j in (g * group)..<((g + 1) * group) {
                    let err = abs(x[j] - y[j])
                    #expect(err <= limit, "\(type) value \(j) scale \(scale): error \(err) > bound \(limit)")
                    if limit > 0 { worstRatio = max(worstRatio, err / limit) }
                }
            }
        }
        // The bound is not vacuous: some value comes close to it.
        if type != .f32 { #expect(worstRatio > 0.3, "\(type): worst error only \(worstRatio) of the bound") }
    }

    @Test func activationQuantizationFastEqualsReferenceAndIsBounded() {
        var rng = SeededRandom(seed: 5)
        for count in [32, 96, 1536] {
            var x = rng.normal(count, scale: 2)
            x[0] = 0
            if count > 64 { for j in 32..<64 { x[j] = 0 } }  // a zero block
            let fast = QuantizedActivations(capacity: count), reference = QuantizedActivations(capacity: count)
            fast.quantize(x)
            x.withUnsafeBufferPointer { reference.quantizeReference($0.baseAddress!, count: count) }
            #expect(fast.blockCount == count / 32)
            for i in 0..<(count / 32) {
                #expect(fast.d[i].bitPattern == reference.d[i].bitPattern)
                #expect(fast.s[i].bitPattern == reference.s[i].bitPattern)
                #expect(fast.bsums[2 * i] == reference.bsums[2 * i] && fast.bsums[2 * i + 1] == reference.bsums[2 * i + 1])
                var sum: Int32 = 0
                for j in 0..<32 {
                    let k = 32 * i + j
                    #expect(fast.qs[k] == reference.qs[k])
                    sum += Int32(fast.qs[k])
                    // Round to nearest: error at most half a step.
                    #expect(abs(x[k] - Float(fast.qs[k]) * fast.d[i]) <= fast.d[i] * 0.5001)
                }
                #expect(fast.s[i] == fast.d[i] * Float(sum))
            }
        }
    }
}

@Suite struct DequantizeFastTests {
    /// Fast dequantization equals the reference bit for bit on random bytes (every bit
    /// pattern of levels, scales and mins; fp16 fields kept finite).
    @Test(arguments: GGMLType.kernelTypes)
    func fastEqualsReferenceOnRandomBytes(_ type: GGMLType) {
        var rng = SeededRandom(seed: 1000 + UInt64(type.rawValue))
        let count = type.blockSize == 256 ? 256 * 5 : 32 * 13 + (type.blockSize == 1 ? 7 : 0)
        var bytes = (0..<type.rowBytes(count: count)!).map { _ in UInt8.random(in: 0...255, using: &rng) }
        // Clear the exponent's top bit of every fp16 field so no scale is inf/NaN.
        func tame(_ offset: Int) { bytes[offset + 1] &= 0xBF }
        for b in 0..<(count / type.blockSize) {
            let base = b * type.typeSize
            switch type {
            case .f16: tame(base)
            case .q8_0, .q4_0, .q5_0: tame(base)
            case .q4_1, .q5_1, .q4_K, .q5_K:
                tame(base)
                tame(base + 2)
            case .q6_K: tame(base + 208)
            default: break
            }
        }
        if type == .f32 || type == .bf16 {
            // Random floats instead of random bits (NaN payloads are not the point here).
            bytes = []
            for _ in 0..<count {
                let f = Float.random(in: -100...100, using: &rng)
                if type == .f32 {
                    withUnsafeBytes(of: f) { bytes += $0 }
                } else {
                    withUnsafeBytes(of: FloatBits.floatToBF16(f)) { bytes += $0 }
                }
            }
        }
        var fast = [Float](repeating: .nan, count: count), reference = fast
        bytes.withUnsafeBytes { src in
            fast.withUnsafeMutableBufferPointer { type.dequantizeRow(src.baseAddress!, into: $0.baseAddress!, count: count) }
            reference.withUnsafeMutableBufferPointer { type.dequantizeRowReference(src.baseAddress!, into: $0.baseAddress!, count: count) }
        }
        #expect(sameBits(fast, reference), "\(type): \(firstDifference(fast, reference))")
        #expect(reference.allSatisfy { $0.isFinite })
    }
}
