import Foundation
import TestSupport
import Testing

@testable import Kernels

/// The audio encoder's own kernels (ConformerKernels.swift, RelativeAttention.swift; the row
/// kernels it shares with the vision encoder are EncoderKernelsTests') against scalar loops
/// in Double, and the relative shift and sinusoid table against values
/// worked out by hand.
@Suite struct ConformerKernelsTests {
    static func randomFloats(_ n: Int, seed: UInt64, scale: Float = 1) -> [Float] {
        var rng = SeededRandom(seed: seed)
        return (0..<n).map { _ in Float.random(in: -scale...scale, using: &rng) }
    }

    static func maxDifference(_ a: [Float], _ b: [Double]) -> Double {
        zip(a, b).map { abs(Double($0) - $1) }.max() ?? 0
    }

    static func half(_ v: Float) -> Float { FloatBits.halfToFloatReference(FloatBits.floatToHalfReference(v)) }

    /// `out[c][i][j] = bias[c] + Σ k[c][a][b] · in[ci][2i-1+a][2j-1+b]`, `ci` = 0 or `c`.
    static func convolutionReference(_ input: [Float], channels inC: Int, height: Int, width: Int, kernels: [Float], bias: [Float])
        -> [Double]
    {
        let oh = (height + 1) / 2, ow = (width + 1) / 2
        var out: [Double] = []
        for c in 0..<bias.count {
            let plane = inC == 1 ? 0 : c
            for i in 0..<oh {
                for j in 0..<ow {
                    var s = Double(bias[c])
                    for a in 0..<3 {
                        for b in 0..<3 {
                            let y = 2 * i - 1 + a, x = 2 * j - 1 + b
                            guard y >= 0, y < height, x >= 0, x < width else { continue }
                            s += Double(kernels[c * 9 + a * 3 + b]) * Double(input[(plane * height + y) * width + x])
                        }
                    }
                    out.append(s)
                }
            }
        }
        return out
    }

    @Test(arguments: [(1, 1), (2, 3), (7, 128), (10, 9), (101, 128)], [false, true])
    func firstConvolutionMatchesLoops(_ size: (Int, Int), _ roundingToHalf: Bool) {
        let (height, width) = size, channels = 5
        let image = Self.randomFloats(height * width, seed: 1, scale: 3)
        let kernels = Self.randomFloats(channels * 9, seed: 2), bias = Self.randomFloats(channels, seed: 3)
        let oh = (height + 1) / 2, ow = (width + 1) / 2
        var out = [Float](repeating: .nan, count: channels * oh * ow)
        var scratch = [Float](repeating: .nan, count: ConformerKernels.convolution3x3Stride2ScratchCount(height: height, width: width))
        let pool = ThreadPool(threads: 2)
        ConformerKernels.convolution3x3Stride2(
            image: image, height: height, width: width, kernels: kernels, bias: bias, channels: channels,
            roundingToHalf: roundingToHalf, output: &out, scratch: &scratch, pool: pool)
        func r(_ v: Float) -> Float { roundingToHalf ? Self.half(v) : v }
        let expected = Self.convolutionReference(
            image.map(r), channels: 1, height: height, width: width, kernels: kernels.map(r), bias: bias
        ).map { max(0, $0) }
        #expect(Self.maxDifference(out, expected) < 1e-5)
        if roundingToHalf {
            // The rounding is really there: without it the results differ.
            let unrounded = Self.convolutionReference(image, channels: 1, height: height, width: width, kernels: kernels, bias: bias)
                .map { max(0, $0) }
            #expect(Self.maxDifference(out, unrounded) > 1e-5)
        }
    }

    @Test(arguments: [(1, 1), (2, 2), (3, 5), (51, 64), (26, 32)])
    func depthwiseConvolutionMatchesLoops(_ size: (Int, Int)) {
        let (height, width) = size, channels = 6
        let input = Self.randomFloats(channels * height * width, seed: 4)
        let kernels = Self.randomFloats(channels * 9, seed: 5), bias = Self.randomFloats(channels, seed: 6)
        var out = [Float](repeating: .nan, count: channels * ((height + 1) / 2) * ((width + 1) / 2))
        ConformerKernels.depthwiseConvolution3x3Stride2(
            input: input, channels: channels, height: height, width: width, kernels: kernels, bias: bias, output: &out,
            pool: ThreadPool(threads: 2))
        let expected = Self.convolutionReference(input, channels: channels, height: height, width: width, kernels: kernels, bias: bias)
        #expect(Self.maxDifference(out, expected) < 1e-5)
    }

