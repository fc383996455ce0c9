import Foundation
import GGUF
import Kernels
import LeapJSON
import Reference
import TestSupport
import Testing

@testable import Models

/// LFM2.5-Audio's detokenizer against the goldens of liquid-audio 1.3.0
/// (`Tests/Fixtures/golden/audio-out`, shared/README.md "LFM2.5-Audio speech-out fixture"):
/// the waveform of every case from its golden frames, each step on the way (the code
/// embeddings' mean, the backbone's output, the STFT rows) so that a failure says where,
/// the streaming decode against the whole-turn one, and the plain reference against both.
@Suite(.serialized) struct AudioDetokenizerTests {
    static let cases = [
        "hello.interleaved", "chirp-1s.interleaved", "weather.interleaved", "tts-thanks.sequential", "tts-rain.sequential",
        "tts-gap.sequential"
    ]
    static let pool = ThreadPool(threads: 2)
    static let tokenizerPath = TestFixtures.path("models/tokenizer-lfm2-audio-tiny.gguf")
    static let vocoderPath = TestFixtures.path("models/vocoder-lfm2-audio-tiny.gguf")

    static func detokenizer() throws -> AudioDetokenizer {
        try AudioDetokenizer(path: tokenizerPath, vocoder: try SpeechVocoder(path: vocoderPath, pool: pool))
    }

    /// A golden case: its JSON and its waveform.
    struct Golden {
        let json: JSONValue
        let wave: [Float]
        var frames: [[Int]] { json["frames"]!.arrayValue!.map { $0.arrayValue!.map { $0.intValue! } } }
        func numbers(_ path: String...) -> [Double] {
            var v = json
            for key in path { v = v[key]! }
            return v.arrayValue!.map { $0.doubleValue! }
        }
        func number(_ path: String...) -> Double {
            var v = json
            for key in path { v = v[key]! }
            return v.doubleValue!
        }
    }

