import Foundation
import GGUF
import TestSupport
import Testing

@testable import Kernels

/// Why K-quant weights meet leap-ref's 32-value activation blocks rather than ggml's Q8_K
/// (one scale per 256 values): the finer scales round activations less, most of all
/// when a few channels carry outliers, as transformer residual streams do. This measures
/// the error of whole dot products with K-quant weights against the exact float product.
@Suite struct ActivationBlockTests {
    /// ggml's Q8_K activation rounding, simulated: one scale per 256 values that maps the
    /// value of largest magnitude onto ±127, values rounded half to even.
    static func q8KRounded(_ x: [Float]) -> [Float] {
        var out = [Float](repeating: 0, count: x.count)
        for s in 0..<(x.count / 256) {
            var peak: Float = 0
            for j in (256 * s)..<(256 * s + 256) where abs(x[j]) > abs(peak) { peak = x[j] }
            guard peak != 0 else { continue }
            let inverse = -127 / peak, d = 1 / inverse
            for j in (256 * s)..<(256 * s + 256) { out[j] = d * Float(min(127, nearestInt(inverse * x[j]))) }
        }
        return out
    }

    /// RMS over rows and tokens of (dot with rounded activations − exact dot), relative to
    /// the RMS of the exact dots: (leap-ref's 32-value blocks, Q8_K's 256-value blocks).
    static func relativeErrors(_ type: GGMLType, outliers: Bool) -> (blocks32: Double, blocks256: Double) {
        let rows = 24, cols = 1024, tokens = 16
        var rng = SeededRandom(seed: 3)
        let floats = rng.normal(rows * cols, scale: 0.02)
        var bytes = [UInt8](repeating: 0, count: rows * type.rowBytes(count: cols)!)
        floats.withUnsafeBufferPointer { src in
            bytes.withUnsafeMutableBytes { type.quantizeRow(src.baseAddress!, into: $0.baseAddress!, count: rows * cols) }
        }
        let w = dequantizeReference(type, bytes, count: rows * cols)
        let acts = QuantizedActivations(capacity: cols)
        var err32 = 0.0, err256 = 0.0, norm = 0.0
        for _ in 0..<tokens {
            var x = rng.normal(cols, scale: 1)
            // A few channels 20-60 times larger, the same in every token.
            if outliers { for (c, f) in [(5, 40), (300, -25), (777, 60)] { x[c] *= Float(f) } }
            acts.quantize(x)
            var rounded32 = [Float](repeating: 0, count: cols)
            for j in 0..<cols { rounded32[j] = Float(acts.qs[j]) * acts.d[j / 32] }
            let rounded256 = Self.q8KRounded(x)
            for r in 0..<rows {
                var exact = 0.0, d32 = 0.0, d256 = 0.0
                for j in 0..<cols {
                    let wj = Double(w[r * cols + j])
                    exact += wj * Double(x[j])
                    d32 += wj * Double(rounded32[j])
                    d256 += wj * Double(rounded256[j])
                }
                err32 += (d32 - exact) * (d32 - exact)
                err256 += (d256 - exact) * (d256 - exact)
                norm += exact * exact
            }
        }
        return ((err32 / norm).squareRoot(), (err256 / norm).squareRoot())
    }

    /// 32-value blocks are more accurate than Q8_K's 256-value ones for every K-quant,
    /// by at least a third with outlier channels.
    @Test(arguments: [GGMLType.q4_K, .q5_K, .q6_K])
    func finerActivationBlocksAreMoreAccurate(_ type: GGMLType) {
        let plain = Self.relativeErrors(type, outliers: false)
        let spiky = Self.relativeErrors(type, outliers: true)
        #expect(plain.blocks32 < plain.blocks256, "\(type) gaussian: \(plain)")
        #expect(spiky.blocks32 < 0.67 * spiky.blocks256, "\(type) with outliers: \(spiky)")
    }
}