    @Test(arguments: [false, true])
    func pointwiseConvolutionMatchesLoops(_ relu: Bool) {
        let inC = 7, outC = 5, pixels = 33
        let input = Self.randomFloats(inC * pixels, seed: 7), weights = Self.randomFloats(outC * inC, seed: 8)
        let bias = Self.randomFloats(outC, seed: 9)
        var out = [Float](repeating: .nan, count: outC * pixels)
        ConformerKernels.pointwiseConvolution(
            input: input, inChannels: inC, pixels: pixels, weights: weights, bias: bias, outChannels: outC, relu: relu, output: &out)
        var expected: [Double] = []
        for o in 0..<outC {
            for p in 0..<pixels {
                let s = (0..<inC).reduce(Double(bias[o])) { $0 + Double(weights[o * inC + $1]) * Double(input[$1 * pixels + p]) }
                expected.append(relu ? max(0, s) : s)
            }
        }
        #expect(Self.maxDifference(out, expected) < 1e-5)
        #expect(relu == out.allSatisfy { $0 >= 0 })
    }

    @Test func gluGatesTheFirstHalfByTheSecond() {
        let rows = 3, width = 37
        let x = Self.randomFloats(rows * 2 * width, seed: 10, scale: 6)
        var out = [Float](repeating: .nan, count: rows * width)
        ConformerKernels.sigmoidGLU(x, rows: rows, width: width, into: &out)
        var expected: [Double] = []
        for t in 0..<rows {
            for c in 0..<width {
                expected.append(Double(x[t * 2 * width + c]) / (1 + exp(-Double(x[t * 2 * width + width + c]))))
            }
        }
        #expect(Self.maxDifference(out, expected) < 1e-5)
    }

    @Test(arguments: [(9, 20), (9, 3), (9, 1), (3, 7), (1, 4)])
    func convolutionOverTimeIsZeroPaddedAndCentred(_ shape: (Int, Int)) {
        let (K, rows) = shape, width = 19
        let x = Self.randomFloats(rows * width, seed: 11), kernel = Self.randomFloats(width * K, seed: 12)
        let bias = Self.randomFloats(width, seed: 13)
        var out = [Float](repeating: .nan, count: rows * width)
        ConformerKernels.depthwiseConvolutionOverTime(
            x, rows: rows, width: width, kernel: kernel, kernelLength: K, bias: bias, into: &out, pool: ThreadPool(threads: 2))
        var expected: [Double] = []
        for t in 0..<rows {
            for c in 0..<width {
                var s = Double(bias[c])
                for k in 0..<K {
                    let src = t + k - (K - 1) / 2
                    if src >= 0, src < rows { s += Double(kernel[c * K + k]) * Double(x[src * width + c]) }
                }
                expected.append(s)
            }
        }
        #expect(Self.maxDifference(out, expected) < 1e-5)
    }

    @Test func foldedBatchNormAndSiLU() {
        let rows = 4, width = 50
        let x = Self.randomFloats(rows * width, seed: 14, scale: 4)
        let scale = Self.randomFloats(width, seed: 15), shift = Self.randomFloats(width, seed: 16)
        var y = x
        ConformerKernels.scaleShiftSiLU(&y, rows: rows, width: width, scale: scale, shift: shift)
        let affine = x.enumerated().map { Double($0.element) * Double(scale[$0.offset % width]) + Double(shift[$0.offset % width]) }
        #expect(Self.maxDifference(y, affine.map { $0 / (1 + exp(-$0)) }) < 1e-5)
    }

    // MARK: - Relative attention