    static func golden(_ name: String) throws -> Golden {
        let base = TestFixtures.path("golden/audio-out/lfm2-audio-out-tiny.\(name)")
        let json = try JSONValue.parse(bytes: Array(try Data(contentsOf: URL(fileURLWithPath: base + ".json"))))
        let bytes = try Data(contentsOf: URL(fileURLWithPath: base + ".wave.f32"))
        let wave = bytes.withUnsafeBytes { raw in
            (0..<(bytes.count / 4)).map {
                Float(bitPattern: UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: 4 * $0, as: UInt32.self)))
            }
        }
        return Golden(json: json, wave: wave)
    }

    static func maxDifference(_ a: [Float], _ b: [Float]) -> Double {
        precondition(a.count == b.count, "\(a.count) vs \(b.count)")
        return zip(a, b).reduce(0) { max($0, abs(Double($1.0) - Double($1.1))) }
    }

    /// `max |a - b| / max(1, |b|)`: for golden values printed to 6 significant digits.
    static func maxRelativeDifference(_ a: [Double], _ b: [Double]) -> Double {
        precondition(a.count == b.count, "\(a.count) vs \(b.count)")
        return zip(a, b).reduce(0) { max($0, abs($1.0 - $1.1) / max(1, abs($1.1))) }
    }

    static func maxDifference(_ a: [Double], _ b: [Double]) -> Double {
        precondition(a.count == b.count, "\(a.count) vs \(b.count)")
        return zip(a, b).reduce(0) { max($0, abs($1.0 - $1.1)) }
    }

    /// Steps 1-4 of one whole-turn decode by the engine, on a fresh backbone session.
    static func steps(_ detokenizer: AudioDetokenizer, _ frames: [AudioFrame]) throws -> (
        means: [Float], hidden: [Float], spectrum: [Float]
    ) {
        let spoken = try detokenizer.spokenFrames(frames)
        let means = try detokenizer.frameEmbeddings(spoken)
        let session = InferenceSession(model: detokenizer.backbone, contextLength: spoken.count * 6)
        let hidden = try session.evaluateHiddenStates(embeddings: detokenizer.upsampled(means))
        return (means, hidden, detokenizer.project(hidden))
    }

    @Test(arguments: cases) func everyGoldenWaveformFromItsFrames(_ name: String) throws {
        let detokenizer = try Self.detokenizer(), golden = try Self.golden(name)
        let frames = try AudioDetokenizer.frames(fromCodes: golden.frames)
        let d = 64, spoken = frames.filter { !$0.isEndOfAudio }.count
        #expect(spoken == Int(golden.number("detokenizer", "n_frames")))

        // 1. The code embeddings' mean.
        let (means, hidden, spectrum) = try Self.steps(detokenizer, frames)
        // The golden's values have 6 significant digits: compare relative to max(1, |value|).
        let meanFirst = Self.maxRelativeDifference(
            means[0..<16].map(Double.init), golden.numbers("detokenizer", "embedding_mean", "first_frame_first16"))
        let meanSum = abs(means.reduce(0.0) { $0 + Double($1) } - golden.number("detokenizer", "embedding_mean", "sum"))
        #expect(meanFirst < 5e-6 && meanSum < 1e-4, "\(name) embedding_mean: first16 \(meanFirst), sum \(meanSum)")

        // 3. The backbone's output after the final norm.
        let rows = hidden.count / d
        #expect(rows == Int(golden.number("detokenizer", "n_stft_frames")))
        let first4 = golden.json["detokenizer"]!["backbone_out"]!["first4_frames_first8"]!.arrayValue!
        var backbone = 0.0
        for (i, row) in first4.enumerated() {
            backbone = max(
                backbone, Self.maxDifference(hidden[(i * d)..<(i * d + 8)].map(Double.init), row.arrayValue!.map { $0.doubleValue! }))
        }
        let rms = (0..<rows).map { i in
            (hidden[(i * d)..<((i + 1) * d)].reduce(0.0) { $0 + Double($1) * Double($1) } / Double(d)).squareRoot()
        }
        let rmsDifference = Self.maxDifference(rms, golden.numbers("detokenizer", "backbone_out", "frame_rms"))
        #expect(backbone < 1e-5 && rmsDifference < 1e-5, "\(name) backbone_out: first rows \(backbone), frame_rms \(rmsDifference)")

        // 4. The STFT rows: log-magnitudes and phases.
        let w = AudioDetokenizer.outputWidth, bins = w / 2
        var stftFirst = 0.0
        for (i, row) in golden.json["detokenizer"]!["stft"]!["first4_frames"]!.arrayValue!.enumerated() {
            let logAbs = row["log_abs_first16"]!.arrayValue!.map { $0.doubleValue! },
                angle = row["angle_first16"]!.arrayValue!.map { $0.doubleValue! }
            stftFirst = max(stftFirst, Self.maxDifference(spectrum[(i * w)..<(i * w + 16)].map(Double.init), logAbs))
            stftFirst = max(stftFirst, Self.maxDifference(spectrum[(i * w + bins)..<(i * w + bins + 16)].map(Double.init), angle))
        }
        let logAbsSums = (0..<rows).map { i in spectrum[(i * w)..<(i * w + bins)].reduce(0.0) { $0 + Double($1) } }
        let angleSums = (0..<rows).map { i in spectrum[(i * w + bins)..<((i + 1) * w)].reduce(0.0) { $0 + Double($1) } }
        let logAbsSum = Self.maxDifference(logAbsSums, golden.numbers("detokenizer", "stft", "frame_log_abs_sum"))
        let angleSum = Self.maxDifference(angleSums, golden.numbers("detokenizer", "stft", "frame_angle_sum"))
        #expect(
            stftFirst < 1e-5 && logAbsSum < 5e-4 && angleSum < 5e-4, "\(name) stft: first rows \(stftFirst), sums \(logAbsSum) \(angleSum)")

        // 5. The waveform, whole turn in one call.
        let samples = try detokenizer.decode(frames)
        #expect(samples.count == Int(golden.number("waveform", "n_samples")) && samples.count == golden.wave.count)
        let wave = Self.maxDifference(samples, golden.wave)
        #expect(wave < 1e-5, "\(name) waveform: \(wave)")
        print(
            "AudioDetokenizer \(name): \(spoken) frames, \(samples.count) samples; max |difference| embedding_mean \(meanFirst) (relative; sum \(meanSum)), backbone first rows \(backbone), frame_rms \(rmsDifference), stft first rows \(stftFirst), frame sums \(logAbsSum) / \(angleSum), waveform \(wave)"
        )
    }

    @Test func streamingInPiecesEqualsTheWholeTurn() throws {
        let detokenizer = try Self.detokenizer()
        var worst = 0.0
        for name in ["weather.interleaved", "tts-gap.sequential"] {
            let golden = try Self.golden(name)
            let frames = try AudioDetokenizer.frames(fromCodes: golden.frames)
            let whole = try detokenizer.decode(frames)
            let stream = detokenizer.makeStream()
            for k in [1, 2, 3, 4, 5, 7, 12, 25, frames.count] {
                var pieces: [Float] = []
                for start in stride(from: 0, to: frames.count, by: k) {
                    let piece = try stream.append(Array(frames[start..<min(frames.count, start + k)]))
                    // Every sample before the last 480 of the frames so far is out.
                    let decoded = frames[0..<min(frames.count, start + k)].filter { !$0.isEndOfAudio }.count
                    #expect(pieces.count + piece.count == max(0, decoded * 1920 - 480))
                    pieces += piece
                }
                pieces += stream.finish()
                #expect(stream.frameCount == 0)
                let difference = Self.maxDifference(pieces, whole)
                worst = max(worst, difference)
                #expect(difference < 1e-5, "\(name), \(k) frames a piece: \(difference)")
            }
        }
        print("AudioDetokenizer streaming: max |pieces - whole turn| \(worst)")
    }

    @Test func theReferenceAgreesWithTheEngineAndTheGoldens() throws {
        let detokenizer = try Self.detokenizer()
        let reference = try ReferenceAudioDetokenizer(
            tokenizer: try GGUFFile(path: Self.tokenizerPath), vocoder: try GGUFFile(path: Self.vocoderPath))
        for name in ["hello.interleaved", "tts-thanks.sequential"] {
            let golden = try Self.golden(name)
            let frames = try AudioDetokenizer.frames(fromCodes: golden.frames)
            let trace = try reference.decode(golden.frames)
            let (means, hidden, spectrum) = try Self.steps(detokenizer, frames)
            let mean = Self.maxDifference(means.map(Double.init), trace.embeddingMeans.flatMap { $0 })
            let backbone = Self.maxDifference(hidden.map(Double.init), trace.hiddenStates.flatMap { $0 })
            let stft = Self.maxDifference(spectrum.map(Double.init), trace.spectrum.flatMap { $0 })
            let samples = try detokenizer.decode(frames)
            let wave = Self.maxDifference(samples.map(Double.init), trace.samples)
            let referenceToGolden = Self.maxDifference(trace.samples, golden.wave.map(Double.init))
            #expect(mean < 1e-6 && backbone < 1e-5 && stft < 1e-5 && wave < 1e-5, "\(name): \(mean) \(backbone) \(stft) \(wave)")
            #expect(referenceToGolden < 1e-5, "\(name): reference to golden \(referenceToGolden)")
            print(
                "ReferenceAudioDetokenizer \(name): engine vs reference embedding_mean \(mean), backbone \(backbone), stft \(stft), waveform \(wave); reference vs golden waveform \(referenceToGolden)"
            )
        }
    }

    @Test func endOfAudioFramesAreSkippedAndBadCodesRefused() throws {
        let detokenizer = try Self.detokenizer()
        let a = AudioFrame([1, 2, 3, 4, 5, 6, 7, 8]), b = AudioFrame([2047, 0, 2047, 0, 9, 10, 11, 2047])
        #expect(try detokenizer.decode([a, .endOfAudio, b, .endOfAudio]) == detokenizer.decode([a, b]))
        #expect(try detokenizer.decode([.endOfAudio]).isEmpty && detokenizer.decode([]).isEmpty)
        #expect(try detokenizer.decode([a]).count == 1920)
        // 2048 outside codebook 0 of an end-of-audio frame has no embedding row.
        let bad = AudioFrame([5, 2048, 0, 0, 0, 0, 0, 0])
        #expect(throws: AudioDetokenizerError.codeOutOfRange(frame: 1, codebook: 1, code: 2048)) { try detokenizer.decode([a, bad]) }
        #expect(throws: AudioDetokenizerError.codeOutOfRange(frame: 0, codebook: 3, code: 5000)) {
            try AudioDetokenizer.frames(fromCodes: [[0, 0, 0, 5000, 0, 0, 0, 0]])
        }
        #expect(throws: AudioDetokenizerError.codeOutOfRange(frame: 1, codebook: 0, code: -1)) {
            try AudioDetokenizer.frames(fromCodes: [[0, 0, 0, 0, 0, 0, 0, 0], [-1, 0, 0, 0, 0, 0, 0, 0]])
        }
        #expect(throws: AudioDetokenizerError.invalidFrame(frame: 0, codes: 7)) {
            try AudioDetokenizer.frames(fromCodes: [[0, 0, 0, 0, 0, 0, 0]])
        }
        // A refused append changes nothing; a turn over maxFrames is refused.
        let stream = detokenizer.makeStream()
        let first = try stream.append([a])
        #expect(throws: AudioDetokenizerError.self) { try stream.append([b, bad]) }
        let rest = try stream.append([b]) + stream.finish()
        #expect(Self.maxDifference(first + rest, try detokenizer.decode([a, b])) < 1e-5)
        let small = try AudioDetokenizer(
            file: try GGUFFile(path: Self.tokenizerPath), path: "t.gguf",
            vocoder: try SpeechVocoder(path: Self.vocoderPath, pool: Self.pool),
            maxFrames: 2)
        #expect(throws: AudioDetokenizerError.tooManyFrames(frames: 3, maximum: 2)) { try small.decode([a, b, .endOfAudio, a]) }
        #expect(try small.decode([a, .endOfAudio, b]).count == 2 * 1920)
    }
}

