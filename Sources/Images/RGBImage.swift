/// An 8-bit RGB image: `height` rows of `width` pixels, each pixel three bytes (red, green,
/// blue), rows top to bottom with no padding. This is the layout llama.cpp's `clip_image_u8`
/// holds and what `stbi_load_from_memory(..., 3)` returns.
public struct RGBImage: Sendable, Equatable {
    /// Pixels per row.
    public let width: Int
    /// Number of rows.
    public let height: Int
    /// `width * height * 3` bytes, row-major, channels interleaved (R, G, B, R, G, B, ...).
    public let rgb: [UInt8]

    /// An image over existing RGB bytes. `rgb.count` must be `width * height * 3`.
    public init(width: Int, height: Int, rgb: [UInt8]) {
        precondition(width > 0 && height > 0, "RGBImage needs a positive size, got \(width)x\(height)")
        precondition(rgb.count == width * height * 3, "RGBImage \(width)x\(height) needs \(width * height * 3) bytes, got \(rgb.count)")
        self.width = width
        self.height = height
        self.rgb = rgb
    }

    /// The red, green and blue bytes of the pixel at column `x`, row `y`.
    public func pixel(x: Int, y: Int) -> (red: UInt8, green: UInt8, blue: UInt8) {
        let i = (y * width + x) * 3
        return (rgb[i], rgb[i + 1], rgb[i + 2])
    }
}

/// The two container formats `ImageDecoder` reads.
public enum ImageFormat: String, Sendable, Equatable, CustomStringConvertible {
    case png = "PNG"
    case jpeg = "JPEG"

    /// "PNG" or "JPEG".
    public var description: String { rawValue }
}

/// Bounds on what the decoder accepts, checked before any work that they bound: the input
/// size first, then the pixel count declared in the header, before any pixel memory is
/// allocated or any compressed data is expanded.
public struct ImageLimits: Sendable, Equatable {
    /// The largest `width * height` accepted. The default, 50 megapixels, admits every
    /// current phone and most camera photos (8160x6120 is 49.9 MP); decoding one needs about
    /// 150 MB for the RGB result plus the decoder's working planes (up to 6 bytes a pixel
    /// more for a progressive JPEG).
    public var maxPixels: Int
    /// The largest input accepted, in bytes. Default 256 MiB.
    public var maxInputBytes: Int

    /// 50 megapixels and 256 MiB of input.
    public static let `default` = ImageLimits(maxPixels: 50_000_000, maxInputBytes: 256 << 20)

    /// Limits of `maxPixels` pixels and `maxInputBytes` bytes (the defaults unless given).
    public init(maxPixels: Int = 50_000_000, maxInputBytes: Int = 256 << 20) {
        self.maxPixels = maxPixels
        self.maxInputBytes = maxInputBytes
    }
}

/// Why an image could not be decoded. Every failure of `ImageDecoder` is one of these; no
/// input crashes the decoder or makes it allocate more than its limits allow.
public enum ImageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The input has no bytes.
    case empty
    /// The input is larger than `ImageLimits.maxInputBytes`.
    case inputTooLarge(bytes: Int, limit: Int)
    /// The bytes are neither PNG nor JPEG. `detected` names the format when its signature is
    /// recognised (GIF, BMP, WebP, TIFF, ...), so the message can say what was sent.
    case unsupportedFormat(detected: String?)
    /// The input ends before something its structure announces: `reading` says what, `offset`
    /// is where the input ended or where the unfinished part began.
    case truncated(format: ImageFormat, offset: Int, reading: String)
    /// A field or the compressed data is invalid: `reason` says what, `offset` is the byte of
    /// the input where it was found (for compressed data, the position reached in the stream).
    case corrupt(format: ImageFormat, offset: Int, reason: String)
    /// The header declares a width or a height of zero.
    case zeroDimension(format: ImageFormat, width: Int, height: Int)
    /// The header declares more pixels than `ImageLimits.maxPixels`.
    case tooManyPixels(format: ImageFormat, width: Int, height: Int, limit: Int)
    /// The file is valid but uses something this decoder does not implement (12-bit or
    /// arithmetic-coded JPEG, lossless JPEG, ...).
    case unsupportedFeature(format: ImageFormat, feature: String)

    public var description: String {
        switch self {
        case .empty:
            return "the image is empty (0 bytes)"
        case .inputTooLarge(let bytes, let limit):
            return "the image is \(bytes) bytes, over the limit of \(limit) bytes"
        case .unsupportedFormat(let detected?):
            return "\(detected) images are not supported: send a PNG or a JPEG"
        case .unsupportedFormat(nil):
            return "not a PNG or a JPEG (unrecognised signature)"
        case .truncated(let format, let offset, let reading):
            return "truncated \(format): the data ends at byte \(offset) while reading \(reading)"
        case .corrupt(let format, let offset, let reason):
            return "corrupt \(format) at byte \(offset): \(reason)"
        case .zeroDimension(let format, let width, let height):
            return "\(format) declares an empty image (\(width)x\(height))"
        case .tooManyPixels(let format, let width, let height, let limit):
            return "\(format) is \(width)x\(height) = \(width * height) pixels, over the limit of \(limit) pixels"
        case .unsupportedFeature(let format, let feature):
            return "unsupported \(format) feature: \(feature)"
        }
    }
}