    @Test func relativeShiftPicksRowTMinus1MinusIPlusJ() {
        // T = 3: five table rows per query, distances 2, 1, 0, -1, -2; key j from query i
        // is at distance i - j, row 2 - i + j.
        let x: [Float] = [
            0, 1, 2, 3, 4,
            10, 11, 12, 13, 14,
            20, 21, 22, 23, 24
        ]
        var out = [Float](repeating: .nan, count: 9)
        RelativePositionAttention.relativeShift(x, tokens: 3, into: &out)
        #expect(out == [2, 3, 4, 11, 12, 13, 20, 21, 22])
        var one = [Float](repeating: .nan, count: 1)
        RelativePositionAttention.relativeShift([7], tokens: 1, into: &one)
        #expect(one == [7])
    }

    @Test func sinusoidTableHoldsTheDistancesFromTMinus1Down() {
        // T = 2, width 4: frequencies 1 and 10000^(-2/4) = 0.01; rows for distances 1, 0, -1.
        let table = RelativePositionAttention.sinusoids(tokens: 2, width: 4)
        let expected: [Double] = [
            0.841_470_984_8, 0.540_302_305_9, 0.009_999_833_3, 0.999_950_000_4,
            0, 1, 0, 1,
            -0.841_470_984_8, 0.540_302_305_9, -0.009_999_833_3, 0.999_950_000_4
        ]
        #expect(Self.maxDifference(table, expected) < 1e-7)

        // 512 wide, 13 tokens (one second of audio): row 12 is distance 0; row 0 distance 12.
        let wide = RelativePositionAttention.sinusoids(tokens: 13, width: 512)
        #expect(wide.count == 25 * 512)
        #expect((0..<256).allSatisfy { wide[12 * 512 + 2 * $0] == 0 && wide[12 * 512 + 2 * $0 + 1] == 1 })
        for i in [0, 1, 100, 255] {
            let angle = 12 * pow(10000, -2 * Double(i) / 512)
            #expect(abs(Double(wide[2 * i]) - sin(angle)) < 2e-6)
            #expect(abs(Double(wide[2 * i + 1]) - cos(angle)) < 2e-6)
            #expect(wide[24 * 512 + 2 * i] == -wide[2 * i])  // distance -12
        }
    }

    @Test(arguments: [1, 2, 13, 64, 65, 150])
    func attentionMatchesTheReference(_ T: Int) {
        let heads = 3, hd = 8, stride = heads * hd + 5  // a stride wider than the heads
        let q = Self.randomFloats(T * stride, seed: 20, scale: 2), k = Self.randomFloats(T * stride, seed: 21, scale: 2)
        let v = Self.randomFloats(T * stride, seed: 22), p = Self.randomFloats((2 * T - 1) * stride, seed: 23, scale: 2)
        let u = Self.randomFloats(heads * hd, seed: 24), w = Self.randomFloats(heads * hd, seed: 25)
        var expected = [Float](repeating: 0, count: T * stride)
        RelativePositionAttention.attendReference(
            queries: q, keys: k, values: v, positions: p, stride: stride, biasU: u, biasV: w, tokens: T, heads: heads, headDim: hd,
            scale: 1 / Float(hd).squareRoot(), out: &expected)
        for pool in [nil, ThreadPool(threads: 2)] {
            var out = [Float](repeating: 0, count: T * stride)
            RelativePositionAttention.attend(
                queries: q, keys: k, values: v, positions: p, stride: stride, biasU: u, biasV: w, tokens: T, heads: heads, headDim: hd,
                scale: 1 / Float(hd).squareRoot(), out: &out, pool: pool)
            #expect(Self.maxDifference(out, expected.map(Double.init)) < 1e-5, "T = \(T)")
        }
        // The position term matters: a table of zeros changes the result.
        var withoutPositions = [Float](repeating: 0, count: T * stride)
        RelativePositionAttention.attend(
            queries: q, keys: k, values: v, positions: [Float](repeating: 0, count: p.count), stride: stride, biasU: u, biasV: w,
            tokens: T, heads: heads, headDim: hd, scale: 1 / Float(hd).squareRoot(), out: &withoutPositions)
        if T > 1 { #expect(Self.maxDifference(withoutPositions, expected.map(Double.init)) > 1e-3) }
    }
}
