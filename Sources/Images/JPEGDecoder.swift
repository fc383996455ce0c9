/// JPEG (ITU-T T.81 / JFIF) to 8-bit RGB, reproducing stb_image's output: baseline and
/// extended sequential (SOF0, SOF1) and progressive (SOF2) Huffman-coded images with 8-bit
/// samples; 1 component (gray), 3 (YCbCr, or RGB) or 4 (Adobe CMYK / YCCK); any sampling
/// factors 1...4 whose ratios are whole numbers (4:4:4, 4:2:2, 4:2:0, 4:4:0, 4:1:1, ...);
/// restart intervals; APPn and COM segments skipped (EXIF orientation ignored, as stb_image
/// does). Not supported, with typed errors: 12-bit samples, arithmetic coding, lossless and
/// hierarchical JPEG, a height given by DNL.
///
/// Stricter than stb_image on damaged files: it decodes a file cut short with gray and stops at
/// an unexpected marker; this decoder reports both (the image must end with EOI).
enum JPEGDecoder {
    static func decode(_ bytes: [UInt8], limits: ImageLimits) throws(ImageError) -> RGBImage {
        var parser = JPEGParser(bytes: bytes, limits: limits)
        return try parser.decode()
    }
}

/// One component of the frame (SOF) and where its samples go.
struct JPEGComponent {
    let id: UInt8
    let horizontalSampling: Int
    let verticalSampling: Int
    let quantizationTable: Int
    /// Samples with image content (stb_image's `x`, `y`).
    let sampleWidth: Int
    let sampleHeight: Int
    /// 8x8 blocks of the plane, whole MCUs: the interleaved scans' extent.
    let blocksWide: Int
    let blocksHigh: Int
    var dcTable = 0
    var acTable = 0
}

/// The decoded planes (and, for progressive images, the coefficients), owned for the length
/// of a decode and freed with it.
final class JPEGBuffers {
    let planes: [UnsafeMutableBufferPointer<UInt8>]
    let coefficients: [UnsafeMutableBufferPointer<Int16>]

    init(components: [JPEGComponent], progressive: Bool) {
        planes = components.map {
            let plane = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: $0.blocksWide * $0.blocksHigh * 64)
            plane.initialize(repeating: 0)
            return plane
        }
        coefficients = components.map {
            let count = progressive ? $0.blocksWide * $0.blocksHigh * 64 : 0
            let buffer = UnsafeMutableBufferPointer<Int16>.allocate(capacity: count)
            buffer.initialize(repeating: 0)
            return buffer
        }
    }

    deinit {
        for plane in planes { plane.deallocate() }
        for buffer in coefficients { buffer.deallocate() }
    }
}

struct JPEGParser {
    let bytes: [UInt8]
    let limits: ImageLimits
    var position = 2
    var quantization = [[Int]](repeating: [Int](repeating: 0, count: 64), count: 4)
    var dcTables = [JPEGHuffmanTable?](repeating: nil, count: 4)
    var acTables = [JPEGHuffmanTable?](repeating: nil, count: 4)
    var restartInterval = 0
    var sawJFIF = false
    var adobeTransform: Int?

    init(bytes: [UInt8], limits: ImageLimits) {
        self.bytes = bytes
        self.limits = limits
    }

    // MARK: Reading

    func corrupt(_ offset: Int, _ reason: String) -> ImageError { .corrupt(format: .jpeg, offset: offset, reason: reason) }

    func truncated(_ reading: String) -> ImageError { .truncated(format: .jpeg, offset: bytes.count, reading: reading) }

    mutating func readByte(_ what: String) throws(ImageError) -> Int {
        guard position < bytes.count else { throw truncated(what) }
        position += 1
        return Int(bytes[position - 1])
    }

    mutating func read16(_ what: String) throws(ImageError) -> Int {
        guard position + 2 <= bytes.count else { throw truncated(what) }
        position += 2
        return Int(bytes[position - 2]) << 8 | Int(bytes[position - 1])
    }

    /// A marker at the current position: 0xFF, any fill 0xFFs, then the code.
    mutating func readMarker(_ what: String) throws(ImageError) -> UInt8 {
        let start = position
        guard try readByte(what) == 0xFF else { throw corrupt(start, "expected a marker (0xFF) before \(what)") }
        var code = try readByte(what)
        while code == 0xFF { code = try readByte(what) }
        guard code != 0 else { throw corrupt(start, "0xFF 0x00 where a marker was expected") }
        return UInt8(code)
    }

