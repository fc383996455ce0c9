import LeapJSON

/// One of the four voices of LFM2.5-Audio's text-to-speech, as the wire names it
/// (`us_female`, `us_male`, `uk_female`, `uk_male`).
public enum WireSpeechVoice: String, Sendable, Equatable, CaseIterable {
    case usFemale = "us_female"
    case usMale = "us_male"
    case ukFemale = "uk_female"
    case ukMale = "uk_male"

    /// OpenAI's voice names and the voice each is spoken in: by the gender and accent
    /// OpenAI's voices have (fable and ballad British, the rest American). Existing clients
    /// send these names; docs/serving.md lists the table.
    public static let openAIVoices: [(name: String, voice: WireSpeechVoice)] = [
        ("alloy", .usFemale), ("ash", .usMale), ("ballad", .ukMale), ("coral", .usFemale), ("echo", .usMale),
        ("fable", .ukMale), ("onyx", .usMale), ("nova", .usFemale), ("sage", .ukFemale), ("shimmer", .ukFemale),
        ("verse", .usMale), ("marin", .usFemale), ("cedar", .usMale)
    ]

    /// The voice a request names: a model voice in any case, its words separated by `_`,
    /// `-`, a space or nothing (`uk_female`, `UK female`, `uk-female`, `UKFemale`), or one
    /// of OpenAI's voice names in any case; nil for anything else.
    public init?(name: String) {
        let words = name.trimmingSpaces.lowercased()
        let joined = words.filter { $0 != "_" && $0 != "-" && $0 != " " }
        if let voice = Self.allCases.first(where: { $0.rawValue.filter { $0 != "_" } == joined }) {
            self = voice
        } else if let mapped = Self.openAIVoices.first(where: { $0.name == words }) {
            self = mapped.voice
        } else {
            return nil
        }
    }

    /// Every name `init(name:)` takes, as the 400 for another voice lists them.
    public static var acceptedNames: String {
        allCases.map(\.rawValue).joined(separator: ", ") + " (or OpenAI's " + openAIVoices.map(\.name).joined(separator: ", ") + ")"
    }
}

/// The audio file format of a speech response (`response_format`).
public enum WireSpeechFormat: String, Sendable, Equatable, CaseIterable {
    /// A WAV file: 16-bit PCM, mono, 24 kHz.
    case wav
    /// Raw samples: 16-bit signed little-endian, mono, 24 kHz (OpenAI's `pcm`).
    case pcm
}

/// `POST /v1/audio/speech`: OpenAI's text-to-speech request (`model`, `input`, `voice`,
/// `response_format`, `speed`), plus leap-ref's `seed`, `temperature` and `max_steps`.
public struct AudioSpeechRequest: WireRequest, Equatable {
    public var model: String?
    /// The text to speak: not empty, at most `maxInputCharacters` characters.
    public var input: String
    public var voice: WireSpeechVoice
    /// The voice as the request named it.
    public var voiceName: String
    /// `wav` (the default) or `pcm`.
    public var responseFormat: WireSpeechFormat
    /// The text's temperature (nil: greedy, as the reference decodes); audio codes follow
    /// the engine's rules (greedy with greedy text, else the TTS defaults).
    public var temperature: Double?
    public var seed: Int?
    /// leap-ref's `max_steps`: the most steps (text tokens and audio frames of 80 ms); nil:
    /// the server's default.
    public var maxSteps: Int?

    /// OpenAI's limit on `input`, in characters (extended grapheme clusters).
    public static let maxInputCharacters = 4096
    /// The formats OpenAI has and this server does not write.
    public static let unsupportedFormats = ["mp3", "opus", "aac", "flac"]

    /// Decodes and validates a request body.
    public init(json: JSONValue) throws(WireError) {
        let r = try FieldReader(json, path: "")
        model = try r.string("model")
        guard let input = try r.string("input") else { throw WireError("'input' is required: the text to speak", param: "input") }
        guard !input.allSatisfy(\.isWhitespace) else {
            throw WireError("'input' is empty: send the text to speak", param: "input")
        }
        guard input.count <= Self.maxInputCharacters else {
            throw WireError(
                "'input' has \(input.count) characters, more than the \(Self.maxInputCharacters) this server speaks in one request",
                param: "input")
        }
        self.input = input
        guard let name = try r.string("voice") else {
            throw WireError("'voice' is required: one of \(WireSpeechVoice.acceptedNames)", param: "voice")
        }
        guard let voice = WireSpeechVoice(name: name) else {
            throw WireError(
                "'voice' '\(name)' is not a voice of this model; the voices are \(WireSpeechVoice.acceptedNames)", param: "voice")
        }
        self.voice = voice
        voiceName = name
        let supported = WireSpeechFormat.allCases.map { "'\($0.rawValue)'" }.joined(separator: " or ")
        switch try r.string("response_format") {
        case nil: responseFormat = .wav
        case let format?:
            guard let f = WireSpeechFormat(rawValue: format.lowercased()) else {
                let why = Self.unsupportedFormats.contains(format.lowercased()) ? "is not supported" : "is not a known format"
                throw WireError(
                    "'response_format' '\(format)' \(why): this server writes \(supported) (16-bit PCM, mono, 24 kHz)",
                    param: "response_format")
            }
            responseFormat = f
        }
        if let speed = try r.number("speed", in: -Double.greatestFiniteMagnitude...Double.greatestFiniteMagnitude), speed != 1 {
            throw WireError("'speed' must be 1: this server speaks at the model's own pace, not \(speed)", param: "speed")
        }
        if let instructions = try r.string("instructions"), !instructions.isEmpty {
            throw WireError("'instructions' is not supported: the model's voices take no style instructions", param: "instructions")
        }
        if let stream = try r.string("stream_format"), stream != "audio" {
            throw WireError(
                "'stream_format' '\(stream)' is not supported: this server answers with the whole file ('audio')", param: "stream_format")
        }
        temperature = try r.number("temperature", in: 0...2)
        seed = try r.integer("seed", in: Int.min...Int.max)
        maxSteps = try r.integer("max_steps", in: 1...Int.max)
    }
}
