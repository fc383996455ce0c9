import Foundation
import TestSupport
import Testing

@testable import LeapSDK
@testable import LeapSDKCore

// The WAV parser and the resamplers are tested in AudioTests; these are the SDK's audio
// content helpers on top of them (ChatMessageContent).

private func sine(frequency: Double, rate: Int, count: Int, amplitude: Double = 0.8) -> [Float] {
    (0..<count).map { Float(amplitude * sin(2 * Double.pi * frequency * Double($0) / Double(rate))) }
}

/// Sign changes between consecutive samples.
private func zeroCrossings(_ x: ArraySlice<Float>) -> Int {
    zip(x, x.dropFirst()).filter { ($0 < 0) != ($1 < 0) }.count
}

@Suite struct WAVContentTests {
    @Test func floatSamplesRoundTripAt16kHzMono() throws {
        let samples: [Float] = [0, 0.5, -0.5, 1, -1, 0.123_456_79, -0.000_001, 0.75]
        let content = ChatMessageContent.fromFloatSamples(samples, sampleRate: 16000, channelCount: 1)
        guard case .audio(let data) = content else {
            Issue.record("fromFloatSamples did not make .audio content")
            return
        }
        let audio = try WAVAudio(data: data)
        #expect(audio.sampleRate == 16000)
        #expect(audio.sampleFormat == .float32)
        #expect(audio.samples == samples)
        #expect(try content.monoSamples16kHz() == samples)
        // fromWAVData accepts the encoded bytes and keeps them unchanged.
        #expect(try ChatMessageContent.fromWAVData(data) == content)
        // 58 bytes of headers (RIFF, fmt with cbSize, fact, data) plus 4 per sample.
        #expect(data.count == 58 + 4 * samples.count)
    }

    @Test func fromFloatSamplesKeepsInterleavedChannelsWhichAreRejectedAtUse() throws {
        let interleaved: [Float] = [0.5, -0.5, 0.25, 0.75]
        let content = ChatMessageContent.fromFloatSamples(interleaved, sampleRate: 16000, channelCount: 2)
        #expect(throws: WAVError.multiChannel(channelCount: 2)) { try content.monoSamples16kHz() }
        let mono = WAVAudio.downmixToMono(interleaved: interleaved, channelCount: 2)
        #expect(mono == [0, 0.5])
        #expect(try ChatMessageContent.fromFloatSamples(mono, sampleRate: 16000, channelCount: 1).monoSamples16kHz() == mono)
        #expect(WAVAudio.downmixToMono(interleaved: [0.25, 0.5, 0.75, 0.125], channelCount: 3) == [0.5, 0.125])
    }

    @Test func fromWAVDataRejectsWhatTheParserRejects() {
        let stereo = WAVBuilder.simple(fmt: WAVBuilder.fmt(tag: 1, channels: 2, bits: 16), samples: [0, 0, 0, 0])
        #expect(throws: WAVError.multiChannel(channelCount: 2)) { try ChatMessageContent.fromWAVData(stereo.data) }
        let id3 = Data(Array("ID3".utf8) + [0x03, 0, 0, 0, 0, 0x0F, 0x76, 0xFF, 0xFB, 0x90, 0x64])
        #expect(throws: WAVError.notWAV(detectedFormat: "MP3 (ID3 tag)")) { try ChatMessageContent.fromWAVData(id3) }
        #expect(throws: WAVError.notAudioContent) { try ChatMessageContent.text("hi").monoSamples16kHz() }
    }

    @Test func audioContentAt48kHzComesOutAt16kHz() throws {
        let x = sine(frequency: 500, rate: 48000, count: 4800)
        let content = ChatMessageContent.fromFloatSamples(x, sampleRate: 48000, channelCount: 1)
        let y = try content.monoSamples16kHz()
        #expect(y.count == 1600)
        #expect(abs(zeroCrossings(y[...]) - 100) <= 2)
    }

}
