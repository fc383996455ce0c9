import Foundation
import Sampling
import TestSupport
import Testing

@testable import Audio

/// Step 2 of the front end written out plainly in Double, with a direct DFT: the reference the
/// Float implementation is held to on inputs the goldens do not cover.
private func referenceLogMel(_ x: [Float]) -> [[Double]] {
    let n = x.count
    var padded = [Double](repeating: 0, count: n + 512)
    for i in 0..<n { padded[256 + i] = i == 0 ? Double(x[0]) : Double(x[i]) - 0.97 * Double(x[i - 1]) }
    let hann = (0..<400).map { 0.5 - 0.5 * cos(2 * Double.pi * Double($0) / 399) }
    let filterbank = LogMelExtractor().filterbank
    let frames = n / 160 + 1, valid = n / 160
    var mel = [[Double]](repeating: [Double](repeating: 0, count: frames), count: 128)
    for t in 0..<valid {
        var power = [Double](repeating: 0, count: 257)
        for k in 0..<257 {
            var re = 0.0, im = 0.0
            for i in 0..<400 {
                let v = hann[i] * padded[t * 160 + 56 + i]
                let angle = 2 * Double.pi * Double((k * (56 + i)) % 512) / 512
                re += v * cos(angle)
                im -= v * sin(angle)
            }
            power[k] = re * re + im * im
        }
        for m in 0..<128 {
            var energy = 0.0
            for k in 0..<257 { energy += power[k] * Double(filterbank.weights[m * 257 + k]) }
            mel[m][t] = log(energy + 0x1p-24)
        }
    }
    for m in 0..<128 {
        let mean = mel[m][0..<valid].reduce(0, +) / Double(valid)
        let variance = mel[m][0..<valid].reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / Double(valid - 1)
        for t in 0..<valid { mel[m][t] = (mel[m][t] - mean) / (variance.squareRoot() + 1e-5) }
    }
    return mel
}

private func tone(_ count: Int, seed: UInt64) -> [Float] {
    var rng = SplitMix64(seed: seed)
    return (0..<count).map { i in
        let t = Double(i) / 16000
        return Float(0.3 * sin(2 * Double.pi * (300 + 2000 * t) * t) + 0.1 * sin(2 * Double.pi * 3100 * t))
            + 0.01 * rng.signedUnit()
    }
}

@Suite struct LogMelEdgeCaseTests {
    @Test func matchesAPlainDoubleReference() throws {
        for (count, seed) in [(320, UInt64(1)), (1000, 2), (4321, 3)] {
            let x = tone(count, seed: seed)
            let mel = try LogMelExtractor().spectrogram(of: x)
            let reference = referenceLogMel(x)
            var maxDifference = 0.0, sumDifference = 0.0
            for m in 0..<128 {
                for t in 0..<mel.frameCount {
                    let difference = abs(Double(mel[m, t]) - reference[m][t])
                    maxDifference = max(maxDifference, difference)
                    sumDifference += difference
                }
            }
            let meanDifference = sumDifference / Double(mel.values.count)
            print("\(count) samples: max |Float - Double reference| \(maxDifference), mean \(meanDifference)")
            #expect(maxDifference < 1e-3 && meanDifference < 1e-5, "\(count) samples")
        }
    }

