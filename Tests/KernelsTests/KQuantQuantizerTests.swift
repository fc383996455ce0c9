import Foundation
import GGUF
import TestSupport
import Testing

@testable import Kernels

/// The K-quant quantizers (KQuantQuantizers.swift): byte for byte against llama-quantize's
/// output, round-trip error bounds, and the rounding helper.
@Suite struct KQuantQuantizerTests {
    static let kTypes: [GGMLType] = [.q4_K, .q5_K, .q6_K]

    /// ggml's `nearest_int`: round half to even, exact for |x| < 2^22.
    @Test func nearestIntRoundsHalfToEven() {
        let cases: [(Float, Int32)] = [
            (0, 0), (0.5, 0), (1.5, 2), (2.5, 2), (-0.5, 0), (-1.5, -2), (-2.5, -2), (0.49999997, 0), (7.5, 8),
            (-7.5, -8), (4_194_303, 4_194_303), (-4_194_303, -4_194_303), (15.500001, 16), (1e-30, 0)
        ]
        for (x, expected) in cases { #expect(nearestInt(x) == expected, "nearestInt(\(x))") }
    }

    /// Our quantizers write the bytes llama-quantize writes (no importance matrix): 8 rows
    /// of 1536 values, 3 of edge cases (zeros, constants, a spike, tiny, huge, one-signed,
    /// tied and fp16-underflowing values) and 5 of SmolLM2's real weights
    /// (scripts/make_kquant_fixtures.py).
    @Test(arguments: kTypes)
    func quantizationIsByteIdenticalToLlamaQuantize(_ type: GGMLType) {
        let input = Fixtures.data("kquant-rows.f32")
        let expected = [UInt8](Fixtures.data("kquant-rows.\(type.name.lowercased().replacingOccurrences(of: "_k", with: "_K"))"))
        let count = input.count / 4, rowBytes = type.rowBytes(count: 1536)!
        var ours = [UInt8](repeating: 0, count: type.rowBytes(count: count)!)
        input.withUnsafeBytes { raw in
            let x = raw.bindMemory(to: Float.self)
            ours.withUnsafeMutableBytes { type.quantizeRow(x.baseAddress!, into: $0.baseAddress!, count: count) }
        }
        #expect(ours.count == expected.count)
        for b in 0..<(ours.count / type.typeSize) {
            let range = (b * type.typeSize)..<((b + 1) * type.typeSize)
            #expect(
                ours[range] == expected[range],
                "\(type) row \(b * type.typeSize / rowBytes) super-block \(b % (1536 / 256)) differs")
        }
    }

    /// Data sets for the round trips: each is whole super-blocks of 256 values.
    static func dataSets() -> [(name: String, values: [Float])] {
        var rng = SeededRandom(seed: 2024)
        var sets: [(String, [Float])] = []
        sets.append(("gaussian", rng.normal(256 * 16, scale: 0.05)))
        var outliers = rng.normal(256 * 16, scale: 0.02)
        for j in stride(from: 7, to: outliers.count, by: 61) { outliers[j] *= 30 }
        sets.append(("gaussian with outliers", outliers))
        sets.append(("uniform positive", (0..<(256 * 4)).map { _ in Float.random(in: 0.1...2, using: &rng) }))
        sets.append(("uniform negative", (0..<(256 * 4)).map { _ in Float.random(in: -3 ... -0.5, using: &rng) }))
        sets.append(("constant", [Float](repeating: 0.37, count: 256 * 2)))
        sets.append(("one spike", (0..<256).map { $0 == 100 ? 5 : 0 }))
        sets.append(("ramp", (0..<(256 * 2)).map { Float($0) / 64 - 4 }))
        sets.append(("small", rng.normal(256 * 2, scale: 1e-2)))
        sets.append(("large", rng.normal(256 * 2, scale: 300)))
        return sets
    }

    static func roundTrip(_ type: GGMLType, _ x: [Float]) -> [Float] {
        var bytes = [UInt8](repeating: 0, count: type.rowBytes(count: x.count)!)
        x.withUnsafeBufferPointer { src in
            bytes.withUnsafeMutableBytes { type.quantizeRow(src.baseAddress!, into: $0.baseAddress!, count: x.count) }
        }
        return dequantizeReference(type, bytes, count: x.count)
    }

    /// All zeros quantize to blocks that decode to exact zeros.
    @Test(arguments: kTypes)
    func zerosStayZero(_ type: GGMLType) {
        let y = Self.roundTrip(type, [Float](repeating: 0, count: 512))
        #expect(y.allSatisfy { $0 == 0 })
    }

    /// Round-trip errors stay within bounds per super-block (amax = its largest |x|):
    /// the largest error at most `max * amax` and the RMS error at most `rms * amax`. The
    /// bounds are about 1.5 times the worst these data sets give (the quantizers are
    /// searches, not closed forms: Q4_K 0.062 / 0.029, Q5_K 0.039 / 0.015, Q6_K 0.016 /
    /// 0.007); they fail on a wrong level, scale or bit layout. They hold while the fp16
    /// super-block scale is a normal number: values so small (|x| below about 1e-4) that it
    /// underflows lose their precision, in ggml's format as here (the byte-identity
    /// fixture has such rows).
    @Test(arguments: kTypes)
    func roundTripErrorBounds(_ type: GGMLType) {
        // (largest error, RMS error) as fractions of the super-block's amax.
        let bounds: (max: Float, rms: Float)
        switch type {
        case .q4_K: bounds = (0.1, 0.04)
        case .q5_K: bounds = (0.05, 0.02)
        default: bounds = (0.025, 0.01)
        }
        for (name, x) in Self.dataSets() {
            let y = Self.roundTrip(type, x)
            for s in 0..<(x.count / 256) {
                let range = (256 * s)..<(256 * s + 256)
                let amax = range.map { abs(x[$0]) }.max()!
                let worst = range.map { abs(x[$0] - y[$0]) }.max()!
                let rms = (range.map { (x[$0] - y[$0]) * (x[$0] - y[$0]) }.reduce(0, +) / 256).squareRoot()
                #expect(worst <= bounds.max * amax, "\(type) \(name) super-block \(s): max error \(worst / amax) of amax")
                #expect(rms <= bounds.rms * amax, "\(type) \(name) super-block \(s): RMS error \(rms / amax) of amax")
            }
        }
    }

    /// The scale search pays: on Gaussian weights each K-quant has a smaller RMS error than
    /// the 32-value format of about the same size (Q4_K 4.5 bits per weight vs Q4_0 4.5,
    /// Q5_K 5.5 vs Q5_0 5.5, Q6_K 6.56 vs Q5_1 6).
    @Test(arguments: [(GGMLType.q4_K, GGMLType.q4_0), (.q5_K, .q5_0), (.q6_K, .q5_1)])
    func kQuantsBeatLegacyFormatsOfTheirSize(_ k: GGMLType, _ legacy: GGMLType) {
        var rng = SeededRandom(seed: 99)
        let x = rng.normal(256 * 32, scale: 0.03)
        func rms(_ y: [Float]) -> Float { (zip(x, y).map { ($0 - $1) * ($0 - $1) }.reduce(0, +) / Float(x.count)).squareRoot() }
        let kError = rms(Self.roundTrip(k, x)), legacyError = rms(Self.roundTrip(legacy, x))
        #expect(kError < legacyError, "\(k) RMS error \(kError) vs \(legacy) \(legacyError)")
    }
}
