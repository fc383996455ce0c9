// swift-tools-version:6.1
//
// leap-ref: a pure-Swift LLM inference engine and LEAP-compatible SDK.
//
// Build flags. On an x86-64 Linux host whose CPU has AVX2, FMA and F16C, the kernels are
// compiled with those instruction sets enabled and the `LEAP_X86_AVX2` condition defined
// (and `LEAP_X86_AVX512VNNI` when the host also has AVX-512 BW/VL and VNNI), so that the
// SIMD fast paths written with the compiler's x86 intrinsics are inlined. This is the
// equivalent of llama.cpp's GGML_NATIVE default. Set `LEAP_REF_PORTABLE=1` in the
// environment to build the portable Swift kernels only (for a binary that must run on any
// x86-64, or when using leap-ref as a versioned dependency, where SwiftPM forbids
// unsafe flags), or `LEAP_REF_NO_VNNI=1` for the AVX2 kernels only on a host that has
// AVX-512 VNNI (to test and measure that path; valgrind cannot run AVX-512 code). See
// docs/performance.md.

import CompilerPluginSupport
import Foundation
import PackageDescription

/// CPU features of the build host, read from /proc/cpuinfo (Linux only).
func hostCPUFlags() -> Set<String> {
    guard let info = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8) else { return [] }
    for line in info.split(separator: "\n") where line.hasPrefix("flags") {
        let parts = line.split(separator: ":", maxSplits: 1)
        if parts.count == 2 { return Set(parts[1].split(separator: " ").map(String.init)) }
    }
    return []
}

var kernelSwiftSettings: [SwiftSetting] = []
let portable = ProcessInfo.processInfo.environment["LEAP_REF_PORTABLE"].map { $0 != "0" && !$0.isEmpty } ?? false
// `LEAP_REF_FORCE_VNNI=1` compiles the AVX-512 VNNI kernels whatever the host has: a
// compile-only check (scripts/test.sh runs it on hosts without VNNI), never to be run there.
let forceVNNI = ProcessInfo.processInfo.environment["LEAP_REF_FORCE_VNNI"].map { $0 != "0" && !$0.isEmpty } ?? false
// `LEAP_REF_NO_VNNI=1` compiles the AVX2 kernels without the VNNI ones whatever the host
// has (and Swift's own code for haswell): the AVX2-only path, tested and measured on a
// VNNI host.
let noVNNI = ProcessInfo.processInfo.environment["LEAP_REF_NO_VNNI"].map { $0 != "0" && !$0.isEmpty } ?? false
#if arch(x86_64) && os(Linux)
if !portable {
    var flags = hostCPUFlags()
    if forceVNNI { flags.formUnion(["avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni"]) }
    if noVNNI { flags.remove("avx512_vnni") }
    if flags.isSuperset(of: ["avx2", "fma", "f16c"]) {
        var cc = ["-mavx2", "-mfma", "-mf16c"]
        // Swift's own code generation (generic SIMD types, auto-vectorized loops) gets the
        // same instruction sets through -target-cpu; the -Xcc flags cover the intrinsics.
        var cpu = "haswell"
        kernelSwiftSettings.append(.define("LEAP_X86_AVX2"))
        if flags.isSuperset(of: ["avx512f", "avx512bw", "avx512vl", "avx512_vnni"]) {
            cc += ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512vnni"]
            cpu = "cascadelake"
            kernelSwiftSettings.append(.define("LEAP_X86_AVX512VNNI"))
        }
        kernelSwiftSettings.append(.unsafeFlags(cc.flatMap { ["-Xcc", $0] } + ["-target-cpu", cpu]))
    }
}
#endif

