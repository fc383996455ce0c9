// swift-tools-version:6.1
//
// ServeBench, the serving benchmark's client (see Sources/ServeBench/main.swift and
// scripts/bench-serve.sh), in a package of its own: its HTTP client (async-http-client)
// brings swift-nio-ssl and BoringSSL, which the engine does not need, so the root
// package's builds and tests do not compile them. It reads and writes JSON with the
// engine's LeapJSON, from the root package by path.
//
//     swift build -c release --package-path Benchmarks/ServeBench
//     swift run -c release --package-path Benchmarks/ServeBench ServeBench --url http://127.0.0.1:8080

import PackageDescription

let package = Package(
    name: "ServeBench",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "leap-ref", path: "../.."),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2")
    ],
    targets: [
        .executableTarget(
            name: "ServeBench",
            dependencies: [
                .product(name: "LeapJSON", package: "leap-ref"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio")
            ]
        )
    ]
)
