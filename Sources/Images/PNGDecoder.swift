/// PNG (ISO/IEC 15948) to 8-bit RGB, as stb_image produces it with 3 components requested:
/// every color type (gray, RGB, palette, gray+alpha, RGBA) at every bit depth the format
/// allows (1, 2, 4, 8, 16), Adam7 interlacing and the five row filters. 16-bit samples keep
/// their high byte; gray below 8 bits is scaled to 0...255 (x255, x85, x17); gray is
/// replicated into R, G and B; alpha and tRNS transparency are dropped, not composited.
///
/// Checks stb_image does not make: the CRC of every critical chunk (IHDR, PLTE, IDAT, IEND)
/// and the zlib stream's Adler-32, as libpng and Pillow do, so that damaged bytes are an error
/// rather than a silently wrong picture. Ancillary chunks are skipped unread.
enum PNGDecoder {
    static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    /// What IHDR declares.
    struct Header {
        var width: Int
        var height: Int
        var bitDepth: Int
        var colorType: Int
        var interlaced: Bool

        /// Samples per pixel of the stored data: gray 1, RGB 3, palette 1, gray+alpha 2, RGBA 4.
        var channels: Int {
            switch colorType {
            case 2: return 3
            case 4: return 2
            case 6: return 4
            default: return 1
            }
        }

        /// Bytes in one filtered row of `pixels` pixels, without its filter-type byte.
        func rowBytes(pixels: Int) -> Int { (pixels * channels * bitDepth + 7) / 8 }
    }

    static func decode(_ bytes: [UInt8], limits: ImageLimits) throws(ImageError) -> RGBImage {
        var chunks = ChunkReader(bytes: bytes)
        let header = try chunks.readHeader(limits: limits)
        var palette: [UInt8] = []
        var compressed: [UInt8] = []
        // Where each IDAT's data starts, in the concatenated stream and in the file.
        var idatOffsets: [(stream: Int, file: Int)] = []
        var sawIEND = false
        while !sawIEND {
            let chunk = try chunks.next()
            switch chunk.type {
            case "IDAT":
                idatOffsets.append((compressed.count, chunk.dataOffset))
                compressed.append(contentsOf: bytes[chunk.dataOffset..<(chunk.dataOffset + chunk.length)])
            case "PLTE":
                guard compressed.isEmpty else { throw corrupt(chunk.offset, "PLTE after IDAT") }
                guard chunk.length % 3 == 0, chunk.length > 0, chunk.length <= 768 else {
                    throw corrupt(chunk.offset, "PLTE of \(chunk.length) bytes (must be 3 to 768, a multiple of 3)")
                }
                palette = Array(bytes[chunk.dataOffset..<(chunk.dataOffset + chunk.length)])
            case "IEND":
                sawIEND = true
            case "IHDR":
                throw corrupt(chunk.offset, "a second IHDR chunk")
            case "CgBI":
                throw ImageError.unsupportedFeature(format: .png, feature: "Apple's CgBI PNG variant (Xcode-optimized, not a standard PNG)")
            default:
                // Bit 5 of the first letter (lower case) marks an ancillary chunk.
                guard chunk.isAncillary else {
                    throw ImageError.unsupportedFeature(format: .png, feature: "unknown critical chunk \(chunk.type)")
                }
            }
        }
        guard !idatOffsets.isEmpty else { throw corrupt(chunks.position, "no IDAT chunk: the file has no image data") }
        if header.colorType == 3 && palette.isEmpty { throw corrupt(chunks.position, "a palette image without a PLTE chunk") }

        let needed = filteredSize(header)
        // stb_image accepts data beyond what the image needs (some encoders pad with zeros); up
        // to a quarter more is allowed, then inflating stops: that bounds a decompression bomb.
        let allowance = max(65_536, needed / 4)
        let filtered: [UInt8]
        do {
            filtered = try Inflater.inflateZlib(compressed, outputLimit: needed + allowance)
        } catch {
            throw mapInflateFailure(error, idatOffsets: idatOffsets, needed: needed)
        }
        guard filtered.count >= needed else {
            throw corrupt(
                idatOffsets[0].file,
                "the image data inflates to \(filtered.count) bytes; a \(header.width)x\(header.height) image needs \(needed)")
        }
        return try reconstruct(filtered, header: header, palette: palette, dataOffset: idatOffsets[0].file)
    }

