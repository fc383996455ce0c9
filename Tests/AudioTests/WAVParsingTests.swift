import Foundation
import Sampling
import TestSupport
import Testing

@testable import Audio

private func parseError(_ data: Data) -> WAVError? {
    do {
        _ = try WAVAudio(data: data)
        return nil
    } catch {
        return error
    }
}

private func sine(frequency: Double, rate: Int, count: Int, amplitude: Double = 0.8) -> [Float] {
    (0..<count).map { Float(amplitude * sin(2 * Double.pi * frequency * Double($0) / Double(rate))) }
}

/// Sign changes between consecutive samples.
private func zeroCrossings(_ x: ArraySlice<Float>) -> Int {
    zip(x, x.dropFirst()).filter { ($0 < 0) != ($1 < 0) }.count
}

/// Magnitude of the DFT of `x` at `frequency` Hz, normalized so a full-length sine of
/// amplitude A gives about A.
private func dftMagnitude(_ x: [Float], frequency: Double, rate: Int) -> Double {
    var re = 0.0, im = 0.0
    for (n, v) in x.enumerated() {
        let phase = 2 * Double.pi * frequency * Double(n) / Double(rate)
        re += Double(v) * cos(phase)
        im -= Double(v) * sin(phase)
    }
    return 2 * (re * re + im * im).squareRoot() / Double(x.count)
}

@Suite struct WAVParsingTests {
    @Test func int16IsDividedBy32768() throws {
        let values = [0, 1, -1, 32767, -32768, 16384, -8192]
        let wav = WAVBuilder.simple(
            fmt: WAVBuilder.fmt(tag: 1, rate: 22050, bits: 16),
            samples: values.flatMap { WAVBuilder.le16($0) })
        let audio = try WAVAudio(data: wav.data)
        #expect(audio.sampleFormat == .int16)
        #expect(audio.sampleRate == 22050)
        let expected: [Float] = [0, 1.0 / 32768, -1.0 / 32768, 32767.0 / 32768, -1, 0.5, -0.25]
        #expect(audio.samples == expected)
    }

    @Test func int24IsSignExtendedAndDividedBy2To23() throws {
        // 0x7FFFFF, 0x800000 (most negative), 1, 0xFFFFFF (-1), 0x400000, 0xC00000 (-0x400000).
        let raw: [UInt8] = [
            0xFF, 0xFF, 0x7F, 0x00, 0x00, 0x80, 0x01, 0x00, 0x00,
            0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x40, 0x00, 0x00, 0xC0
        ]
        let wav = WAVBuilder.simple(fmt: WAVBuilder.fmt(tag: 1, bits: 24), samples: raw)
        let audio = try WAVAudio(data: wav.data)
        #expect(audio.sampleFormat == .int24)
        let scale: Float = 8_388_608
        let expected: [Float] = [8_388_607 / scale, -1, 1 / scale, -1 / scale, 0.5, -0.5]
        #expect(audio.samples == expected)
    }

    @Test func int32IsDividedBy2To31() throws {
        let values: [Int32] = [Int32.min, 1 << 30, -(1 << 29), 0, 1 << 7, Int32.max]
        let raw = values.flatMap { WAVBuilder.le32(Int(UInt32(bitPattern: $0))) }
        let wav = WAVBuilder.simple(fmt: WAVBuilder.fmt(tag: 1, bits: 32), samples: raw)
        let audio = try WAVAudio(data: wav.data)
        #expect(audio.sampleFormat == .int32)
        // Int32.max / 2^31 rounds to 1 in Float.
        let expected: [Float] = [-1, 0.5, -0.25, 0, 1.0 / 16_777_216, 1]
        #expect(audio.samples == expected)
    }

    @Test func float32IsKeptWithNaNZeroedAndOverrangeClamped() throws {
        let values: [Float] = [0.5, -0.25, 1, -1, 0.1, .nan, 2, -3, .infinity]
        let raw = values.flatMap { WAVBuilder.le32(Int($0.bitPattern)) }
        let wav = WAVBuilder.simple(fmt: WAVBuilder.fmt(tag: 3, rate: 48000, bits: 32, cbSize: 0), samples: raw)
        let audio = try WAVAudio(data: wav.data)
        #expect(audio.sampleFormat == .float32)
        #expect(audio.sampleRate == 48000)
        #expect(audio.samples == [0.5, -0.25, 1, -1, 0.1, 0, 1, -1, 1])
    }

