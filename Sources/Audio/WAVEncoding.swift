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

        var out = [UInt8]()
        out.reserveCapacity(58 + samples.count * 4)
        func put(_ s: String) { out.append(contentsOf: Array(s.utf8)) }
        func put16(_ v: UInt16) {
            out.append(UInt8(v & 0xFF))
            out.append(UInt8(v >> 8))
        }
        func put32(_ v: UInt32) { for shift in stride(from: 0, to: 32, by: 8) { out.append(UInt8((v >> UInt32(shift)) & 0xFF)) } }

        put("RIFF")
        put32(riffSize)
        put("WAVE")
        put("fmt ")
        put32(18)
        put16(3)
        put16(channels)
        put32(rate)
        put32(byteRate)
        put16(blockAlign)
        put16(32)
        put16(0)
        put("fact")
        put32(4)
        put32(frames)
        put("data")
        put32(dataSize)
        for sample in samples.prefix(Int(dataSize) / 4) { put32(sample.bitPattern) }
        return Data(out)
    }
}
