import Foundation
import Sampling
import Testing

@testable import Audio

/// `X[k] = sum_n x[n] e^(-2 pi i k n / N)` for k = 0 ... N/2, term by term in Double.
private func directDFT(_ x: [Float]) -> (real: [Double], imaginary: [Double]) {
    let n = x.count
    var real: [Double] = [], imaginary: [Double] = []
    for k in 0...(n / 2) {
        var re = 0.0, im = 0.0
        for (j, v) in x.enumerated() {
            // Reduce k j mod N first so the angle stays exact for large products.
            let angle = 2 * Double.pi * Double((k * j) % n) / Double(n)
            re += Double(v) * cos(angle)
            im -= Double(v) * sin(angle)
        }
        real.append(re)
        imaginary.append(im)
    }
    return (real, imaginary)
}

/// The textbook recursion, written out for the test: the FFT of the even samples, the FFT of
/// the odd samples, combined with the twiddles `w = cos - i sin` of `2 pi k / N`, in the same
/// Float expressions `RealFFT` documents. Returns all N bins.
private func recursiveFFT(_ x: [Float], cosines: [Float], sines: [Float], tableSize: Int) -> ([Float], [Float]) {
    let n = x.count
    if n == 1 { return ([x[0]], [0]) }
    let (er, ei) = recursiveFFT(stride(from: 0, to: n, by: 2).map { x[$0] }, cosines: cosines, sines: sines, tableSize: tableSize)
    let (or, oi) = recursiveFFT(stride(from: 1, to: n, by: 2).map { x[$0] }, cosines: cosines, sines: sines, tableSize: tableSize)
    var re = [Float](repeating: 0, count: n), im = [Float](repeating: 0, count: n)
    for k in 0..<(n / 2) {
        let wr = cosines[k * tableSize / n], wi = -sines[k * tableSize / n]
        re[k] = er[k] + wr * or[k] - wi * oi[k]
        im[k] = ei[k] + wr * oi[k] + wi * or[k]
        re[k + n / 2] = er[k] - wr * or[k] + wi * oi[k]
        im[k + n / 2] = ei[k] - wr * oi[k] - wi * or[k]
    }
    return (re, im)
}

@Suite struct RealFFTTests {
    @Test func matchesADirectDFTOnSeededRandomInput() throws {
        var rng = SplitMix64(seed: 0xFF7_0512)
        for size in [2, 4, 8, 16, 64, 512, 1024] {
            let fft = try #require(RealFFT(size: size))
            #expect(fft.binCount == size / 2 + 1)
            for _ in 0..<3 {
                let x = (0..<size).map { _ in rng.signedUnit() }
                let (re, im) = fft.transform(x)
                let (expectedRe, expectedIm) = directDFT(x)
                #expect(re.count == size / 2 + 1 && im.count == size / 2 + 1)
                let scale = x.reduce(0.0) { $0 + Double(abs($1)) }
                var maxError = 0.0
                for k in 0...(size / 2) {
                    maxError = max(maxError, abs(Double(re[k]) - expectedRe[k]), abs(Double(im[k]) - expectedIm[k]))
                }
                // Float rounding grows with log2(N): a few units of 2^-24 times sum |x|.
                #expect(maxError <= 1e-6 * scale, "size \(size): max error \(maxError), sum |x| \(scale)")
                // Bins 0 and N/2 of a real signal are real.
                #expect(im[0] == 0 && Double(abs(im[size / 2])) <= 1e-6 * scale)
            }
        }
    }

    @Test func equalsTheEvenOddRecursionBitForBit() throws {
        // The in-place transform after the bit-reversal permutation performs the very
        // butterflies of llama.cpp's recursive FFT, so the results are identical, not just close.
        var rng = SplitMix64(seed: 0x5EED_0FF7)
        let size = 512
        let fft = try #require(RealFFT(size: size))
        let angles = (0..<size).map { Float(2 * Double.pi * Double($0) / Double(size)) }
        let cosines = angles.map { cosf($0) }, sines = angles.map { sinf($0) }
        for _ in 0..<20 {
            let x = (0..<size).map { _ in rng.signedUnit() * 0.01 }
            let (re, im) = fft.transform(x)
            let (expectedRe, expectedIm) = recursiveFFT(x, cosines: cosines, sines: sines, tableSize: size)
            #expect(re == Array(expectedRe[0...(size / 2)]))
            #expect(im == Array(expectedIm[0...(size / 2)]))
        }
    }

