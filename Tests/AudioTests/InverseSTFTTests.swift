import Foundation
import Sampling
import Testing

@testable import Audio

/// `X[k] = sum_n x[n] e^(∓2 pi i k n / N)` for every k, term by term in Double (`inverse`:
/// the `+` sign, unscaled).
private func directComplexDFT(_ re: [Float], _ im: [Float], inverse: Bool) -> (real: [Double], imaginary: [Double]) {
    let n = re.count, sign = inverse ? 1.0 : -1.0
    var outRe = [Double](repeating: 0, count: n), outIm = [Double](repeating: 0, count: n)
    for k in 0..<n {
        var sr = 0.0, si = 0.0
        for j in 0..<n {
            let angle = 2 * Double.pi * Double(k * j % n) / Double(n)
            let (c, s) = (cos(angle), sign * sin(angle))
            sr += Double(re[j]) * c - Double(im[j]) * s
            si += Double(re[j]) * s + Double(im[j]) * c
        }
        outRe[k] = sr
        outIm[k] = si
    }
    return (outRe, outIm)
}

/// `irfft(X, N)`: `(1/N) (Re X[0] + (-1)^n Re X[N/2] + 2 sum_{0<k<N/2} Re(X[k] e^(2 pi i k n / N)))`,
/// term by term in Double.
private func directInverseRealDFT(_ re: [Float], _ im: [Float], size n: Int) -> [Double] {
    (0..<n).map { j in
        var sum = Double(re[0]) + (j % 2 == 0 ? 1 : -1) * Double(re[n / 2])
        for k in 1..<(n / 2) {
            let angle = 2 * Double.pi * Double(k * j % n) / Double(n)
            sum += 2 * (Double(re[k]) * cos(angle) - Double(im[k]) * sin(angle))
        }
        return sum / Double(n)
    }
}

/// The inverse STFT with "same" padding written out in Double from its definition: every
/// row's direct inverse DFT times the periodic Hann window, overlap-added with the squared
/// window, divided, `(N - H)/2` samples dropped at each end.
private func directInverseSTFT(_ re: [Float], _ im: [Float], fftSize n: Int, hop: Int) -> [Double] {
    let bins = n / 2 + 1, rows = re.count / bins
    guard rows > 0 else { return [] }
    let window = (0..<n).map { 0.5 - 0.5 * cos(2 * Double.pi * Double($0) / Double(n)) }
    let length = (rows - 1) * hop + n
    var y = [Double](repeating: 0, count: length), envelope = [Double](repeating: 0, count: length)
    for t in 0..<rows {
        let frame = directInverseRealDFT(Array(re[(t * bins)..<((t + 1) * bins)]), Array(im[(t * bins)..<((t + 1) * bins)]), size: n)
        for k in 0..<n {
            y[t * hop + k] += frame[k] * window[k]
            envelope[t * hop + k] += window[k] * window[k]
        }
    }
    let pad = (n - hop) / 2
    return (pad..<(length - pad)).map { y[$0] / envelope[$0] }
}

/// Seeded spectrum rows as the detokenizer makes them: `exp(L) (cos P + i sin P)` with
/// log-magnitudes `L` in [-2, 2) and phases `P` in [-4, 4).
private func randomRows(_ rows: Int, bins: Int, _ rng: inout SplitMix64) -> (real: [Float], imaginary: [Float]) {
    var re: [Float] = [], im: [Float] = []
    for _ in 0..<(rows * bins) {
        let magnitude = exp(2 * rng.signedUnit()), phase = 4 * rng.signedUnit()
        re.append(magnitude * cos(phase))
        im.append(magnitude * sin(phase))
    }
    return (re, im)
}

