/// Decodes PNG and JPEG files into 8-bit RGB, byte for byte as llama.cpp's image loader
/// (stb_image 2.30, `stbi_load_from_memory` with 3 components) does for every valid file:
/// alpha is dropped (not composited), gray is replicated, 16-bit samples keep their high byte,
/// EXIF orientation is ignored. See docs/images.md for what differs on invalid files.
public enum ImageDecoder {
    /// The format of `bytes`, from its signature, or nil when it is neither PNG nor JPEG.
    public static func format(of bytes: [UInt8]) -> ImageFormat? {
        if bytes.count >= 8 && Array(bytes[0..<8]) == PNGDecoder.signature { return .png }
        if bytes.count >= 2 && bytes[0] == 0xFF && bytes[1] == 0xD8 { return .jpeg }
        return nil
    }

    /// Decodes a PNG or a JPEG (told apart by signature) into RGB.
    ///
    /// The input size is checked against `limits.maxInputBytes` first, then the header's
    /// pixel count against `limits.maxPixels`, before pixel memory is allocated or compressed
    /// data expanded.
    public static func decode(_ bytes: [UInt8], limits: ImageLimits = .default) throws(ImageError) -> RGBImage {
        guard !bytes.isEmpty else { throw .empty }
        guard bytes.count <= limits.maxInputBytes else { throw .inputTooLarge(bytes: bytes.count, limit: limits.maxInputBytes) }
        switch format(of: bytes) {
        case .png?: return try PNGDecoder.decode(bytes, limits: limits)
        case .jpeg?: return try JPEGDecoder.decode(bytes, limits: limits)
        case nil: throw .unsupportedFormat(detected: otherFormatName(bytes))
        }
    }

    /// The format and size an image declares, read from its header (PNG's IHDR, JPEG's frame
    /// header) without decoding pixels: for checking an image, or laying out its tokens, before
    /// paying for the decode. Fails as `decode` would on the header, limits included.
    public static func header(of bytes: [UInt8], limits: ImageLimits = .default) throws(ImageError) -> ImageHeader {
        guard !bytes.isEmpty else { throw .empty }
        guard bytes.count <= limits.maxInputBytes else { throw .inputTooLarge(bytes: bytes.count, limit: limits.maxInputBytes) }
        switch format(of: bytes) {
        case .png?:
            var chunks = ChunkReader(bytes: bytes)
            let header = try chunks.readHeader(limits: limits)
            return ImageHeader(format: .png, width: header.width, height: header.height)
        case .jpeg?:
            var parser = JPEGParser(bytes: bytes, limits: limits)
            let frame = try parser.readUpToFrame()
            return ImageHeader(format: .jpeg, width: frame.width, height: frame.height)
        case nil:
            throw .unsupportedFormat(detected: otherFormatName(bytes))
        }
    }

    /// Decodes any collection of bytes (`Data`, a slice, ...): see `decode(_:limits:)`.
    public static func decode<Bytes: Collection>(_ bytes: Bytes, limits: ImageLimits = .default) throws(ImageError) -> RGBImage
    where Bytes.Element == UInt8 {
        guard bytes.count <= limits.maxInputBytes else { throw .inputTooLarge(bytes: bytes.count, limit: limits.maxInputBytes) }
        return try decode(Array(bytes), limits: limits)
    }

    /// The name of a common image format that is not PNG or JPEG, from its signature.
    static func otherFormatName(_ bytes: [UInt8]) -> String? {
        func starts(_ prefix: [UInt8], at offset: Int = 0) -> Bool {
            bytes.count >= offset + prefix.count && Array(bytes[offset..<(offset + prefix.count)]) == prefix
        }
        let ascii = { (s: String) in Array(s.utf8) }
        if starts(ascii("GIF87a")) || starts(ascii("GIF89a")) { return "GIF" }
        if starts(ascii("BM")) && bytes.count >= 14 { return "BMP" }
        if starts(ascii("RIFF")) && starts(ascii("WEBP"), at: 8) { return "WebP" }
        if starts([0x49, 0x49, 0x2A, 0x00]) || starts([0x4D, 0x4D, 0x00, 0x2A]) { return "TIFF" }
        if starts(ascii("ftyp"), at: 4) {
            if starts(ascii("avif"), at: 8) || starts(ascii("avis"), at: 8) { return "AVIF" }
            return "HEIF"
        }
        if starts([0xFF, 0x0A]) || starts([0, 0, 0, 0x0C, 0x4A, 0x58, 0x4C, 0x20]) { return "JPEG XL" }
        if starts([0, 0, 0, 0x0C, 0x6A, 0x50, 0x20, 0x20]) { return "JPEG 2000" }
        if starts(ascii("8BPS")) { return "PSD" }
        if starts(ascii("#?RADIANCE")) { return "HDR" }
        if starts(ascii("<svg")) || starts(ascii("<?xml")) { return "SVG" }
        return nil
    }
}

/// What an image's header declares.
public struct ImageHeader: Sendable, Equatable {
    /// PNG or JPEG.
    public let format: ImageFormat
    /// Pixels per row, as declared.
    public let width: Int
    /// Rows, as declared.
    public let height: Int
}
