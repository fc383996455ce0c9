import TestSupport
import Testing

@testable import Images

/// Every variant in Tests/Fixtures/images/variants (scripts/tools/make_image_variants.py)
/// decodes to the RGB that stb_image itself produced from it.
@Suite struct DecoderVariantTests {
    @Test func everyVariantDecodesToStbImagesRGB() throws {
        let expectations = try stbExpectations()
        #expect(expectations.count >= 60)
        var matched = 0
        for expected in expectations {
            switch decodeResult(try fixtureBytes("images/variants/\(expected.name)")) {
            case .success(let image):
                let hash = SHA256.hex(image.rgb)
                if image.width == expected.width && image.height == expected.height && hash == expected.sha256 {
                    matched += 1
                } else {
                    Issue.record(
                        "\(expected.name): \(image.width)x\(image.height) \(hash), stb_image gives \(expected.width)x\(expected.height) \(expected.sha256)"
                    )
                }
            case .failure(let error):
                Issue.record("\(expected.name): \(error)")
            }
        }
        #expect(matched == expectations.count)
    }

    /// The variants cover what they are meant to: both formats, each PNG color type and depth,
    /// interlacing, and the JPEG processes and samplings.
    @Test func variantsCoverTheFeatures() throws {
        let names = Set(try stbExpectations().map(\.name))
        for depth in [1, 2, 4, 8, 16] { #expect(names.contains("png-gray\(depth)-23x17.png")) }
        for depth in [1, 2, 4, 8] { #expect(names.contains("png-palette\(depth)-23x17.png")) }
        for name in [
            "png-rgb16-23x17.png", "png-graya8-23x17.png", "png-graya16-23x17.png", "png-rgba8-23x17.png", "png-rgba16-23x17.png",
            "png-rgb8-adam7-23x17.png", "png-rgb8-stored-23x17.png", "png-rgb8-fixed-23x17.png", "jpeg-444-61x45.jpg",
            "jpeg-422-61x45.jpg", "jpeg-420-61x45.jpg", "jpeg-440-37x21.jpg", "jpeg-411-37x21.jpg", "jpeg-gray-61x45.jpg",
            "jpeg-progressive-420-61x45.jpg", "jpeg-restart-blocks-61x45.jpg", "jpeg-cmyk-61x45.jpg", "jpeg-rgb-61x45.jpg",
            "jpeg-420-17x9.jpg", "jpeg-420-noninterleaved-37x21.jpg"
        ] {
            #expect(names.contains(name), "missing \(name)")
        }
    }

    /// EXIF orientation 6 (rotate 90) is ignored, as stb_image ignores it: the image keeps its
    /// stored width and height.
    @Test func exifOrientationIsIgnored() throws {
        let image = try ImageDecoder.decode(fixtureBytes("images/variants/jpeg-exif-icc-comment-61x45.jpg"))
        #expect(image.width == 61 && image.height == 45)
        let plain = try ImageDecoder.decode(fixtureBytes("images/variants/jpeg-420-61x45.jpg"))
        #expect(image.rgb == plain.rgb)
    }

    /// Pillow 12's BILINEAR resizes (llama.cpp's pass order: horizontal, then vertical),
    /// byte for byte, including sizes that grow one side and shrink the other.
    @Test func bilinearResizeMatchesPillow() throws {
        let reference = try fixtureJSON("images/variants/pillow_bilinear_resize.json")
        let source = try ImageDecoder.decode(fixtureBytes("images/variants/\(try #require(reference["source"]?.stringValue))"))
        let cases = try #require(reference["cases"]?.arrayValue)
        #expect(cases.count >= 10)
        for c in cases {
            let width = try #require(c["width"]?.intValue)
            let height = try #require(c["height"]?.intValue)
            let resized = PillowBilinear.resize(source, width: width, height: height)
            #expect(SHA256.hex(resized.rgb) == c["rgb_sha256"]?.stringValue, "\(width)x\(height)")
        }
    }

    @Test func headersGiveTheSizeWithoutDecoding() throws {
        for expected in try stbExpectations() {
            let header = try ImageDecoder.header(of: fixtureBytes("images/variants/\(expected.name)"))
            #expect(header.width == expected.width && header.height == expected.height, "\(expected.name)")
            #expect(header.format == (expected.name.hasSuffix(".png") ? .png : .jpeg))
        }
        let huge = png(ihdr(width: 100_000, height: 100_000), pngChunk("IEND", []))
        #expect(throws: ImageError.tooManyPixels(format: .png, width: 100_000, height: 100_000, limit: 50_000_000)) {
            try ImageDecoder.header(of: huge)
        }
    }

    @Test func dataAndSlicesDecodeLikeArrays() throws {
        let bytes = try fixtureBytes("images/variants/png-rgb8-23x17.png")
        let fromSlice = try ImageDecoder.decode(bytes[...])
        #expect(fromSlice == (try ImageDecoder.decode(bytes)))
        #expect(ImageDecoder.format(of: bytes) == .png)
        #expect(ImageDecoder.format(of: try fixtureBytes("images/medium-500x375.jpg")) == .jpeg)
    }

    /// Known zlib streams, one per DEFLATE block type.
    @Test func inflateHandlesStoredFixedAndDynamicBlocks() throws {
        func inflate(_ hex: String) throws -> [UInt8] {
            var bytes: [UInt8] = []
            var index = hex.startIndex
            while index < hex.endIndex {
                let next = hex.index(index, offsetBy: 2)
                bytes.append(UInt8(hex[index..<next], radix: 16)!)
                index = next
            }
            return try Inflater.inflateZlib(bytes, outputLimit: 4096)
        }
        #expect(try inflate("789ccb48cdc9c90700062c0215") == Array("hello".utf8))
        #expect(try inflate("7801011400ebff68656c6c6f2c2068656c6c6f2c2068656c6c6f214b1e06f6") == Array("hello, hello, hello!".utf8))
        #expect(try inflate("78014b4c4a4ec481742b2aab00bda10bef") == Array("abcabcabcabcabcabcabcabcabc-xyz".utf8))
        let dynamic = try inflate(
            "78da25518911c030085ac5d5108d9afd0728a6d7e77246101075e06d5368981fc0ce310e3048e20205875b93acd0510df0cb7126cb4f51f757"
                + "0cfa4e955053ae2e1bb5818053bf6e6cb3271e436b0cbd7574f592919cbe079daec94e4ff52e02ec5a29e3e15700931a0df2092fc1f5a8e8"
                + "1a50aa26664b77c5ab7a11e21f54ecc884d7027553d801e143677135c23a294d71df60d422049137b9458a1479a88434e0d8f3a0763c9fa2"
                + "50b55369d9c3e107a53d811cf9f03d2c8632008f9e23952de498028ae55b5d2fb09510b84979d2726ad92835b2ce3fbf6bbe122b7339cfc3"
                + "6237164d25429756e6d255ddbc8679262da31e41c9d1d112bbea69343ecf8a97d6889aa399dcfce63e80de5d30fe95ae4699a8fb16484adf"
                + "9438ce1f3f42f4f90199cae1b3")
        #expect(dynamic.count == 600)
        #expect(SHA256.hex(dynamic) == "4d056570984431939670f7453748062c3237bc8f1143a1db07613231792a0650")
    }
}

/// The sizing rules on their own, with sizes worked out from llama.cpp's formulas.
@Suite struct PreprocessingLayoutTests {
    let preprocessor: LFM2VLImagePreprocessor