    @Test func extensibleFormatUsesItsSubformat() throws {
        // 24-bit PCM in WAVE_FORMAT_EXTENSIBLE.
        let pcm = WAVBuilder.simple(
            fmt: WAVBuilder.extensibleFmt(subformat: 1, bits: 24, validBits: 24),
            samples: [0x00, 0x00, 0x40, 0xFF, 0xFF, 0xFF])
        let pcmAudio = try WAVAudio(data: pcm.data)
        #expect(pcmAudio.sampleFormat == .int24)
        #expect(pcmAudio.samples == [0.5, -1 / 8_388_608])

        // IEEE float in WAVE_FORMAT_EXTENSIBLE.
        let floats: [Float] = [-0.75, 0.375]
        let float = WAVBuilder.simple(
            fmt: WAVBuilder.extensibleFmt(subformat: 3, rate: 44100, bits: 32, validBits: 32),
            samples: floats.flatMap { WAVBuilder.le32(Int($0.bitPattern)) })
        let floatAudio = try WAVAudio(data: float.data)
        #expect(floatAudio.sampleFormat == .float32)
        #expect(floatAudio.sampleRate == 44100)
        #expect(floatAudio.samples == floats)

        // 24 valid bits left-justified in a 32-bit container decode by the container size.
        let container = WAVBuilder.simple(
            fmt: WAVBuilder.extensibleFmt(subformat: 1, bits: 32, validBits: 24),
            samples: [0x00, 0x00, 0x00, 0xC0])
        #expect(try WAVAudio(data: container.data).samples == [-0.5])
    }

    @Test func extensibleWithUnknownGUIDIsRejected() {
        var tail: [UInt8] = [0, 0, 0, 0, 0x10, 0, 0x80, 0, 0, 0xAA, 0, 0x38, 0x9B, 0x71]
        tail[13] = 0x72
        let wav = WAVBuilder.simple(
            fmt: WAVBuilder.extensibleFmt(subformat: 1, bits: 16, validBits: 16, guidTail: tail),
            samples: [0, 0])
        guard case .unsupportedEncoding(let what)? = parseError(wav.data) else {
            Issue.record("an unknown sub-format GUID was accepted")
            return
        }
        #expect(what.contains("0100000000001000800000aa00389b72"))
        // A known GUID with a sub-format other than PCM or float (mu-law, 7) is rejected too.
        let mulaw = WAVBuilder.simple(fmt: WAVBuilder.extensibleFmt(subformat: 7, bits: 16, validBits: 16), samples: [0, 0])
        #expect(parseError(mulaw.data).map { if case .unsupportedEncoding = $0 { true } else { false } } == true)
    }

    @Test func unknownChunksAndOddPaddingAreSkipped() throws {
        var wav = WAVBuilder()
        wav.add("LIST", Array("INFOISFT\u{5}\0\0\0Lavf\0".utf8))  // 17 bytes: odd, so padded
        wav.add("fmt ", WAVBuilder.fmt(tag: 1, bits: 16))
        wav.add("junk", [1, 2, 3])  // odd again
        wav.add("data", WAVBuilder.le16(16384) + WAVBuilder.le16(-16384))
        wav.add("cue ", [9])
        #expect(wav.chunks[0].body.count % 2 == 1)
        let audio = try WAVAudio(data: wav.data)
        #expect(audio.samples == [0.5, -0.5])

        // The data chunk may come before the fmt chunk.
        var reversed = WAVBuilder()
        reversed.add("data", WAVBuilder.le16(-32768))
        reversed.add("fmt ", WAVBuilder.fmt(tag: 1, bits: 16))
        #expect(try WAVAudio(data: reversed.data).samples == [-1])
    }

