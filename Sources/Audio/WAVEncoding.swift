import Foundation

extension WAVAudio {
    /// Encodes samples as a 32-bit IEEE-float WAV file (format tag 3, with the `fact` chunk
    /// that non-PCM WAV files carry), exactly as given: interleaved samples of
    /// `channelCount` channels at `sampleRate` Hz.
    ///
    /// Nothing is validated or converted, so the encoding never fails: a rate or channel
    /// count that does not fit the header fields (negative, or above 2^32 - 1 / 65535) is
    /// clamped into them, and `WAVAudio(data:)` then reports it (multi-channel audio, a
    /// sample rate of 0, ...). More than about 1 billion samples do not fit a WAV file's
    /// 32-bit sizes, which are clamped as well.
    public static func encodeFloat32WAV(samples: [Float], sampleRate: Int, channelCount: Int) -> Data {
        let channels = UInt16(clamping: channelCount)
        let rate = UInt32(clamping: sampleRate)
        let blockAlign = UInt16(clamping: Int(channels) * 4)
        let byteRate = UInt32(clamping: Int(rate) * Int(blockAlign))
        let dataSize = UInt32(clamping: samples.count * 4)
        let frames = UInt32(clamping: channels == 0 ? 0 : samples.count / Int(channels))
        // "WAVE" + fmt (8 + 18) + fact (8 + 4) + data header (8) + samples.
        let riffSize = UInt32(clamping: 4 + 26 + 12 + 8 + Int(dataSize))

        var out = LittleEndianBytes(capacity: 58 + samples.count * 4)
        out.put("RIFF")
        out.put32(riffSize)
        out.put("WAVE")
        out.put("fmt ")
        out.put32(18)
        out.put16(3)
        out.put16(channels)
        out.put32(rate)
        out.put32(byteRate)
        out.put16(blockAlign)
        out.put16(32)
        out.put16(0)
        out.put("fact")
        out.put32(4)
        out.put32(frames)
        out.put("data")
        out.put32(dataSize)
        for sample in samples.prefix(Int(dataSize) / 4) { out.put32(sample.bitPattern) }
        return Data(out.bytes)
    }
}

extension WAVAudio {
    /// A sample as a 16-bit integer, the inverse of `WAVAudio(data:)`'s Int16 decoding
    /// (`v / 32768`): `x · 32768` rounded to the nearest integer (halves away from zero) and
    /// clamped to [-32768, 32767]; NaN is 0. A sample in [-1, 32767/32768] comes back from
    /// the decoder within half a step (2^-16, about 1.5e-5); louder ones are clipped.
    public static func int16Sample(_ x: Float) -> Int16 {
        guard !x.isNaN else { return 0 }
        let scaled = (x * 32768).rounded(.toNearestOrAwayFromZero)
        return Int16(max(-32768, min(32767, scaled)))
    }

    /// Samples as raw 16-bit signed little-endian PCM (`int16Sample` each), no header:
    /// OpenAI's `pcm` speech format.
    public static func encodePCM16(samples: [Float]) -> Data {
        var out = LittleEndianBytes(capacity: samples.count * 2)
        for x in samples { out.put16(UInt16(bitPattern: int16Sample(x))) }
        return Data(out.bytes)
    }

    /// Encodes samples as a 16-bit integer PCM WAV file (format tag 1, the 16-byte `fmt `
    /// chunk every player reads), each sample converted by `int16Sample`: interleaved samples
    /// of `channelCount` channels at `sampleRate` Hz. As `encodeFloat32WAV`, it never fails:
    /// header fields that cannot hold a value are clamped.
    public static func encodePCM16WAV(samples: [Float], sampleRate: Int, channelCount: Int) -> Data {
        let channels = UInt16(clamping: channelCount)
        let rate = UInt32(clamping: sampleRate)
        let blockAlign = UInt16(clamping: Int(channels) * 2)
        let byteRate = UInt32(clamping: Int(rate) * Int(blockAlign))
        // "WAVE" + fmt (8 + 16) + data header (8) + samples; the sizes are 32-bit.
        let kept = min(samples.count, (Int(UInt32.max) - 36) / 2)
        let dataSize = UInt32(kept * 2)

        var out = LittleEndianBytes(capacity: 44 + kept * 2)
        out.put("RIFF")
        out.put32(36 + dataSize)
        out.put("WAVE")
        out.put("fmt ")
        out.put32(16)
        out.put16(1)
        out.put16(channels)
        out.put32(rate)
        out.put32(byteRate)
        out.put16(blockAlign)
        out.put16(16)
        out.put("data")
        out.put32(dataSize)
        for sample in samples.prefix(kept) { out.put16(UInt16(bitPattern: int16Sample(sample))) }
        return Data(out.bytes)
    }
}

/// The bytes of a RIFF file as the WAV encoders write them: ASCII tags and little-endian
/// integers, appended in order.
private struct LittleEndianBytes {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int) { bytes.reserveCapacity(capacity) }

    mutating func put(_ tag: String) { bytes.append(contentsOf: tag.utf8) }

    mutating func put16(_ v: UInt16) {
        bytes.append(UInt8(v & 0xFF))
        bytes.append(UInt8(v >> 8))
    }

    mutating func put32(_ v: UInt32) {
        for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8((v >> UInt32(shift)) & 0xFF)) }
    }
}
