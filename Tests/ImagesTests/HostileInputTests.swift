import TestSupport
import Testing

@testable import Images

/// Damaged and hostile inputs: every one ends in a typed `ImageError` (or, where the damage
/// leaves a valid stream, an image of the declared size), never a crash, a hang or an
/// allocation sized by a forged field.
@Suite struct HostileInputTests {
    // MARK: Truncation

    @Test(arguments: ["png-rgb8-23x17.png", "png-rgb8-adam7-23x17.png", "png-palette4-23x17.png", "png-rgba16-23x17.png"])
    func pngCutAtEveryOffsetIsTruncated(_ name: String) throws {
        let bytes = try fixtureBytes("images/variants/\(name)")
        for cut in 0..<bytes.count {
            let error = decodeError(Array(bytes[..<cut]))
            switch (cut, error) {
            case (0, .empty?): break
            case (1..<8, .unsupportedFormat?): break
            case (8..., .truncated?): break
            default: Issue.record("\(name) cut at \(cut) of \(bytes.count): \(String(describing: error))")
            }
        }
    }

    @Test(arguments: ["jpeg-420-61x45.jpg", "jpeg-progressive-420-61x45.jpg", "jpeg-restart-blocks-61x45.jpg", "jpeg-gray-61x45.jpg"])
    func jpegCutAtEveryOffsetFails(_ name: String) throws {
        let bytes = try fixtureBytes("images/variants/\(name)")
        var truncated = 0
        for cut in 0..<bytes.count {
            let error = decodeError(Array(bytes[..<cut]))
            switch (cut, error) {
            case (0, .empty?), (1, .unsupportedFormat?): break
            case (2..., .truncated?): truncated += 1
            // Zero bits fed past the end can decode as an invalid code, or run into the
            // place of a restart marker, before the missing end is noticed.
            case (2..., .corrupt?): break
            default: Issue.record("\(name) cut at \(cut) of \(bytes.count): \(String(describing: error))")
            }
        }
        #expect(truncated > bytes.count / 4)
        // Bytes after EOI are ignored.
        #expect(decodeError(bytes + [0x00, 0xFF, 0x12]) == nil)
    }

    // MARK: Bit flips

