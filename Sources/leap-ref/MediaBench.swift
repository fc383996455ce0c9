import Audio
import Dispatch
import Foundation
import GGUF
import Images
import Kernels
import LeapJSON
import Models

/// `leap-ref bench --image` / `--audio`: the media encoder's two stages timed apart, on one
/// file: preprocessing (an image's decoding, resizing, slicing and normalization; a WAV
/// clip's decoding to 16 kHz and its log-mel spectrogram) and the encoder (every slice, or
/// the clip's mel frames, through the mmproj file's encoder). Each stage runs once to warm
/// up, then `repetitions` times; the median, minimum and maximum are reported.
struct MediaBenchResult: Equatable {
    var kind: MediaKind
    /// The file's name.
    var input: String
    /// An image's decoded width and height (0 for audio).
    var width = 0, height = 0
    /// A clip's length in seconds at 16 kHz (0 for an image).
    var seconds = 0.0
    /// Encoder calls per run: an image's slices, 1 for audio.
    var slices = 1
    /// Embedding rows (prompt positions) the encoder writes per run.
    var positions = 0
    /// The embedding width (the language model's).
    var outputWidth = 0
    var threads = 1
    var repetitions = 1
    /// Milliseconds per run, in run order (the warm-up not included).
    var preprocessMilliseconds: [Double] = []
    var encodeMilliseconds: [Double] = []
    /// For an image: the encode's products timed alone as F32 OpenBLAS sgemms (`ProductRoof`).
    var roof: ProductRoof?

    static func median(_ xs: [Double]) -> Double {
        let s = xs.sorted()
        guard !s.isEmpty else { return 0 }
        return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }

    var preprocessMedian: Double { Self.median(preprocessMilliseconds) }
    var encodeMedian: Double { Self.median(encodeMilliseconds) }
    /// The median of each run's preprocessing plus encoding.
    var totalMedian: Double { Self.median(zip(preprocessMilliseconds, encodeMilliseconds).map { $0 + $1 }) }
    /// Per image: the total; per second of audio: the total divided by the clip's seconds.
    var perUnit: Double { kind == .image ? totalMedian : totalMedian / max(seconds, 1e-9) }
    var unit: String { kind == .image ? "ms per image" : "ms per second of audio" }

    func json() -> JSONValue {
        func stats(_ xs: [Double]) -> JSONValue {
            .object(
                JSONObject([
                    ("median", .double(Self.median(xs))), ("min", .double(xs.min() ?? 0)), ("max", .double(xs.max() ?? 0)),
                    ("runs", .array(xs.map { .double($0) }))
                ]))
        }
        var out = JSONObject()
        out["kind"] = .string(kind.rawValue)
        out["input"] = .string(input)
        if kind == .image {
            out["width"] = .integer(width)
            out["height"] = .integer(height)
        } else {
            out["seconds"] = .double(seconds)
        }
        out["slices"] = .integer(slices)
        out["positions"] = .integer(positions)
        out["output_width"] = .integer(outputWidth)
        out["threads"] = .integer(threads)
        out["repetitions"] = .integer(repetitions)
        out["preprocess_ms"] = stats(preprocessMilliseconds)
        out["encode_ms"] = stats(encodeMilliseconds)
        out["total_ms"] = .double(totalMedian)
        out[kind == .image ? "ms_per_image" : "ms_per_audio_second"] = .double(perUnit)
        if let roof {
            out["products_gflop"] = .double(roof.gflop)
            out["sgemm_roof_ms"] = .double(roof.milliseconds)
            out["sgemm_peak_gflops"] = .double(roof.peakGFLOPS)
            out["peak_ms"] = .double(roof.peakMilliseconds)
            out["fraction_of_peak"] = .double(encodeMedian > 0 ? roof.peakMilliseconds / encodeMedian : 0)
        }
        return .object(out)
    }

    /// llama-bench-like markdown: one row of medians.
    func table() -> String {
        let what = kind == .image ? "\(width)x\(height), \(slices) slice\(slices == 1 ? "" : "s")" : String(format: "%.2f s", seconds)
        var out = "| input | media | threads | positions | preprocess ms | encoder ms | total ms | \(unit) |\n"
        out += "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n"
        out += "| \(input) | \(what) | \(threads) | \(positions) | "
        out += String(format: "%.2f | %.2f | %.2f | %.2f |\n", preprocessMedian, encodeMedian, totalMedian, perUnit)
        out += "\nmedians of \(repetitions) run\(repetitions == 1 ? "" : "s") after one warm-up; "
        out += kind == .image ? "preprocess: decode, resize, slice, normalize" : "preprocess: WAV decode to 16 kHz, log-mel"
        out += "; kernels: \(KernelBuild.description)\n"
        if let roof {
            out += String(
                format: "products: %.1f GFLOP; as F32 OpenBLAS sgemms of the same shapes %.1f ms; peak %.1f GFLOP/s (%.1f ms), "
                    + "the encoder at %.0f%% of it\n",
                roof.gflop, roof.milliseconds, roof.peakGFLOPS, roof.peakMilliseconds,
                encodeMedian > 0 ? 100 * roof.peakMilliseconds / encodeMedian : 0)
        }
        return out
    }
}

