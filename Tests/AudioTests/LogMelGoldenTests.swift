import Foundation
import LeapJSON
import TestSupport
import Testing

@testable import Audio

/// One of libmtmd's audio goldens (`Tests/Fixtures/golden/audio`): the clip it decoded, the
/// samples and the log-mel spectrogram it computed. The mel does not depend on the model,
/// so every golden (both models, both prompts) checks the same front end.
private struct AudioGolden: Sendable, CustomStringConvertible {
    let name: String
    let json: JSONValue
    var description: String { name }

    static let directory = "golden/audio"
    static var all: [AudioGolden] {
        get throws {
            let names = try FileManager.default.contentsOfDirectory(atPath: TestFixtures.path(directory))
                .filter { $0.hasSuffix(".json") }.sorted()
            return try names.map { name in
                let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: TestFixtures.path("\(directory)/\(name)"))))
                return AudioGolden(name: name, json: try JSONValue.parse(bytes: bytes))
            }
        }
    }

    func number(_ path: String...) -> Double { value(path).doubleValue ?? .nan }
    func integer(_ path: String...) -> Int { value(path).intValue ?? -1 }
    func string(_ path: String...) -> String { value(path).stringValue ?? "" }
    func numbers(_ path: String...) -> [Double] { (value(path).arrayValue ?? []).map { $0.doubleValue ?? .nan } }
    func matrix(_ path: String...) -> [[Double]] {
        (value(path).arrayValue ?? []).map { ($0.arrayValue ?? []).map { $0.doubleValue ?? .nan } }
    }
    func has(_ path: String...) -> Bool { path.reduce(Optional(json)) { $0?[$1] } != nil }
    private func value(_ path: [String]) -> JSONValue { path.reduce(Optional(json)) { $0?[$1] } ?? .null }
}

/// True when `actual` equals `expected` as printed with 6 significant digits (the goldens'
/// precision), with `slack` more relative error allowed.
private func agrees(_ actual: Double, _ expected: Double, slack: Double = 0) -> Bool {
    abs(actual - expected) <= (5e-6 + slack) * max(abs(expected), 1e-30) + 1e-12
}

