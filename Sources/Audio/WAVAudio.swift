import Foundation

/// How the samples of a WAV file are stored (all little-endian).
public enum WAVSampleFormat: Sendable, Equatable, CaseIterable {
    /// 16-bit signed integers, range [-32768, 32767].
    case int16
    /// 24-bit signed integers packed in 3 bytes, range [-8388608, 8388607].
    case int24
    /// 32-bit signed integers, range [-2147483648, 2147483647].
    case int32
    /// 32-bit IEEE floats, nominally in [-1, 1].
    case float32

    /// Bytes one sample occupies in the file.
    public var bytesPerSample: Int {
        switch self {
        case .int16: return 2
        case .int24: return 3
        case .int32, .float32: return 4
        }
    }
}

/// What a mono WAV file's header declares: `WAVAudio.header(of:)`.
public struct WAVHeader: Sendable, Equatable {
    /// Frames per second.
    public let sampleRate: Int
    /// How the samples are stored.
    public let sampleFormat: WAVSampleFormat
    /// The samples of the `data` chunk (a trailing partial sample not counted).
    public let sampleCount: Int

    /// Length of the audio in seconds.
    public var duration: Double { Double(sampleCount) / Double(sampleRate) }
}

/// Mono audio decoded from a RIFF/WAVE file: its sample rate and its samples as `Float`
/// in [-1, 1].
///
/// `WAVAudio(data:)` reads the `fmt ` chunk (format tag 1 = integer PCM, 3 = IEEE float, and
/// 0xFFFE = WAVE_FORMAT_EXTENSIBLE whose sub-format GUID is PCM or IEEE float), skips every
/// other chunk (`LIST`, `fact`, `cue `, ..., honouring the pad byte after odd-sized chunks)
/// and decodes the first `data` chunk. Supported encodings are Int16, Int24, Int32 and
/// Float32 (see `WAVSampleFormat`). Integers are divided by 2^(bits-1), so they land in
/// [-1, 1); float samples are kept, except that NaN becomes 0 and values outside [-1, 1]
/// are clamped. These are miniaudio 0.11's conversions to `Float` (what llama.cpp decodes
/// audio with), value for value, but for that clamping. Multi-channel audio is rejected (`WAVError.multiChannel`): convert it to
/// mono first, for example with `downmixToMono(interleaved:channelCount:)`.
///
/// The parser is strict about sizes: a RIFF or chunk size that points past the end of the
/// data is an error (`WAVError.truncated` / `.chunkSizeExceedsData`), never a crash. Bytes
/// after the RIFF chunk are ignored.
public struct WAVAudio: Sendable, Equatable {
    /// The sample rate the LEAP audio models take as input.
    public static let modelSampleRate = 16_000
    /// Sample rates the parser and the resampler accept, in Hz. The lower bound keeps
    /// resampling to 16 kHz from growing a file more than 16-fold.
    public static let supportedSampleRates = 1_000...768_000

    /// Frames per second.
    public let sampleRate: Int
    /// How the samples were stored in the file (`.float32` for audio made in memory).
    public let sampleFormat: WAVSampleFormat
    /// The mono samples, in [-1, 1].
    public let samples: [Float]

    /// Length of the audio in seconds.
    public var duration: Double { Double(samples.count) / Double(sampleRate) }

    /// Audio from samples already in memory.
    /// - Throws: `WAVError.unsupportedSampleRate` when `sampleRate` is outside
    ///   `supportedSampleRates`.
    public init(samples: [Float], sampleRate: Int) throws(WAVError) {
        guard Self.supportedSampleRates.contains(sampleRate) else { throw .unsupportedSampleRate(sampleRate) }
        self.samples = samples
        self.sampleRate = sampleRate
        self.sampleFormat = .float32
    }

    /// What the header of WAV bytes declares (rate, sample format, sample count), read and
    /// checked as `init(data:)` reads it but without decoding a sample: how long a clip is
    /// can be known, and refused, before its samples are allocated.
    /// - Throws: the `WAVError`s of `init(data:)`.
    public static func header(of data: Data) throws(WAVError) -> WAVHeader {
        try readFormatAndData([UInt8](data)).header
    }

