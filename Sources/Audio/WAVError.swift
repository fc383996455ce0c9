/// Why WAV bytes could not be read or used as model audio input.
///
/// Every case's `description` says what is wrong and what to do about it. The parser,
/// `WAVAudio(data:)`, throws only these errors: malformed, truncated or hostile input never
/// traps.
public enum WAVError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The bytes are not a RIFF/WAVE file. `detectedFormat` names what they look like
    /// (for example "MP3" or "MP4/M4A") when the signature is recognized.
    case notWAV(detectedFormat: String?)
    /// The data ends in the middle of `structure` (the RIFF header, a chunk header, ...).
    case truncated(structure: String)
    /// A chunk declares more bytes than the file holds after its header.
    case chunkSizeExceedsData(chunkID: String, declaredSize: Int, availableBytes: Int)
    /// No `fmt ` chunk was found, so the sample encoding is unknown.
    case missingFormatChunk
    /// No `data` chunk was found, so there are no samples.
    case missingDataChunk
    /// The `fmt ` chunk is inconsistent (too small, block alignment that does not match the
    /// bit depth, ...); the message says which field.
    case malformedFormatChunk(String)
    /// The encoding (format tag or extensible sub-format) is not linear PCM or IEEE float,
    /// for example ADPCM, mu-law or MPEG data inside a WAV container.
    case unsupportedEncoding(String)
    /// The bit depth is not one of 16, 24, 32 (integer PCM) or 32 (float).
    case unsupportedBitDepth(bitsPerSample: Int, isFloat: Bool)
    /// The audio has more than one channel; only mono is accepted.
    case multiChannel(channelCount: Int)
    /// The `fmt ` chunk declares zero channels.
    case noChannels
    /// The sample rate is zero or outside `WAVAudio.supportedSampleRates`.
    case unsupportedSampleRate(Int)
    /// The message content is not `.audio`, so it has no samples.
    case notAudioContent
    /// The clip lasts `seconds`, longer than the `maximumSeconds` accepted (read from the
    /// header, before decoding: `WAVAudio.decodeMono16kHz(_:maximumSeconds:)`).
    case tooLong(seconds: Double, maximumSeconds: Double)

    public var description: String {
        switch self {
        case .notWAV(let detected):
            let what = detected.map { "it looks like \($0)" } ?? "it does not start with a RIFF/WAVE header"
            return "the audio is not a WAV file (\(what)); only WAV (RIFF/WAVE) audio is supported: "
                + "convert it to a 16 kHz mono WAV file"
        case .truncated(let structure):
            return "the WAV data is truncated: it ends inside the \(structure)"
        case .chunkSizeExceedsData(let id, let declared, let available):
            return "the WAV chunk '\(id)' declares \(declared) bytes but only \(available) bytes follow its header: "
                + "the file is truncated or corrupt"
        case .missingFormatChunk:
            return "the WAV file has no 'fmt ' chunk, so its sample format is unknown"
        case .missingDataChunk:
            return "the WAV file has no 'data' chunk, so it holds no samples"
        case .malformedFormatChunk(let why):
            return "the WAV 'fmt ' chunk is malformed: \(why)"
        case .unsupportedEncoding(let what):
            return "the WAV encoding \(what) is not supported: use linear PCM (16, 24 or 32-bit integer) "
                + "or 32-bit IEEE float"
        case .unsupportedBitDepth(let bits, let isFloat):
            let kind = isFloat ? "float" : "integer PCM"
            return "\(bits)-bit \(kind) WAV audio is not supported: use 16, 24 or 32-bit integer PCM or 32-bit float"
        case .multiChannel(let count):
            return "stereo/multi-channel audio is not supported: convert it to mono "
                + "(this audio has \(count) channels; WAVAudio.downmixToMono averages interleaved channels)"
        case .noChannels:
            return "the WAV 'fmt ' chunk declares 0 channels; mono audio (1 channel) is required"
        case .unsupportedSampleRate(let rate):
            return "the sample rate \(rate) Hz is not supported: it must be between "
                + "\(WAVAudio.supportedSampleRates.lowerBound) and \(WAVAudio.supportedSampleRates.upperBound) Hz "
                + "(16000 Hz is recommended)"
        case .notAudioContent:
            return "the message content is not audio (.audio with WAV bytes), so it has no samples"
        case .tooLong(let seconds, let maximum):
            return "the audio is too long: \(String(format: "%.1f", seconds)) s, more than the \(String(format: "%g", maximum)) s "
                + "accepted: send a shorter clip (or raise the limit: MediaLimits.maxAudioSeconds, --max-audio-seconds)"
        }
    }
}