@Suite struct ComplexFFTTests {
    @Test func sizesWithOtherPrimeFactorsAreRefused() {
        for size in [0, -4, 7, 14, 22, 1282, 49, (1 << 24) + 2] { #expect(ComplexFFT(size: size) == nil, "size \(size)") }
        for size in [1, 2, 3, 4, 5, 6, 15, 640, 1280, 3 * 5 * 16] { #expect(ComplexFFT(size: size) != nil, "size \(size)") }
        #expect(InverseRealFFT(size: 1) == nil && InverseRealFFT(size: 15) == nil && InverseRealFFT(size: 14) == nil)
        #expect(InverseRealFFT(size: 2) != nil && InverseRealFFT(size: 1280) != nil)
    }

    @Test func forwardAndInverseMatchADirectDFT() throws {
        var rng = SplitMix64(seed: 0xC0DE_1280)
        for size in [1, 2, 3, 4, 5, 6, 8, 9, 10, 12, 15, 16, 20, 25, 27, 30, 40, 45, 60, 64, 75, 100, 125, 160, 320, 640, 1280] {
            let fft = try #require(ComplexFFT(size: size))
            let re = (0..<size).map { _ in rng.signedUnit() }, im = (0..<size).map { _ in rng.signedUnit() }
            for inverse in [false, true] {
                let (gotRe, gotIm) = fft.transform(real: re, imaginary: im, inverse: inverse)
                let (wantRe, wantIm) = directComplexDFT(re, im, inverse: inverse)
                var maxError = 0.0
                for k in 0..<size { maxError = max(maxError, abs(Double(gotRe[k]) - wantRe[k]), abs(Double(gotIm[k]) - wantIm[k])) }
                // Float rounding: a few units of 2^-24 per stage times sum |x| (<= 2N here).
                #expect(maxError < 1e-6 * Double(size).squareRoot() * 8, "size \(size) inverse \(inverse): \(maxError)")
            }
        }
    }

    @Test func inverseRealFFTMatchesTheDirectSumAndIgnoresTheImaginaryDCAndNyquist() throws {
        var rng = SplitMix64(seed: 0x1FF7)
        for size in [2, 4, 6, 10, 12, 30, 64, 160, 640, 1280] {
            let fft = try #require(InverseRealFFT(size: size))
            let bins = size / 2 + 1
            var (re, im) = randomRows(1, bins: bins, &rng)
            let got = fft.transform(real: re, imaginary: im)
            let want = directInverseRealDFT(re, im, size: size)
            let maxError = zip(got, want).map { abs(Double($0) - $1) }.max()!
            let scale = re.indices.reduce(0.0) { $0 + Double(abs(re[$1]) + abs(im[$1])) } / Double(size)
            #expect(maxError <= 4e-7 * scale * Double(size).squareRoot(), "size \(size): \(maxError) (scale \(scale))")
            // Only the real parts of X[0] and X[N/2] count.
            im[0] = 123
            im[bins - 1] = -45
            #expect(fft.transform(real: re, imaginary: im) == got)
        }
    }
}

@Suite struct InverseSTFTTests {
    @Test func parametersAreChecked() throws {
        let istft = try #require(InverseSTFT())
        #expect(istft.fftSize == 1280 && istft.hopLength == 320 && istft.binCount == 641 && istft.padding == 480)
        #expect(InverseSTFT(fftSize: 1280, hopLength: 1280) == nil)
        #expect(InverseSTFT(fftSize: 1280, hopLength: 0) == nil)
        #expect(InverseSTFT(fftSize: 1280, hopLength: 321) == nil)
        #expect(InverseSTFT(fftSize: 1282, hopLength: 320) == nil)
        #expect(InverseSTFT(fftSize: 60, hopLength: 10) != nil)
    }

    @Test func matchesADirectFloat64InverseSTFT() throws {
        var rng = SplitMix64(seed: 0x15_7F7)
        var worst = 0.0
        for (size, hop, rows) in [(1280, 320, 1), (1280, 320, 2), (1280, 320, 3), (1280, 320, 13), (60, 10, 9), (48, 12, 5), (30, 6, 1)] {
            let istft = try #require(InverseSTFT(fftSize: size, hopLength: hop))
            let (re, im) = randomRows(rows, bins: istft.binCount, &rng)
            let got = istft.synthesize(real: re, imaginary: im)
            let want = directInverseSTFT(re, im, fftSize: size, hop: hop)
            #expect(got.count == rows * hop && want.count == rows * hop)
            let maxError = zip(got, want).map { abs(Double($0) - $1) }.max() ?? 0
            let rms = (want.reduce(0) { $0 + $1 * $1 } / Double(want.count)).squareRoot()
            #expect(maxError < 2e-6 * max(rms, 1e-3) * 10, "N \(size) H \(hop) T \(rows): \(maxError), rms \(rms)")
            worst = max(worst, maxError / rms)
        }
        print("InverseSTFT: max |difference| from the float64 direct inverse STFT \(worst) of the rms")
        #expect(try #require(InverseSTFT()).synthesize(real: [], imaginary: []).isEmpty)
    }

    @Test func streamingChunksConcatenateToTheOneCallResult() throws {
        var rng = SplitMix64(seed: 0x57_2EA)
        let istft = try #require(InverseSTFT())
        let rows = 23, bins = istft.binCount
        let (re, im) = randomRows(rows, bins: bins, &rng)
        let whole = istft.synthesize(real: re, imaginary: im)
        #expect(whole.count == rows * 320)
        var stream = istft
        // Chunks of every size, and random cuts.
        var cuttings: [[Int]] = (1...rows).map { k in Array(stride(from: 0, to: rows, by: k)) + [rows] }
        for _ in 0..<20 { cuttings.append(([0, rows] + (0..<rng.below(8)).map { _ in rng.below(rows + 1) }).sorted()) }
        for cuts in cuttings {
            var out: [Float] = [], given = 0
            for (a, b) in zip(cuts, cuts.dropFirst()) {
                let chunk = stream.append(real: Array(re[(a * bins)..<(b * bins)]), imaginary: Array(im[(a * bins)..<(b * bins)]))
                given = b
                // Every sample before the last row's window is out: t H - P of them.
                #expect(out.count + chunk.count == max(0, given * 320 - 480))
                out += chunk
            }
            #expect(stream.rowCount == rows)
            out += stream.finish()
            #expect(stream.rowCount == 0)
            #expect(out == whole, "cuts \(cuts)")
        }
        // An empty stream finishes with nothing; one row gives its 320 samples at the end.
        #expect(stream.finish().isEmpty)
        #expect(stream.append(real: Array(re[0..<bins]), imaginary: Array(im[0..<bins])).isEmpty)
        #expect(stream.finish() == istft.synthesize(real: Array(re[0..<bins]), imaginary: Array(im[0..<bins])))
    }
}