    /// Parses mono WAV bytes.
    /// - Throws: a `WAVError` saying what is wrong: not a WAV file, truncated, unsupported
    ///   encoding or bit depth, multi-channel, zero or out-of-range sample rate.
    public init(data: Data) throws(WAVError) {
        try self.init(bytes: [UInt8](data), maximumSeconds: .infinity)
    }

    /// Parses mono WAV bytes, refusing a clip over `maximumSeconds` from its header before
    /// a sample is decoded (`WAVError.tooLong`).
    init(bytes: [UInt8], maximumSeconds: Double) throws(WAVError) {
        let format = try Self.readFormatAndData(bytes)
        let duration = format.header.duration
        if duration > maximumSeconds { throw .tooLong(seconds: duration, maximumSeconds: maximumSeconds) }
        self.sampleRate = format.sampleRate
        self.sampleFormat = format.sampleFormat
        self.samples = Self.decode(bytes[format.dataRange], as: format.sampleFormat)
    }

    /// Averages interleaved multi-channel samples (frame after frame, channel after channel)
    /// into one channel. A trailing partial frame is averaged over the channels it has.
    /// With `channelCount` 1 or less the samples are returned unchanged.
    public static func downmixToMono(interleaved samples: [Float], channelCount: Int) -> [Float] {
        guard channelCount > 1 else { return samples }
        var mono: [Float] = []
        mono.reserveCapacity((samples.count + channelCount - 1) / channelCount)
        var start = 0
        while start < samples.count {
            let end = min(start + channelCount, samples.count)
            var sum: Float = 0
            for i in start..<end { sum += samples[i] }
            mono.append(sum / Float(end - start))
            start = end
        }
        return mono
    }

    // MARK: - Parsing

    private struct FormatAndData {
        var sampleRate: Int
        var sampleFormat: WAVSampleFormat
        var dataRange: Range<Int>

        var header: WAVHeader {
            WAVHeader(sampleRate: sampleRate, sampleFormat: sampleFormat, sampleCount: dataRange.count / sampleFormat.bytesPerSample)
        }
    }

    private struct Format {
        var sampleRate: Int
        var sampleFormat: WAVSampleFormat
    }

    /// The tail of the KSDATAFORMAT_SUBTYPE_PCM / _IEEE_FLOAT GUIDs after their first two
    /// bytes (which hold the format tag): 0000-0010-8000-00AA00389B71, as stored on disk.
    private static let extensibleGUIDTail: [UInt8] = [
        0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71
    ]

    private static func readFormatAndData(_ bytes: [UInt8]) throws(WAVError) -> FormatAndData {
        guard bytes.count >= 12, bytes[0..<4].elementsEqual(Array("RIFF".utf8)),
            bytes[8..<12].elementsEqual(Array("WAVE".utf8))
        else {
            if let detected = detectFormat(bytes) { throw .notWAV(detectedFormat: detected) }
            if !bytes.isEmpty, bytes.count < 12, Array("RIFF".utf8).starts(with: bytes.prefix(4)) {
                throw .truncated(structure: "RIFF header")
            }
            throw .notWAV(detectedFormat: nil)
        }
        let riffSize = Int(readUInt32(bytes, 4))
        // The RIFF size counts the bytes after its own 8-byte header.
        guard riffSize >= 4 else { throw .truncated(structure: "RIFF header (its size \(riffSize) is below 4)") }
        guard riffSize <= bytes.count - 8 else {
            throw .chunkSizeExceedsData(chunkID: "RIFF", declaredSize: riffSize, availableBytes: bytes.count - 8)
        }
        let end = 8 + riffSize

        var format: Format?
        var dataRange: Range<Int>?
        var offset = 12
        while offset < end {
            guard end - offset >= 8 else {
                // Some writers leave a few stray bytes at the end; harmless once both chunks are read.
                if format != nil, dataRange != nil { break }
                throw .truncated(structure: "chunk header at byte \(offset)")
            }
            let id = chunkID(bytes, offset)
            let size = Int(readUInt32(bytes, offset + 4))
            let bodyStart = offset + 8
            guard size <= end - bodyStart else {
                throw .chunkSizeExceedsData(chunkID: id, declaredSize: size, availableBytes: end - bodyStart)
            }
            let body = bodyStart..<(bodyStart + size)
            if id == "fmt " && format == nil {
                format = try parseFormat(bytes, body)
            } else if id == "data" && dataRange == nil {
                dataRange = body
            }
            // Chunks are word-aligned: an odd-sized chunk is followed by one pad byte, which a
            // last chunk may omit.
            offset = min(body.upperBound + (size & 1), end)
        }
        guard let format else { throw .missingFormatChunk }
        guard let dataRange else { throw .missingDataChunk }
        // A trailing partial sample (a data size not a multiple of the sample size) is dropped.
        let usable = dataRange.count - dataRange.count % format.sampleFormat.bytesPerSample
        return FormatAndData(
            sampleRate: format.sampleRate, sampleFormat: format.sampleFormat,
            dataRange: dataRange.lowerBound..<(dataRange.lowerBound + usable)
        )
    }

