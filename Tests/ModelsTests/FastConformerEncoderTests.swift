import Foundation
import GGUF
import Kernels
import LeapJSON
import Models
import Reference
import TestSupport
import Testing

/// LFM2-Audio's audio encoder (`FastConformerEncoder`, the `lfm2a` projector) against llama.cpp's
/// (libmtmd's) embeddings for the tiny fixture, against `ReferenceFastConformerEncoder` on random
/// inputs, and against hostile projector files and inputs.
///
/// Bounds (docs/media-encoders.md):
/// - F32-mmproj goldens (`lfm2-audio-tiny-f32.*`): llama.cpp on the same weights as F32,
///   with no activation rounding but its F16 first convolution, which the encoder
///   reproduces. The input is the golden's mel, printed with 6 significant digits: 77 of
///   its 12,928 values lie within that precision of a half-precision rounding midpoint,
///   so the half the encoder rounds them to is a coin toss, and random choices for those
///   77 move the embeddings' max |diff| between 1.1e-4 and 3.0e-4 (measured). Bounds: max
///   5e-4, mean 5e-5 (measured 2.7e-4 and 2.0e-5, embeddings rms 0.9); without the F16
///   rounding the mean is 9 times larger.
/// - F16-mmproj goldens (`lfm2-audio-tiny.*`): llama.cpp also rounds every activation to
///   F16 before each F16 matrix product; the encoder multiplies exactly: bound 2e-3 (the
///   issue's), as Tests/Fixtures/golden/MEDIA.md measured for float64.
/// - Engine against the reference (Double, plain loops): float rounding only, 1e-4.
@Suite struct FastConformerEncoderTests {
    static let mmproj = TestFixtures.path("models/mmproj-lfm2-audio-tiny.gguf")
    static let pools = [1: ThreadPool(threads: 1), 2: ThreadPool(threads: 2)]

    static func encoder(threads: Int = 2, roundsFirstConvolutionToHalf: Bool = true) throws -> FastConformerEncoder {
        try FastConformerEncoder(path: mmproj, pool: pools[threads]!, roundsFirstConvolutionToHalf: roundsFirstConvolutionToHalf)
    }
    static let goldenNames = [
        "chirp-1s.transcribe", "chirp-1s.asr", "short-0.25s.transcribe", "tones-22k.transcribe"
    ]

    static func golden(_ name: String) throws -> JSONValue {
        let path = TestFixtures.path("golden/audio/\(name).json")
        return try JSONValue.parse(String(contentsOfFile: path, encoding: .utf8))
    }

    static func doubles(_ v: JSONValue?) -> [Double] { v?.arrayValue?.compactMap(\.doubleValue) ?? [] }

    /// The golden's whole mel matrix (`frames` is [n_frames][n_mels]) as the encoder takes
    /// it, bin-major [n_mels][n_frames].
    static func mel(_ g: JSONValue) -> (values: [Float], frames: Int) {
        let rows = g["mel"]?["frames"]?.arrayValue?.map { doubles($0) } ?? []
        let bins = rows.first?.count ?? 0
        var mel = [Float](repeating: 0, count: bins * rows.count)
        for (t, row) in rows.enumerated() {
            for (f, v) in row.enumerated() { mel[f * rows.count + t] = Float(v) }
        }
        return (mel, rows.count)
    }

    static func embeddings(_ g: JSONValue) -> [Double] {
        (g["embeddings"]?["data"]?.arrayValue ?? []).flatMap { doubles($0) }
    }

    // MARK: - The fixture and llama.cpp