    @Test func theShortestAcceptedInputIs320Samples() throws {
        let extractor = LogMelExtractor()
        #expect(LogMelExtractor.minimumSampleCount == 320)
        #expect(throws: LogMelError.tooShort(sampleCount: 319, minimum: 320)) { try extractor.spectrogram(of: tone(319, seed: 4)) }
        #expect(throws: LogMelError.tooShort(sampleCount: 0, minimum: 320)) { try extractor.spectrogram(of: []) }
        let mel = try extractor.spectrogram(of: tone(320, seed: 4))
        #expect(mel.frameCount == 3 && mel.validFrameCount == 2)
        // Two frames a and b normalised with the unbiased deviation |a - b| / sqrt(2): each
        // value is +-(|a - b| / 2) / (|a - b| / sqrt(2) + 1e-5), just under 1/sqrt(2) (the
        // biased deviation would give 1), the two of a bin opposite; the third frame is 0.
        let halfRoot = Float(0.5.squareRoot())
        for m in 0..<128 {
            #expect(abs(mel[m, 0]) <= halfRoot)
            #expect(mel[m, 0] == -mel[m, 1])
            #expect(mel[m, 2] == 0)
        }
        let magnitudes = (0..<128).map { abs(mel[$0, 0]) }.sorted()
        #expect(magnitudes[64] > halfRoot - 1e-3, "the median bin: \(magnitudes[64])")
        #expect(
            LogMelError.tooShort(sampleCount: 160, minimum: 320).description
                == "the audio is too short: 160 samples at 16 kHz (0.010 s); at least 320 samples (0.020 s) are needed")
    }

    @Test func aHundredthOfASecondIsRefusedAfterDecoding() throws {
        // 0.01 s at 16 kHz decodes (160 samples) and the front end refuses it; at 22.05 kHz
        // it resamples to 160 samples first.
        for rate in [16000, 22050] {
            let count = rate / 100
            let wav = WAVBuilder.simple(
                fmt: WAVBuilder.fmt(tag: 1, rate: rate, bits: 16),
                samples: (0..<count).flatMap { WAVBuilder.le16(($0 * 97) % 2000 - 1000) })
            let samples = try WAVAudio.decodeMono16kHz(wav.data)
            #expect(samples.count == 160)
            #expect(throws: LogMelError.tooShort(sampleCount: 160, minimum: 320)) { try LogMelExtractor().spectrogram(of: samples) }
        }
    }

    @Test func theMaximumLengthIsConfigurable() throws {
        #expect(LogMelExtractor().maximumSampleCount == 9_600_000)
        let extractor = LogMelExtractor(maximumSampleCount: 1600)
        #expect(try extractor.spectrogram(of: tone(1600, seed: 5)).frameCount == 11)
        #expect(throws: LogMelError.tooLong(sampleCount: 1601, maximum: 1600)) { try extractor.spectrogram(of: tone(1601, seed: 5)) }
        #expect(
            LogMelError.tooLong(sampleCount: 1601, maximum: 1600).description
                == "the audio is too long: 1601 samples at 16 kHz (0.100 s); at most 1600 samples (0.100 s) are accepted")
    }

    @Test func nonFiniteSamplesAreRefused() {
        var x = tone(1000, seed: 6)
        x[417] = .nan
        #expect(throws: LogMelError.nonFiniteSample(index: 417)) { try LogMelExtractor().spectrogram(of: x) }
        x[417] = 0
        x[3] = -.infinity
        #expect(throws: LogMelError.nonFiniteSample(index: 3)) { try LogMelExtractor().spectrogram(of: x) }
    }

    @Test func frameCountsFollowTheHop() throws {
        for (count, frames) in [(320, 3), (479, 3), (480, 4), (4000, 26), (16000, 101), (24000, 151)] {
            #expect(LogMelExtractor.frameCount(forSampleCount: count) == frames)
            let mel = try LogMelExtractor().spectrogram(of: tone(count, seed: UInt64(count)))
            #expect(mel.frameCount == frames && mel.validFrameCount == frames - 1)
            #expect(mel.values.allSatisfy { $0.isFinite })
        }
        // Silence is refused by nothing: every energy is at the 2^-24 floor, every bin flat,
        // so every normalised value is 0.
        #expect(try LogMelExtractor().spectrogram(of: [Float](repeating: 0, count: 800)).values.allSatisfy { $0 == 0 })
    }

    @Test func theWindowIsASymmetricHannOf400CentredIn512() {
        let window = LogMelExtractor().window
        #expect(window.count == 512)
        #expect(window[0..<56].allSatisfy { $0 == 0 } && window[456...].allSatisfy { $0 == 0 })
        #expect(window[56] == 0 && window[455] == 0)
        #expect((0..<200).allSatisfy { abs(window[56 + $0] - window[455 - $0]) < 1e-6 })
        #expect(abs(window[56 + 133] - Float(0.5 - 0.5 * cos(2 * Double.pi * 133 / 399))) < 1e-6)
    }

    @Test func badFilesAreTypedErrorsOnTheWayIn() {
        func error(_ bytes: [UInt8]) -> WAVError? {
            do {
                _ = try WAVAudio.decodeMono16kHz(Data(bytes))
                return nil
            } catch { return error }
        }
        let stereo = WAVBuilder.simple(fmt: WAVBuilder.fmt(tag: 1, channels: 2, bits: 16), samples: [0, 0, 0, 0])
        #expect(error(stereo.bytes) == .multiChannel(channelCount: 2))
        #expect(error(Array("fLaC".utf8) + [0, 0, 0, 34]) == .notWAV(detectedFormat: "FLAC"))
        #expect(error(Array("ID3".utf8) + [3, 0, 0, 0, 0, 0]) == .notWAV(detectedFormat: "MP3 (ID3 tag)"))
        let adpcm = WAVBuilder.simple(fmt: WAVBuilder.fmt(tag: 2, bits: 4, blockAlign: 1), samples: [0, 0])
        #expect(error(adpcm.bytes) == .unsupportedEncoding("Microsoft ADPCM (format tag 0x2)"))
        let unknown = WAVBuilder.simple(fmt: WAVBuilder.fmt(tag: 0x1234, bits: 16), samples: [0, 0])
        #expect(error(unknown.bytes) == .unsupportedEncoding("with format tag 0x1234"))
        let valid = WAVBuilder.simple(fmt: WAVBuilder.fmt(tag: 1, bits: 16), samples: [1, 2, 3, 4]).bytes
        #expect(error(Array(valid.prefix(30))) == .chunkSizeExceedsData(chunkID: "RIFF", declaredSize: valid.count - 8, availableBytes: 22))
        #expect(error(Array(valid.prefix(10))) == .truncated(structure: "RIFF header"))
    }
}