    private static func parseFormat(_ bytes: [UInt8], _ body: Range<Int>) throws(WAVError) -> Format {
        guard body.count >= 16 else {
            throw .malformedFormatChunk("it has \(body.count) bytes, fewer than the 16 of a PCM format")
        }
        let o = body.lowerBound
        var formatTag = Int(readUInt16(bytes, o))
        let channels = Int(readUInt16(bytes, o + 2))
        let sampleRate = Int(readUInt32(bytes, o + 4))
        let blockAlign = Int(readUInt16(bytes, o + 12))
        let bitsPerSample = Int(readUInt16(bytes, o + 14))

        if formatTag == 0xFFFE {
            // WAVE_FORMAT_EXTENSIBLE: cbSize (22), valid bits, channel mask, sub-format GUID.
            guard body.count >= 40 else {
                throw .malformedFormatChunk(
                    "WAVE_FORMAT_EXTENSIBLE needs 40 bytes but the chunk has \(body.count)")
            }
            let extensionSize = Int(readUInt16(bytes, o + 16))
            guard extensionSize >= 22 else {
                throw .malformedFormatChunk("WAVE_FORMAT_EXTENSIBLE declares an extension of \(extensionSize) bytes, not 22")
            }
            let validBits = Int(readUInt16(bytes, o + 18))
            guard validBits <= bitsPerSample else {
                throw .malformedFormatChunk("\(validBits) valid bits do not fit a \(bitsPerSample)-bit container")
            }
            let guid = Array(bytes[(o + 24)..<(o + 40)])
            let subformat = Int(readUInt16(guid, 0))
            guard guid[2...].elementsEqual(extensibleGUIDTail), subformat == 1 || subformat == 3 else {
                throw .unsupportedEncoding("WAVE_FORMAT_EXTENSIBLE with sub-format GUID \(guidString(guid))")
            }
            formatTag = subformat
        }
        guard formatTag == 1 || formatTag == 3 else { throw .unsupportedEncoding(formatTagName(formatTag)) }
        guard channels != 0 else { throw .noChannels }
        guard channels == 1 else { throw .multiChannel(channelCount: channels) }
        guard supportedSampleRates.contains(sampleRate) else { throw .unsupportedSampleRate(sampleRate) }

        let isFloat = formatTag == 3
        // Integer PCM may carry fewer valid bits than its byte container (e.g. 20 bits in 3
        // bytes); the samples are left-justified, so the container size decides the decoding.
        let containerBytes = (bitsPerSample + 7) / 8
        let sampleFormat: WAVSampleFormat
        switch (isFloat, containerBytes) {
        case (false, 2) where bitsPerSample > 8: sampleFormat = .int16
        case (false, 3): sampleFormat = .int24
        case (false, 4): sampleFormat = .int32
        case (true, 4) where bitsPerSample == 32: sampleFormat = .float32
        default: throw .unsupportedBitDepth(bitsPerSample: bitsPerSample, isFloat: isFloat)
        }
        guard blockAlign == sampleFormat.bytesPerSample else {
            throw .malformedFormatChunk(
                "block alignment \(blockAlign) does not match \(bitsPerSample)-bit mono samples "
                    + "(\(sampleFormat.bytesPerSample) bytes per frame)")
        }
        return Format(sampleRate: sampleRate, sampleFormat: sampleFormat)
    }