    @Test func aLastOddChunkMayOmitItsPadByteAndTrailingBytesAreIgnored() throws {
        // 24-bit mono, 1 sample: a 3-byte data chunk, last in the file, without its pad byte.
        var bytes = WAVBuilder.simple(fmt: WAVBuilder.fmt(tag: 1, bits: 24), samples: [0, 0, 0x40]).bytes
        bytes.removeLast()
        let riffSize = bytes.count - 8
        bytes.replaceSubrange(4..<8, with: WAVBuilder.le32(riffSize))
        #expect(try WAVAudio(data: Data(bytes)).samples == [0.5])
        // Bytes after the RIFF chunk are not part of it.
        #expect(try WAVAudio(data: Data(bytes + [0xDE, 0xAD, 0xBE])).samples == [0.5])
    }

    @Test func theHeaderDeclaresWhatDecodingGives() throws {
        let cases: [(fmt: [UInt8], bytes: Int)] = [
            (WAVBuilder.fmt(tag: 1, rate: 1000, bits: 16), 10),
            (WAVBuilder.fmt(tag: 1, rate: 22050, bits: 24), 3 * 7 + 2),  // a partial sample at the end
            (WAVBuilder.fmt(tag: 1, rate: 48000, bits: 32), 4 * 5),
            (WAVBuilder.extensibleFmt(subformat: 3, rate: 44100, bits: 32, validBits: 32), 4 * 9 + 1)
        ]
        for (fmt, count) in cases {
            let wav = WAVBuilder.simple(fmt: fmt, samples: (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37) })
            let header = try WAVAudio.header(of: wav.data)
            let audio = try WAVAudio(data: wav.data)
            #expect(header.sampleRate == audio.sampleRate)
            #expect(header.sampleFormat == audio.sampleFormat)
            #expect(header.sampleCount == audio.samples.count)
            #expect(header.duration == audio.duration)
        }
        // Its errors are those of decoding.
        let stereo = WAVBuilder.simple(fmt: WAVBuilder.fmt(tag: 1, channels: 2, bits: 16), samples: [0, 0, 0, 0])
        #expect(throws: WAVError.multiChannel(channelCount: 2)) { try WAVAudio.header(of: stereo.data) }
        #expect(throws: WAVError.notWAV(detectedFormat: nil)) { try WAVAudio.header(of: Data("text".utf8)) }
    }

    /// A clip over the limit is refused from its header: a 1 kHz clip would grow 16-fold
    /// when resampled before the spectrogram's own length check could see it (a 120 MB file
    /// took 4 GB and 10 s to be refused that way).
    @Test func aClipOverTheLimitIsRefusedBeforeItIsDecoded() throws {
        func clip(_ samples: Int) -> Data {
            WAVBuilder.simple(fmt: WAVBuilder.fmt(tag: 1, rate: 1000, bits: 16), samples: [UInt8](repeating: 3, count: 2 * samples)).data
        }
        #expect(throws: WAVError.tooLong(seconds: 3.001, maximumSeconds: 3)) {
            try WAVAudio.decodeMono16kHz(clip(3001), maximumSeconds: 3)
        }
        let samples = try WAVAudio.decodeMono16kHz(clip(3000), maximumSeconds: 3)
        #expect(samples.count == (try LinearResampler(from: 1000, to: 16000)).outputCount(forInputCount: 3000))
        #expect(samples == (try WAVAudio.decodeMono16kHz(clip(3000))))
        #expect(
            WAVError.tooLong(seconds: 3.001, maximumSeconds: 3).description
                == "the audio is too long: 3.0 s, more than the 3 s accepted: send a shorter clip "
                + "(or raise the limit: MediaLimits.maxAudioSeconds, --max-audio-seconds)")
    }

    @Test func stereoIsRejectedWithAClearMessage() {
        let stereo = WAVBuilder.simple(fmt: WAVBuilder.fmt(tag: 1, channels: 2, bits: 16), samples: [0, 0, 0, 0])
        #expect(parseError(stereo.data) == .multiChannel(channelCount: 2))
        #expect(
            WAVError.multiChannel(channelCount: 2).description
                .hasPrefix("stereo/multi-channel audio is not supported: convert it to mono"))
        let surround = WAVBuilder.simple(
            fmt: WAVBuilder.extensibleFmt(subformat: 3, channels: 6, bits: 32, validBits: 32),
            samples: [UInt8](repeating: 0, count: 24))
        #expect(parseError(surround.data) == .multiChannel(channelCount: 6))
    }

    @Test func compressedAndOtherFormatsAreNotWAV() {
        let id3 = Data(Array("ID3".utf8) + [0x03, 0, 0, 0, 0, 0x0F, 0x76, 0xFF, 0xFB, 0x90, 0x64])
        #expect(parseError(id3) == .notWAV(detectedFormat: "MP3 (ID3 tag)"))
        let mpegFrame = Data([0xFF, 0xFB, 0x90, 0x64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
        #expect(parseError(mpegFrame) == .notWAV(detectedFormat: "MP3 or AAC (MPEG audio frame)"))
        let m4a = Data([0, 0, 0, 0x20] + Array("ftypM4A ".utf8) + [0, 0, 2, 0])
        #expect(parseError(m4a) == .notWAV(detectedFormat: "MP4/M4A"))
        let avi = Data(Array("RIFF".utf8) + WAVBuilder.le32(4) + Array("AVI ".utf8))
        #expect(parseError(avi) == .notWAV(detectedFormat: "a RIFF file of type 'AVI ', not WAVE"))
        #expect(parseError(Data("hello, this is text".utf8)) == .notWAV(detectedFormat: nil))
        #expect(parseError(Data()) == .notWAV(detectedFormat: nil))
        #expect(WAVError.notWAV(detectedFormat: "MP4/M4A").description.contains("convert it to a 16 kHz mono WAV"))
    }

    @Test func badFormatFieldsAreTypedErrors() throws {
        func error(fmt: [UInt8], samples: [UInt8] = [0, 0, 0, 0]) -> WAVError? {
            parseError(WAVBuilder.simple(fmt: fmt, samples: samples).data)
        }
        #expect(error(fmt: WAVBuilder.fmt(tag: 1, rate: 0, bits: 16)) == .unsupportedSampleRate(0))
        #expect(error(fmt: WAVBuilder.fmt(tag: 1, rate: 4_000_000, bits: 16)) == .unsupportedSampleRate(4_000_000))
        #expect(error(fmt: WAVBuilder.fmt(tag: 1, channels: 0, bits: 16, blockAlign: 2)) == .noChannels)
        #expect(error(fmt: WAVBuilder.fmt(tag: 1, bits: 8)) == .unsupportedBitDepth(bitsPerSample: 8, isFloat: false))
        #expect(error(fmt: WAVBuilder.fmt(tag: 1, bits: 0, blockAlign: 2)) == .unsupportedBitDepth(bitsPerSample: 0, isFloat: false))
        // 12 valid bits left-justified in 2 bytes decode as 16-bit samples.
        #expect(
            try WAVAudio(
                data: WAVBuilder.simple(
                    fmt: WAVBuilder.fmt(tag: 1, bits: 12, blockAlign: 2),
                    samples: WAVBuilder.le16(-16384)
                ).data
            ).samples == [-0.5])
        #expect(error(fmt: WAVBuilder.fmt(tag: 1, bits: 40)) == .unsupportedBitDepth(bitsPerSample: 40, isFloat: false))
        #expect(
            error(fmt: WAVBuilder.fmt(tag: 3, bits: 64), samples: [UInt8](repeating: 0, count: 8))
                == .unsupportedBitDepth(bitsPerSample: 64, isFloat: true))
        #expect(error(fmt: WAVBuilder.fmt(tag: 3, bits: 16)) == .unsupportedBitDepth(bitsPerSample: 16, isFloat: true))
        #expect(error(fmt: WAVBuilder.fmt(tag: 7, bits: 8)) == .unsupportedEncoding("mu-law (format tag 0x7)"))
        #expect(error(fmt: WAVBuilder.fmt(tag: 0x55, bits: 0)) == .unsupportedEncoding("MPEG Layer 3 (MP3) (format tag 0x55)"))
        #expect(
            error(fmt: WAVBuilder.fmt(tag: 1, bits: 16, blockAlign: 4))
                == .malformedFormatChunk(
                    "block alignment 4 does not match 16-bit mono samples (2 bytes per frame)"))
        #expect(
            error(fmt: Array(WAVBuilder.fmt(tag: 1, bits: 16).prefix(14)))
                == .malformedFormatChunk(
                    "it has 14 bytes, fewer than the 16 of a PCM format"))

        var noData = WAVBuilder()
        noData.add("fmt ", WAVBuilder.fmt(tag: 1, bits: 16))
        #expect(parseError(noData.data) == .missingDataChunk)
        var noFormat = WAVBuilder()
        noFormat.add("data", [0, 0])
        #expect(parseError(noFormat.data) == .missingFormatChunk)
    }

    @Test func sizesBeyondTheDataAreRejected() {
        let valid = WAVBuilder.simple(fmt: WAVBuilder.fmt(tag: 1, bits: 16), samples: [1, 2, 3, 4]).bytes
        // The data chunk header starts after RIFF(12) + fmt(8 + 16).
        var hugeData = valid
        hugeData.replaceSubrange(40..<44, with: [0xFF, 0xFF, 0xFF, 0xFF])
        #expect(
            parseError(Data(hugeData))
                == .chunkSizeExceedsData(
                    chunkID: "data", declaredSize: 0xFFFF_FFFF,
                    availableBytes: 4))
        var hugeRIFF = valid
        hugeRIFF.replaceSubrange(4..<8, with: [0x00, 0x00, 0x00, 0x80])
        #expect(
            parseError(Data(hugeRIFF))
                == .chunkSizeExceedsData(
                    chunkID: "RIFF", declaredSize: 0x8000_0000,
                    availableBytes: valid.count - 8))
        var tinyRIFF = valid
        tinyRIFF.replaceSubrange(4..<8, with: WAVBuilder.le32(2))
        #expect(parseError(Data(tinyRIFF)) == .truncated(structure: "RIFF header (its size 2 is below 4)"))
    }

    @Test func everyTruncationOfAValidFileThrows() throws {
        var wav = WAVBuilder()
        wav.add("LIST", [UInt8](repeating: 0x41, count: 11))
        wav.add("fmt ", WAVBuilder.fmt(tag: 3, bits: 32, cbSize: 0))
        wav.add("fact", WAVBuilder.le32(3))
        wav.add("data", [Float(0.5), -0.5, 0.25].flatMap { WAVBuilder.le32(Int($0.bitPattern)) })
        let bytes = wav.bytes
        #expect(try WAVAudio(data: Data(bytes)).samples == [0.5, -0.5, 0.25])
        for length in 0..<bytes.count {
            #expect(parseError(Data(bytes.prefix(length))) != nil, "a \(length)-byte prefix was accepted")
        }
        #expect(
            parseError(Data(bytes.prefix(20)))
                == .chunkSizeExceedsData(
                    chunkID: "RIFF", declaredSize: bytes.count - 8, availableBytes: 12))
        #expect(parseError(Data(bytes.prefix(7))) == .truncated(structure: "RIFF header"))
    }

    @Test func randomByteFlipsThrowOrDecodeSaneSamples() {
        var wav = WAVBuilder()
        wav.add("LIST", [UInt8](repeating: 0x20, count: 9))
        wav.add("fmt ", WAVBuilder.extensibleFmt(subformat: 1, rate: 44100, bits: 24, validBits: 24))
        var sampleBytes: [UInt8] = []
        for i in 0..<30 {
            sampleBytes.append(UInt8(i))
            sampleBytes.append(UInt8((i * 7) & 0xFF))
            sampleBytes.append(UInt8((i * 13) & 0xFF))
        }
        wav.add("data", sampleBytes)
        let original = wav.bytes
        var rng = SplitMix64(seed: 0x5EED_0003)
        var accepted = 0, rejected = 0
        for _ in 0..<3000 {
            var mutated = original
            for _ in 0...rng.below(4) {
                let position = rng.below(mutated.count)
                if rng.below(2) == 0 {
                    mutated[position] ^= UInt8(1 << rng.below(8))
                } else {
                    mutated[position] = UInt8(truncatingIfNeeded: rng.next())
                }
            }
            if rng.below(4) == 0 { mutated.removeLast(rng.below(mutated.count)) }
            do {
                let audio = try WAVAudio(data: Data(mutated))
                accepted += 1
                #expect(WAVAudio.supportedSampleRates.contains(audio.sampleRate))
                #expect(audio.samples.allSatisfy { $0.isFinite && $0 >= -1 && $0 <= 1 })
            } catch {
                rejected += 1
                #expect(!error.description.isEmpty)
            }
        }
        // Flips inside the sample bytes keep the file valid; flips in the headers mostly do not.
        #expect(accepted > 0)
        #expect(rejected > 0)
    }

}

