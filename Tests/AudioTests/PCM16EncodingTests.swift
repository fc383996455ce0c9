import Audio
import Foundation
import Testing

/// 16-bit PCM output (the server's speech formats): the header a player reads, the
/// conversion that inverts the decoder's `v / 32768` within half a step, clipping, and the
/// raw little-endian samples.
@Suite struct PCM16EncodingTests {
    /// A little-endian field of `bytes`.
    func field(_ bytes: [UInt8], _ offset: Int, _ size: Int) -> Int {
        (0..<size).reduce(0) { $0 | Int(bytes[offset + $1]) << (8 * $1) }
    }

    @Test func theHeaderIsACanonicalPCMWAV() {
        let bytes = [UInt8](WAVAudio.encodePCM16WAV(samples: [0, 0.5, -0.5], sampleRate: 24_000, channelCount: 1))
        #expect(bytes.count == 44 + 6)
        #expect(String(decoding: bytes[0..<4], as: UTF8.self) == "RIFF" && field(bytes, 4, 4) == 36 + 6)
        #expect(String(decoding: bytes[8..<16], as: UTF8.self) == "WAVEfmt ")
        #expect(field(bytes, 16, 4) == 16)  // fmt size
        #expect(field(bytes, 20, 2) == 1)  // integer PCM
        #expect(field(bytes, 22, 2) == 1)  // mono
        #expect(field(bytes, 24, 4) == 24_000)
        #expect(field(bytes, 28, 4) == 48_000)  // byte rate
        #expect(field(bytes, 32, 2) == 2 && field(bytes, 34, 2) == 16)
        #expect(String(decoding: bytes[36..<40], as: UTF8.self) == "data" && field(bytes, 40, 4) == 6)
        #expect(Array(bytes[44...]) == [0x00, 0x00, 0x00, 0x40, 0x00, 0xC0])
        // No samples: a valid, empty file.
        let empty = WAVAudio.encodePCM16WAV(samples: [], sampleRate: 24_000, channelCount: 1)
        #expect(empty.count == 44)
        #expect((try? WAVAudio(data: empty))?.samples == [])
    }

    @Test func decodingGivesTheSamplesBackWithinHalfAStep() throws {
        var rng = SystemRandomNumberGenerator()
        let samples = (0..<5000).map { _ in Float.random(in: -1...(32767.0 / 32768), using: &rng) } + [-1, 0, 32767.0 / 32768]
        let decoded = try WAVAudio(data: WAVAudio.encodePCM16WAV(samples: samples, sampleRate: 24_000, channelCount: 1))
        #expect(decoded.sampleRate == 24_000 && decoded.sampleFormat == .int16)
        #expect(decoded.samples.count == samples.count)
        let worst = zip(decoded.samples, samples).map { abs($0 - $1) }.max() ?? 1
        #expect(worst <= 0.5 / 32768 + 1e-9)
        // Values on the grid come back exactly.
        let grid: [Float] = [-1, -0.5, 0, 1.0 / 32768, 0.25, 32767.0 / 32768]
        #expect(try WAVAudio(data: WAVAudio.encodePCM16WAV(samples: grid, sampleRate: 24_000, channelCount: 1)).samples == grid)
    }

    @Test func loudSamplesClipAndNaNIsSilence() {
        #expect(WAVAudio.int16Sample(1) == 32767)
        #expect(WAVAudio.int16Sample(7.5) == 32767 && WAVAudio.int16Sample(.infinity) == 32767)
        #expect(WAVAudio.int16Sample(-1) == -32768 && WAVAudio.int16Sample(-3) == -32768 && WAVAudio.int16Sample(-.infinity) == -32768)
        #expect(WAVAudio.int16Sample(.nan) == 0)
        #expect(WAVAudio.int16Sample(0.5 / 32768) == 1 && WAVAudio.int16Sample(-0.5 / 32768) == -1)  // halves away from zero
        #expect(WAVAudio.int16Sample(0.49 / 32768) == 0)
    }

    @Test func rawPCMIsTheWAVsDataChunk() {
        let samples: [Float] = [0.1, -0.2, 0.999, -1, 0]
        let raw = WAVAudio.encodePCM16(samples: samples)
        #expect(raw.count == 2 * samples.count)
        #expect(raw == WAVAudio.encodePCM16WAV(samples: samples, sampleRate: 24_000, channelCount: 1).dropFirst(44))
        let values = stride(from: 0, to: raw.count, by: 2).map { Int16(bitPattern: UInt16(raw[$0]) | UInt16(raw[$0 + 1]) << 8) }
        #expect(values == samples.map(WAVAudio.int16Sample))
    }
}