    /// The next marker, skipping bytes that are not one (stb_image tolerates padding between
    /// segments, and after the entropy-coded data).
    mutating func findMarker(_ what: String) throws(ImageError) -> UInt8 {
        while position < bytes.count {
            if bytes[position] != 0xFF {
                position += 1
                continue
            }
            var next = position + 1
            while next < bytes.count && bytes[next] == 0xFF { next += 1 }
            guard next < bytes.count else { break }
            position = next + 1
            if bytes[next] != 0 { return bytes[next] }
        }
        throw truncated(what)
    }

    /// A segment's length field and the offset where its data ends.
    mutating func segmentEnd(_ name: String) throws(ImageError) -> Int {
        let start = position
        let length = try read16("the length of \(name)")
        guard length >= 2 else { throw corrupt(start, "\(name) length \(length) is less than 2") }
        guard start + length <= bytes.count else { throw truncated("\(name) of \(length) bytes at byte \(start)") }
        return start + length
    }

    // MARK: The file

    /// Tables and application segments, up to and including the frame header.
    mutating func readUpToFrame() throws(ImageError) -> Frame {
        var marker = try findMarker("the frame header (SOF)")
        while !(0xC0...0xC2).contains(marker) {
            try processTableOrMiscellaneous(marker, before: "the frame header")
            marker = try findMarker("the frame header (SOF)")
        }
        return try readFrameHeader(progressive: marker == 0xC2)
    }

    mutating func decode() throws(ImageError) -> RGBImage {
        let frame = try readUpToFrame()
        let buffers = JPEGBuffers(components: frame.components, progressive: frame.progressive)
        var components = frame.components
        var scanned = [Bool](repeating: false, count: components.count)
        var marker = try readMarker("the next segment (no EOI marker)")
        while marker != 0xD9 {
            switch marker {
            case 0xDA:
                let scan = try readScanHeader(&components, progressive: frame.progressive)
                for index in scan.componentIndices { scanned[index] = true }
                let end = try decodeScan(scan, frame: frame, components: components, buffers: buffers)
                position = end.position
                if let pending = end.marker {
                    marker = pending
                } else {
                    marker = try findMarker("the EOI marker after the scan")
                }
                if (0xD0...0xD7).contains(marker) { marker = try readMarker("the segment after a restart marker") }
                continue
            case 0xDC:
                let end = try segmentEnd("DNL")
                let lines = try read16("DNL")
                guard end == position, lines == frame.height else {
                    throw corrupt(position - 4, "DNL of \(lines) lines for a frame of \(frame.height)")
                }
            case 0xC0...0xCF where marker != 0xC4 && marker != 0xC8 && marker != 0xCC:
                throw corrupt(position - 2, "a second frame header (SOF marker 0x\(String(marker, radix: 16)))")
            default:
                try processTableOrMiscellaneous(marker, before: "the end of the image")
            }
            marker = try readMarker("the next segment (no EOI marker)")
        }
        if let missing = scanned.firstIndex(of: false) {
            throw corrupt(position, "component \(components[missing].id) appears in no scan")
        }
        if frame.progressive { finishProgressive(components: components, buffers: buffers) }
        return RGBImage(width: frame.width, height: frame.height, rgb: assembleRGB(frame: frame, components: components, buffers: buffers))
    }

    /// DQT, DHT, DRI, APPn and COM; a marker that cannot appear here is an error, one for an
    /// unsupported JPEG process a typed `unsupportedFeature`.
    mutating func processTableOrMiscellaneous(_ marker: UInt8, before: String) throws(ImageError) {
        let markerOffset = position - 2
        switch marker {
        case 0xDB: try readQuantizationTables()
        case 0xC4: try readHuffmanTables()
        case 0xDD:
            let end = try segmentEnd("DRI")
            guard end == position + 2 else { throw corrupt(markerOffset, "DRI of \(end - markerOffset - 2) bytes, not 4") }
            restartInterval = try read16("DRI")
        case 0xE0...0xEF, 0xFE:
            let end = try segmentEnd(marker == 0xFE ? "COM" : "APP\(marker - 0xE0)")
            let data = bytes[position..<end]
            if marker == 0xE0 && data.starts(with: Array("JFIF\0".utf8)) { sawJFIF = true }
            if marker == 0xEE && data.count >= 12 && data.starts(with: Array("Adobe\0".utf8)) {
                adobeTransform = Int(data[data.startIndex + 11])
            }
            position = end
        case 0xC3, 0xC7, 0xCB, 0xCF:
            throw ImageError.unsupportedFeature(format: .jpeg, feature: "lossless JPEG (SOF\(marker - 0xC0))")
        case 0xC5, 0xC6, 0xCD, 0xCE:
            throw ImageError.unsupportedFeature(format: .jpeg, feature: "hierarchical JPEG (SOF\(marker - 0xC0))")
        case 0xC9, 0xCA, 0xCC:
            throw ImageError.unsupportedFeature(
                format: .jpeg, feature: "arithmetic coding (\(marker == 0xCC ? "DAC" : "SOF\(marker - 0xC0)"))")
        case 0xD8: throw corrupt(markerOffset, "a second SOI marker before \(before)")
        case 0xD9: throw corrupt(markerOffset, "EOI before \(before)")
        case 0xDA: throw corrupt(markerOffset, "a scan (SOS) before the frame header (SOF)")
        case 0xD0...0xD7: throw corrupt(markerOffset, "restart marker RST\(marker - 0xD0) outside a scan")
        default: throw corrupt(markerOffset, "unknown marker 0xFF\(String(marker, radix: 16, uppercase: true))")
        }
    }

