import Foundation
import GGUF
import Kernels
import LeapJSON
import Models
import Reference
import TestSupport
import Testing

/// One LFM2-VL golden of `Tests/Fixtures/golden/vl`: llama.cpp's preprocessed slices (sizes
/// and token counts; for `small-40x30.png` also every pixel value) and the projector's
/// output for the whole image.
struct VisionGolden {
    struct Slice {
        let width: Int, height: Int, tokens: Int
        /// All values of the slice (only the small image's golden has them).
        let pixels: [Float]?
    }

    let slices: [Slice]
    /// `[tokens, 128]` embeddings of every slice, concatenated in prompt order (flattened).
    let embeddings: [Float]
    let embeddingRows: Int

    static let images = [
        "small-40x30.png", "medium-500x375.png", "medium-500x375.jpg", "tall-300x900.png", "big-640x600.png", "large-900x800.png"
    ]

    init(image: String) throws {
        let url = TestFixtures.directory.appendingPathComponent("golden/vl/lfm2-vl-tiny.\(image).json")
        let json = try JSONValue.parse(String(contentsOf: url, encoding: .utf8))
        func floats(_ v: JSONValue?) -> [Float] { (v?.arrayValue ?? []).map { Float($0.doubleValue ?? .nan) } }
        slices = (json["preprocessed"]?.arrayValue ?? []).map { s in
            Slice(
                width: s["width"]?.intValue ?? 0, height: s["height"]?.intValue ?? 0, tokens: s["n_tokens"]?.intValue ?? 0,
                pixels: s["pixels"].map(floats))
        }
        // One row of 128 values per token.
        embeddings = (json["embeddings"]?["values"]?.arrayValue ?? []).flatMap { floats($0) }
        embeddingRows = json["embeddings"]?["shape"]?.arrayValue?.first?.intValue ?? 0
    }
}

/// The LFM2-VL vision encoder on the tiny fixture: against llama.cpp's goldens, against the
/// plain reference, its geometry (pixel unshuffle, the antialiased resize) on hand-computed
/// cases, and the token counts of every golden slice.
@Suite struct VisionEncoderTests {
    static let mmproj = TestFixtures.path("models/mmproj-lfm2-vl-tiny.gguf")

    static let pools = [1: ThreadPool(threads: 1), 2: ThreadPool(threads: 2)]

    static func encoder(threads: Int = 2, weights: MediaEncoder.WeightStorage = .asStored) throws -> SigLIP2VisionEncoder {
        try SigLIP2VisionEncoder(path: mmproj, pool: pools[threads]!, weights: weights)
    }

    static func reference() throws -> ReferenceSigLIP2VisionEncoder {
        try ReferenceSigLIP2VisionEncoder(file: GGUFFile(path: mmproj), path: mmproj)
    }