@Suite struct WAVSincResamplingTests {
    @Test func sixteenKilohertzIsTheIdentity() throws {
        let x = sine(frequency: 300, rate: 16000, count: 1000)
        #expect(try WAVAudio.resample(x, from: 16000, to: 16000, method: .bandLimitedSinc) == x)
        #expect(try WAVAudio(samples: x, sampleRate: 16000).resampled(to: 16000, method: .bandLimitedSinc).samples == x)
    }

    @Test func downsampling48kTo16kKeepsTheFrequency() throws {
        let x = sine(frequency: 1000, rate: 48000, count: 48000)
        let y = try WAVAudio.resample(x, from: 48000, to: 16000, method: .bandLimitedSinc)
        #expect(y.count == 16000)
        // One second of 1 kHz: 2000 sign changes.
        #expect(abs(zeroCrossings(y[...]) - 2000) <= 2)
        #expect(abs(dftMagnitude(y, frequency: 1000, rate: 16000) - 0.8) < 0.01)
        #expect(dftMagnitude(y, frequency: 3000, rate: 16000) < 0.001)
        // Away from the edges the output is the sine sampled at 16 kHz.
        let expected = sine(frequency: 1000, rate: 16000, count: 16000)
        let interior = 200..<15800
        let maxError = interior.map { abs(y[$0] - expected[$0]) }.max() ?? 1
        #expect(maxError < 2e-3)
    }

