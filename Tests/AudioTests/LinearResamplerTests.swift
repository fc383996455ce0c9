import Foundation
import TestSupport
import Testing

@testable import Audio

private func sine(frequency: Double, rate: Int, count: Int, amplitude: Double = 0.8) -> [Float] {
    (0..<count).map { Float(amplitude * sin(2 * Double.pi * frequency * Double($0) / Double(rate))) }
}

/// Sign changes between consecutive samples.
private func zeroCrossings(_ x: ArraySlice<Float>) -> Int {
    zip(x, x.dropFirst()).filter { ($0 < 0) != ($1 < 0) }.count
}

/// Magnitude of the DFT of `x` at `frequency` Hz, normalized so a full-length sine of
/// amplitude A gives about A.
private func dftMagnitude(_ x: ArraySlice<Float>, frequency: Double, rate: Int) -> Double {
    var re = 0.0, im = 0.0
    for (n, v) in x.enumerated() {
        let phase = 2 * Double.pi * frequency * Double(n) / Double(rate)
        re += Double(v) * cos(phase)
        im -= Double(v) * sin(phase)
    }
    return 2 * (re * re + im * im).squareRoot() / Double(x.count)
}

@Suite struct LinearResamplerTests {
    @Test func the22kHzClipBecomesTheSamplesLlamaCppDecodedBitForBit() throws {
        let source = try WAVAudio(data: Data(contentsOf: URL(fileURLWithPath: TestFixtures.path("audio/lfm2-audio-tones-22k-f32.wav"))))
        let expected = try WAVAudio(
            data: Data(contentsOf: URL(fileURLWithPath: TestFixtures.path("audio/lfm2-audio-tones-22k-f32.miniaudio-16k.wav"))))
        #expect(source.sampleRate == 22050 && source.sampleFormat == .float32 && source.samples.count == 33075)
        #expect(expected.sampleRate == 16000 && expected.samples.count == 24000)

        let resampler = try LinearResampler(from: 22050, to: 16000)
        #expect(resampler.outputCount(forInputCount: 33075) == 24000)
        let output = resampler.resample(source.samples)
        #expect(output.count == 24000)
        let maxDifference = zip(output, expected.samples).map { abs($0 - $1) }.max() ?? .infinity
        #expect(maxDifference == 0, "max |diff| against miniaudio's 16 kHz PCM: \(maxDifference)")
        #expect(output == expected.samples)
        // The same through the WAV entry point and the resampling method.
        let wavBytes = try Data(contentsOf: URL(fileURLWithPath: TestFixtures.path("audio/lfm2-audio-tones-22k-f32.wav")))
        #expect(try WAVAudio.decodeMono16kHz(wavBytes) == expected.samples)
        #expect(try source.resampled(to: 16000, method: .linear).samples == expected.samples)
    }

    @Test func outputCountIsMiniaudiosExpectedFrameCount() throws {
        // (input count, source rate, target rate, output count), from
        // ma_linear_resampler_get_expected_output_frame_count worked by hand:
        // floor(n * out / in), plus one when 1 + floor(that * in / out) input samples exist.
        let cases: [(Int, Int, Int, Int)] = [
            (33075, 22050, 16000, 24000), (44100, 44100, 16000, 16000), (3, 48000, 16000, 1),
            (0, 48000, 16000, 0), (1, 48000, 16000, 1), (8000, 8000, 16000, 16000), (1, 8000, 16000, 2),
            (4410, 44100, 16000, 1600), (10, 16000, 16000, 10)
        ]
        for (count, source, target, expected) in cases {
            let resampler = try LinearResampler(from: source, to: target)
            #expect(resampler.outputCount(forInputCount: count) == expected, "\(count) samples \(source) -> \(target)")
            #expect(resampler.resample([Float](repeating: 0.25, count: count)).count == expected)
        }
        // Against an independent count: step the timer (in units of 1 / target) until an
        // output would need an input sample that does not exist.
        for (source, target) in [(22050, 16000), (44100, 16000), (48000, 16000), (11025, 16000), (8000, 16000), (96000, 16000)] {
            let resampler = try LinearResampler(from: source, to: target)
            for count in [1, 2, 3, 7, 100, 441, 1000, 4801] {
                var produced = 0
                while (produced * source) / target + 1 <= count { produced += 1 }
                #expect(resampler.outputCount(forInputCount: count) == produced, "\(count) samples \(source) -> \(target)")
            }
        }
    }

    @Test func downsamplingStartsAtZeroAndSettlesOnAConstant() throws {
        let dc = try LinearResampler(from: 44100, to: 16000).resample([Float](repeating: 0.5, count: 4410))
        // The first output interpolates from the zero before the signal, at fraction 0.
        #expect(dc[0] == 0)
        // The filter's gain at 0 Hz is 1, so a constant comes through once the filter settles.
        #expect(dc[100...].allSatisfy { abs($0 - 0.5) < 1e-6 })
    }

    @Test func upsampling8kTo16kKeepsTheTone() throws {
        let x = sine(frequency: 440, rate: 8000, count: 8000)
        let y = try LinearResampler(from: 8000, to: 16000).resample(x)
        #expect(y.count == 16000)
        #expect(abs(zeroCrossings(y[200...]) - 869) <= 2)
        #expect(abs(dftMagnitude(y[200..<16000], frequency: 440, rate: 16000) - 0.8) < 0.02)
    }

    @Test func downsamplingAttenuatesButDoesNotRemoveContentAboveTheNewNyquist() throws {
        // 12 kHz cannot be represented at 16 kHz; it folds to 4 kHz. The 4th-order filter at
        // 8 kHz leaves about a ninth of the amplitude (the sinc resampler: under 0.3 %).
        let x = sine(frequency: 12000, rate: 48000, count: 48000)
        let linear = try WAVAudio.resample(x, from: 48000, to: 16000, method: .linear)
        let aliased = dftMagnitude(linear[200..<15800], frequency: 4000, rate: 16000)
        #expect(aliased > 0.06 && aliased < 0.12)
        let sinc = try WAVAudio.resample(x, from: 48000, to: 16000, method: .bandLimitedSinc)
        #expect(dftMagnitude(sinc[200..<15800], frequency: 4000, rate: 16000) < 0.002)
    }

    @Test func ratesAreValidated() throws {
        #expect(throws: WAVError.unsupportedSampleRate(0)) { try LinearResampler(from: 0, to: 16000) }
        #expect(throws: WAVError.unsupportedSampleRate(999)) { try LinearResampler(from: 16000, to: 999) }
        #expect(throws: WAVError.unsupportedSampleRate(-1)) { try WAVAudio.resample([0], from: -1, to: 16000, method: .linear) }
        // Equal rates are the identity with either method.
        let x: [Float] = [0.5, -0.25, 1, 0]
        for method in ResamplingMethod.allCases {
            #expect(try WAVAudio.resample(x, from: 16000, to: 16000, method: method) == x)
        }
        #expect((try? LinearResampler(from: 16000, to: 16000))?.resample(x) == x)
    }
}
