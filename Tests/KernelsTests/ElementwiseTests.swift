import Foundation
import Kernels
import Testing

/// The element-wise kernels against their formulas computed in Double.
@Suite struct ElementwiseTests {
    @Test func simdExpIsWithinThreeUlp() {
        var worstUlp: Float = 0
        var x: Float = -87
        while x < 88.5 {
            let v = Elementwise.exp(SIMD16<Float>(repeating: x))[0]
            let ref = Float(Foundation.exp(Double(x)))
            worstUlp = max(worstUlp, abs(v - ref) / ref.ulp)
            x += 0.0137
        }
        #expect(worstUlp <= 3, "worst error \(worstUlp) ulp")
        #expect(Elementwise.exp(SIMD16(repeating: -200))[0] == 0)
        #expect(Elementwise.exp(SIMD16(repeating: 200))[0] == .infinity)
        #expect(Elementwise.exp(SIMD16(repeating: 0))[0] == 1)
    }

    /// Softmax's exp gives `exp`'s bits for every input at most 0: a sweep, the edges of the
    /// clamp, results that are subnormal or 0, and every float in a few narrow ranges.
    @Test func expOfNonPositiveIsExpBitForBit() {
        var inputs: [Float] = [0, -0.0, -Float.leastNonzeroMagnitude, -1e-30, -87.3, -88, -103, -104, -200]
        inputs += [-87.33, Float(-87.33).nextUp, Float(-87.33).nextDown]
        var x: Float = -90
        while x <= 0 {
            inputs.append(x)
            x += 0.000_731
        }
        for start: Float in [-87.4, -0.35, -0.346_573_6] {
            var v = start
            for _ in 0..<20_000 {
                inputs.append(v)
                v = v.nextUp
            }
        }
        var mismatches = 0
        for x in inputs {
            let fast = Elementwise.expOfNonPositive(SIMD16<Float>(repeating: x))[0], exact = Elementwise.exp(SIMD16<Float>(repeating: x))[0]
            if fast.bitPattern != exact.bitPattern { mismatches += 1 }
        }
        #expect(mismatches == 0, "\(mismatches) of \(inputs.count) inputs differ")
    }

    @Test(arguments: [1, 15, 16, 17, 100])
    func softmaxSumsToOneAndMatchesDouble(_ n: Int) {
        var x = (0..<n).map { Float(sin(Double($0) * 1.3) * 20) }
        let m = x.map(Double.init).max()!
        let e = x.map { Foundation.exp(Double($0) - m) }
        let s = e.reduce(0, +)
        x.withUnsafeMutableBufferPointer { Elementwise.softmax($0.baseAddress!, count: n) }
        for i in 0..<n { #expect(abs(Double(x[i]) - e[i] / s) < 1e-6) }
    }

    @Test(arguments: [7, 32, 576, 1000])
    func rmsNormAndSiLU(_ n: Int) {
        let x = (0..<n).map { Float(cos(Double($0) * 0.7) * 3) }
        let w = (0..<n).map { Float(1 + Double($0 % 5) * 0.1) }
        var y = [Float](repeating: 0, count: n)
        x.withUnsafeBufferPointer { xp in
            w.withUnsafeBufferPointer { wp in
                y.withUnsafeMutableBufferPointer { yp in
                    Elementwise.rmsNorm(xp.baseAddress!, weight: wp.baseAddress!, yp.baseAddress!, count: n, eps: 1e-5)
                }
            }
        }
        let rms = (x.map { Double($0) * Double($0) }.reduce(0, +) / Double(n) + 1e-5).squareRoot()
        for i in 0..<n { #expect(abs(Double(y[i]) - Double(x[i]) / rms * Double(w[i])) < 1e-5) }

        var g = x
        x.withUnsafeBufferPointer { up in
            g.withUnsafeMutableBufferPointer { Elementwise.siluMultiply($0.baseAddress!, up.baseAddress!, count: n) }
        }
        for i in 0..<n {
            let v = Double(x[i])
            #expect(abs(Double(g[i]) - v / (1 + Foundation.exp(-v)) * v) < 1e-5 * max(1, abs(v * v)))
        }
    }

    /// GEGLU's GELU (tanh form) against the formula in Double, over the range where it
    /// bends (and past the points where ggml switches to 0 and to the identity, ±10).
    @Test(arguments: [7, 32, 100, 2048])
    func geluTanhMultiplyMatchesTheFormula(_ n: Int) {
        let gate = (0..<n).map { Float(-12 + 24 * Double($0) / Double(max(1, n - 1))) }
        let up = (0..<n).map { Float(1 + sin(Double($0))) }
        var y = gate
        up.withUnsafeBufferPointer { u in
            y.withUnsafeMutableBufferPointer { Elementwise.geluTanhMultiply($0.baseAddress!, u.baseAddress!, count: n) }
        }
        for i in 0..<n {
            let g = Double(gate[i]), u = Double(up[i])
            let expected = 0.5 * g * (1 + tanh((2 / Double.pi).squareRoot() * (g + 0.044715 * g * g * g))) * u
            #expect(abs(Double(y[i]) - expected) <= 1e-6 * max(1, abs(expected)), "gelu(\(g)) * \(u)")
        }
    }

    @Test func ropeRotatesPairsByPositionTimesFrequency() {
        let dims = 8, pairs = 4, position = 5
        let scale = Elementwise.ropeThetaScale(base: 10000, dimensions: dims)
        var cache = [Float](repeating: 0, count: 2 * pairs)
        cache.withUnsafeMutableBufferPointer {
            Elementwise.ropeCache(position: position, thetaScale: scale, pairs: pairs, into: $0.baseAddress!)
        }
        let x: [Float] = [1, 2, 3, 4, 5, 6, 7, 8]
        for style in [Elementwise.RopeStyle.adjacentPairs, .neox] {
            var y = x
            y.withUnsafeMutableBufferPointer { yp in
                cache.withUnsafeBufferPointer { c in
                    Elementwise.rope(yp.baseAddress!, heads: 1, headDim: dims, cache: c.baseAddress!, pairs: pairs, style: style)
                }
            }
            for p in 0..<pairs {
                let theta = Double(position) * pow(10000, -2 * Double(p) / Double(dims))
                let (i, j) = style == .adjacentPairs ? (2 * p, 2 * p + 1) : (p, p + pairs)
                let a = Double(x[i]), b = Double(x[j])
                #expect(abs(Double(y[i]) - (a * cos(theta) - b * sin(theta))) < 1e-5)
                #expect(abs(Double(y[j]) - (a * sin(theta) + b * cos(theta))) < 1e-5)
            }
        }
    }

    @Test func dotAndAxpy() {
        let n = 37
        let a = (0..<n).map { Float($0) * 0.5 }, b = (0..<n).map { Float(n - $0) }
        let expected = zip(a, b).map { Double($0) * Double($1) }.reduce(0, +)
        #expect(abs(Double(Elementwise.dot(a, b, count: n)) - expected) < 1e-3)
        var y = b
        y.withUnsafeMutableBufferPointer { Elementwise.axpy(2, a, $0.baseAddress!, count: n) }
        for i in 0..<n { #expect(y[i] == b[i] + 2 * a[i]) }
    }
}
