import Foundation

/// Builds WAV files byte by byte, independently of the code under test (`WAVAudio.encodeFloat32WAV`),
/// for the WAV tests of the Audio module and of the SDK.
public struct WAVBuilder {
    public var chunks: [(id: String, body: [UInt8])] = []

    public init() {}

    public static func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8((v >> 8) & 0xFF)] }
    public static func le32(_ v: Int) -> [UInt8] { (0..<4).map { UInt8((v >> (8 * $0)) & 0xFF) } }

    /// A 16-byte (or 18 with `cbSize`) `fmt ` body.
    public static func fmt(
        tag: Int, channels: Int = 1, rate: Int = 16000, bits: Int, blockAlign: Int? = nil,
        cbSize: Int? = nil
    ) -> [UInt8] {
        let align = blockAlign ?? channels * ((bits + 7) / 8)
        var b: [UInt8] = le16(tag)
        b += le16(channels)
        b += le32(rate)
        b += le32(rate * align)
        b += le16(align)
        b += le16(bits)
        if let cbSize { b += le16(cbSize) }
        return b
    }

    /// A 40-byte WAVE_FORMAT_EXTENSIBLE `fmt ` body with the PCM (1) or float (3) GUID.
    public static func extensibleFmt(
        subformat: Int, channels: Int = 1, rate: Int = 16000, bits: Int, validBits: Int,
        guidTail: [UInt8] = [0, 0, 0, 0, 0x10, 0, 0x80, 0, 0, 0xAA, 0, 0x38, 0x9B, 0x71]
    )
        -> [UInt8]
    {
        var b = fmt(tag: 0xFFFE, channels: channels, rate: rate, bits: bits, cbSize: 22)
        b += le16(validBits)
        b += le32(channels == 1 ? 4 : 3)
        b += le16(subformat)
        b += guidTail
        return b
    }

    public mutating func add(_ id: String, _ body: [UInt8]) { chunks.append((id, body)) }

    public var bytes: [UInt8] {
        var content = Array("WAVE".utf8)
        for chunk in chunks {
            content += Array(chunk.id.utf8) + Self.le32(chunk.body.count) + chunk.body
            if chunk.body.count % 2 == 1 { content.append(0) }
        }
        return Array("RIFF".utf8) + Self.le32(content.count) + content
    }

    public var data: Data { Data(bytes) }

    public static func simple(fmt: [UInt8], samples: [UInt8]) -> WAVBuilder {
        var b = WAVBuilder()
        b.add("fmt ", fmt)
        b.add("data", samples)
        return b
    }
}
