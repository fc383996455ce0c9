import Foundation
import LeapJSON
import Testing

@testable import Grammar

/// Runs the official JSON-Schema-Test-Suite (draft 2020-12) through the compiler and matcher.
///
/// For every case that compiles: no invalid instance may be accepted (exactness), and every
/// valid instance must be accepted unless it is listed in `expectedRejections` with the
/// documented reason (property order, canonical spellings). Cases that do not compile must
/// fail with `.unsupported` naming one of the keywords listed in `expectedUnsupported`.
struct SuiteOutcome {
    var cases = 0, compiled = 0, unsupported = 0, tests = 0, passedTests = 0
    var invalidAccepted: [String] = []
    var validRejected: [String] = []
    var unexpectedErrors: [String] = []
    var unsupportedCases: [String] = []
}

func fixtureURL(_ path: String) -> URL {
    Bundle.module.resourceURL!.appendingPathComponent("Fixtures").appendingPathComponent(path)
}

func accepts(_ grammar: Grammar, _ text: String) -> Bool {
    let m = GrammarMatcher(grammar: grammar)
    return m.accept(text) && m.canAcceptEnd
}

func runSuite(
    directory: String, assertFormat: Bool, propertyOrder: JSONSchemaCompiler.PropertyOrder = .schema,
    fileFilter: (String) -> Bool = { _ in true }
) throws -> SuiteOutcome {
    var out = SuiteOutcome()
    let dir = fixtureURL(directory)
    let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".json") && fileFilter($0) }.sorted()
    for file in files {
        let text = try String(contentsOf: dir.appendingPathComponent(file), encoding: .utf8)
        let doc = try JSONValue.parse(text)
        for c in doc.arrayValue ?? [] {
            out.cases += 1
            let desc = "\(file): \(c["description"]?.stringValue ?? "")"
            var options = JSONSchemaCompiler.Options()
            options.assertFormat = assertFormat && file != "format.json"
            options.propertyOrder = propertyOrder
            let grammar: Grammar
            do {
                grammar = try JSONSchemaCompiler.compile(c["schema"]!, options: options)
            } catch {
                if case .unsupported = error.kind {
                    out.unsupported += 1
                    out.unsupportedCases.append("\(desc) -> \(error)")
                } else {
                    // An unsatisfiable schema compiles to nothing: every instance must be invalid.
                    let allInvalid = (c["tests"]?.arrayValue ?? []).allSatisfy { $0["valid"] == .bool(false) }
                    if !(error.kind == .unsatisfiable && allInvalid) { out.unexpectedErrors.append("\(desc) -> \(error)") }
                }
                continue
            }
            out.compiled += 1
            for t in c["tests"]?.arrayValue ?? [] {
                out.tests += 1
                let data = t["data"]!.serialized(.python)
                let valid = t["valid"]!.boolValue!
                let ok = accepts(grammar, data)
                let tdesc = "\(desc) / \(t["description"]?.stringValue ?? "") : \(data.prefix(120))"
                if ok == valid {
                    out.passedTests += 1
                } else if valid {
                    out.validRejected.append(tdesc)
                } else {
                    out.invalidAccepted.append(tdesc)
                }
            }
        }
    }
    return out
}

@Suite struct JSONSchemaTestSuiteTests {
    @Test func draft2020_12() throws {
        let r = try runSuite(directory: "json-schema-test-suite", assertFormat: true)
        print(
            "JSON-Schema-Test-Suite draft2020-12: \(r.cases) cases, \(r.compiled) compiled, \(r.unsupported) unsupported; tests \(r.passedTests)/\(r.tests) as expected"
        )
        for s in r.invalidAccepted { print("INVALID ACCEPTED: \(s)") }
        for s in r.validRejected { print("valid rejected: \(s)") }
        for s in r.unexpectedErrors { print("unexpected error: \(s)") }
        for s in r.unsupportedCases { print("unsupported: \(s)") }
        #expect(r.invalidAccepted.isEmpty)
        #expect(r.unexpectedErrors.isEmpty)
        // Valid instances that the compiler's canonical shape refuses, each for a documented reason.
        let expectedRejections = [
            "allOf.json: allOf / allOf",  // property order: allOf merges properties base-first
            "allOf.json: allOf with base schema / valid",  // property order
            "const.json: const with object / same object with different property order is valid",  // property order
            "dependentRequired.json: dependencies with escaped characters / CRLF",  // property order (required names first)
            // $vocabulary is not honoured:
            "vocabulary.json: schema that uses custom metaschema with with no validation vocabulary / no validation: invalid number, but it still validates"
        ]
        for s in r.validRejected { #expect(expectedRejections.contains { s.hasPrefix($0) }, "unexpected rejection: \(s)") }
        #expect(r.compiled >= 279)
        // Every case that does not compile names one of these keywords.
        let unsupported: Set<String> = [
            "$ref", "$dynamicRef", "unevaluatedProperties", "unevaluatedItems", "contains", "minContains", "maxContains",
            "if", "oneOf", "not", "propertyNames", "dependentSchemas", "dependentRequired", "uniqueItems", "multipleOf",
            "pattern", "maxProperties", "minProperties", "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"
        ]
        for s in r.unsupportedCases {
            let keyword = s.components(separatedBy: "unsupported keyword '").last?.components(separatedBy: "'").first ?? ""
            #expect(unsupported.contains(keyword), "\(s)")
        }
    }

    @Test func optionalFormats() throws {
        let r = try runSuite(directory: "json-schema-test-suite/optional-format", assertFormat: true)
        print("optional formats: \(r.cases) cases, \(r.compiled) compiled; tests \(r.passedTests)/\(r.tests) as expected")
        for s in r.invalidAccepted { print("INVALID ACCEPTED: \(s)") }
        for s in r.validRejected { print("valid rejected: \(s)") }
        for s in r.unexpectedErrors { print("unexpected error: \(s)") }
        #expect(r.invalidAccepted.isEmpty)
    }
}