    @Test func upsampling8kTo16kKeepsTheFrequency() throws {
        let x = sine(frequency: 440, rate: 8000, count: 8000)
        let y = try WAVAudio.resample(x, from: 8000, to: 16000, method: .bandLimitedSinc)
        #expect(y.count == 16000)
        #expect(abs(zeroCrossings(y[...]) - 880) <= 2)
        let expected = sine(frequency: 440, rate: 16000, count: 16000)
        let maxError = (200..<15800).map { abs(y[$0] - expected[$0]) }.max() ?? 1
        #expect(maxError < 2e-3)
    }

    @Test func downsamplingFiltersContentAboveTheNewNyquist() throws {
        // 12 kHz cannot be represented at 16 kHz; a plain interpolator would alias it to 4 kHz.
        let x = sine(frequency: 12000, rate: 48000, count: 48000)
        let y = try WAVAudio.resample(x, from: 48000, to: 16000, method: .bandLimitedSinc)
        let rms = (y[200..<15800].reduce(0) { $0 + Double($1 * $1) } / 15600).squareRoot()
        #expect(rms < 0.002)
        #expect(dftMagnitude(y, frequency: 4000, rate: 16000) < 0.002)
    }

    @Test func outputLengthFollowsTheRateRatio() throws {
        #expect(
            try WAVAudio.resample([Float](repeating: 0.1, count: 44100), from: 44100, to: 16000, method: .bandLimitedSinc).count == 16000)
        #expect(try WAVAudio.resample([Float](repeating: 0.1, count: 2205), from: 22050, to: 16000, method: .bandLimitedSinc).count == 1600)
        #expect(try WAVAudio.resample([Float](repeating: 0.1, count: 3), from: 48000, to: 16000, method: .bandLimitedSinc).count == 1)
        #expect(try WAVAudio.resample([], from: 8000, to: 16000, method: .bandLimitedSinc).isEmpty)
        // A constant stays constant away from the edges.
        let dc = try WAVAudio.resample([Float](repeating: 0.5, count: 4410), from: 44100, to: 16000, method: .bandLimitedSinc)
        #expect(dc[100..<1500].allSatisfy { abs($0 - 0.5) < 1e-3 })
    }

    @Test func unsupportedRatesThrow() {
        #expect(throws: WAVError.unsupportedSampleRate(0)) { try WAVAudio.resample([0], from: 0, to: 16000, method: .bandLimitedSinc) }
        #expect(throws: WAVError.unsupportedSampleRate(-5)) { try WAVAudio.resample([0], from: 16000, to: -5, method: .bandLimitedSinc) }
        #expect(throws: WAVError.unsupportedSampleRate(999)) { try WAVAudio(samples: [0], sampleRate: 999) }
    }

}
