import Foundation
import LeapJSON
import Testing

@testable import ChatTemplates

/// Every template in `Fixtures/chat-templates/templates` rendered with every conversation
/// in `cases.json`, compared byte for byte with what Python's jinja2 produced
/// (`expected/<template>/<case>.txt`), or with the error it raised (`.error`).
enum ChatTemplateFixtures {
    static let root: URL = Bundle.module.resourceURL!.appendingPathComponent("Fixtures/chat-templates")

    static let templateNames: [String] = {
        let dir = root.appendingPathComponent("templates")
        let files = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
        return files.filter { $0.hasSuffix(".jinja") }.map { String($0.dropLast(6)) }.sorted()
    }()

    static let casesJSON: String = (try? String(contentsOf: root.appendingPathComponent("cases.json"), encoding: .utf8)) ?? "[]"

    static let caseNames: [String] = {
        guard case .array(let cases)? = try? JSONValue.parse(casesJSON) else { return [] }
        return cases.compactMap { $0["name"]?.stringValue }
    }()

    static func templateSource(_ name: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent("templates/\(name).jinja"), encoding: .utf8)
    }

    /// The expected file for one pair: (`txt` or `error`, contents).
    static func expected(_ template: String, _ caseName: String) -> (kind: String, text: String)? {
        for kind in ["txt", "error"] {
            let url = root.appendingPathComponent("expected/\(template)/\(caseName).\(kind)")
            if let data = try? Data(contentsOf: url) { return (kind, String(decoding: data, as: UTF8.self)) }
        }
        return nil
    }

    /// Results per template, rendered once and shared by the parameterized tests.
    static let results = Cache()

    final class Cache: @unchecked Sendable {
        private var store: [String: [FixtureCaseResult]] = [:]
        private let lock = NSLock()

        func results(for template: String) throws -> [FixtureCaseResult] {
            lock.lock()
            defer { lock.unlock() }
            if let r = store[template] { return r }
            let r = try renderFixtureCases(
                templateSource: ChatTemplateFixtures.templateSource(template), casesJSON: ChatTemplateFixtures.casesJSON)
            store[template] = r
            return r
        }
    }

    struct Pair: CustomTestStringConvertible, Sendable {
        let template: String
        let caseName: String
        var testDescription: String { "\(template) / \(caseName)" }
    }

    static let pairs: [Pair] = templateNames.flatMap { t in caseNames.map { Pair(template: t, caseName: $0) } }
}

@Suite struct FixtureTests {
    @Test func fixturesArePresent() {
        #expect(ChatTemplateFixtures.templateNames.count == 40)
        #expect(ChatTemplateFixtures.caseNames.count == 10)
        #expect(ChatTemplateFixtures.pairs.count == 400)
    }

    @Test(arguments: ChatTemplateFixtures.pairs)
    func rendersLikeJinja2(_ pair: ChatTemplateFixtures.Pair) throws {
        let expected = try #require(ChatTemplateFixtures.expected(pair.template, pair.caseName))
        let results = try ChatTemplateFixtures.results.results(for: pair.template)
        let result = try #require(results.first { $0.name == pair.caseName })
        switch (result.result, expected.kind) {
        case (.success(let text), "txt"):
            #expect(text == expected.text)
            if text != expected.text { Issue.record(Comment(rawValue: firstDifference(text, expected.text))) }
        case (.failure(let error), "error"):
            #expect(result.fileContents == expected.text)
            #expect(error.kind != .unsupported && error.kind != .limit)
        case (.success(let text), _):
            Issue.record("rendered \(text.utf8.count) bytes, jinja2 raised: \(expected.text)")
        case (.failure(let error), _):
            Issue.record("failed with \(error), jinja2 rendered \(expected.text.utf8.count) bytes")
        }
    }
}

/// Where two texts first differ, with a little context.
func firstDifference(_ a: String, _ b: String) -> String {
    let x = Array(a.unicodeScalars), y = Array(b.unicodeScalars)
    var i = 0
    while i < x.count, i < y.count, x[i] == y[i] { i += 1 }
    func around(_ s: [Unicode.Scalar]) -> String {
        let lo = max(0, i - 40), hi = min(s.count, i + 40)
        return String(String.UnicodeScalarView(s[lo..<hi])).debugDescription
    }
    return "first difference at scalar \(i): got \(around(x)) expected \(around(y))"
}