let package = Package(
    name: "leap-ref",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "leap-ref", targets: ["leap-ref"]),
        .library(name: "LeapJSON", targets: ["LeapJSON"]),
        .library(name: "Images", targets: ["Images"]),
        .library(name: "Checksums", targets: ["Checksums"]),
        .library(name: "GGUF", targets: ["GGUF"]),
        .library(name: "Kernels", targets: ["Kernels"]),
        .library(name: "Tokenizers", targets: ["Tokenizers"]),
        .library(name: "Audio", targets: ["Audio"]),
        .library(name: "ChatTemplates", targets: ["ChatTemplates"]),
        .library(name: "Models", targets: ["Models"]),
        .library(name: "Reference", targets: ["Reference"]),
        .library(name: "Quantization", targets: ["Quantization"]),
        .library(name: "Sampling", targets: ["Sampling"]),
        .library(name: "Grammar", targets: ["Grammar"]),
        .library(name: "LeapSDK", targets: ["LeapSDK"]),
        // What LEAP SDK v0.10 apps `import` for `@Generatable` / `@Guide` (it re-exports LeapSDK).
        .library(name: "LeapSDKMacros", targets: ["LeapSDKMacros"]),
        .library(name: "RunAnywhere", targets: ["RunAnywhere"]),
        .library(name: "OpenAIWire", targets: ["OpenAIWire"]),
        .library(name: "LeapServer", targets: ["LeapServer"])
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/swiftlang/swift-syntax", from: "603.0.0"),
        // The HTTP server (LeapServer only; the SDK does not depend on NIO). No traits: the
        // swift-configuration support and full Foundation are not used.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: []),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0")
        // Benchmarks/ServeBench is a package of its own (its HTTP client brings BoringSSL).
    ],
    targets: [
        .systemLibrary(
            name: "CBLAS",
            pkgConfig: "openblas",
            providers: [.apt(["libopenblas-dev"]), .brew(["openblas"])]
        ),
        // `leap_prefetch`: a one-line C header for the software prefetch of the decode kernels.
        .systemLibrary(name: "CPUHints", path: "Sources/CPUHints"),
        .target(name: "LeapJSON"),
        // PNG and JPEG decoding to RGB and LFM2-VL's image preprocessing; no dependencies.
        .target(name: "Images"),
        // SHA-256: the digest of decoded pixels `leap-ref logits` reports, and the tests'
        // checksums of files; no dependencies.
        .target(name: "Checksums"),
        .target(name: "GGUF"),
        .target(name: "Kernels", dependencies: ["GGUF", "CBLAS", "CPUHints"], swiftSettings: kernelSwiftSettings),
        .target(name: "Tokenizers", dependencies: ["GGUF"]),
        .target(name: "Audio"),
        .target(name: "ChatTemplates", dependencies: ["LeapJSON"]),
        .target(name: "Models", dependencies: ["GGUF", "Kernels", "Sampling", "Audio"], swiftSettings: kernelSwiftSettings),
        // The plain references: the forward pass and both media encoders written out, the
        // oracles the tests hold the engine to and a first read (docs/walkthrough.md). Only
        // test targets may depend on it, never the engine (scripts/check-reference-isolation.sh).
        .target(name: "Reference", dependencies: ["GGUF", "Kernels", "Models"]),
        .target(name: "Quantization", dependencies: ["GGUF", "Kernels"]),
        .target(name: "Sampling"),
        .target(name: "Grammar", dependencies: ["LeapJSON"]),
        // The compiler plugin that expands `@Generatable` / `@Guide` (the macros are declared
        // in LeapSDK; the library LeapSDKMacros re-exports them under v0.10's product name).
        .macro(
            name: "LeapSDKMacrosPlugin",
            dependencies: [
                .product(name: "SwiftSyntaxMacros", package: "swift-syntax"),
                .product(name: "SwiftCompilerPlugin", package: "swift-syntax")
            ]
        ),
        .target(
            name: "LeapSDKCore",
            dependencies: [
                "LeapJSON", "GGUF", "Kernels", "Models", "Sampling", "Tokenizers", "ChatTemplates", "Grammar", "Audio", "Images",
                "Checksums"
            ]
        ),
        .target(name: "LeapSDK", dependencies: ["LeapSDKCore", "LeapJSON", "LeapSDKMacrosPlugin"]),
        .target(name: "LeapSDKMacros", dependencies: ["LeapSDK"]),
        .target(name: "RunAnywhere", dependencies: ["LeapSDKCore", "LeapJSON"]),
        .target(name: "OpenAIWire", dependencies: ["LeapJSON"]),
        .target(
            name: "LeapServer",
            dependencies: [
                "OpenAIWire", "LeapSDKCore", "LeapJSON",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")
            ],
            // The chat page at `/` (plain HTML, CSS and JavaScript; docs/serving.md).
            resources: [.copy("WebUI")]
        ),
        .executableTarget(
            name: "leap-ref",
            dependencies: [
                "LeapJSON", "GGUF", "Kernels", "Models", "Quantization", "Sampling", "Tokenizers", "ChatTemplates", "Grammar",
                "LeapSDKCore", "RunAnywhere", "LeapServer", "OpenAIWire", "Images", "Audio", "Checksums",
                .product(name: "ArgumentParser", package: "swift-argument-parser")
            ]
        ),
        .executableTarget(
            name: "KernelBench",
            dependencies: ["GGUF", "Kernels"],
            path: "Benchmarks/KernelBench",
            swiftSettings: kernelSwiftSettings
        ),
        .executableTarget(
            name: "TokenizerBench",
            dependencies: ["GGUF", "Tokenizers"],
            path: "Benchmarks/TokenizerBench"
        ),
        .target(name: "TestSupport", dependencies: ["Checksums", "Sampling"], path: "Tests/TestSupport"),
        .target(name: "FuzzDriver", path: "Fuzz/FuzzDriver"),
        .executableTarget(name: "GGUFFuzz", dependencies: ["GGUF", "FuzzDriver"], path: "Fuzz/GGUFFuzz"),
        .executableTarget(name: "MediaFuzz", dependencies: ["Images", "Audio", "FuzzDriver"], path: "Fuzz/MediaFuzz"),
        .testTarget(name: "LeapJSONTests", dependencies: ["LeapJSON"]),
        .testTarget(name: "ImagesTests", dependencies: ["Images", "TestSupport", "LeapJSON"]),
        .testTarget(name: "GGUFTests", dependencies: ["GGUF", "TestSupport"]),
        .testTarget(name: "KernelsTests", dependencies: ["GGUF", "Kernels", "TestSupport"], resources: [.copy("Fixtures")]),
        .testTarget(name: "ModelsTests", dependencies: ["Models", "Reference", "GGUF", "Kernels", "LeapJSON", "Sampling", "TestSupport"]),
        .testTarget(name: "QuantizationTests", dependencies: ["Quantization", "Models", "GGUF", "Kernels", "TestSupport"]),
        .testTarget(name: "AudioTests", dependencies: ["Audio", "TestSupport", "LeapJSON", "Sampling"]),
        .testTarget(name: "TokenizersTests", dependencies: ["GGUF", "Tokenizers", "TestSupport", "leap-ref"]),
        .testTarget(name: "SamplingTests", dependencies: ["Sampling"]),
        .testTarget(name: "CLITests", dependencies: ["leap-ref", "GGUF", "LeapJSON", "LeapSDKCore", "TestSupport"]),
        .testTarget(name: "ChatTemplatesTests", dependencies: ["ChatTemplates", "Sampling"], resources: [.copy("Fixtures")]),
        .testTarget(
            name: "LeapSDKTests",
            dependencies: [
                "LeapSDK", "LeapSDKMacros", "LeapSDKCore", "GGUF", "LeapJSON", "Grammar", "Sampling", "Models", "Tokenizers",
                "TestSupport"
            ]),
        .testTarget(name: "RunAnywhereTests", dependencies: ["RunAnywhere", "LeapSDKCore", "LeapJSON", "GGUF", "TestSupport"]),
        .testTarget(name: "OpenAIWireTests", dependencies: ["OpenAIWire", "LeapJSON"]),
        .testTarget(
            name: "LeapServerTests",
            dependencies: [
                "LeapServer", "OpenAIWire", "LeapSDKCore", "LeapJSON", "Grammar", "TestSupport", "GGUF", "Tokenizers",
                // Not HummingbirdTesting: its HTTP client brings BoringSSL (InProcessClient.swift).
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log")
            ]
        ),
        .testTarget(name: "GrammarTests", dependencies: ["Grammar", "LeapJSON", "Sampling"], resources: [.copy("Fixtures")]),
        .executableTarget(name: "SchemaFuzz", dependencies: ["Grammar", "LeapJSON", "Sampling"], path: "Fuzz/SchemaFuzz")
    ]
)

// `LEAP_REF_OPTIMIZE=1`: optimize this package's own code (-O) in a debug build. The test
// script uses it: a release build would also compile swift-syntax (for the @Generatable
// macro) with optimization, which takes over ten minutes on two cores, while the tests need
// only the engine to be fast. The last -O on the command line wins over debug's -Onone.
if ProcessInfo.processInfo.environment["LEAP_REF_OPTIMIZE"] == "1" {
    for target in package.targets where target.type != .macro && target.type != .system {
        target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-O"])]
    }
}