    init() throws { preprocessor = try LFM2VLImagePreprocessor() }

    @Test func smartResizeRoundsScalesUpAndDown() {
        #expect(preprocessor.smartResize(width: 40, height: 30) == (320, 224))  // under the minimum: scaled up, ceiled
        #expect(preprocessor.smartResize(width: 500, height: 375) == (512, 384))  // rounded to multiples of 32
        #expect(preprocessor.smartResize(width: 640, height: 600) == (512, 480))  // over the maximum: scaled down, floored
        #expect(preprocessor.smartResize(width: 1, height: 1) == (256, 256))
        #expect(preprocessor.smartResize(width: 500, height: 1000) == (352, 704))
    }

    @Test func tilingThresholdAndGrid() {
        #expect(!preprocessor.isTiled(width: 640, height: 600))
        #expect(!preprocessor.isTiled(width: 500, height: 1000))  // 512 x 992 = 507,904: under 2 x 262,144
        #expect(preprocessor.isTiled(width: 900, height: 800))
        #expect(preprocessor.tileGrid(width: 900, height: 800) == TileGrid(columns: 2, rows: 2))
        #expect(preprocessor.tileGrid(width: 1100, height: 500) == TileGrid(columns: 2, rows: 1))
        #expect(preprocessor.tileGrid(width: 500, height: 1100) == TileGrid(columns: 1, rows: 2))
        // Aspect 1: 2x2 (area 4) comes first; 3x3 ties and replaces it when the image is
        // larger than half of 3x3 tiles (9 x 512^2 / 2 = 1,179,648 pixels).
        #expect(preprocessor.tileGrid(width: 1000, height: 1000) == TileGrid(columns: 2, rows: 2))
        #expect(preprocessor.tileGrid(width: 1100, height: 1100) == TileGrid(columns: 3, rows: 3))
    }