    private static func decode(_ bytes: ArraySlice<UInt8>, as format: WAVSampleFormat) -> [Float] {
        let count = bytes.count / format.bytesPerSample
        var samples = [Float](repeating: 0, count: count)
        var p = bytes.startIndex
        switch format {
        case .int16:
            for i in 0..<count {
                let v = Int16(bitPattern: UInt16(bytes[p]) | UInt16(bytes[p + 1]) << 8)
                samples[i] = Float(v) / 32768
                p += 2
            }
        case .int24:
            for i in 0..<count {
                // Shift the 3 bytes to the top of an Int32 and back to sign-extend.
                let raw = UInt32(bytes[p]) << 8 | UInt32(bytes[p + 1]) << 16 | UInt32(bytes[p + 2]) << 24
                let v = Int32(bitPattern: raw) >> 8
                samples[i] = Float(v) / 8_388_608
                p += 3
            }
        case .int32:
            for i in 0..<count {
                let v = Int32(bitPattern: readUInt32(bytes, p))
                samples[i] = Float(Double(v) / 2_147_483_648)
                p += 4
            }
        case .float32:
            for i in 0..<count {
                let v = Float(bitPattern: readUInt32(bytes, p))
                samples[i] = v.isNaN ? 0 : min(max(v, -1), 1)
                p += 4
            }
        }
        return samples
    }

    // MARK: - Byte helpers (callers check the bounds)

    private static func readUInt16<C: Collection<UInt8>>(_ bytes: C, _ offset: C.Index) -> UInt16
    where C.Index == Int {
        UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8
    }

    private static func readUInt32<C: Collection<UInt8>>(_ bytes: C, _ offset: C.Index) -> UInt32
    where C.Index == Int {
        UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16
            | UInt32(bytes[offset + 3]) << 24
    }

    /// A chunk's four-character code, printable characters kept and others shown as `?`.
    private static func chunkID(_ bytes: [UInt8], _ offset: Int) -> String {
        String(bytes[offset..<(offset + 4)].map { (0x20...0x7E).contains($0) ? Character(UnicodeScalar($0)) : "?" })
    }

    private static func guidString(_ guid: [UInt8]) -> String {
        guid.map { String(format: "%02x", $0) }.joined()
    }

    private static func formatTagName(_ tag: Int) -> String {
        let known: [Int: String] = [
            0x0002: "Microsoft ADPCM", 0x0006: "A-law", 0x0007: "mu-law", 0x0011: "IMA ADPCM",
            0x0050: "MPEG", 0x0055: "MPEG Layer 3 (MP3)", 0x00FF: "AAC", 0x1610: "AAC (MPEG-4)"
        ]
        let hex = "0x" + String(tag, radix: 16, uppercase: true)
        return known[tag].map { "\($0) (format tag \(hex))" } ?? "with format tag \(hex)"
    }

    /// Names common non-WAV audio containers from their leading bytes.
    private static func detectFormat(_ bytes: [UInt8]) -> String? {
        func starts(_ s: String, at offset: Int = 0) -> Bool {
            let sig = Array(s.utf8)
            return bytes.count >= offset + sig.count && bytes[offset..<(offset + sig.count)].elementsEqual(sig)
        }
        if starts("ID3") { return "MP3 (ID3 tag)" }
        if bytes.count >= 2, bytes[0] == 0xFF, bytes[1] & 0xE0 == 0xE0 { return "MP3 or AAC (MPEG audio frame)" }
        if starts("ftyp", at: 4) { return "MP4/M4A" }
        if starts("OggS") { return "Ogg" }
        if starts("fLaC") { return "FLAC" }
        if starts("FORM") { return "AIFF" }
        if starts("caff") { return "CAF" }
        if starts("RIFX") { return "a big-endian WAV (RIFX), which is not supported" }
        if starts("RF64") { return "an RF64 WAV, which is not supported" }
        if starts("RIFF"), bytes.count >= 12 {
            let type = chunkID(bytes, 8)
            return "a RIFF file of type '\(type)', not WAVE"
        }
        return nil
    }
}
