// A libFuzzer target over the GGUF reader. Built by `scripts/fuzz.sh gguf` with
// `-sanitize=fuzzer,address` and `-D LEAP_FUZZ`, it hands libFuzzer `exercise`
// (Fuzz/FuzzDriver). Built normally (as `swift build` does for every target), it is a
// replayer: `GGUFFuzz FILE...` parses each file and reports the outcome, which is how a
// crash input found by the fuzzer is reproduced.
import FuzzDriver
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
@_cdecl("GGUFFuzz_main")
func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    runLibFuzzer(argc, argv, exercise)
}
#else
@main
struct Replay {
    static func main() {
        replay(usage: "usage: GGUFFuzz FILE... (replays inputs through the GGUF reader; see docs/fuzzing.md)", exercise)
    }
}
#endif