    @Test func layoutsInPromptOrder() throws {
        let wide = try preprocessor.layout(width: 1100, height: 500)
        #expect(wide.grid == TileGrid(columns: 2, rows: 1))
        #expect(wide.slices.map(\.kind) == [.tile(row: 1, column: 1), .tile(row: 1, column: 2), .thumbnail])
        #expect(wide.slices.last.map { [$0.width, $0.height, $0.tokenCount] } == [736, 320, 230])
        #expect(wide.tokenCount == 256 + 256 + 230)
        let large = try preprocessor.layout(width: 900, height: 800)
        #expect(large.tokenCount == 4 * 256 + 240)
        let tall = try preprocessor.layout(width: 500, height: 1000)
        #expect(tall.grid == nil && tall.slices.count == 1 && tall.slices[0].tokenCount == 242)
    }

    /// A tiled image is fitted into the grid keeping its aspect ratio and centred on black:
    /// 900x800 into 1024x1024 is 1024x911 with 56 black rows above (llama.cpp pads).
    @Test func fitAndPadCentresOnBlack() throws {
        let gray = RGBImage(width: 900, height: 800, rgb: [UInt8](repeating: 200, count: 900 * 800 * 3))
        let canvas = preprocessor.fitAndPad(gray, width: 1024, height: 1024)
        #expect(canvas.width == 1024 && canvas.height == 1024)
        #expect(canvas.pixel(x: 500, y: 55) == (0, 0, 0))
        #expect(canvas.pixel(x: 500, y: 56) == (200, 200, 200))
        #expect(canvas.pixel(x: 500, y: 56 + 910) == (200, 200, 200))
        #expect(canvas.pixel(x: 500, y: 56 + 911) == (0, 0, 0))
        #expect(canvas.pixel(x: 0, y: 500) == (200, 200, 200) && canvas.pixel(x: 1023, y: 500) == (200, 200, 200))
    }

    @Test func normalizationUsesMeanAndStd() throws {
        let custom = try LFM2VLImagePreprocessor(
            configuration: .init(imageMean: SIMD3(0.25, 0.5, 0.75), imageStd: SIMD3(0.5, 0.25, 2)))
        let image = RGBImage(width: 256, height: 256, rgb: [UInt8](repeating: 255, count: 256 * 256 * 3))
        let slice = try #require(custom.preprocess(image).slices.first)
        #expect(slice.kind == .image && slice.width == 256 && slice.tokenCount == 64)
        let expected: [Float] = [(1 - 0.25) / 0.5, (1 - 0.5) / 0.25, (1 - 0.75) / 2]
        #expect(Array(slice.values.prefix(3)) == expected)
    }

    @Test func extremeAspectRatiosAreRefusedAsLlamaCppRefusesThem() {
        #expect(throws: ImagePreprocessingError.self) { try preprocessor.layout(width: 50_000, height: 1) }
        #expect(throws: ImagePreprocessingError.emptyImage(width: 0, height: 5)) { try preprocessor.layout(width: 0, height: 5) }
    }

    @Test func invalidConfigurationsAreTypedErrors() {
        let bad: [LFM2VLImagePreprocessor.Configuration] = [
            .init(patchSize: 0), .init(mergeFactor: 0), .init(minImageTokens: 0), .init(minImageTokens: 300, maxImageTokens: 256),
            .init(tileSize: 500), .init(minTiles: 3, maxTiles: 2), .init(imageStd: SIMD3(0.5, 0, 0.5)),
            .init(imageMean: SIMD3(.nan, 0, 0)), .init(maxPixelsTolerance: 0), .init(maxImageTokens: 100_000),
            .init(tileSize: 4096, maxTiles: 20)
        ]
        for configuration in bad {
            #expect(throws: ImagePreprocessingError.self, "\(configuration)") { try LFM2VLImagePreprocessor(configuration: configuration) }
        }
    }
}