    /// Size of the inflated data: each row (of each Adam7 pass) with its filter-type byte.
    static func filteredSize(_ header: Header) -> Int {
        if !header.interlaced { return header.height * (1 + header.rowBytes(pixels: header.width)) }
        var total = 0
        for pass in adam7Passes {
            let (columns, rows) = pass.size(width: header.width, height: header.height)
            if columns > 0 && rows > 0 { total += rows * (1 + header.rowBytes(pixels: columns)) }
        }
        return total
    }

    /// One Adam7 pass: the pixels at (x0 + i*dx, y0 + j*dy).
    struct Adam7Pass {
        let x0: Int, y0: Int, dx: Int, dy: Int

        func size(width: Int, height: Int) -> (columns: Int, rows: Int) {
            ((width - x0 + dx - 1) / dx, (height - y0 + dy - 1) / dy)
        }
    }

    static let adam7Passes = [
        Adam7Pass(x0: 0, y0: 0, dx: 8, dy: 8), Adam7Pass(x0: 4, y0: 0, dx: 8, dy: 8), Adam7Pass(x0: 0, y0: 4, dx: 4, dy: 8),
        Adam7Pass(x0: 2, y0: 0, dx: 4, dy: 4), Adam7Pass(x0: 0, y0: 2, dx: 2, dy: 4), Adam7Pass(x0: 1, y0: 0, dx: 2, dy: 2),
        Adam7Pass(x0: 0, y0: 1, dx: 1, dy: 2)
    ]

    /// Undoes the row filters and converts the samples to RGB, pass by pass when interlaced.
    /// `dataOffset` (the first IDAT's data) is where errors in the inflated data are reported.
    static func reconstruct(_ filtered: [UInt8], header: Header, palette: [UInt8], dataOffset: Int) throws(ImageError) -> RGBImage {
        var rgb = [UInt8](repeating: 0, count: header.width * header.height * 3)
        let passes = header.interlaced ? adam7Passes : [Adam7Pass(x0: 0, y0: 0, dx: 1, dy: 1)]
        var offset = 0
        for (passIndex, pass) in passes.enumerated() {
            let (columns, rows) = pass.size(width: header.width, height: header.height)
            guard columns > 0 && rows > 0 else { continue }
            let rowBytes = header.rowBytes(pixels: columns)
            // Bytes per complete pixel, at least 1: the distance the filters look back.
            let filterStride = max(1, header.channels * header.bitDepth / 8)
            var previous = [UInt8](repeating: 0, count: rowBytes)
            var current = [UInt8](repeating: 0, count: rowBytes)
            for row in 0..<rows {
                let filterType = filtered[offset]
                guard filterType <= 4 else {
                    let place = header.interlaced ? "row \(row) of Adam7 pass \(passIndex + 1)" : "row \(row)"
                    throw corrupt(dataOffset, "\(place) has filter type \(filterType) (0 to 4 exist)")
                }
                unfilter(
                    filterType, row: filtered[(offset + 1)..<(offset + 1 + rowBytes)], previous: previous, into: &current,
                    stride: filterStride)
                offset += 1 + rowBytes
                convertRow(current, columns: columns, header: header, palette: palette) { column, r, g, b in
                    let i = ((pass.y0 + row * pass.dy) * header.width + pass.x0 + column * pass.dx) * 3
                    rgb[i] = r
                    rgb[i + 1] = g
                    rgb[i + 2] = b
                }
                swap(&previous, &current)
            }
        }
        return RGBImage(width: header.width, height: header.height, rgb: rgb)
    }

    /// Reverses one row's filter (PNG section 9): none, sub, up, average, Paeth; the row
    /// above the first is zeros.
    static func unfilter(
        _ filterType: UInt8, row raw: ArraySlice<UInt8>, previous: [UInt8], into current: inout [UInt8], stride: Int
    ) {
        let count = current.count
        raw.withUnsafeBufferPointer { rawBuffer in
            previous.withUnsafeBufferPointer { above in
                current.withUnsafeMutableBufferPointer { out in
                    switch filterType {
                    case 0:
                        for i in 0..<count { out[i] = rawBuffer[i] }
                    case 1:
                        for i in 0..<count { out[i] = rawBuffer[i] &+ (i >= stride ? out[i - stride] : 0) }
                    case 2:
                        for i in 0..<count { out[i] = rawBuffer[i] &+ above[i] }
                    case 3:
                        for i in 0..<count {
                            let left = i >= stride ? Int(out[i - stride]) : 0
                            out[i] = rawBuffer[i] &+ UInt8((left + Int(above[i])) >> 1)
                        }
                    case 4:
                        for i in 0..<count {
                            let left = i >= stride ? Int(out[i - stride]) : 0
                            let upLeft = i >= stride ? Int(above[i - stride]) : 0
                            out[i] = rawBuffer[i] &+ UInt8(paeth(left, Int(above[i]), upLeft))
                        }
                    default:
                        preconditionFailure("filter type \(filterType) is checked by the caller")
                    }
                }
            }
        }
    }

