import Foundation
import TestSupport
import Testing

/// `leap-ref bench`'s text tables and its `--cache-type` flag (never its speed), and the flag's
/// bad values on every command that takes it.
@Suite struct BenchCLITests {
    static let model = TestFixtures.path("models/lfm2-tiny.gguf")

    /// With `--cache-type f16` and a depth, the pp and tg rows are there and the footer names
    /// the cache; the decode reads the F16 cache it filled.
    @Test func benchRunsWithAnF16Cache() throws {
        for type in ["f16", "f32"] {
            let run = try LeapRefBinary.run([
                "bench", "--model", Self.model, "-p", "8", "-n", "4", "-d", "16", "-r", "1", "-t", "1", "--cache-type", type
            ])
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.stdout.contains("| pp8 @ d16 |") && run.stdout.contains("| tg4 @ d16 |"), "\(run.stdout)")
            #expect(run.stdout.contains("; \(type) cache;"), "\(run.stdout)")
        }
    }

    /// A value that is not a cache type is refused before any model is read, with the
    /// values it takes.
    @Test(arguments: ["bench", "chat", "serve"])
    func anUnknownCacheTypeIsRefused(_ command: String) throws {
        let run = try LeapRefBinary.run([command, "--model", Self.model, "--cache-type", "q8_0"])
        #expect(run.status != 0)
        #expect(run.stdout.isEmpty)
        #expect(run.stderr.contains("q8_0") && run.stderr.contains("f16"), "\(run.stderr)")
    }
}