    @Test func theFixtureLoadsWithItsShape() throws {
        let encoder = try Self.encoder()
        let hp = encoder.hyperparameters
        #expect(hp.melBins == 128 && hp.width == 64 && hp.feedForwardLength == 256 && hp.layerCount == 2)
        #expect(hp.headCount == 4 && hp.headDim == 16 && hp.layerNormEpsilon == 1e-5 && hp.projectionDim == 128)
        #expect(hp.subsamplingChannels == 16 && hp.convolutionKernelLength == 9 && hp.positionTableWidth == 512)
        #expect(hp.positionRows == 2056 && encoder.maximumFrameCount == 4113)
        #expect(encoder.melBinCount == 128 && encoder.outputWidth == 128)
        let counts = try [3, 8, 9, 16, 17, 101, 4113].map { (frames) throws(ProjectorError) in try encoder.tokenCount(frames: frames) }
        #expect(FastConformerEncoder.minimumFrameCount == 3 && counts == [1, 1, 2, 2, 3, 13, 515])
        let lm = TestFixtures.path("models/lfm2-audio-tiny.gguf")
        try encoder.checkLanguageModelWidth(128, languageModel: lm)
        #expect(throws: ProjectorError.widthMismatch(path: Self.mmproj, projectorWidth: 128, languageModel: lm, languageModelWidth: 64)) {
            try encoder.checkLanguageModelWidth(64, languageModel: lm)
        }
    }

    @Test func tokenCountsMatchEveryGolden() throws {
        let encoder = try Self.encoder()
        for model in ["lfm2-audio-tiny", "lfm2-audio-tiny-f32"] {
            for name in Self.goldenNames {
                let g = try Self.golden("\(model).\(name)")
                let frames = try #require(g["mel"]?["n_frames"]?.intValue)
                let tokens = try encoder.tokenCount(frames: frames)
                #expect(tokens == g["embeddings"]?["n_tokens"]?.intValue, "\(model).\(name)")
                #expect(g["embeddings"]?["n_embd"]?.intValue == 128)
            }
        }
    }

    /// chirp-1s from the golden's own mel: against the F32-mmproj goldens (tight) and the
    /// F16-mmproj goldens (llama.cpp's F16 activations).
    @Test(arguments: ["transcribe", "asr"])
    func chirpEmbeddingsMatchLlamaCpp(_ prompt: String) throws {
        let encoder = try Self.encoder()
        let stored = try Self.golden("lfm2-audio-tiny-f32.chirp-1s.\(prompt)")
        let quantized = try Self.golden("lfm2-audio-tiny.chirp-1s.\(prompt)")
        let (mel, frames) = Self.mel(stored)
        #expect(frames == 101 && mel.count == 128 * 101)
        let out = try encoder.encode(mel: mel, frames: frames)
        #expect(out.count == 13 * 128)

        let f32 = maxAndMeanDifference(out, Self.embeddings(stored))
        let f16 = maxAndMeanDifference(out, Self.embeddings(quantized))
        print(
            "chirp-1s.\(prompt): vs F32-mmproj golden max \(f32.max) mean \(f32.mean); vs F16-mmproj golden max \(f16.max) mean \(f16.mean)"
        )
        #expect(Self.embeddings(stored).count == out.count && Self.embeddings(quantized).count == out.count)
        #expect(f32.max < 5e-4 && f32.mean < 5e-5, "max |diff| \(f32.max), mean \(f32.mean) against the F32-mmproj golden")
        #expect(f16.max < 2e-3, "max |diff| \(f16.max) against the F16-mmproj golden")

        // llama.cpp's F16 first convolution matters at this scale: without it the mean
        // distance grows several times.
        let exact = try Self.encoder(roundsFirstConvolutionToHalf: false)
        let unrounded = maxAndMeanDifference(try exact.encode(mel: mel, frames: frames), Self.embeddings(stored))
        print("chirp-1s.\(prompt): without the F16 first convolution, max \(unrounded.max) mean \(unrounded.mean)")
        #expect(unrounded.mean > 4 * f32.mean && unrounded.max > f32.max)
    }

    // MARK: - The engine against the reference

    @Test(arguments: [3, 4, 9, 17, 64, 101, 203])
    func engineMatchesTheReference(_ frames: Int) throws {
        let file = try GGUFFile(path: Self.mmproj)
        let reference = try ReferenceFastConformerEncoder(file: file, path: Self.mmproj)
        let mel = EncoderRandom.mel(bins: 128, frames: frames, seed: UInt64(frames))
        let expected = try reference.encode(mel: mel, frames: frames).map(Double.init)
        var worst = 0.0
        for threads in [1, 2] {
            let encoder = try FastConformerEncoder(file: file, path: Self.mmproj, pool: Self.pools[threads]!)
            let tokens = try encoder.tokenCount(frames: frames)
            #expect(expected.count == tokens * 128)
            let d = maxAndMeanDifference(try encoder.encode(mel: mel, frames: frames), expected)
            worst = max(worst, d.max)
            #expect(d.max < 1e-4, "\(frames) frames, \(threads) threads: max |diff| \(d.max)")
        }
        print("engine vs reference, \(frames) frames: max |diff| \(worst)")

        // Without the F16 rounding on both sides they agree as well.
        let exact = try FastConformerEncoder(file: file, path: Self.mmproj, pool: Self.pools[2]!, roundsFirstConvolutionToHalf: false)
        let plainReference = try ReferenceFastConformerEncoder(file: file, path: Self.mmproj, roundsFirstConvolutionToHalf: false)
        let d = maxAndMeanDifference(
            try exact.encode(mel: mel, frames: frames), try plainReference.encode(mel: mel, frames: frames).map(Double.init))
        #expect(d.max < 1e-4)
    }

    @Test func aPerturbedInputMovesTheEmbeddings() throws {
        // The comparison above can fail: one mel value changed moves the output well past
        // the bound.
        let encoder = try Self.encoder()
        var mel = EncoderRandom.mel(bins: 128, frames: 40, seed: 7)
        let a = try encoder.encode(mel: mel, frames: 40)
        mel[5 * 40 + 20] += 1
        let b = try encoder.encode(mel: mel, frames: 40)
        #expect(maxAndMeanDifference(a, b.map(Double.init)).max > 1e-2)
    }

    /// The longest input the position table allows is encoded as the reference encodes it
    /// (every relative position of the table in use), and one frame more is refused.
    @Test func theLongestInputMatchesTheReference() throws {
        let encoder = try Self.encoder()
        let frames = encoder.maximumFrameCount
        let mel = EncoderRandom.mel(bins: 128, frames: frames, seed: 3)
        let out = try encoder.encode(mel: mel, frames: frames)
        let reference = try ReferenceFastConformerEncoder(file: try GGUFFile(path: Self.mmproj), path: Self.mmproj)
        let expected = try reference.encode(mel: mel, frames: frames).map(Double.init)
        let tokens = try encoder.tokenCount(frames: frames)
        #expect(out.count == expected.count && out.count == tokens * 128)
        let d = maxAndMeanDifference(out, expected)
        print("the longest input, \(frames) frames: max |diff| \(d.max)")
        #expect(d.max < 1e-4)
        let longer = EncoderRandom.mel(bins: 128, frames: frames + 1, seed: 3)
        #expect {
            try encoder.encode(mel: longer, frames: frames + 1)
        } throws: { error in
            guard case ProjectorError.inputTooLarge(_, let value, let maximum) = error else { return false }
            return value == frames + 1 && maximum == frames
        }
    }

    /// Weights converted to F32 at load give the products of the weights as stored.
    @Test func weightsConvertedAtLoadGiveTheSameEmbeddings() throws {
        let mel = EncoderRandom.mel(bins: 128, frames: 101, seed: 11)
        let stored = try Self.encoder().encode(mel: mel, frames: 101)
        let converted = try FastConformerEncoder(path: Self.mmproj, pool: Self.pools[2]!, weights: .float32)
        #expect(converted.weightStorage == .float32)
        #expect(maxAndMeanDifference(try converted.encode(mel: mel, frames: 101), stored.map(Double.init)).max < 1e-5)
    }
}
