import Foundation
import LeapJSON
import LeapSDKCore
import TestSupport
import Testing

/// `SpeechSchedule` against the reference's own replies: every step of every speech-out
/// golden (liquid-audio 1.3.0, greedy) is of the kind the schedule says comes next, the
/// replies end where the schedule ends them, and the mode rules' corners (an early end of
/// audio, a token the rules do not name) are met on the way.
@Suite struct SpeechScheduleTests {
    static let cases = [
        "hello.interleaved", "chirp-1s.interleaved", "weather.interleaved", "tts-thanks.sequential",
        "tts-rain.sequential", "tts-gap.sequential"
    ]

    /// One step of a golden: a text token or the 8 codes of a frame.
    enum Step {
        case text(Int)
        case frame([Int])
    }

    static func golden(_ name: String) throws -> (mode: SpeechMode, tokens: SpeechTokens, limit: Int, steps: [Step]) {
        let json = try JSONValue.parse(
            String(contentsOfFile: TestFixtures.path("golden/audio-out/lfm2-audio-out-tiny.\(name).json"), encoding: .utf8))
        let ids = try #require(json["special_ids"])
        let tokens = SpeechTokens(
            endOfTurn: try #require(ids["im_end"]?.intValue), textEnd: try #require(ids["text_end"]?.intValue),
            audioStart: try #require(ids["audio_start"]?.intValue))
        let modeName = try #require(json["mode"]?.stringValue)
        let mode = try #require(SpeechMode(rawValue: modeName))
        let steps = (json["outputs"]?.arrayValue ?? []).map { output -> Step in
            if let id = output["text"]?.intValue { return .text(id) }
            return .frame(output["audio"]?.arrayValue?.compactMap(\.intValue) ?? [])
        }
        let limit = try #require(json["max_new_tokens"]?.intValue)
        return (mode, tokens, limit, steps)
    }

    @Test(arguments: cases) func everyStepIsTheKindTheScheduleExpects(_ name: String) throws {
        let golden = try Self.golden(name)
        var schedule = SpeechSchedule(mode: golden.mode, tokens: golden.tokens)
        var ended = false
        for (index, step) in golden.steps.enumerated() {
            #expect(!ended, "\(name): step \(index) after the end")
            let kind = schedule.beginStep()
            switch step {
            case .text(let id):
                #expect(kind == .text, "\(name): step \(index) is text, the schedule expected audio")
                let outcome = schedule.recordText(id)
                #expect(outcome != .ended, "\(name): an emitted token ended the reply")
                ended = outcome == .emittedAndEnded
            case .frame(let codes):
                #expect(kind == .audio, "\(name): step \(index) is audio, the schedule expected text")
                #expect(codes.count == 8)
                schedule.recordFrame(endOfAudio: codes[0] == 2048)
            }
        }
        if golden.steps.count < golden.limit, !ended {
            // The reply stopped before its limit without an emitted end: an interleaved
            // `<|im_end|>` came next, in a text step.
            #expect(golden.mode == .interleaved)
            #expect(schedule.beginStep() == .text)
            #expect(schedule.recordText(golden.tokens.endOfTurn) == .ended)
        }
    }

    /// The corners, by hand: an interleaved text run of six, an audio run of twelve, an
    /// early end of audio that gives text only the steps left, `<|text_end|>`; sequential
    /// `<|audio_start|>`, end of audio and `<|im_end|>`; the unnamed tokens are text.
    @Test func theModeRulesCorners() {
        let tokens = SpeechTokens(endOfTurn: 2, textEnd: 3, audioStart: 4)
        var s = SpeechSchedule(mode: .interleaved, tokens: tokens)
        for _ in 0..<6 {
            #expect(s.beginStep() == .text)
            #expect(s.recordText(4) == .emitted)  // <|audio_start|> is plain text here
        }
        for _ in 0..<3 {
            #expect(s.beginStep() == .audio)
            s.recordFrame(endOfAudio: false)
        }
        #expect(s.beginStep() == .audio)
        s.recordFrame(endOfAudio: true)  // 8 frames were left: text gets 8 steps, not 6
        for _ in 0..<8 {
            #expect(s.beginStep() == .text)
            _ = s.recordText(10)
        }
        #expect(s.beginStep() == .audio)
        s.recordFrame(endOfAudio: false)
        var t = SpeechSchedule(mode: .interleaved, tokens: tokens)
        #expect(t.beginStep() == .text)
        #expect(t.recordText(3) == .emitted)
        #expect(t.textDone)
        for _ in 0..<20 {  // text done: audio past its run, until its end
            #expect(t.beginStep() == .audio)
            t.recordFrame(endOfAudio: false)
        }
        #expect(t.beginStep() == .audio)
        t.recordFrame(endOfAudio: true)
        #expect(t.beginStep() == .text)
        #expect(t.recordText(2) == .ended)

        var q = SpeechSchedule(mode: .sequential, tokens: tokens)
        #expect(q.beginStep() == .text)
        #expect(q.recordText(3) == .emitted)  // <|text_end|> is plain text here
        #expect(q.beginStep() == .text)
        #expect(q.recordText(4) == .emitted)
        for _ in 0..<30 {
            #expect(q.beginStep() == .audio)
            q.recordFrame(endOfAudio: false)
        }
        #expect(q.beginStep() == .audio)
        q.recordFrame(endOfAudio: true)
        #expect(q.beginStep() == .text)
        #expect(q.recordText(2) == .emittedAndEnded)
    }
}

/// The system prompts the model was trained on choose the mode; anything else is text.
@Suite struct SpeechModeTests {
    @Test func trainedSystemPromptsChooseTheMode() {
        #expect(SpeechMode(systemPrompt: "Respond with interleaved text and audio.") == .interleaved)
        #expect(SpeechMode(systemPrompt: "  Respond with interleaved text and audio.\n") == .interleaved)
        for prompt in [
            "Perform TTS. Use the UK female voice.", "Perform TTS. Use the UK male voice.",
            "Perform TTS. Use the US female voice.", "Perform TTS. Use the US male voice."
        ] {
            #expect(SpeechMode(systemPrompt: prompt) == .sequential, "\(prompt)")
        }
        for prompt in ["Perform ASR.", "You are a helpful assistant.", "Perform TTS. Use the French voice.", ""] {
            #expect(SpeechMode(systemPrompt: prompt) == nil, "\(prompt)")
        }
        #expect(SpeechVoice.ukFemale.systemPrompt == "Perform TTS. Use the UK female voice.")
    }
}
