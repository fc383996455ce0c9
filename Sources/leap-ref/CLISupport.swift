import ArgumentParser
import Foundation
import GGUF
import Models

/// Where the set-up script puts models, and how commands find the default one.
enum ModelCache {
    /// `$LEAP_REF_CACHE/models`, default `~/.cache/leap-ref/models`.
    static var directory: String {
        let env = ProcessInfo.processInfo.environment
        let root = env["LEAP_REF_CACHE"] ?? (NSHomeDirectory() + "/.cache/leap-ref")
        return root + "/models"
    }

    /// The default model, SmolLM2-135M-Instruct (Q4_1), fetched by scripts/setup.sh.
    static var defaultModelPath: String { directory + "/SmolLM2-135M-Instruct.Q4_1.gguf" }

    /// The model the user named, or the default one; a missing file is a user error that
    /// says how to get the model. A `NAME:QUANT` that is not a file is a model of the
    /// library, pulled into the cache (`leap-ref pull`) and its GGUF's path returned.
    static func resolve(_ path: String?) throws -> String {
        if let path {
            guard FileManager.default.fileExists(atPath: path) else {
                if let (name, quantization) = LibraryPull.parse(path) { return try LibraryPull.pull(name, quantization).modelPath }
                throw CLIError("model file '\(path)' does not exist (a model of the library is NAME:QUANT)")
            }
            return path
        }
        let path = defaultModelPath
        guard FileManager.default.fileExists(atPath: path) else {
            throw CLIError("the default model is not installed at \(path); run ./scripts/setup.sh to fetch it, or pass --model FILE.gguf")
        }
        return path
    }
}

/// A user-facing error: printed as one line, then the command exits with status 1.
struct CLIError: Error, CustomStringConvertible {
    let description: String
    init(_ message: String) { description = message }
}

/// Runs `body`, turning any error into one line on stderr and exit status 1.
func runReportingErrors(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as CLIError {
        printError(error.description)
    } catch let error as CustomStringConvertible {
        printError(error.description)
    } catch {
        printError("\(error)")
    }
}

private func printError(_ message: String) -> Never {
    FileHandle.standardError.write(Data(("leap-ref: error: " + message + "\n").utf8))
    exit(1)
}

/// Writes text to stdout without buffering delays (for streaming output).
func writeOut(_ text: String) {
    FileHandle.standardOutput.write(Data(text.utf8))
}

extension KVCacheType: ExpressibleByArgument {}

extension SpeechVocoder.WeightStorage {
    /// The storage `--vocoder-weights` names (`serve`, `speak`): `f32` or `stored`.
    init(flag: String) throws {
        switch flag {
        case "f32": self = .float32
        case "stored": self = .asStored
        default: throw CLIError("--vocoder-weights is f32 or stored, not '\(flag)'")
        }
    }
}
