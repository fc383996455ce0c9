import Foundation
import LeapJSON
import Testing

@testable import ChatTemplates

/// Small templates, one language feature each, with what Python's jinja2 renders for
/// them under Hugging Face's settings (`Fixtures/language/cases.json`, made by
/// `generate.py` from `snippets.py`).
enum LanguageCases {
    struct Case: CustomTestStringConvertible, Sendable {
        let name: String
        let template: String
        let context: [String: JSONValue]
        let expected: String?
        let error: String?
        var testDescription: String { name }
    }

    static let all: [Case] = {
        let url = Bundle.module.resourceURL!.appendingPathComponent("Fixtures/language/cases.json")
        guard let text = try? String(contentsOf: url, encoding: .utf8),
            case .array(let items)? = try? JSONValue.parse(text)
        else { return [] }
        return items.compactMap { item in
            guard let name = item["name"]?.stringValue, let template = item["template"]?.stringValue else { return nil }
            var context: [String: JSONValue] = [:]
            if case .object(let o)? = item["context"] { for (k, v) in o { context[k] = v } }
            return Case(
                name: name, template: template, context: context,
                expected: item["expected"]?.stringValue, error: item["error"]?.stringValue)
        }
    }()
}

@Suite struct LanguageTests {
    @Test func casesArePresent() {
        #expect(LanguageCases.all.count > 200)
    }

    @Test(arguments: LanguageCases.all)
    func matchesJinja2(_ c: LanguageCases.Case) {
        let outcome: Result<String, ChatTemplateError>
        do throws(ChatTemplateError) {
            let template = try ChatTemplate(source: c.template)
            outcome = .success(try template.render(context: c.context, options: .fixtures))
        } catch {
            outcome = .failure(error)
        }
        switch (outcome, c.expected, c.error) {
        case (.success(let text), let expected?, _):
            #expect(text == expected)
        case (.failure(let error), _, let expected?):
            if expected.hasPrefix("TemplateSyntaxError:") || expected.hasPrefix("SyntaxError:") {
                // Syntax error wording differs from jinja2's (a Python `SyntaxError` is
                // jinja2's generated code failing to compile); the kind must match.
                #expect(error.kind == .syntax, "\(error)")
            } else {
                #expect(error.description == expected)
            }
        case (.success(let text), nil, let expected?):
            Issue.record("rendered \(text.debugDescription), jinja2 raised \(expected)")
        case (.failure(let error), let expected?, nil):
            Issue.record("failed with \(error), jinja2 rendered \(expected.debugDescription)")
        default:
            Issue.record("malformed case")
        }
    }
}
