import Foundation

/// Locates test data: the fixtures committed under `Tests/Fixtures`, and the models that
/// `scripts/setup.sh` installs in the model cache. A missing model is a test failure with
/// instructions, never a skip.
public enum TestFixtures {
    /// `Tests/Fixtures` in this checkout.
    public static let directory: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures")

    /// Path of a committed fixture, e.g. `path("models/lfm2-tiny.gguf")`.
    public static func path(_ relative: String) -> String {
        directory.appendingPathComponent(relative).path
    }

    /// The model cache of scripts/setup.sh (`$LEAP_REF_CACHE/models`, default ~/.cache/leap-ref/models).
    public static var modelCache: String {
        let env = ProcessInfo.processInfo.environment
        return (env["LEAP_REF_CACHE"] ?? (NSHomeDirectory() + "/.cache/leap-ref")) + "/models"
    }

    /// The shipped SmolLM2-135M-Instruct Q4_1 GGUF.
    public static var smolLM2Q4_1: String { modelCache + "/SmolLM2-135M-Instruct.Q4_1.gguf" }

    /// Gemma 3 270M in Q4_K_M (`scripts/setup.sh --gemma`, which `scripts/test.sh` runs).
    public static var gemma3_270mQ4_K_M: String { modelCache + "/gemma-3-270m-q4_k_m.gguf" }

    /// Returns `path` if the file exists, else throws an error telling how to install it.
    public static func require(_ path: String) throws -> String {
        guard FileManager.default.fileExists(atPath: path) else { throw MissingFixture(path: path) }
        return path
    }

    public struct MissingFixture: Error, CustomStringConvertible {
        public let path: String
        public var description: String { "missing \(path): run ./scripts/setup.sh --gemma first (it installs the models the tests use)" }
    }
}
