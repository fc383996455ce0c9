import Foundation
import Testing

/// The compile-time errors of `@Generatable` and `@Guide`, checked by type-checking a source
/// file with `swiftc` and the package's own built macro plugin (`LeapSDKMacrosPlugin-tool`, built
/// beside the test executable because LeapSDK depends on it).
///
/// (A test target depending on the macro target directly, for swift-syntax's
/// `assertMacroExpansion`, would make SwiftPM build the whole test product a second time for
/// the host and break the tests that import the `leap-ref` executable; see
/// docs/structured-output.md.) The successful expansions are covered by the schemas that
/// GeneratableTests.swift checks on real `@Generatable` types.
@Suite("Generatable macro diagnostics")
struct GeneratableMacroDiagnosticsTests {
    /// The macro declarations of LeapSDK, restated so the snippet needs no module but the plugin.
    static let prelude = """
        protocol GeneratableType {}
        @attached(extension, conformances: GeneratableType, names: named(generatableSchema))
        macro Generatable(_ description: String) = #externalMacro(module: "LeapSDKMacrosPlugin", type: "GeneratableMacro")
        @attached(peer)
        macro Guide(_ description: String) = #externalMacro(module: "LeapSDKMacrosPlugin", type: "GuideMacro")
        struct Date {}

        """

    /// Each case: source lines, and the diagnostic expected on the case's first line + offset.
    static let cases: [(source: String, lineOffset: Int, message: String)] = [
        (
            "@Generatable(\"Bad\")\nstruct DictionaryProperty {\n    let table: [String: Int]\n}", 2,
            "property 'table' has a type @Generatable cannot describe: dictionaries are not supported (use a @Generatable struct)"
        ),
        (
            "@Generatable(\"Bad\")\nstruct TupleProperty {\n    let pair: (Int, Int)\n}", 2,
            "property 'pair' has a type @Generatable cannot describe: tuples are not supported (use a @Generatable struct)"
        ),
        (
            "@Generatable(\"Bad\")\nstruct DateProperty {\n    let ok: String\n    let when: Date\n}", 3,
            "property 'when' has a type @Generatable cannot describe: Date is not supported (use a String or a number)"
        ),
        (
            "@Generatable(\"Bad\")\nstruct SetProperty {\n    let ids: [Set<Int>]\n}", 2,
            "property 'ids' has a type @Generatable cannot describe: sets are not supported (use an array)"
        ),
        (
            "@Generatable(\"Bad\")\nstruct ClosureProperty {\n    let run: () -> Void\n}", 2,
            "property 'run' has a type @Generatable cannot describe: function types are not supported"
        ),
        (
            "@Generatable(\"Bad\")\nstruct UntypedProperty {\n    var count = 0\n}", 2,
            "property 'count' needs an explicit type annotation for @Generatable"
        ),
        (
            "@Generatable(\"A class\")\nfinal class Box {\n    let value: Int = 0\n}", 0,
            "@Generatable can only be applied to a struct, not a class"
        ),
        (
            "@Generatable(\"An enum\")\nenum Color { case red }", 0,
            "@Generatable can only be applied to a struct, not an enum"
        ),
        (
            "@Generatable(\"Renamed\")\nstruct Renamed {\n    let value: Int\n    enum CodingKeys: String, CodingKey { case value = \"v\" }\n}",
            3,
            "@Generatable does not support a custom CodingKeys enum; the JSON keys are the property names"
        ),
        (
            "@Guide(\"A function\")\nfunc describedFunction() {}", 0,
            "@Guide can only be applied to a stored property"
        )
    ]

    /// The macro plugin built with the tests: `LeapSDKMacrosPlugin-tool` in the test executable's directory.
    static func pluginPath() throws -> String {
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var directory = executable.deletingLastPathComponent()
        // On macOS the executable is inside an .xctest bundle: leave it.
        while directory.path.contains(".xctest") { directory = directory.deletingLastPathComponent() }
        let plugin = directory.appendingPathComponent("LeapSDKMacrosPlugin-tool").path
        guard FileManager.default.isExecutableFile(atPath: plugin) else {
            throw PluginNotFound(path: plugin)
        }
        return plugin
    }

    struct PluginNotFound: Error, CustomStringConvertible {
        let path: String
        var description: String { "the macro plugin was not found at \(path); build the package's tests with SwiftPM" }
    }

    @Test("unsupported types, missing annotations, non-structs, custom CodingKeys and a misplaced @Guide are errors at the right line")
    func diagnostics() throws {
        var source = Self.prelude
        var expected: [(line: Int, message: String)] = []
        for item in Self.cases {
            let firstLine = source.split(separator: "\n", omittingEmptySubsequences: false).count
            expected.append((firstLine + item.lineOffset, item.message))
            source += item.source + "\n\n"
        }
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("leap-generatable-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("Snippet.swift")
        try source.write(to: file, atomically: true, encoding: .utf8)

        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "swiftc", "-typecheck", "-swift-version", "6", "-diagnostic-style", "llvm", "-module-name", "Snippet",
            "-load-plugin-executable", try Self.pluginPath() + "#LeapSDKMacrosPlugin", file.path
        ]
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = Pipe()
        try process.run()
        let output = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()

        #expect(process.terminationStatus != 0, "the snippet must fail to compile")
        let errorLines = output.split(separator: "\n").filter { $0.contains("Snippet.swift:") && $0.contains(": error: ") }
        for (line, message) in expected {
            #expect(
                errorLines.contains { $0.contains("Snippet.swift:\(line):") && $0.contains(": error: \(message) (from macro") },
                "expected at line \(line): \(message)\ncompiler output:\n\(output)")
        }
        // Nothing but these errors (each once, as the macro reports each problem once).
        #expect(errorLines.count == expected.count, "compiler output:\n\(output)")
    }
}