    @Test func knownTransforms() throws {
        let fft = try #require(RealFFT(size: 8))
        // An impulse has a flat spectrum; a constant has everything in bin 0; a cosine at bin 2
        // has N/2 in bin 2.
        #expect(fft.transform([1, 0, 0, 0, 0, 0, 0, 0]).real == [1, 1, 1, 1, 1])
        #expect(fft.transform([Float](repeating: 0.5, count: 8)).real == [4, 0, 0, 0, 0])
        let cosine = (0..<8).map { Float(cos(2 * Double.pi * 2 * Double($0) / 8)) }
        let power = fft.powerSpectrum(cosine)
        #expect(abs(power[2] - 16) < 1e-5)
        #expect([0, 1, 3, 4].allSatisfy { power[$0] < 1e-10 })
        // Other lengths are cropped or zero-padded to the size.
        #expect(fft.transform([1]) == fft.transform([1, 0, 0, 0, 0, 0, 0, 0]))
        #expect(fft.transform([Float](repeating: 0.5, count: 12)).real == [4, 0, 0, 0, 0])
        #expect(fft.transform([]).real == [0, 0, 0, 0, 0])
    }

    @Test func sizesMustBePowersOfTwo() {
        for size in [-8, 0, 1, 3, 6, 500, 513, 1 << 21] { #expect(RealFFT(size: size) == nil, "size \(size)") }
        #expect(RealFFT(size: 2) != nil && RealFFT(size: 1 << 20) != nil)
    }
}

@Suite struct MelFilterbankTests {
    let filterbank = LogMelExtractor().filterbank

    @Test func theSlaneyScale() {
        // Linear to 1 kHz (3 mel per 200 Hz), logarithmic above (27 mel per factor 6.4).
        #expect(MelFilterbank.mel(hertz: 0) == 0)
        #expect(abs(MelFilterbank.mel(hertz: 500) - 7.5) < 1e-12)
        #expect(abs(MelFilterbank.mel(hertz: 1000) - 15) < 1e-12)
        #expect(abs(MelFilterbank.mel(hertz: 6400) - 42) < 1e-12)
        #expect(abs(MelFilterbank.mel(hertz: 8000) - 45.245_640_471_924_965) < 1e-9)
        for hertz in [0.0, 123.4, 999.9, 1000, 2500, 7999] {
            #expect(abs(MelFilterbank.hertz(mel: MelFilterbank.mel(hertz: hertz)) - hertz) < 1e-9)
        }
    }

    @Test func shapeAndSupports() {
        #expect(filterbank.melCount == 128 && filterbank.binCount == 257)
        #expect(filterbank.weights.count == 128 * 257)
        #expect(filterbank.weights.allSatisfy { $0 >= 0 })
        for m in 0..<128 {
            let row = Array(filterbank.weights[(m * 257)..<((m + 1) * 257)])
            let support = filterbank.supports[m]
            // Every filter covers at least one bin (the lowest are narrower than two bins),
            // and is zero outside its support.
            #expect(!support.isEmpty)
            #expect(row.indices.allSatisfy { support.contains($0) || row[$0] == 0 })
            #expect(support.allSatisfy { row[$0] > 0 })
            // A triangle: rising, then falling.
            let peak = support.max { row[$0] < row[$1] }!
            #expect((support.lowerBound..<peak).allSatisfy { row[$0] <= row[$0 + 1] })
            #expect((peak..<(support.upperBound - 1)).allSatisfy { row[$0] >= row[$0 + 1] })
            if m > 0 { #expect(support.lowerBound >= filterbank.supports[m - 1].lowerBound) }
        }
        // 0 Hz is every filter's left edge at most, and 8 kHz the last one's right edge.
        #expect((0..<128).allSatisfy { filterbank.weights[$0 * 257] == 0 && filterbank.weights[$0 * 257 + 256] == 0 })
        #expect(filterbank.supports[0] == 1..<2 && filterbank.supports[127] == 244..<256)
    }

    @Test func slaneyNormalizationScalesTrianglesThatSumToOne() {
        // Undo the area normalisation (each filter scaled by 2 / width in Hz): the triangles
        // then overlap so that they sum to 1 at every bin between the first and the last
        // filter's centre.
        let edges = (0..<130).map { MelFilterbank.hertz(mel: MelFilterbank.mel(hertz: 8000) * Double($0) / 129) }
        for k in 1..<257 {
            let frequency = Double(k) * 16000 / 512
            guard frequency > edges[1] && frequency < edges[128] else { continue }
            var sum = 0.0
            for m in 0..<128 { sum += Double(filterbank.weights[m * 257 + k]) * (edges[m + 2] - edges[m]) / 2 }
            #expect(abs(sum - 1) < 1e-6, "bin \(k) (\(frequency) Hz): triangles sum to \(sum)")
        }
    }
}
