import LeapJSON
import OpenAIWire
import Testing

/// Chat completion bodies that ask for a spoken reply (`modalities`, `audio`): what is
/// decoded, and the 400 (message and `param`) of every refusal.
@Suite struct ChatAudioRequestTests {
    static let messages = #""messages": [{"role": "user", "content": "Hi"}]"#
    static let spoken = #"\#(messages), "modalities": ["text", "audio"]"#

    @Test func decodesTheVoiceAndFormat() throws {
        let wav = try chat(#"{\#(Self.spoken), "audio": {"voice": "alloy", "format": "wav"}}"#)
        #expect(wav.audioOutput == WireChatAudio(voice: .usFemale, voiceName: "alloy", format: .wav))
        let pcm = try chat(#"{\#(Self.spoken), "audio": {"voice": "UK male", "format": "PCM16"}}"#)
        #expect(pcm.audioOutput == WireChatAudio(voice: .ukMale, voiceName: "UK male", format: .pcm16))
    }

    @Test func textOnlyIsAsBefore() throws {
        #expect(try chat(#"{\#(Self.messages)}"#).audioOutput == nil)
        #expect(try chat(#"{\#(Self.messages), "modalities": ["text"]}"#).audioOutput == nil)
        // `audio` without audio in `modalities` is ignored, as it was before.
        #expect(try chat(#"{\#(Self.messages), "audio": {"voice": "alloy", "format": "mp3"}}"#).audioOutput == nil)
        // Text only: a schema and tools are fine.
        #expect(try chat(#"{\#(Self.messages), "modalities": ["text"], "response_format": {"type": "json_object"}}"#).audioOutput == nil)
    }

    @Test func everyRefusalNamesItsField() {
        let audio = #""audio": {"voice": "alloy", "format": "wav"}"#
        let tool = #""tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]"#
        let cases: [(String, String, String)] = [
            (#"{\#(Self.spoken)}"#, "'audio' is required when 'modalities' includes \"audio\"", "audio"),
            (
                #"{\#(Self.messages), "modalities": ["text", "video"]}"#, "'modalities[1]' must be \"text\" or \"audio\", not 'video'",
                "modalities"
            ),
            (#"{\#(Self.messages), "modalities": [1]}"#, "'modalities[0]' must be \"text\" or \"audio\", not an integer", "modalities"),
            (#"{\#(Self.messages), "modalities": "audio"}"#, "'modalities' must be an array", "modalities"),
            (#"{\#(Self.spoken), "audio": "alloy"}"#, "'audio' must be a JSON object", "audio"),
            (#"{\#(Self.spoken), "audio": {"format": "wav"}}"#, "'audio.voice' is required", "audio.voice"),
            (
                #"{\#(Self.spoken), "audio": {"voice": "robot", "format": "wav"}}"#, "'audio.voice' 'robot' is not a voice of this model",
                "audio.voice"
            ),
            (#"{\#(Self.spoken), "audio": {"voice": "alloy"}}"#, "'audio.format' is required: 'wav' or 'pcm16'", "audio.format"),
            (
                #"{\#(Self.spoken), "audio": {"voice": "alloy", "format": "mp3"}}"#,
                "'audio.format' 'mp3' is not supported: this server writes 'wav' or 'pcm16'", "audio.format"
            ),
            (#"{\#(Self.spoken), "audio": {"voice": "alloy", "format": "flac"}}"#, "'flac' is not supported", "audio.format"),
            (#"{\#(Self.spoken), "audio": {"voice": "alloy", "format": "opus"}}"#, "'opus' is not supported", "audio.format"),
            (#"{\#(Self.spoken), "audio": {"voice": "alloy", "format": "aac"}}"#, "'aac' is not supported", "audio.format"),
            (#"{\#(Self.spoken), "audio": {"voice": "alloy", "format": "ogg"}}"#, "'ogg' is not a known format", "audio.format"),
            (
                #"{\#(Self.spoken), \#(audio), "response_format": {"type": "json_object"}}"#, "a spoken reply is not constrained",
                "response_format"
            ),
            (
                #"{\#(Self.spoken), \#(audio), "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "object"}}}}"#,
                "cannot be combined with audio output", "response_format"
            ),
            (#"{\#(Self.spoken), \#(audio), \#(tool)}"#, "'tools' cannot be combined with audio output", "tools")
        ]
        for (body, message, param) in cases {
            let error = chatError(body)
            #expect(error?.message.contains(message) == true, "\(body): \(error?.message ?? "accepted")")
            #expect(error?.param == param, "\(body)")
        }
    }
}
