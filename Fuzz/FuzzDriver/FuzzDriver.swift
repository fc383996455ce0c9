// What the libFuzzer targets (Fuzz/GGUFFuzz, Fuzz/MediaFuzz) share: handing libFuzzer the
// target's `exercise` function when built with `-sanitize=fuzzer` and `-D LEAP_FUZZ`
// (scripts/fuzz.sh), and otherwise replaying files through it (docs/fuzzing.md).
import Foundation

/// One input through a target: what it made of it, or the typed error it refused it with.
public typealias FuzzExercise = @Sendable (UnsafeRawBufferPointer) -> String

#if LEAP_FUZZ
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
) -> Int32

/// The target being fuzzed (a C callback cannot capture it).
nonisolated(unsafe) var fuzzedExercise: FuzzExercise?

/// Runs libFuzzer over `exercise` with the program's arguments. A target's entry point
/// (`@_cdecl("NAME_main")`: SwiftPM names an executable's entry point so and aliases `main`
/// to it, so libFuzzer's own `main` stays unused) calls it.
public func runLibFuzzer(
    _ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ exercise: @escaping FuzzExercise
) -> Int32 {
    fuzzedExercise = exercise
    var argc = argc
    var argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv) { data, size in
        _ = fuzzedExercise?(UnsafeRawBufferPointer(start: data, count: size))
        return 0
    }
}
#endif

/// Runs each file named on the command line through `exercise` and prints the outcome: how
/// an input libFuzzer reported is reproduced. `usage` is printed when no file is named.
public func replay(usage: String, _ exercise: FuzzExercise) {
    let paths = CommandLine.arguments.dropFirst()
    if paths.isEmpty { print(usage) }
    for path in paths {
        guard let data = FileManager.default.contents(atPath: path) else {
            print("\(path): unreadable")
            continue
        }
        print("\(path): " + data.withUnsafeBytes { exercise($0) })
    }
}
