import LeapJSON
import OpenAIWire
import Testing

/// `POST /v1/audio/speech` bodies: what is decoded, and the 400 (message and `param`) of
/// every refused field.
@Suite struct AudioSpeechRequestTests {
    func speech(_ text: String) throws -> AudioSpeechRequest {
        try AudioSpeechRequest(json: try JSONValue.parse(text))
    }

    /// The error a speech request body gets.
    func speechError(_ text: String) -> WireError? {
        do {
            _ = try AudioSpeechRequest(json: try JSONValue.parse(text))
            return nil
        } catch let e as WireError {
            return e
        } catch {
            return WireError("unexpected \(error)")
        }
    }

    @Test func decodesAFullRequestAndDefaults() throws {
        let r = try speech(
            #"{"model": "m", "input": "Thank you for calling.", "voice": "uk_female", "response_format": "pcm", "speed": 1.0, "#
                + #""seed": -3, "temperature": 0.7, "max_steps": 40, "instructions": "", "stream_format": "audio"}"#)
        #expect(r.model == "m" && r.input == "Thank you for calling.")
        #expect(r.voice == .ukFemale && r.voiceName == "uk_female")
        #expect(r.responseFormat == .pcm)
        #expect(r.seed == -3 && r.temperature == 0.7 && r.maxSteps == 40)

        let plain = try speech(#"{"input": "Hi", "voice": "alloy", "speed": null, "response_format": null}"#)
        #expect(plain.model == nil && plain.responseFormat == .wav && plain.voice == .usFemale)
        #expect(plain.temperature == nil && plain.seed == nil && plain.maxSteps == nil)
        let upper = try speech(#"{"input": "Hi", "voice": "US male", "speed": 1, "response_format": "WAV"}"#)
        #expect(upper.voice == .usMale && upper.voiceName == "US male" && upper.responseFormat == .wav)
    }

    @Test func voicesAcceptTheModelsSpellingsAndOpenAINames() {
        for (name, voice) in [
            ("us_female", WireSpeechVoice.usFemale), ("US female", .usFemale), ("us-female", .usFemale), ("USFemale", .usFemale),
            (" uk male ", .ukMale), ("UK_Male", .ukMale), ("uk female", .ukFemale), ("us male", .usMale)
        ] {
            #expect(WireSpeechVoice(name: name) == voice, "\(name)")
        }
        // The documented table (docs/serving.md).
        let table: [String: WireSpeechVoice] = [
            "alloy": .usFemale, "ash": .usMale, "ballad": .ukMale, "coral": .usFemale, "echo": .usMale, "fable": .ukMale,
            "onyx": .usMale, "nova": .usFemale, "sage": .ukFemale, "shimmer": .ukFemale, "verse": .usMale, "marin": .usFemale,
            "cedar": .usMale
        ]
        #expect(WireSpeechVoice.openAIVoices.count == table.count)
        for (name, voice) in table {
            #expect(WireSpeechVoice(name: name) == voice, "\(name)")
            #expect(WireSpeechVoice(name: name.uppercased()) == voice, "\(name)")
        }
        for name in ["", "uk", "female", "us_female_2", "alloy2", "usfemalevoice", "al loy"] {
            #expect(WireSpeechVoice(name: name) == nil, "\(name)")
        }
    }

    @Test func everyRefusalNamesItsField() {
        let good = #""input": "Hello", "voice": "uk_female""#
        let cases: [(String, String, String?)] = [
            ("[]", "the request body must be a JSON object", nil),
            (#"{"voice": "uk_female"}"#, "'input' is required", "input"),
            (#"{"input": null, "voice": "uk_female"}"#, "'input' is required", "input"),
            (#"{"input": 5, "voice": "uk_female"}"#, "'input' must be a string, not an integer", "input"),
            (#"{"input": "", "voice": "uk_female"}"#, "'input' is empty", "input"),
            (#"{"input": " \n\t ", "voice": "uk_female"}"#, "'input' is empty", "input"),
            (
                #"{"input": "\#(String(repeating: "a", count: 4097))", "voice": "uk_female"}"#,
                "'input' has 4097 characters, more than the 4096", "input"
            ),
            (#"{"input": "Hello"}"#, "'voice' is required: one of us_female, us_male, uk_female, uk_male", "voice"),
            (#"{"input": "Hello", "voice": {"id": "v1"}}"#, "'voice' must be a string, not an object", "voice"),
            (
                #"{"input": "Hello", "voice": "robot"}"#,
                "'voice' 'robot' is not a voice of this model; the voices are us_female, us_male, uk_female, uk_male (or OpenAI's alloy, ash,",
                "voice"
            ),
            (
                #"{\#(good), "response_format": "mp3"}"#, "'response_format' 'mp3' is not supported: this server writes 'wav' or 'pcm'",
                "response_format"
            ),
            (#"{\#(good), "response_format": "opus"}"#, "'response_format' 'opus' is not supported", "response_format"),
            (#"{\#(good), "response_format": "aac"}"#, "'response_format' 'aac' is not supported", "response_format"),
            (#"{\#(good), "response_format": "flac"}"#, "'response_format' 'flac' is not supported", "response_format"),
            (
                #"{\#(good), "response_format": "ogg"}"#,
                "'response_format' 'ogg' is not a known format: this server writes 'wav' or 'pcm'", "response_format"
            ),
            (#"{\#(good), "response_format": 1}"#, "'response_format' must be a string", "response_format"),
            (#"{\#(good), "speed": 1.5}"#, "'speed' must be 1: this server speaks at the model's own pace, not 1.5", "speed"),
            (#"{\#(good), "speed": 0.25}"#, "'speed' must be 1", "speed"),
            (#"{\#(good), "speed": "fast"}"#, "'speed' must be a number, not a string", "speed"),
            (#"{\#(good), "temperature": 3}"#, "'temperature' must be between 0 and 2, not 3", "temperature"),
            (#"{\#(good), "temperature": "hot"}"#, "'temperature' must be a number", "temperature"),
            (#"{\#(good), "seed": 1.5}"#, "'seed' must be an integer", "seed"),
            (#"{\#(good), "max_steps": 0}"#, "'max_steps' must be at least 1, not 0", "max_steps"),
            (#"{\#(good), "max_steps": "many"}"#, "'max_steps' must be an integer", "max_steps"),
            (#"{\#(good), "model": 7}"#, "'model' must be a string", "model"),
            (#"{\#(good), "instructions": "Speak slowly."}"#, "'instructions' is not supported", "instructions"),
            (#"{\#(good), "stream_format": "sse"}"#, "'stream_format' 'sse' is not supported", "stream_format")
        ]
        for (body, message, param) in cases {
            let error = speechError(body)
            #expect(error?.message.hasPrefix(message) == true, "\(body.prefix(80)): \(error?.message ?? "accepted")")
            #expect(error?.param == param, "\(body.prefix(80))")
        }
        // 4096 characters (not bytes: "é" is two) are accepted.
        #expect(speechError(#"{"input": "\#(String(repeating: "é", count: 4096))", "voice": "uk_female"}"#) == nil)
    }
}
