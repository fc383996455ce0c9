// A libFuzzer target over the GGUF reader. Built by scripts/fuzz-gguf.sh with
// `-sanitize=fuzzer,address` and `-D LEAP_FUZZ`, libFuzzer supplies `main` and calls
// `LLVMFuzzerTestOneInput` with mutated files. Built normally (as `swift build` does for
// every target), it is a replayer: `GGUFFuzz FILE...` parses each file and reports the
// outcome, which is how a crash input found by the fuzzer is reproduced.
import GGUF

/// Parses one input and touches everything a consumer would: metadata accessors and every
/// tensor's data view. Any outcome other than success or a `GGUFError` is a bug.
func exercise(_ bytes: UnsafeRawBufferPointer) -> String {
    do {
        let file = try GGUFFile(buffer: bytes)
        var checksum = 0
        for (key, value) in file.metadata.pairs {
            checksum &+= key.utf8.count
            if case .array(let a) = value { checksum &+= a.count }
            _ = try? file.metadata.int(key)
            _ = try? file.metadata.string(key)
        }
        for t in file.tensors {
            let data = file.data(for: t)
            if let first = data.first { checksum &+= Int(first) }
            if let last = data.last { checksum &+= Int(last) }
        }
        return "ok: \(file.tensors.count) tensors, \(file.metadata.count) keys (\(checksum))"
    } catch {
        return "error: \(error)"
    }
}

#if LEAP_FUZZ
/// libFuzzer's entry for programs that own `main` (SwiftPM names an executable's entry
/// point `GGUFFuzz_main` and aliases `main` to it, so libFuzzer's own `main` stays unused).
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
) -> Int32

@_cdecl("GGUFFuzz_main")
func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var argc = argc
    var argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv) { data, size in
        _ = exercise(UnsafeRawBufferPointer(start: data, count: size))
        return 0
    }
}
#else
import Foundation

@main
struct Replay {
    static func main() {
        let paths = CommandLine.arguments.dropFirst()
        if paths.isEmpty {
            print("usage: GGUFFuzz FILE... (replays inputs through the GGUF reader; see docs/fuzzing.md)")
        }
        for path in paths {
            guard let data = FileManager.default.contents(atPath: path) else {
                print("\(path): unreadable")
                continue
            }
            print("\(path): " + data.withUnsafeBytes { exercise($0) })
        }
    }
}
#endif