    /// The Paeth predictor: whichever of left, above and upper-left is closest to
    /// left + above - upper-left, ties in that order.
    @inline(__always)
    static func paeth(_ left: Int, _ above: Int, _ upperLeft: Int) -> Int {
        let estimate = left + above - upperLeft
        let toLeft = abs(estimate - left)
        let toAbove = abs(estimate - above)
        let toUpperLeft = abs(estimate - upperLeft)
        if toLeft <= toAbove && toLeft <= toUpperLeft { return left }
        return toAbove <= toUpperLeft ? above : upperLeft
    }

    /// Calls `store(column, r, g, b)` for each pixel of an unfiltered row.
    @inline(__always)
    static func convertRow(
        _ row: [UInt8], columns: Int, header: Header, palette: [UInt8], store: (Int, UInt8, UInt8, UInt8) -> Void
    ) {
        let depth = header.bitDepth
        // A sample of `depth` bits at sample index `s` of the row.
        func sample(_ s: Int) -> Int {
            switch depth {
            case 16: return Int(row[2 * s])  // the high byte, as stb_image keeps
            case 8: return Int(row[s])
            default:
                let bitOffset = s * depth
                let byte = Int(row[bitOffset >> 3])
                return (byte >> (8 - depth - (bitOffset & 7))) & ((1 << depth) - 1)
            }
        }
        // Gray below 8 bits spreads to 0...255: 1 bit x255, 2 bits x85, 4 bits x17.
        let grayScale = depth >= 8 ? 1 : 255 / ((1 << depth) - 1)
        switch header.colorType {
        case 0, 4:
            let step = header.colorType == 0 ? 1 : 2
            for x in 0..<columns {
                let g = UInt8(sample(x * step) * grayScale)
                store(x, g, g, g)
            }
        case 2, 6:
            let step = header.colorType == 2 ? 3 : 4
            for x in 0..<columns {
                store(x, UInt8(sample(x * step)), UInt8(sample(x * step + 1)), UInt8(sample(x * step + 2)))
            }
        default:
            // Palette: an index past the palette's end shows black, as libpng and Pillow do
            // (stb_image would read uninitialised memory).
            for x in 0..<columns {
                let entry = sample(x) * 3
                if entry + 2 < palette.count {
                    store(x, palette[entry], palette[entry + 1], palette[entry + 2])
                } else {
                    store(x, 0, 0, 0)
                }
            }
        }
    }

    static func corrupt(_ offset: Int, _ reason: String) -> ImageError {
        .corrupt(format: .png, offset: offset, reason: reason)
    }

    /// An inflate failure with its offset translated from the IDAT stream to the file.
    static func mapInflateFailure(_ failure: InflateFailure, idatOffsets: [(stream: Int, file: Int)], needed: Int)
        -> ImageError
    {
        func fileOffset(_ streamOffset: Int) -> Int {
            let chunk = idatOffsets.last { $0.stream <= streamOffset } ?? idatOffsets[0]
            return chunk.file + streamOffset - chunk.stream
        }
        switch failure {
        case .truncated(let at, let reading):
            return .truncated(format: .png, offset: fileOffset(at), reading: "\(reading) (the IDAT data ends too early)")
        case .corrupt(let at, let reason):
            return .corrupt(format: .png, offset: fileOffset(at), reason: "IDAT data: \(reason)")
        case .outputLimitExceeded(let limit):
            return .corrupt(
                format: .png, offset: idatOffsets[0].file,
                reason: "the image data inflates to more than \(limit) bytes, the image needs \(needed): refused as a decompression bomb")
        }
    }
}

/// Reads PNG chunks: length, type, data, CRC (checked for critical chunks).
struct ChunkReader {
    struct Chunk {
        let type: String
        /// Offset of the chunk's length field.
        let offset: Int
        let dataOffset: Int
        let length: Int
        let isAncillary: Bool
    }

    let bytes: [UInt8]
    var position = 8