/// A tokenizer file that is not an embedding model, or whose keys or tensors do not fit,
/// and a code embedding of the wrong shape, are typed errors naming the file and the key
/// or tensor, never a crash; ordinary LFM2 files load as before.
@Suite struct AudioDetokenizerLoadErrorTests {
    static let name = "edited.gguf"
    static let pool = ThreadPool(threads: 1)
    static let vocoder = Result { try SpeechVocoder(path: AudioDetokenizerTests.vocoderPath, pool: pool) }

    /// The tiny tokenizer with its metadata and tensors edited, loaded as `name`.
    func load(
        _ edit: (inout GGUFWriter) throws -> Void = { _ in }, skipTensor: String? = nil,
        replace: [(name: String, type: GGMLType, shape: [Int], data: [UInt8])] = [], vocoder: SpeechVocoder? = nil,
        file path: String = AudioDetokenizerTests.tokenizerPath
    ) throws -> AudioDetokenizerError? {
        let file = try GGUFFile(path: path)
        var w = GGUFWriter(copyingMetadataOf: file)
        for t in file.tensors where t.name != skipTensor {
            if let r = replace.first(where: { $0.name == t.name }) {
                try w.addTensor(name: t.name, type: r.type, shape: r.shape, data: r.data)
            } else {
                try w.addTensor(name: t.name, type: t.type, shape: t.shape, data: Array(file.data(for: t)))
            }
        }
        try edit(&w)
        let image = try GGUFFile(bytes: try w.serialize())
        let vocoder = try vocoder ?? Self.vocoder.get()
        do {
            _ = try AudioDetokenizer(file: image, path: Self.name, vocoder: vocoder)
            return nil
        } catch { return error }
    }