@Suite struct LogMelGoldenTests {
    @Test func thereAreGoldensForEveryClip() throws {
        let clips = Set(try AudioGolden.all.map { $0.string("audio") })
        #expect(
            clips == ["lfm2-audio-chirp-1s-16k.wav", "lfm2-audio-short-0.25s-16k.wav", "lfm2-audio-tones-22k-f32.wav"])
    }

    @Test(arguments: try AudioGolden.all)
    fileprivate func decodedSamplesMatch(_ golden: AudioGolden) throws {
        let bytes = try Data(contentsOf: URL(fileURLWithPath: TestFixtures.path("audio/\(golden.string("audio"))")))
        let file = try WAVAudio(data: bytes)
        #expect(file.sampleRate == golden.integer("source", "sample_rate"))
        #expect(file.samples.count == golden.integer("source", "n_frames"))
        #expect(golden.integer("source", "channels") == 1)
        let format: WAVSampleFormat = golden.string("source", "format") == "pcm_s16" ? .int16 : .float32
        #expect(file.sampleFormat == format)
        #expect(format.bytesPerSample * 8 == golden.integer("source", "bits"))

        let samples = try WAVAudio.decodeMono16kHz(bytes)
        #expect(golden.integer("samples", "sample_rate") == 16000)
        #expect(samples.count == golden.integer("samples", "n"))
        let sum = samples.reduce(0.0) { $0 + Double($1) }
        let sumAbs = samples.reduce(0.0) { $0 + Double(abs($1)) }
        #expect(agrees(sum, golden.number("samples", "sum"), slack: 1e-6), "sum \(sum)")
        #expect(agrees(sumAbs, golden.number("samples", "sum_abs"), slack: 1e-6), "sum_abs \(sumAbs)")
        let first = golden.numbers("samples", "first")
        #expect(first.count == 16)
        for (i, expected) in first.enumerated() {
            #expect(agrees(Double(samples[i]), expected), "sample \(i): \(samples[i]) vs \(expected)")
        }
    }

    @Test(arguments: try AudioGolden.all)
    fileprivate func logMelMatches(_ golden: AudioGolden) throws {
        #expect(golden.integer("mel_params", "sample_rate") == LogMelExtractor.sampleRate)
        #expect(golden.integer("mel_params", "n_fft") == LogMelExtractor.fftSize)
        #expect(golden.integer("mel_params", "window") == LogMelExtractor.windowLength)
        #expect(golden.integer("mel_params", "hop") == LogMelExtractor.hopLength)

        let bytes = try Data(contentsOf: URL(fileURLWithPath: TestFixtures.path("audio/\(golden.string("audio"))")))
        let samples = try WAVAudio.decodeMono16kHz(bytes)
        let mel = try LogMelExtractor().spectrogram(of: samples)
        #expect(mel.melCount == golden.integer("mel", "n_mels"))
        #expect(mel.frameCount == golden.integer("mel", "n_frames"))
        #expect(mel.validFrameCount == golden.integer("mel", "n_valid_frames"))
        #expect(mel.frameCount == LogMelExtractor.frameCount(forSampleCount: samples.count))
        #expect(mel.values.count == mel.melCount * mel.frameCount)

        // Sum and mean are 0 up to rounding (each bin is normalised to mean 0): compare them
        // absolutely; the sum of |v| and each frame's sum of |v| relatively.
        let sum = mel.values.reduce(0.0) { $0 + Double($1) }
        #expect(abs(sum - golden.number("mel", "sum")) < 1e-3, "sum \(sum)")
        #expect(abs(sum / Double(mel.values.count) - golden.number("mel", "mean")) < 1e-7)
        let sumAbs = mel.values.reduce(0.0) { $0 + Double(abs($1)) }
        #expect(agrees(sumAbs, golden.number("mel", "sum_abs"), slack: 1e-6), "sum_abs \(sumAbs)")
        let frameAbsSums = golden.numbers("mel", "frame_abs_sums")
        #expect(frameAbsSums.count == mel.frameCount)
        for (t, expected) in frameAbsSums.enumerated() {
            let actual = (0..<mel.melCount).reduce(0.0) { $0 + Double(abs(mel[$1, t])) }
            #expect(agrees(actual, expected, slack: 1e-6), "frame \(t): sum |v| \(actual) vs \(expected)")
        }
        // The last frame is 0.
        #expect((0..<mel.melCount).allSatisfy { mel[$0, mel.frameCount - 1] == 0 })

        // Values: the whole matrix for chirp-1s, the first 64 bins of the first 4 frames for
        // the others; [frame][mel] in the JSON.
        let frames = golden.has("mel", "frames") ? golden.matrix("mel", "frames") : golden.matrix("mel", "first_frames")
        #expect(frames.count == (golden.has("mel", "frames") ? mel.frameCount : 4))
        var maxDifference = 0.0, sumDifference = 0.0, count = 0, outsideRounding = 0
        for (t, row) in frames.enumerated() {
            #expect(row.count == (golden.has("mel", "frames") ? mel.melCount : 64))
            for (m, expected) in row.enumerated() {
                let difference = abs(Double(mel[m, t]) - expected)
                maxDifference = max(maxDifference, difference)
                sumDifference += difference
                count += 1
                if !agrees(Double(mel[m, t]), expected, slack: 1e-6) { outsideRounding += 1 }
            }
        }
        print("\(golden.name): \(count) mel values, max |diff| \(maxDifference), mean |diff| \(sumDifference / Double(count))")
        // The brief's tolerance, and the finer fact: every value equals llama.cpp's as printed.
        #expect(maxDifference <= 1e-3)
        #expect(outsideRounding == 0, "\(outsideRounding) of \(count) values differ beyond the JSON's 6 digits")
    }
}