    mutating func readHeader(limits: ImageLimits) throws(ImageError) -> PNGDecoder.Header {
        guard bytes.count >= 8 else { throw .truncated(format: .png, offset: bytes.count, reading: "the PNG signature") }
        let chunk = try next()
        if chunk.type == "CgBI" {
            throw .unsupportedFeature(format: .png, feature: "Apple's CgBI PNG variant (Xcode-optimized, not a standard PNG)")
        }
        guard chunk.type == "IHDR" else { throw PNGDecoder.corrupt(chunk.offset, "the first chunk is \(chunk.type), not IHDR") }
        guard chunk.length == 13 else { throw PNGDecoder.corrupt(chunk.offset, "IHDR of \(chunk.length) bytes, not 13") }
        let d = chunk.dataOffset
        let width = Int(readUInt32(at: d))
        let height = Int(readUInt32(at: d + 4))
        let bitDepth = Int(bytes[d + 8])
        let colorType = Int(bytes[d + 9])
        guard width > 0 && height > 0 else { throw .zeroDimension(format: .png, width: width, height: height) }
        guard width <= Int(Int32.max) && height <= Int(Int32.max) else {
            throw PNGDecoder.corrupt(d, "dimensions \(width)x\(height) exceed the format's 2^31-1")
        }
        guard width * height <= limits.maxPixels else {
            throw .tooManyPixels(format: .png, width: width, height: height, limit: limits.maxPixels)
        }
        let allowedDepths: [Int: [Int]] = [0: [1, 2, 4, 8, 16], 2: [8, 16], 3: [1, 2, 4, 8], 4: [8, 16], 6: [8, 16]]
        guard let depths = allowedDepths[colorType] else { throw PNGDecoder.corrupt(d + 9, "color type \(colorType) does not exist") }
        guard depths.contains(bitDepth) else {
            throw PNGDecoder.corrupt(d + 8, "bit depth \(bitDepth) is not allowed with color type \(colorType)")
        }
        guard bytes[d + 10] == 0 else { throw PNGDecoder.corrupt(d + 10, "compression method \(bytes[d + 10]), not 0") }
        guard bytes[d + 11] == 0 else { throw PNGDecoder.corrupt(d + 11, "filter method \(bytes[d + 11]), not 0") }
        guard bytes[d + 12] <= 1 else { throw PNGDecoder.corrupt(d + 12, "interlace method \(bytes[d + 12]) (0 or 1 exist)") }
        return PNGDecoder.Header(width: width, height: height, bitDepth: bitDepth, colorType: colorType, interlaced: bytes[d + 12] == 1)
    }

    /// The next chunk, its data bounds-checked and, for critical chunks, its CRC verified.
    mutating func next() throws(ImageError) -> Chunk {
        let start = position
        guard start + 8 <= bytes.count else {
            throw .truncated(format: .png, offset: bytes.count, reading: start == 8 ? "the IHDR chunk" : "a chunk header (no IEND chunk)")
        }
        let length = Int(readUInt32(at: start))
        let typeBytes = Array(bytes[(start + 4)..<(start + 8)])
        let isLetter = { (b: UInt8) in (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b) }
        guard typeBytes.allSatisfy(isLetter) else {
            throw PNGDecoder.corrupt(start + 4, "chunk type bytes \(typeBytes.map { String($0, radix: 16) }) are not letters")
        }
        let type = String(decoding: typeBytes, as: UTF8.self)
        guard length <= Int(Int32.max) else { throw PNGDecoder.corrupt(start, "chunk \(type) declares \(length) bytes, over 2^31-1") }
        guard start + 12 + length <= bytes.count else {
            throw .truncated(format: .png, offset: bytes.count, reading: "chunk \(type) of \(length) bytes at byte \(start)")
        }
        let isAncillary = typeBytes[0] & 0x20 != 0
        if !isAncillary {
            let stored = readUInt32(at: start + 8 + length)
            let computed = CRC32.checksum(bytes[(start + 4)..<(start + 8 + length)])
            guard stored == computed else {
                throw PNGDecoder.corrupt(
                    start + 8 + length,
                    "chunk \(type) has CRC 0x\(String(stored, radix: 16)), its bytes give 0x\(String(computed, radix: 16))")
            }
        }
        position = start + 12 + length
        return Chunk(type: type, offset: start, dataOffset: start + 8, length: length, isAncillary: isAncillary)
    }

    func readUInt32(at offset: Int) -> UInt32 {
        UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
    }
}

/// CRC-32 (ISO 3309, polynomial 0xEDB88320 reflected), as PNG chunks carry it.
enum CRC32 {
    static let table: [UInt32] = (0..<256).map { n -> UInt32 in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    static func checksum(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
        return crc ^ 0xFFFF_FFFF
    }
}