    mutating func readQuantizationTables() throws(ImageError) {
        let end = try segmentEnd("DQT")
        while position < end {
            let start = position
            let spec = try readByte("DQT")
            let precision = spec >> 4
            let table = spec & 15
            guard precision <= 1 else { throw corrupt(start, "DQT precision \(precision) (0 or 1 exist)") }
            guard table <= 3 else { throw corrupt(start, "DQT table \(table) (0 to 3 exist)") }
            guard position + 64 * (precision + 1) <= end else { throw corrupt(start, "DQT table \(table) runs past its segment") }
            for k in 0..<64 {
                quantization[table][jpegNaturalOrder[k]] = precision == 1 ? try read16("DQT") : try readByte("DQT")
            }
        }
    }

    mutating func readHuffmanTables() throws(ImageError) {
        let end = try segmentEnd("DHT")
        while position < end {
            let start = position
            let spec = try readByte("DHT")
            let tableClass = spec >> 4
            let table = spec & 15
            guard tableClass <= 1 && table <= 3 else {
                throw corrupt(start, "DHT class \(tableClass) table \(table) (classes 0-1, tables 0-3)")
            }
            guard position + 16 <= end else { throw corrupt(start, "DHT code counts run past the segment") }
            let counts = bytes[position..<(position + 16)].map { Int($0) }
            position += 16
            let total = counts.reduce(0, +)
            guard total <= 256 else { throw corrupt(start, "DHT declares \(total) codes (at most 256)") }
            guard position + total <= end else { throw corrupt(start, "DHT symbols run past the segment") }
            let symbols = Array(bytes[position..<(position + total)])
            position += total
            guard let huffman = JPEGHuffmanTable(counts: counts, symbols: symbols) else {
                throw corrupt(start, "DHT code counts \(counts) are more codes than their lengths allow")
            }
            if tableClass == 0 { dcTables[table] = huffman } else { acTables[table] = huffman }
        }
    }

    // MARK: Frame and scans

    struct Frame {
        let width: Int
        let height: Int
        let progressive: Bool
        let components: [JPEGComponent]
        let maxHorizontal: Int
        let maxVertical: Int
        let mcusWide: Int
        let mcusHigh: Int
    }

    mutating func readFrameHeader(progressive: Bool) throws(ImageError) -> Frame {
        let start = position - 2
        let end = try segmentEnd("SOF")
        let precision = try readByte("SOF")
        guard precision == 8 else {
            throw ImageError.unsupportedFeature(format: .jpeg, feature: "\(precision)-bit samples (only 8-bit JPEG is supported)")
        }
        let height = try read16("SOF")
        let width = try read16("SOF")
        let count = try readByte("SOF")
        guard width > 0 else { throw ImageError.zeroDimension(format: .jpeg, width: width, height: height) }
        guard height > 0 else {
            throw ImageError.unsupportedFeature(format: .jpeg, feature: "a height of 0 in SOF (to be given by a DNL marker)")
        }
        guard width * height <= limits.maxPixels else {
            throw ImageError.tooManyPixels(format: .jpeg, width: width, height: height, limit: limits.maxPixels)
        }
        guard count == 1 || count == 3 || count == 4 else { throw corrupt(start, "\(count) components (1, 3 or 4 are supported)") }
        guard end == position + 3 * count else { throw corrupt(start, "SOF of \(end - start - 2) bytes for \(count) components") }
        var specs: [(id: UInt8, h: Int, v: Int, table: Int)] = []
        for _ in 0..<count {
            let id = UInt8(try readByte("SOF"))
            let sampling = try readByte("SOF")
            let table = try readByte("SOF")
            guard (1...4).contains(sampling >> 4), (1...4).contains(sampling & 15) else {
                throw corrupt(position - 2, "component \(id) sampling factors \(sampling >> 4)x\(sampling & 15) (1 to 4 allowed)")
            }
            guard table <= 3 else { throw corrupt(position - 1, "component \(id) uses quantization table \(table) (0 to 3 exist)") }
            specs.append((id, sampling >> 4, sampling & 15, table))
        }
        let maxH = specs.map(\.h).max()!
        let maxV = specs.map(\.v).max()!
        for spec in specs where maxH % spec.h != 0 || maxV % spec.v != 0 {
            throw ImageError.unsupportedFeature(
                format: .jpeg, feature: "component \(spec.id) sampled \(spec.h)x\(spec.v) against \(maxH)x\(maxV): not a whole-number ratio"
            )
        }
        let mcusWide = (width + 8 * maxH - 1) / (8 * maxH)
        let mcusHigh = (height + 8 * maxV - 1) / (8 * maxV)
        let components = specs.map { spec in
            JPEGComponent(
                id: spec.id, horizontalSampling: spec.h, verticalSampling: spec.v, quantizationTable: spec.table,
                sampleWidth: (width * spec.h + maxH - 1) / maxH, sampleHeight: (height * spec.v + maxV - 1) / maxV,
                blocksWide: mcusWide * spec.h, blocksHigh: mcusHigh * spec.v)
        }
        // Whole blocks and MCUs can far outgrow a very thin image: bound the working memory too.
        let blocks = components.reduce(0) { $0 + $1.blocksWide * $1.blocksHigh }
        let workingBytes = blocks * 64 * (progressive ? 3 : 1)
        guard workingBytes <= max(16 * limits.maxPixels, 1 << 20) else {
            throw ImageError.tooManyPixels(format: .jpeg, width: width, height: height, limit: limits.maxPixels)
        }
        return Frame(
            width: width, height: height, progressive: progressive, components: components, maxHorizontal: maxH, maxVertical: maxV,
            mcusWide: mcusWide, mcusHigh: mcusHigh)
    }