    /// The tiny vocoder with `emb.emb.weight` replaced by an F32 table of `width` x 16384
    /// (`nan`: with a NaN at value 7 of row 6151), loaded as `vocoder.gguf`.
    func vocoder(width: Int, nanInRow6151: Bool = false) throws -> SpeechVocoder {
        let file = try GGUFFile(path: AudioDetokenizerTests.vocoderPath)
        var w = GGUFWriter(copyingMetadataOf: file)
        var table = [UInt8](repeating: 0, count: 16384 * width * 4)
        if nanInRow6151 {
            withUnsafeBytes(of: Float.nan.bitPattern.littleEndian) { for i in 0..<4 { table[(6151 * width + 7) * 4 + i] = $0[i] } }
        }
        for t in file.tensors {
            if t.name == "emb.emb.weight" {
                try w.addTensor(name: t.name, type: .f32, shape: [width, 16384], data: table)
            } else {
                try w.addTensor(name: t.name, type: t.type, shape: t.shape, data: Array(file.data(for: t)))
            }
        }
        return try SpeechVocoder(file: try GGUFFile(bytes: try w.serialize()), path: "vocoder.gguf", pool: Self.pool)
    }

    @Test func theUnmodifiedFileLoadsAndIsAnEmbeddingModel() throws {
        #expect(try load() == nil)
        let model = try TransformerModel(path: AudioDetokenizerTests.tokenizerPath, threads: 1)
        #expect(model.outputEmbeddingLength == 1282)
        #expect(
            model.weights.layers.compactMap { ($0 as? LFM2Layer)?.mixer }.compactMap { m -> Int? in
                if case .attention(let a) = m { return a.window } else { return nil }
            } == [30])
        // An ordinary LFM2 file: no window, no projection.
        let lm = try TransformerModel(path: TestFixtures.path("models/lfm2-tiny.gguf"), threads: 1)
        #expect(lm.outputEmbeddingLength == nil)
        #expect(
            lm.weights.layers.allSatisfy { layer in
                guard case .attention(let a) = (layer as! LFM2Layer).mixer else { return true }
                return a.window == nil
            })
    }

    @Test func aLanguageModelIsNotADetokenizer() throws {
        #expect(
            try load(file: TestFixtures.path("models/lfm2-tiny.gguf"))
                == .notAnEmbeddingModel(path: Self.name, architecture: "lfm2", key: "lfm2.embedding_length_out"))
        #expect(
            try load { $0.metadata.set("general.architecture", .string("llama")) }
                == .notAnEmbeddingModel(path: Self.name, architecture: "llama", key: "lfm2.embedding_length_out"))
        #expect(
            try load { $0.metadata.remove("lfm2.embedding_length_out") }
                == .notAnEmbeddingModel(path: Self.name, architecture: "lfm2", key: "lfm2.embedding_length_out"))
        let e = try load { $0.metadata.remove("lfm2.attention.sliding_window") }
        #expect(e == .missingKey(path: Self.name, key: "lfm2.attention.sliding_window"))
        #expect(e?.description.contains(Self.name) == true)
    }

    @Test func badKeysAndTensorsNameTheFileAndWhat() throws {
        #expect(
            try load(skipTensor: "dense_2.weight") == .backbone(path: Self.name, .file(.missingTensor("dense_2.weight"))))
        #expect(try load(skipTensor: "dense_2.bias") == .backbone(path: Self.name, .file(.missingTensor("dense_2.bias"))))
        #expect(
            try load(replace: [("dense_2.weight", .f32, [64, 1000], [UInt8](repeating: 0, count: 64_000 * 4))])
                == .backbone(path: Self.name, .tensorShapeMismatch(name: "dense_2.weight", expected: [64, 1282], found: [64, 1000])))
        #expect(
            try load(replace: [("dense_2.bias", .f32, [1000], [UInt8](repeating: 0, count: 4000))])
                == .backbone(path: Self.name, .tensorShapeMismatch(name: "dense_2.bias", expected: [1282], found: [1000])))
        // An output of another width than 1282, with a dense_2 that fits it.
        let e = try load(
            { $0.metadata.set("lfm2.embedding_length_out", .uint32(1000)) },
            replace: [
                ("dense_2.weight", .f32, [64, 1000], [UInt8](repeating: 0, count: 64_000 * 4)),
                ("dense_2.bias", .f32, [1000], [UInt8](repeating: 0, count: 4000))
            ])
        guard case .invalidValue(Self.name, "lfm2.embedding_length_out", "1000", _)? = e else {
            Issue.record("\(String(describing: e))")
            return
        }
        for value in [-1, 0, 1 << 21] {
            #expect(
                try load { $0.metadata.set("lfm2.attention.sliding_window", .int32(Int32(value))) }
                    == (value == 0
                        ? nil
                        : .backbone(
                            path: Self.name,
                            .invalidHyperParameter(
                                key: "lfm2.attention.sliding_window", value: "\(value)", reason: "must be 0 (none) or 1...1048576"))))
        }
        #expect(
            try load { $0.metadata.set("lfm2.embedding_length_out", .int32(0)) }
                == .backbone(
                    path: Self.name, .invalidHyperParameter(key: "lfm2.embedding_length_out", value: "0", reason: "must be 1...1048576")))
    }

    @Test func aCodeEmbeddingThatDoesNotFitIsRefused() throws {
        #expect(
            try load(vocoder: try vocoder(width: 32))
                == .widthMismatch(
                    path: "vocoder.gguf", tensor: "emb.emb.weight", codeEmbeddingWidth: 32, detokenizer: Self.name, detokenizerWidth: 64))
        // A code embedding row that is not finite is refused when a frame reads it.
        let detokenizer = try AudioDetokenizer(
            file: try GGUFFile(path: AudioDetokenizerTests.tokenizerPath), path: Self.name,
            vocoder: try vocoder(width: 64, nanInRow6151: true))
        #expect(try detokenizer.decode([AudioFrame([0, 0, 0, 6, 0, 0, 0, 0])]).count == 1920)
        #expect(
            throws: AudioDetokenizerError.invalidValue(
                path: "vocoder.gguf", key: "emb.emb.weight", value: "row 6151", reason: "holds a NaN or infinite value")
        ) { try detokenizer.decode([AudioFrame([0, 0, 0, 7, 0, 0, 0, 0])]) }
    }
}
