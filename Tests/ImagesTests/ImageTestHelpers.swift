import Foundation
import LeapJSON
import TestSupport

@testable import Images

/// The bytes of a committed fixture under Tests/Fixtures.
func fixtureBytes(_ relative: String) throws -> [UInt8] {
    [UInt8](try Data(contentsOf: URL(fileURLWithPath: TestFixtures.path(relative))))
}

/// A committed JSON fixture, parsed.
func fixtureJSON(_ relative: String) throws -> JSONValue {
    try JSONValue.parse(bytes: fixtureBytes(relative))
}

/// The images of `Tests/Fixtures/images/variants` with the RGB stb_image decodes from them.
func stbExpectations() throws -> [(name: String, width: Int, height: Int, sha256: String)] {
    guard let images = try fixtureJSON("images/variants/stb_image_rgb.json")["images"]?.objectValue else {
        throw FixtureFormatError(file: "stb_image_rgb.json")
    }
    return images.pairs.map { name, value in
        (name, value["width"]?.intValue ?? -1, value["height"]?.intValue ?? -1, value["rgb_sha256"]?.stringValue ?? "")
    }
}

struct FixtureFormatError: Error, CustomStringConvertible {
    let file: String
    var description: String { "\(file) does not have the expected fields" }
}

/// Decodes, returning the error instead of throwing it.
func decodeResult(_ bytes: [UInt8], limits: ImageLimits = .default) -> Result<RGBImage, ImageError> {
    do { return .success(try ImageDecoder.decode(bytes, limits: limits)) } catch { return .failure(error) }
}

/// The error decoding `bytes` throws, or nil when it decodes.
func decodeError(_ bytes: [UInt8], limits: ImageLimits = .default) -> ImageError? {
    if case .failure(let error) = decodeResult(bytes, limits: limits) { return error }
    return nil
}

// MARK: Building PNGs

func bigEndian32(_ value: Int) -> [UInt8] {
    [
        UInt8(truncatingIfNeeded: value >> 24), UInt8(truncatingIfNeeded: value >> 16), UInt8(truncatingIfNeeded: value >> 8),
        UInt8(truncatingIfNeeded: value)
    ]
}

/// A PNG chunk with a correct CRC.
func pngChunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
    let body = Array(type.utf8) + data
    return bigEndian32(data.count) + body + bigEndian32(Int(CRC32.checksum(body[...])))
}

func ihdr(width: Int, height: Int, bitDepth: UInt8 = 8, colorType: UInt8 = 0, interlace: UInt8 = 0) -> [UInt8] {
    pngChunk("IHDR", bigEndian32(width) + bigEndian32(height) + [bitDepth, colorType, 0, 0, interlace])
}

/// A PNG of the given chunks (after the signature).
func png(_ chunks: [UInt8]...) -> [UInt8] { PNGDecoder.signature + chunks.flatMap { $0 } }

/// A zlib stream of one stored block holding `data`.
func storedZlib(_ data: [UInt8]) -> [UInt8] {
    precondition(data.count <= 65535)
    let length = data.count
    return [0x78, 0x01, 0x01, UInt8(length & 0xFF), UInt8(length >> 8), UInt8(~length & 0xFF), UInt8((~length >> 8) & 0xFF)]
        + data + bigEndian32(Int(Inflater.adler32(data[...])))
}

/// The chunks of a PNG: (offset of the length field, type, data range).
func pngChunks(_ bytes: [UInt8]) -> [(offset: Int, type: String, data: Range<Int>)] {
    var chunks: [(Int, String, Range<Int>)] = []
    var position = 8
    while position + 12 <= bytes.count {
        let length = Int(bytes[position]) << 24 | Int(bytes[position + 1]) << 16 | Int(bytes[position + 2]) << 8 | Int(bytes[position + 3])
        let type = String(decoding: bytes[(position + 4)..<(position + 8)], as: UTF8.self)
        chunks.append((position, type, (position + 8)..<(position + 8 + length)))
        position += 12 + length
    }
    return chunks
}

/// `bytes` with the CRC of every chunk recomputed: damage inside chunk data then reaches the
/// decoder's inner layers instead of stopping at the checksum.
func withFixedCRCs(_ bytes: [UInt8]) -> [UInt8] {
    var out = bytes
    for chunk in pngChunks(bytes) where chunk.data.upperBound + 4 <= bytes.count {
        let crc = bigEndian32(Int(CRC32.checksum(out[(chunk.offset + 4)..<chunk.data.upperBound])))
        out.replaceSubrange(chunk.data.upperBound..<(chunk.data.upperBound + 4), with: crc)
    }
    return out
}

/// Writes DEFLATE bits, least significant first; Huffman codes go most significant bit first.
struct DeflateBitWriter {
    var bytes: [UInt8] = []
    private var accumulator: UInt64 = 0
    private var count = 0

    mutating func write(_ value: Int, bits: Int) {
        accumulator |= UInt64(value) << UInt64(count)
        count += bits
        while count >= 8 {
            bytes.append(UInt8(truncatingIfNeeded: accumulator))
            accumulator >>= 8
            count -= 8
        }
    }

    /// A Huffman code of `bits` bits, sent from its most significant bit.
    mutating func writeCode(_ code: Int, bits: Int) {
        var reversed = 0
        for i in 0..<bits where code & (1 << i) != 0 { reversed |= 1 << (bits - 1 - i) }
        write(reversed, bits: bits)
    }

    mutating func finish() -> [UInt8] {
        if count > 0 { write(0, bits: 8 - count) }
        return bytes
    }
}

/// A zlib stream of one fixed-Huffman block that expands to about `outputBytes` zeros: a
/// literal 0, then matches of 258 bytes at distance 1 (13 bits for every 258 bytes out). The
/// Adler-32 is a dummy: a bounded decoder must stop long before it.
func zeroBombZlib(outputBytes: Int) -> [UInt8] {
    var w = DeflateBitWriter()
    w.write(1, bits: 1)  // final block
    w.write(1, bits: 2)  // fixed Huffman
    w.writeCode(0x30, bits: 8)  // literal 0
    for _ in 0..<(outputBytes / 258) {
        w.writeCode(0b1100_0101, bits: 8)  // length symbol 285: 258 bytes
        w.writeCode(0, bits: 5)  // distance symbol 0: 1 byte back
    }
    w.writeCode(0, bits: 7)  // end of block (symbol 256)
    return [0x78, 0x01] + w.finish() + [0, 0, 0, 0]
}