    @Test func readsTheFixturesKeys() throws {
        let e = try Self.encoder()
        let hp = e.hyperparameters
        #expect(hp.imageSize == 256 && hp.patchSize == 16 && hp.width == 64 && hp.feedForwardLength == 128)
        #expect(hp.layerCount == 2 && hp.headCount == 4 && hp.headDim == 16 && hp.layerNormEpsilon == 1e-6)
        #expect(hp.imageMean == [0.5, 0.5, 0.5] && hp.imageStd == [0.5, 0.5, 0.5])
        #expect(hp.mergeFactor == 2 && hp.projectorHiddenWidth == 256 && hp.projectionDim == 128 && hp.projectorInputNorm)
        #expect(e.outputWidth == 128)
        let pre = e.preprocessing
        #expect(pre.patchSize == 16 && pre.mergeFactor == 2 && pre.alignment == 32)
        #expect(pre.minImageTokens == 64 && pre.maxImageTokens == 256 && pre.minPixels == 65_536 && pre.maxPixels == 262_144)
        let lm = TestFixtures.path("models/lfm2-vl-tiny.gguf")
        try e.checkLanguageModelWidth(128, languageModel: lm)
        #expect(throws: ProjectorError.widthMismatch(path: Self.mmproj, projectorWidth: 128, languageModel: lm, languageModelWidth: 64)) {
            try e.checkLanguageModelWidth(64, languageModel: lm)
        }
    }

    /// small-40x30.png: llama.cpp's own 320x224 slice (a 20x14 patch grid, so the position
    /// table is resized) through the encoder, against llama.cpp's embeddings.
    @Test func smallImageMatchesLlamaCpp() throws {
        let golden = try VisionGolden(image: "small-40x30.png")
        let slice = try #require(golden.slices.first)
        let pixels = try #require(slice.pixels)
        #expect(slice.width == 320 && slice.height == 224 && slice.tokens == 70 && pixels.count == 320 * 224 * 3)
        let e = try Self.encoder()
        let ours = try e.encode(pixels: pixels, width: slice.width, height: slice.height)
        #expect(ours.count == golden.embeddings.count && golden.embeddingRows == 70)
        let (worst, mean) = maxAndMeanDifference(ours, golden.embeddings)
        print("small-40x30.png vs llama.cpp: max |diff| \(worst), mean \(mean)")
        #expect(worst < 2e-3)
        let reference = try Self.reference().encode(pixels: pixels, width: slice.width, height: slice.height)
        let (refWorst, refMean) = maxAndMeanDifference(reference, golden.embeddings)
        print("small-40x30.png reference vs llama.cpp: max |diff| \(refWorst), mean \(refMean)")
        #expect(refWorst < 2e-3)
    }

    struct SliceCase: Sendable, CustomStringConvertible {
        let width: Int, height: Int, seed: UInt64, threads: Int
        var description: String { "\(width)x\(height) seed \(seed), \(threads) threads" }
    }

    static let sliceCases = [
        SliceCase(width: 512, height: 512, seed: 1, threads: 2),  // 32x32 patches: the table at 16x16 is upsampled x2
        SliceCase(width: 256, height: 256, seed: 5, threads: 2),  // 16x16 patches: the table as stored
        SliceCase(width: 384, height: 160, seed: 2, threads: 2),  // 24x10: up along x, down along y
        SliceCase(width: 64, height: 608, seed: 3, threads: 1),  // 4x38: strongly down along x
        SliceCase(width: 32, height: 32, seed: 4, threads: 2)  // one token
    ]

    /// The engine against the plain Double reference on random slices: the resize (identity
    /// at 16x16, up, down, mixed), attention over up to 1,024 patches, with and without
    /// threads.
    @Test(arguments: sliceCases)
    func engineMatchesReference(_ c: SliceCase) throws {
        let pixels = EncoderRandom.slice(width: c.width, height: c.height, seed: c.seed)
        let ours = try Self.encoder(threads: c.threads).encode(pixels: pixels, width: c.width, height: c.height)
        let reference = try Self.reference().encode(pixels: pixels, width: c.width, height: c.height)
        #expect(ours.count == (c.width / 32) * (c.height / 32) * 128)
        let (worst, mean) = maxAndMeanDifference(ours, reference)
        print("\(c): engine vs reference max |diff| \(worst), mean \(mean)")
        #expect(worst < 1e-5)
    }

    /// Weights converted to F32 at load give the products of the weights as stored.
    @Test func weightsConvertedAtLoadGiveTheSameEmbeddings() throws {
        let pixels = EncoderRandom.slice(width: 320, height: 224, seed: 11)
        let stored = try Self.encoder().encode(pixels: pixels, width: 320, height: 224)
        let converted = try Self.encoder(weights: .float32)
        #expect(converted.weightStorage == .float32)
        let (worst, _) = maxAndMeanDifference(try converted.encode(pixels: pixels, width: 320, height: 224), stored)
        #expect(worst < 1e-6)
    }

    @Test func engineMatchesReferenceOnLlamaCppsSlice() throws {
        let golden = try VisionGolden(image: "small-40x30.png")
        let pixels = try #require(golden.slices.first?.pixels)
        let ours = try Self.encoder().encode(pixels: pixels, width: 320, height: 224)
        let reference = try Self.reference().encode(pixels: pixels, width: 320, height: 224)
        let (worst, mean) = maxAndMeanDifference(ours, reference)
        print("small-40x30.png engine vs reference: max |diff| \(worst), mean \(mean)")
        #expect(worst < 1e-5)
    }

    /// Every slice size in the goldens (untiled images, tiles, thumbnails) gives the token
    /// count llama.cpp gave, and finite embeddings of the right width; the goldens' token
    /// counts add up to their embeddings' rows.
    @Test func tokenCountsOfEveryGoldenSlice() throws {
        let e = try Self.encoder()
        var encoded: Set<[Int]> = []
        for image in VisionGolden.images {
            let golden = try VisionGolden(image: image)
            #expect(golden.slices.map(\.tokens).reduce(0, +) == golden.embeddingRows, "\(image)")
            #expect(golden.embeddings.count == golden.embeddingRows * e.outputWidth, "\(image)")
            for s in golden.slices {
                #expect(try e.tokenCount(width: s.width, height: s.height) == s.tokens, "\(image) \(s.width)x\(s.height)")
                guard encoded.insert([s.width, s.height]).inserted else { continue }
                let out = try e.encode(
                    pixels: EncoderRandom.slice(width: s.width, height: s.height, seed: 9), width: s.width, height: s.height)
                #expect(out.count == s.tokens * e.outputWidth && out.allSatisfy(\.isFinite), "\(s.width)x\(s.height)")
            }
        }
        #expect(encoded.count == 5)
    }

    /// Token (Y, X) is patches (2Y, 2X), (2Y, 2X+1), (2Y+1, 2X), (2Y+1, 2X+1), in that order.
    @Test func pixelUnshuffleOrder() {
        // A 4x2 grid of patches with 2 channels; patch p = y·4 + x holds (10p, 10p + 1).
        let x = (0..<8).flatMap { p in [Float(10 * p), Float(10 * p + 1)] }
        let t = VisionGeometry.pixelUnshuffle(x, gridWidth: 4, gridHeight: 2, channels: 2, factor: 2)
        #expect(t == [0, 1, 10, 11, 40, 41, 50, 51, 20, 21, 30, 31, 60, 61, 70, 71])
        // Factor 3 on a 3x6 grid, one channel: token (1, 0) is rows 3...5, columns 0...2.
        let y = (0..<18).map(Float.init)
        let u = VisionGeometry.pixelUnshuffle(y, gridWidth: 3, gridHeight: 6, channels: 1, factor: 3)
        #expect(Array(u[9..<18]) == [9, 10, 11, 12, 13, 14, 15, 16, 17])
    }

    /// The antialiased bilinear taps on sizes worked out by hand from torch's rule.
    @Test func antialiasedResizeTaps() {
        func taps(_ a: Int, _ b: Int) -> [(Int, [Float])] {
            VisionGeometry.antialiasedBilinearTaps(from: a, to: b).map { ($0.first, $0.weights) }
        }
        func close(_ a: [(Int, [Float])], _ b: [(Int, [Float])]) -> Bool {
            a.count == b.count
                && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1.count == $1.1.count && zip($0.1, $1.1).allSatisfy { abs($0 - $1) < 1e-6 } }
        }
        // Down by 2 (support 2): centre 1.0 weighs inputs 0, 1, 2 as 0.75, 0.75, 0.25.
        let half: [(Int, [Float])] = [(0, [3.0 / 7, 3.0 / 7, 1.0 / 7]), (1, [1.0 / 7, 3.0 / 7, 3.0 / 7])]
        #expect(close(taps(4, 2), half))
        // Up by 2: plain bilinear with the edges clamped.
        let double: [(Int, [Float])] = [(0, [1]), (0, [0.75, 0.25]), (0, [0.25, 0.75]), (1, [1])]
        #expect(close(taps(2, 4), double))
        // The same size: the identity.
        let identity: [(Int, [Float])] = (0..<16).map { i in (i, i == 15 ? [1] : [1, 0]) }
        #expect(close(taps(16, 16), identity))
        // Down by 3 (support 3): centre 1.5; inputs 0...4 weigh 1 - |j - 1| / 3, that is
        // 2/3, 1, 2/3, 1/3, 0, normalized by their sum 8/3.
        let third: [(Int, [Float])] = [(0, [0.25, 0.375, 0.25, 0.125, 0])]
        #expect(close([taps(6, 2)[0]], third))
    }

    @Test func resizedPositionTable() {
        // 2x2 table, one channel: [[1, 2], [3, 4]] up to 4x4 is separable bilinear.
        let up = VisionGeometry.resizedPositionTable([1, 2, 3, 4], side: 2, channels: 1, gridWidth: 4, gridHeight: 4)
        let expected: [Float] = [1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4]
        let upError = zip(up, expected).map { abs($0 - $1) }.max() ?? 1
        #expect(up.count == 16 && upError < 1e-6)
        // 4x4 (value y·4 + x) down to 2x1: x weights (3/7, 3/7, 1/7), (1/7, 3/7, 3/7); all
        // four rows average to y = 1.5.
        let table = (0..<16).map(Float.init)
        let down = VisionGeometry.resizedPositionTable(table, side: 4, channels: 1, gridWidth: 2, gridHeight: 1)
        let left: Float = 6 + 5.0 / 7, right: Float = 6 + 16.0 / 7
        #expect(abs(down[0] - left) < 1e-5 && abs(down[1] - right) < 1e-5)
        // The stored size: unchanged, bit for bit.
        #expect(VisionGeometry.resizedPositionTable(table, side: 4, channels: 1, gridWidth: 4, gridHeight: 4) == table)
    }
}