    struct Scan {
        let componentIndices: [Int]
        let spectralStart: Int
        let spectralEnd: Int
        let successiveHigh: Int
        let successiveLow: Int
        let dataOffset: Int
    }

    mutating func readScanHeader(_ components: inout [JPEGComponent], progressive: Bool) throws(ImageError) -> Scan {
        let start = position - 2
        let end = try segmentEnd("SOS")
        let count = try readByte("SOS")
        guard (1...components.count).contains(count) else {
            throw corrupt(start, "scan of \(count) components in a frame of \(components.count)")
        }
        guard end == position + 2 * count + 3 else { throw corrupt(start, "SOS of \(end - start - 2) bytes for \(count) components") }
        var indices: [Int] = []
        for _ in 0..<count {
            let id = UInt8(try readByte("SOS"))
            let tables = try readByte("SOS")
            guard let index = components.firstIndex(where: { $0.id == id }) else {
                throw corrupt(position - 2, "the scan names component \(id), which the frame does not have")
            }
            guard tables >> 4 <= 3 && tables & 15 <= 3 else {
                throw corrupt(position - 1, "Huffman table selectors \(tables >> 4), \(tables & 15)")
            }
            components[index].dcTable = tables >> 4
            components[index].acTable = tables & 15
            indices.append(index)
        }
        var spectralStart = try readByte("SOS")
        var spectralEnd = try readByte("SOS")
        let approximation = try readByte("SOS")
        let (high, low) = (approximation >> 4, approximation & 15)
        if progressive {
            guard spectralStart <= spectralEnd, spectralEnd <= 63, high <= 13, low <= 13 else {
                throw corrupt(start, "progressive scan band \(spectralStart)...\(spectralEnd), approximation \(high), \(low)")
            }
            guard spectralStart > 0 || spectralEnd == 0 else { throw corrupt(start, "a progressive scan mixes DC and AC coefficients") }
            guard spectralStart == 0 || count == 1 else { throw corrupt(start, "a progressive AC scan of \(count) components") }
        } else {
            guard spectralStart == 0 && high == 0 && low == 0 else { throw corrupt(start, "a sequential scan with progressive parameters") }
            (spectralStart, spectralEnd) = (0, 63)
        }
        // The tables this scan decodes with must exist.
        for index in indices {
            let component = components[index]
            let needsDC = !progressive || (spectralStart == 0 && high == 0)
            let needsAC = !progressive || spectralStart > 0
            if needsDC && dcTables[component.dcTable] == nil {
                throw corrupt(start, "component \(component.id) uses DC Huffman table \(component.dcTable), which no DHT defined")
            }
            if needsAC && acTables[component.acTable] == nil {
                throw corrupt(start, "component \(component.id) uses AC Huffman table \(component.acTable), which no DHT defined")
            }
        }
        return Scan(
            componentIndices: indices, spectralStart: spectralStart, spectralEnd: spectralEnd, successiveHigh: high, successiveLow: low,
            dataOffset: position)
    }
}