extension MediaBenchResult {
    /// Times `projector` on the media `data` (`name` is how the result names it).
    static func measure(
        _ projector: MediaEncoder, kind: MediaKind, data: Data, name: String, repetitions: Int
    ) throws -> MediaBenchResult {
        var result = MediaBenchResult(kind: kind, input: name)
        result.outputWidth = projector.outputWidth
        result.threads = projector.encoder.pool.threads
        result.repetitions = repetitions
        let bytes = [UInt8](data)
        func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }
        func ms(_ t0: UInt64) -> Double { Double(now() - t0) / 1e6 }
        for rep in 0...repetitions {
            let t0 = now()
            var rows = 0
            switch projector {
            case .vision(let encoder):
                guard kind == .image else { throw MediaFlagError.wrongKind(projector: projector.path, encodes: .image, asked: kind) }
                let p = encoder.preprocessing
                let configuration = LFM2VLImagePreprocessor.Configuration(
                    patchSize: p.patchSize, mergeFactor: p.mergeFactor, minImageTokens: p.minImageTokens,
                    maxImageTokens: p.maxImageTokens, imageMean: rgb(p.imageMean, 0.5), imageStd: rgb(p.imageStd, 0.5))
                let image = try ImageDecoder.decode(bytes)
                let processed = try LFM2VLImagePreprocessor(configuration: configuration).preprocess(image)
                let t1 = now()
                for slice in processed.slices {
                    rows += try encoder.encode(pixels: slice.values, width: slice.width, height: slice.height).count / projector.outputWidth
                }
                if rep > 0 {
                    result.preprocessMilliseconds.append(Double(t1 - t0) / 1e6)
                    result.encodeMilliseconds.append(ms(t1))
                }
                (result.width, result.height, result.slices) = (image.width, image.height, processed.slices.count)
                if rep == repetitions {
                    var shapes: [SigLIP2VisionEncoder.ProductShape] = []
                    for slice in processed.slices { shapes += try encoder.productShapes(width: slice.width, height: slice.height) }
                    result.roof = ProductRoof.measure(shapes)
                }
            case .audio(let encoder):
                guard kind == .audio else { throw MediaFlagError.wrongKind(projector: projector.path, encodes: .audio, asked: kind) }
                let samples = try WAVAudio.decodeMono16kHz(data)
                let mel = try LogMelExtractor().spectrogram(of: samples)
                let t1 = now()
                guard mel.frameCount <= encoder.maximumFrameCount else {
                    throw CLIError(
                        "the clip has \(mel.frameCount) mel frames, more than this encoder takes (\(encoder.maximumFrameCount), about \(encoder.maximumFrameCount / 100) s)"
                    )
                }
                rows = try encoder.encode(mel: mel.values, frames: mel.frameCount).count / projector.outputWidth
                if rep > 0 {
                    result.preprocessMilliseconds.append(Double(t1 - t0) / 1e6)
                    result.encodeMilliseconds.append(ms(t1))
                }
                result.seconds = Double(samples.count) / Double(WAVAudio.modelSampleRate)
            }
            result.positions = rows
        }
        return result
    }

    private static func rgb(_ v: [Float], _ fallback: Float) -> SIMD3<Float> {
        v.count == 3 ? SIMD3(v[0], v[1], v[2]) : SIMD3(repeating: fallback)
    }
}

extension Bench {
    /// The media bench (see `MediaBenchResult`): `--model` (for the companion mmproj file and
    /// the width check) with `--mmproj`, and `--image` or `--audio`.
    func runMedia() throws {
        guard repetitions >= 1 else { throw CLIError("-r must be >= 1") }
        guard parallel == nil, depth == 0 else { throw CLIError("--parallel and -d do not apply to --image or --audio") }
        if image != nil, audio != nil { throw MediaFlagError.bothKinds }
        let kind: MediaKind = image != nil ? .image : .audio
        // Without --model, --mmproj alone is enough (no width check, no companion search).
        let modelPath = model != nil || mmproj == nil ? try ModelCache.resolve(model) : nil
        let choice = try ProjectorChoice.require(
            try ProjectorChoice.resolve(mmproj, model: modelPath ?? ""), kind, model: modelPath ?? "(no --model)")
        let attachment = try MediaAttachment.read(image ?? audio ?? "", as: kind)
        let threadCount = max(1, threads ?? ThreadPool.defaultThreads)
        BLAS.setThreads(threadCount)
        let projector = try MediaEncoder.load(path: choice.path, pool: ThreadPool(threads: threadCount))
        if let modelPath {
            let file = try GGUFFile(path: modelPath)
            let arch = (try? file.metadata.string("general.architecture")) ?? ""
            if let width = file.metadata[arch + ".embedding_length"]?.intValue {
                try projector.checkLanguageModelWidth(width, languageModel: modelPath)
            }
        }
        let data: Data
        switch attachment.content {
        case .image(let d), .audio(let d): data = d
        case .text: throw CLIError("no media")
        }
        let result = try MediaBenchResult.measure(
            projector, kind: kind, data: data, name: URL(fileURLWithPath: attachment.path).lastPathComponent,
            repetitions: repetitions)
        if json {
            writeOut(result.json().serialized(.python) + "\n")
        } else {
            writeOut(result.table())
        }
    }
}
