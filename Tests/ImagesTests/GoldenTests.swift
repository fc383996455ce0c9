import LeapJSON
import TestSupport
import Testing

@testable import Images

/// libmtmd's own outputs for the LFM2-VL fixture images (Tests/Fixtures/golden/vl): the RGB
/// stb_image decodes, and every preprocessed slice.
@Suite struct VLGoldenTests {
    static let images = [
        "small-40x30.png", "medium-500x375.png", "medium-500x375.jpg", "tall-300x900.png", "big-640x600.png", "large-900x800.png"
    ]

    @Test(arguments: images)
    func decodedRGBMatchesStbImage(_ image: String) throws {
        let golden = try fixtureJSON("golden/vl/lfm2-vl-tiny.\(image).json")
        let decoded = try ImageDecoder.decode(fixtureBytes("images/\(image)"))
        #expect(decoded.width == golden["decoded"]?["width"]?.intValue)
        #expect(decoded.height == golden["decoded"]?["height"]?.intValue)
        #expect(SHA256.hex(decoded.rgb) == golden["decoded"]?["rgb_sha256"]?.stringValue)
    }

    @Test(arguments: images)
    func preprocessedSlicesMatchLibmtmd(_ image: String) throws {
        let golden = try fixtureJSON("golden/vl/lfm2-vl-tiny.\(image).json")
        let preprocessor = try LFM2VLImagePreprocessor()
        let settings = try #require(golden["preprocessing"])
        #expect(preprocessor.configuration.minPixels == settings["image_min_pixels"]?.intValue)
        #expect(preprocessor.configuration.maxPixels == settings["image_max_pixels"]?.intValue)
        #expect(preprocessor.configuration.patchSize == settings["patch_size"]?.intValue)
        #expect(preprocessor.configuration.mergeFactor == settings["n_merge"]?.intValue)

        let result = try preprocessor.preprocess(ImageDecoder.decode(fixtureBytes("images/\(image)")))
        let gridValues = settings["grid"]?.arrayValue?.compactMap(\.intValue)
        let grid = try #require(gridValues)
        #expect(grid == [result.grid?.columns ?? 0, result.grid?.rows ?? 0])

        let expected = try #require(golden["preprocessed"]?.arrayValue)
        try #require(result.slices.count == expected.count)
        for (index, (slice, want)) in zip(result.slices, expected).enumerated() {
            let kind: ImageSliceKind
            switch want["kind"]?.stringValue {
            case "image": kind = .image
            case "thumbnail": kind = .thumbnail
            default: kind = .tile(row: want["row"]?.intValue ?? -1, column: want["col"]?.intValue ?? -1)
            }
            #expect(slice.kind == kind, "slice \(index)")
            #expect(slice.width == want["width"]?.intValue, "slice \(index)")
            #expect(slice.height == want["height"]?.intValue, "slice \(index)")
            #expect(slice.tokenCount == want["n_tokens"]?.intValue, "slice \(index)")
            #expect(slice.values.count == want["n_values"]?.intValue, "slice \(index)")
            let sum = slice.values.reduce(0.0) { $0 + Double($1) }
            let wantSum = try #require(want["sum"]?.doubleValue)
            let wantMean = try #require(want["mean"]?.doubleValue)
            #expect(abs(sum - wantSum) <= 1e-9 * max(1, abs(wantSum)), "slice \(index): sum \(sum), libmtmd \(wantSum)")
            #expect(abs(sum / Double(slice.values.count) - wantMean) <= 1e-12, "slice \(index) mean")
            // Exact: PNG pixels go through the same bytes and float32 arithmetic, and the JPEG
            // decodes to stb_image's very RGB, so its floats are exact too.
            let first64Values = want["first64"]?.arrayValue?.compactMap(\.doubleValue)
            let first64 = try #require(first64Values)
            #expect(Array(slice.values.prefix(64)) == first64.map { Float($0) }, "slice \(index) first64")
            if let pixels = want["pixels"]?.arrayValue {
                let values = pixels.compactMap(\.doubleValue).map { Float($0) }
                #expect(values.count == slice.values.count)
                let differing = zip(values, slice.values).filter { $0 != $1 }.count
                #expect(differing == 0, "slice \(index): \(differing) of \(values.count) values differ from libmtmd's")
            }
        }
    }

    /// The layout alone (what the prompt needs) agrees with the preprocessed slices.
    @Test(arguments: images)
    func layoutMatchesPreprocessing(_ image: String) throws {
        let preprocessor = try LFM2VLImagePreprocessor()
        let decoded = try ImageDecoder.decode(fixtureBytes("images/\(image)"))
        let layout = try preprocessor.layout(width: decoded.width, height: decoded.height)
        let result = try preprocessor.preprocess(decoded)
        #expect(layout.grid == result.grid)
        #expect(layout.slices.map(\.kind) == result.slices.map(\.kind))
        #expect(layout.slices.map(\.tokenCount) == result.slices.map(\.tokenCount))
        #expect(layout.slices.map(\.width) == result.slices.map(\.width))
    }
}
