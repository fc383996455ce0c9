// A libFuzzer target over the media decoders: PNG and JPEG (`ImageDecoder`, then LFM2-VL's
// preprocessing of what decodes) and WAV (`WAVAudio.decodeMono16kHz`, then the log-mel
// spectrogram). Built by `scripts/fuzz.sh media` with `-sanitize=fuzzer,address` and
// `-D LEAP_FUZZ`; built normally it is a replayer: `MediaFuzz FILE...` runs each file
// through the same steps and prints the outcome (docs/fuzzing.md).
import Audio
import Foundation
import FuzzDriver
import Images

/// Limits small enough for a fuzzer's many inputs a second, large enough that every path
/// of the decoders (progressive JPEG, interlaced PNG, resampling) is reached.
let imageLimits = ImageLimits(maxPixels: 4_000_000, maxInputBytes: 1 << 20)
/// Images up to this many pixels also go through the preprocessing (resize, tiles).
let preprocessedPixels = 250_000
/// The longest clip decoded and turned into a spectrogram.
let maximumSeconds = 30.0

/// Every input goes to both decoders (each refuses the other's bytes at their signature).
/// Any outcome other than a result or a typed error (`ImageError`,
/// `ImagePreprocessingError`, `WAVError`, `LogMelError`) is a bug: a trap, an out-of-bounds
/// read, memory over libFuzzer's limit, or an input slower than its timeout.
func exercise(_ bytes: UnsafeRawBufferPointer) -> String {
    [image(bytes), audio(bytes)].joined(separator: "; ")
}

func image(_ bytes: UnsafeRawBufferPointer) -> String {
    do throws(ImageError) {
        let decoded = try ImageDecoder.decode([UInt8](bytes), limits: imageLimits)
        var summary = "image \(decoded.width)x\(decoded.height)"
        guard decoded.width * decoded.height <= preprocessedPixels else { return summary }
        do {
            let processed = try LFM2VLImagePreprocessor().preprocess(decoded)
            summary += ", \(processed.slices.count) slices"
        } catch {
            summary += ", preprocessing: \(error)"
        }
        return summary
    } catch {
        return "image: \(error)"
    }
}

func audio(_ bytes: UnsafeRawBufferPointer) -> String {
    let samples: [Float]
    do {
        samples = try WAVAudio.decodeMono16kHz(Data(bytes), maximumSeconds: maximumSeconds)
    } catch {
        return "audio: \(error)"
    }
    do {
        let mel = try LogMelExtractor(maximumSampleCount: Int(maximumSeconds) * LogMelExtractor.sampleRate).spectrogram(of: samples)
        return "audio \(samples.count) samples, \(mel.frameCount) frames"
    } catch {
        return "audio \(samples.count) samples: \(error)"
    }
}

#if LEAP_FUZZ
@_cdecl("MediaFuzz_main")
func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    runLibFuzzer(argc, argv, exercise)
}
#else
@main
struct Replay {
    static func main() {
        replay(usage: "usage: MediaFuzz FILE... (replays inputs through the image and WAV decoders; see docs/fuzzing.md)", exercise)
    }
}
#endif
