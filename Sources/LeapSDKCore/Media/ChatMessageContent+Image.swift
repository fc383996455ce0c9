import Foundation
@_exported import Images

#if canImport(UIKit)
import UIKit
#endif
#if canImport(AppKit)
import AppKit
#endif

extension ChatMessageContent {
    /// Image content from JPEG bytes (PNG is accepted too), after checking that they are an
    /// image the engine can decode: a JPEG or PNG header with a size within `limits`. The
    /// bytes are kept unchanged: `.image(data)`. The pixels are decoded when the message is
    /// used, as LFM2-VL's preprocessing needs them.
    ///
    /// - Throws: the `ImageError` of the header (`unsupportedFormat` for GIF or WebP bytes,
    ///   `truncated`, `tooManyPixels`, ...); its `description` is the message to show.
    public static func fromJPEGData(_ data: Data, limits: ImageLimits = .default) throws(ImageError) -> ChatMessageContent {
        _ = try ImageDecoder.header(of: [UInt8](data), limits: limits)
        return .image(data)
    }

    #if canImport(UIKit)
    /// Image content from a `UIImage`, JPEG-encoded at `compressionQuality` (default 0.9);
    /// nil when the image has no bitmap to encode.
    public static func fromUIImage(_ image: UIImage, compressionQuality: CGFloat = 0.9) -> ChatMessageContent? {
        image.jpegData(compressionQuality: compressionQuality).map { .image($0) }
    }
    #endif

    #if canImport(AppKit)
    /// Image content from an `NSImage`, JPEG-encoded at `compressionQuality` (default 0.9);
    /// nil when the image has no bitmap to encode.
    public static func fromNSImage(_ image: NSImage, compressionQuality: Double = 0.9) -> ChatMessageContent? {
        guard let tiff = image.tiffRepresentation, let bitmap = NSBitmapImageRep(data: tiff) else { return nil }
        return bitmap.representation(using: .jpeg, properties: [.compressionFactor: compressionQuality]).map { .image($0) }
    }
    #endif
}