    /// Seeded random bit flips, with the PNG CRCs recomputed so that the damage reaches the
    /// inflater and the filters rather than stopping at a checksum.
    @Test(arguments: [
        "png-rgb8-23x17.png", "png-gray1-adam7-23x17.png", "png-palette2-23x17.png", "png-rgb8-fixed-23x17.png",
        "jpeg-420-61x45.jpg", "jpeg-progressive-420-61x45.jpg", "jpeg-444-61x45.jpg", "jpeg-restart-rows-progressive-61x45.jpg",
        "jpeg-411-37x21.jpg", "jpeg-cmyk-61x45.jpg"
    ])
    func randomBitFlipsEndInAnImageOrAnImageError(_ name: String) throws {
        let original = try fixtureBytes("images/variants/\(name)")
        let isPNG = name.hasSuffix(".png")
        var generator = SeededRandom(seed: 0x1234_5678 ^ UInt64(original.count))
        var failures = 0
        let trials = 250
        for _ in 0..<trials {
            var bytes = original
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                let index = Int.random(in: (isPNG ? 8 : 2)..<bytes.count, using: &generator)
                bytes[index] ^= UInt8(1) << UInt8.random(in: 0...7, using: &generator)
            }
            if isPNG { bytes = withFixedCRCs(bytes) }
            switch decodeResult(bytes) {
            case .success(let image): #expect(image.rgb.count == image.width * image.height * 3)
            case .failure: failures += 1
            }
        }
        // The damage must be noticed at least sometimes (most flips of a PNG's zlib stream
        // break its Huffman codes or its Adler-32).
        #expect(failures > 0)
    }

    @Test func pngChecksumsAreVerifiedForCriticalChunksOnly() throws {
        let bytes = try fixtureBytes("images/variants/png-rgb8-23x17.png")
        let chunks = pngChunks(bytes)
        let idat = try #require(chunks.first { $0.type == "IDAT" })
        var damaged = bytes
        damaged[idat.data.lowerBound + 3] ^= 0x10
        guard case .corrupt(.png, _, let reason)? = decodeError(damaged) else {
            Issue.record("a flipped IDAT byte was not caught")
            return
        }
        #expect(reason.contains("CRC"))
        // gAMA and tEXt are ancillary: a wrong CRC there is skipped unread.
        let gama = try #require(chunks.first { $0.type == "gAMA" })
        var ancillary = bytes
        ancillary[gama.data.upperBound] ^= 0xFF
        #expect(decodeError(ancillary) == nil)
    }

    // MARK: Dimensions and limits

    @Test func zeroAndHugeDimensionsFailFromTheHeader() {
        let data = pngChunk("IDAT", storedZlib([0, 0]))
        #expect(
            decodeError(png(ihdr(width: 0, height: 5), data, pngChunk("IEND", []))) == .zeroDimension(format: .png, width: 0, height: 5))
        // 10^10 pixels: refused from IHDR, before anything is allocated or inflated.
        let huge = png(ihdr(width: 100_000, height: 100_000), pngChunk("IDAT", zeroBombZlib(outputBytes: 1 << 20)), pngChunk("IEND", []))
        #expect(decodeError(huge) == .tooManyPixels(format: .png, width: 100_000, height: 100_000, limit: 50_000_000))
        if case .corrupt? = decodeError(png(ihdr(width: 1 << 31, height: 1), data, pngChunk("IEND", []))) {
        } else {
            Issue.record("a width of 2^31 was not refused")
        }
        #expect(decodeError(jpegFrame(width: 0, height: 10)) == .zeroDimension(format: .jpeg, width: 0, height: 10))
        #expect(
            decodeError(jpegFrame(width: 65535, height: 65535))
                == .tooManyPixels(format: .jpeg, width: 65535, height: 65535, limit: 50_000_000))
        guard case .unsupportedFeature(.jpeg, let feature)? = decodeError(jpegFrame(width: 10, height: 0)) else {
            Issue.record("a JPEG height of 0 (DNL) was not reported as unsupported")
            return
        }
        #expect(feature.contains("DNL"))
    }

    @Test func limitsAreConfigurable() throws {
        let bytes = try fixtureBytes("images/medium-500x375.png")
        #expect(
            decodeError(bytes, limits: ImageLimits(maxPixels: 100_000))
                == .tooManyPixels(format: .png, width: 500, height: 375, limit: 100_000))
        #expect(decodeError(bytes, limits: ImageLimits(maxInputBytes: 1000)) == .inputTooLarge(bytes: bytes.count, limit: 1000))
        let jpeg = try fixtureBytes("images/medium-500x375.jpg")
        #expect(
            decodeError(jpeg, limits: ImageLimits(maxPixels: 187_499))
                == .tooManyPixels(format: .jpeg, width: 500, height: 375, limit: 187_499))
        #expect(decodeError(jpeg, limits: ImageLimits(maxPixels: 187_500)) == nil)
        #expect(ImageLimits.default.maxPixels == 50_000_000)
    }

    // MARK: Decompression bombs

    @Test func zlibBombsStopAtTheImagesSize() {
        // 1000x1000 gray needs 1,001,000 bytes; the stream would give 50 MB of zeros.
        let bomb = png(ihdr(width: 1000, height: 1000), pngChunk("IDAT", zeroBombZlib(outputBytes: 50 << 20)), pngChunk("IEND", []))
        guard case .corrupt(.png, _, let reason)? = decodeError(bomb) else {
            Issue.record("the bomb was not refused")
            return
        }
        #expect(reason.contains("decompression bomb"))
        let tiny = png(ihdr(width: 1, height: 1), pngChunk("IDAT", zeroBombZlib(outputBytes: 10 << 20)), pngChunk("IEND", []))
        if case .corrupt? = decodeError(tiny) {} else { Issue.record("a 1x1 bomb was not refused") }
    }

    // MARK: Bad Huffman tables and streams

    @Test func invalidDeflateStreamsAreCorrupt() {
        func decodeGrayPixel(zlib: [UInt8]) -> ImageError? {
            decodeError(png(ihdr(width: 1, height: 1), pngChunk("IDAT", zlib), pngChunk("IEND", [])))
        }
        // Dynamic block whose code-length code gives 19 codes of 1 bit: over-subscribed.
        var oversubscribed = DeflateBitWriter()
        oversubscribed.write(1, bits: 1)
        oversubscribed.write(2, bits: 2)
        oversubscribed.write(0, bits: 5)
        oversubscribed.write(0, bits: 5)
        oversubscribed.write(15, bits: 4)
        for _ in 0..<19 { oversubscribed.write(1, bits: 3) }
        expectCorrupt(decodeGrayPixel(zlib: [0x78, 0x01] + oversubscribed.finish() + [0, 0, 0, 0]), mentioning: "over-subscribed")
        // Block type 3 is reserved.
        var reserved = DeflateBitWriter()
        reserved.write(1, bits: 1)
        reserved.write(3, bits: 2)
        expectCorrupt(decodeGrayPixel(zlib: [0x78, 0x01] + reserved.finish()), mentioning: "reserved")
        // A match reaching before the first byte.
        var farBack = DeflateBitWriter()
        farBack.write(1, bits: 1)
        farBack.write(1, bits: 2)
        farBack.writeCode(0x30, bits: 8)  // literal 0
        farBack.writeCode(1, bits: 7)  // length symbol 257: 3 bytes
        farBack.writeCode(4, bits: 5)  // distance symbol 4: 5 bytes back (+1 extra bit)
        farBack.write(0, bits: 1)
        farBack.writeCode(0, bits: 7)
        expectCorrupt(decodeGrayPixel(zlib: [0x78, 0x01] + farBack.finish() + [0, 0, 0, 0]), mentioning: "before the start")
        // A bad header and a wrong Adler-32.
        expectCorrupt(decodeGrayPixel(zlib: [0x78, 0x02] + storedZlib([0, 0]).dropFirst(2)), mentioning: "header")
        var wrongAdler = storedZlib([0, 7])
        wrongAdler[wrongAdler.count - 1] ^= 1
        expectCorrupt(decodeGrayPixel(zlib: wrongAdler), mentioning: "Adler-32")
        // A filter type that does not exist.
        expectCorrupt(decodeGrayPixel(zlib: storedZlib([7, 0])), mentioning: "filter type 7")
    }

    @Test func badJPEGHuffmanTablesAreCorrupt() throws {
        let bytes = try fixtureBytes("images/variants/jpeg-420-61x45.jpg")
        let dht = try #require(segmentOffsets(bytes, marker: 0xC4).first)
        // Three 1-bit codes (the total count unchanged): more codes than 1 bit can hold.
        var tooMany = bytes
        let countsStart = dht + 5
        let longer = try #require((1..<16).first { tooMany[countsStart + $0] >= 3 })
        tooMany[countsStart] += 3
        tooMany[countsStart + longer] -= 3
        expectCorrupt(decodeError(tooMany), mentioning: "more codes than")
        // More than 256 codes in all.
        let counts350 = [UInt8](repeating: 0, count: 12) + [150, 0, 0, 200]
        let overfull = [0xFF, 0xD8] + jpegSegment(0xC4, [0x00] + counts350 + [UInt8](repeating: 0, count: 200))
        expectCorrupt(decodeError(overfull), mentioning: "at most 256")
        // A scan naming a table no DHT defined.
        let sos = try #require(segmentOffsets(bytes, marker: 0xDA).first)
        var undefined = bytes
        undefined[sos + 8] = 0x33  // FF DA, length, count, then (id, selectors) pairs: the second's DC 3, AC 3
        expectCorrupt(decodeError(undefined), mentioning: "no DHT defined")
        // A class that does not exist.
        var badClass = bytes
        badClass[dht + 4] = 0x20
        expectCorrupt(decodeError(badClass), mentioning: "DHT class")
    }

    // MARK: Wrong lengths

    @Test func wrongPNGChunkLengthsAreCaught() throws {
        let bytes = try fixtureBytes("images/variants/png-rgb8-23x17.png")
        let idat = try #require(pngChunks(bytes).first { $0.type == "IDAT" })
        for (value, label) in [
            (idat.data.count + 1, "one too many"), (idat.data.count - 1, "one too few"), (0x7FFF_FFF0, "huge"), (-1, "2^32-1")
        ] {
            var damaged = bytes
            damaged.replaceSubrange(idat.offset..<(idat.offset + 4), with: bigEndian32(value))
            #expect(decodeError(damaged) != nil, "IDAT length \(label)")
        }
        // IHDR of 12 bytes, with a valid CRC over them.
        let short = png(pngChunk("IHDR", bigEndian32(1) + bigEndian32(1) + [8, 0, 0, 0]), pngChunk("IEND", []))
        expectCorrupt(decodeError(short), mentioning: "IHDR of 12 bytes")
        let noData = png(ihdr(width: 1, height: 1), pngChunk("IEND", []))
        expectCorrupt(decodeError(noData), mentioning: "no IDAT")
        let noPalette = png(ihdr(width: 1, height: 1, colorType: 3), pngChunk("IDAT", storedZlib([0, 0])), pngChunk("IEND", []))
        expectCorrupt(decodeError(noPalette), mentioning: "PLTE")
        let badDepth = png(ihdr(width: 1, height: 1, bitDepth: 16, colorType: 3), pngChunk("IEND", []))
        expectCorrupt(decodeError(badDepth), mentioning: "bit depth 16")
    }

    @Test func wrongJPEGSegmentLengthsAreCaught() throws {
        let bytes = try fixtureBytes("images/variants/jpeg-420-61x45.jpg")
        let app0 = try #require(segmentOffsets(bytes, marker: 0xE0).first)
        var tooShort = bytes
        tooShort[app0 + 2] = 0
        tooShort[app0 + 3] = 1
        expectCorrupt(decodeError(tooShort), mentioning: "less than 2")
        var pastEnd = bytes
        pastEnd[app0 + 2] = 0xFF
        #expect(decodeError(pastEnd) != nil)
        let dqt = try #require(segmentOffsets(bytes, marker: 0xDB).first)
        var shortTable = bytes
        shortTable[dqt + 3] -= 1
        #expect(decodeError(shortTable) != nil)
        let sof = try #require(segmentOffsets(bytes, marker: 0xC0).first)
        var badFrame = bytes
        badFrame[sof + 3] += 3
        #expect(decodeError(badFrame) != nil)
        let sos = try #require(segmentOffsets(bytes, marker: 0xDA).first)
        var badScan = bytes
        badScan[sos + 3] += 2
        #expect(decodeError(badScan) != nil)
    }

    // MARK: Other refusals and tolerances

    @Test func unsupportedFormatsAndFeaturesAreNamed() throws {
        #expect(decodeError([]) == .empty)
        #expect(decodeError(Array("GIF89a....".utf8)) == .unsupportedFormat(detected: "GIF"))
        #expect(decodeError(Array("RIFF\u{0}\u{0}\u{0}\u{0}WEBPVP8 ".utf8)) == .unsupportedFormat(detected: "WebP"))
        #expect(decodeError([1, 2, 3, 4, 5, 6, 7, 8, 9]) == .unsupportedFormat(detected: nil))
        for (marker, word) in [(UInt8(0xC3), "lossless"), (0xC9, "arithmetic"), (0xC5, "hierarchical")] {
            guard case .unsupportedFeature(.jpeg, let feature)? = decodeError(jpegFrame(width: 8, height: 8, marker: marker)) else {
                Issue.record("SOF 0x\(String(marker, radix: 16)) was not refused as unsupported")
                continue
            }
            #expect(feature.contains(word))
        }
        guard case .unsupportedFeature(.jpeg, let feature)? = decodeError(jpegFrame(width: 8, height: 8, precision: 12)) else {
            Issue.record("12-bit JPEG was not refused as unsupported")
            return
        }
        #expect(feature.contains("12-bit"))
        let cgbi = png(pngChunk("CgBI", [0x50, 0x00, 0x20, 0x06]), ihdr(width: 1, height: 1), pngChunk("IEND", []))
        if case .unsupportedFeature(.png, _)? = decodeError(cgbi) {} else { Issue.record("CgBI was not refused as unsupported") }
    }

    @Test func pngTolerances() throws {
        // A palette index past the palette's end shows black; data after IEND is ignored.
        let palette = pngChunk("PLTE", [10, 20, 30])
        let image = try ImageDecoder.decode(
            png(ihdr(width: 2, height: 1, colorType: 3), palette, pngChunk("IDAT", storedZlib([0, 0, 5])), pngChunk("IEND", [])) + [1, 2, 3]
        )
        #expect(image.rgb == [10, 20, 30, 0, 0, 0])
        // Trailing zeros after the rows (as some encoders write) are accepted.
        let padded = try ImageDecoder.decode(
            png(ihdr(width: 1, height: 1), pngChunk("IDAT", storedZlib([0, 77, 0, 0, 0])), pngChunk("IEND", [])))
        #expect(padded.rgb == [77, 77, 77])
        // Too little data is corrupt.
        let short = png(ihdr(width: 2, height: 2), pngChunk("IDAT", storedZlib([0, 1, 2])), pngChunk("IEND", []))
        expectCorrupt(decodeError(short), mentioning: "needs 6")
    }

    @Test func jpegWithoutItsRestartMarkerIsCorrupt() throws {
        let bytes = try fixtureBytes("images/variants/jpeg-restart-blocks-61x45.jpg")
        let sos = try #require(segmentOffsets(bytes, marker: 0xDA).first)
        let rst = try #require((sos..<(bytes.count - 1)).first { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xD0 })
        var missing = bytes
        missing.removeSubrange(rst..<(rst + 2))
        expectCorrupt(decodeError(missing), mentioning: "restart marker")
    }

    @Test func errorsDescribeThemselves() {
        let error = ImageError.tooManyPixels(format: .png, width: 100_000, height: 100_000, limit: 50_000_000)
        #expect(error.description.contains("100000x100000") && error.description.contains("50000000"))
        #expect(ImageError.corrupt(format: .jpeg, offset: 12, reason: "x").description == "corrupt JPEG at byte 12: x")
        #expect(ImageError.unsupportedFormat(detected: "GIF").description.contains("PNG or a JPEG"))
    }

    // MARK: Helpers

    func expectCorrupt(_ error: ImageError?, mentioning text: String, sourceLocation: SourceLocation = #_sourceLocation) {
        guard case .corrupt(_, _, let reason)? = error else {
            Issue.record(
                "expected a corrupt-data error mentioning \"\(text)\", got \(String(describing: error))", sourceLocation: sourceLocation)
            return
        }
        #expect(reason.contains(text), "\(reason)", sourceLocation: sourceLocation)
    }

    /// Offsets of the 0xFF of every `marker` segment before the first scan's data.
    func segmentOffsets(_ bytes: [UInt8], marker: UInt8) -> [Int] {
        var offsets: [Int] = []
        var position = 2
        while position + 4 <= bytes.count && bytes[position] == 0xFF {
            let code = bytes[position + 1]
            if code == marker { offsets.append(position) }
            if code == 0xDA { break }
            position += 2 + Int(bytes[position + 2]) << 8 + Int(bytes[position + 3])
        }
        return offsets
    }

    func jpegSegment(_ marker: UInt8, _ payload: [UInt8]) -> [UInt8] {
        [0xFF, marker, UInt8((payload.count + 2) >> 8), UInt8((payload.count + 2) & 0xFF)] + payload
    }

    /// SOI, a frame header of three components (4:2:0) and EOI.
    func jpegFrame(width: Int, height: Int, precision: UInt8 = 8, marker: UInt8 = 0xC0) -> [UInt8] {
        let frame: [UInt8] = [
            precision, UInt8(height >> 8), UInt8(height & 0xFF), UInt8(width >> 8), UInt8(width & 0xFF), 3, 1, 0x22, 0, 2, 0x11, 0, 3, 0x11,
            0
        ]
        return [0xFF, 0xD8] + jpegSegment(marker, frame) + [0xFF, 0xD9]
    }
}
