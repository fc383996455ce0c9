import ArgumentParser
import Foundation
import LeapSDKCore

/// `leap-ref pull NAME QUANT`: a model of LiquidAI's library into the cache, by the same
/// code as `Leap.shared.load(model:quantization:)`.
struct Pull: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Download a model of LiquidAI's model library (LEAP) by name and quantization into the cache.",
        discussion: """
            Asks the library's model-manifest endpoint for the manifest of NAME at QUANT, then \
            downloads the manifest's files (the GGUF and, where the model has them, its mmproj, \
            vocoder and audio tokenizer) into $LEAP_REF_CACHE/library/NAME/QUANT (default \
            ~/.cache/leap-ref/library), resuming an interrupted download and checking each \
            file's sha256. Files already in the cache are checked, not downloaded again. Prints \
            the files' paths. Any command's --model accepts NAME:QUANT and pulls the same way. \
            The library is LiquidAI's (https://leap.liquid.ai) unless --library or \
            LEAP_REF_LIBRARY_URL names another. See docs/leap-sdk.md.
            """
    )

    @Argument(help: "The model's name in the library (e.g. LFM2.5-1.2B-Instruct).")
    var name: String?

    @Argument(help: "The quantization (e.g. Q4_0, Q8_0, F16).")
    var quantization: String?

    @Option(name: .customLong("manifest"), help: "Pull the model of this manifest URL instead of NAME QUANT.")
    var manifest: String?

    @Option(name: .customLong("library"), help: "The library's base URL (default: $LEAP_REF_LIBRARY_URL, else LiquidAI's).")
    var library: String?

    @Option(name: .customLong("cache"), help: "The cache folder (default: $LEAP_REF_CACHE/library).")
    var cache: String?

    @Flag(name: .customLong("quiet"), help: "Print no progress.")
    var quiet = false

    func run() async throws {
        try await runReportingErrors {
            let lib = LeapModelLibrary(
                baseURL: try library.map { text in
                    guard let url = URL(string: text), url.scheme != nil else { throw CLIError("--library: '\(text)' is not a URL") }
                    return url
                },
                cacheDirectory: cache.map { URL(fileURLWithPath: $0) })
            let files: ModelLibraryFiles
            if let manifest {
                guard name == nil, quantization == nil else { throw CLIError("give NAME QUANT or --manifest URL, not both") }
                guard let url = URL(string: manifest), url.scheme != nil else { throw CLIError("--manifest: '\(manifest)' is not a URL") }
                let meter = LibraryPull.meter(label: url.lastPathComponent, quiet: quiet)
                files = try lib.pull(manifestURL: url, progress: meter)
            } else {
                guard let name, let quantization else { throw CLIError("pull needs NAME and QUANT (e.g. pull LFM2-350M Q4_0)") }
                files = try LibraryPull.pull(name, quantization, library: lib, quiet: quiet)
            }
            for line in LibraryPull.summary(files) { writeOut(line + "\n") }
        }
    }
}

/// Pulling a model of the library for the command line: `pull`, and `--model NAME:QUANT`
/// (`ModelCache.resolve`).
enum LibraryPull {
    /// `NAME:QUANT` as a name and a quantization; nil for anything else (a path: it has a
    /// `/`, or no `:`, or an empty side).
    static func parse(_ text: String) -> (name: String, quantization: String)? {
        guard !text.contains("/"), let colon = text.lastIndex(of: ":") else { return nil }
        let name = String(text[..<colon]), quantization = String(text[text.index(after: colon)...])
        guard !name.isEmpty, !quantization.isEmpty else { return nil }
        return (name, quantization)
    }

    /// Pulls `name` at `quantization` (blocking), with progress on stderr unless `quiet`.
    static func pull(_ name: String, _ quantization: String, library: LeapModelLibrary = .shared, quiet: Bool = false) throws
        -> ModelLibraryFiles
    {
        try library.pull(model: name, quantization: quantization, progress: meter(label: "\(name) \(quantization)", quiet: quiet))
    }

    /// A progress closure printing `label: 42% (12.3 MB/s)` on stderr, one line per tenth
    /// on a pipe, updated in place on a terminal.
    static func meter(label: String, quiet: Bool) -> @Sendable (Double, Int64) -> Void {
        guard !quiet else { return { _, _ in } }
        let terminal = isatty(FileHandle.standardError.fileDescriptor) != 0
        let last = LastStep()
        return { fraction, speed in
            let step = Int(fraction * (terminal ? 100 : 10))
            guard last.advance(to: step) else { return }
            let percent = Int(fraction * 100)
            let rate = String(format: "%.1f MB/s", Double(speed) / 1_000_000)
            let line = "pulling \(label): \(percent)% (\(rate))"
            let end = fraction >= 1 ? "\n" : (terminal ? "" : "\n")
            FileHandle.standardError.write(Data(((terminal ? "\r" : "") + line + end).utf8))
        }
    }

    /// The files, one `key: path` line each.
    static func summary(_ files: ModelLibraryFiles) -> [String] {
        var lines = ["model: \(files.modelPath)"]
        if let p = files.multimodalProjectorPath { lines.append("multimodal_projector: \(p)") }
        if let p = files.audioDecoderPath { lines.append("audio_decoder: \(p)") }
        if let p = files.audioTokenizerPath { lines.append("audio_tokenizer: \(p)") }
        return lines
    }

    /// The last progress step printed.
    private final class LastStep: @unchecked Sendable {
        private let lock = NSLock()
        private var step = -1

        func advance(to next: Int) -> Bool {
            lock.withLock {
                guard next > step else { return false }
                step = next
                return true
            }
        }
    }
}
