import Foundation
import LeapJSON
import Sampling
import Testing

@testable import ChatTemplates

private func render(
    _ source: String, _ context: [String: JSONValue] = [:],
    options: RenderOptions = .fixtures
) throws(ChatTemplateError) -> String {
    try ChatTemplate(source: source).render(context: context, options: options)
}

private func error(
    _ source: String, _ context: [String: JSONValue] = [:],
    options: RenderOptions = .fixtures
) -> ChatTemplateError? {
    do throws(ChatTemplateError) {
        _ = try render(source, context, options: options)
        return nil
    } catch {
        return error
    }
}

@Suite struct APITests {
    static let chatML = """
        {% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}
        """

    @Test func parseOnceRenderMany() throws {
        let template = try ChatTemplate(source: Self.chatML)
        let a = try template.render(messages: [["role": "user", "content": "Hi"]])
        let b = try template.render(messages: [["role": "user", "content": "Hi"]], addGenerationPrompt: false)
        #expect(a == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
        #expect(b == "<|im_start|>user\nHi<|im_end|>\n")
    }

    @Test func conveniencePassesTokensToolsAndExtras() throws {
        let template = try ChatTemplate(
            source: """
                {{ bos_token }}|{{ tools is defined }}|{{ tools is none }}|{{ enable_thinking }}|{{ eos_token is defined }}
                """)
        let out = try template.render(
            messages: [], tools: [["type": "function"]], bosToken: "<s>",
            extraVariables: ["enable_thinking": false])
        #expect(out == "<s>|True|False|False|False")
        let noTools = try template.render(messages: [])
        #expect(noTools == "|False|False||False")
        let hfStyle = try template.render(messages: [], extraVariables: ["tools": .null])
        #expect(hfStyle == "|True|True||False")
    }

    @Test func contextKeepsPythonTypes() throws {
        let out = try render(
            "{{ a }} {{ b }} {{ c }} {{ d }} {{ e }}",
            ["a": 1, "b": 1.0, "c": .null, "d": ["x": [true, 2.5]], "e": "é"])
        #expect(out == "1 1.0 None {'x': [True, 2.5]} é")
    }

    @Test func raiseExceptionCarriesTheTemplatesMessage() {
        let e = error("{{ raise_exception('Only user and assistant roles are supported!') }}")
        #expect(e?.kind == .templateError)
        #expect(e?.message == "Only user and assistant roles are supported!")
        #expect(e?.description == "TemplateError: Only user and assistant roles are supported!")
    }

    @Test func undefinedErrorsNameTheVariable() {
        let e = error("{{ functions | tojson }}")
        #expect(e?.description == "TypeError: Object of type Undefined is not JSON serializable")
        let f = error("{% for f in functions.list %}{% endfor %}")
        #expect(f?.description == "UndefinedError: 'functions' is undefined")
    }

    @Test func syntaxErrorsHaveALine() {
        let e = error("line one\n{% if x %}\n{{ 1 + }}\n{% endif %}")
        #expect(e?.kind == .syntax)
        #expect(e?.line == 3)
        #expect(e?.description.hasSuffix("(line 3)") == true)
    }

    @Test(arguments: [
        ("{% include 'other.jinja' %}", "include"),
        ("{% extends 'base' %}", "extends"),
        ("{% import 'm' as m %}", "import"),
        ("{{ {'a': 1}|xmlattr }}", "xmlattr"),
        ("{{ 'x'|wordwrap(3) }}", "wordwrap"),
        ("{{ lipsum() }}", "lipsum"),
        ("{{ [1]|select }}", "generator"),
        ("{{ 'abc'.encode() }}", "encode"),
        ("{{ 2 ** 64 }}", "integer overflow"),
        ("{{ '\\N{BULLET}' }}", "\\N{")
    ])
    func unsupportedConstructsFailClearly(_ source: String, _ construct: String) {
        let e = error(source)
        #expect(e?.kind == .unsupported, "\(String(describing: e))")
        #expect(e?.description.contains(construct) == true, "\(String(describing: e))")
    }

    @Test func unknownFilterFailsAtParseOutsideIfAndWhenRunInsideIf() throws {
        // Outside an `if`, jinja2 rejects the name when it compiles the template.
        #expect(throws: ChatTemplateError(.assertion, "No filter named 'nosuch'.", line: 1)) {
            try ChatTemplate(source: "{{ x|nosuch }}")
        }
        // Inside one, only when the branch runs.
        let template = try ChatTemplate(source: "{% if x %}{{ x|nosuch }}{% endif %}ok")
        #expect(try template.render(context: [:]) == "ok")
        #expect(throws: ChatTemplateError(.runtime, "No filter named 'nosuch' found.", line: 1)) {
            try template.render(context: ["x": 1])
        }
    }

    @Test func clockIsInjectable() throws {
        let options = RenderOptions.fixedClock(year: 2024, month: 7, day: 26, hour: 18, minute: 5)
        #expect(try render("{{ strftime_now('%d %b %Y %H:%M %A') }}", options: options) == "26 Jul 2024 18:05 Friday")
        #expect(try render("{{ strftime_now('%Y-%m-%d') }}") == "2026-01-15")
        let real = try render("{{ strftime_now('%Y') }}", options: RenderOptions())
        #expect(Int(real)! >= 2025)
    }

    @Test func runawayRecursionIsALimitError() {
        let e = error("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}")
        #expect(e?.kind == .limit)
    }

    @Test func loopIterationLimit() {
        var options = RenderOptions.fixtures
        options.limits.maxLoopIterations = 1000
        let e = error("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}", options: options)
        #expect(e?.kind == .limit)
        #expect(error("{% for i in range(10) %}{% for j in range(10) %}{% endfor %}{% endfor %}", options: options) == nil)
    }

    @Test func outputLimit() {
        var options = RenderOptions.fixtures
        options.limits.maxOutputBytes = 10_000
        #expect(error("{% for i in range(100) %}{{ 'x' * 500 }}{% endfor %}", options: options)?.kind == .limit)
        #expect(error("{{ 'x' * 100000000000 }}", options: options)?.kind == .limit)
    }

    static let memoryBlowups: [String: String] = [
        "string doubling with ~": "{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
        "string doubling with +": "{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
        "list doubling": "{% set ns = namespace(l=[1]) %}{% for i in range(100) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
        "str.center": "{{ 'x'.center(10000000000) }}",
        "center filter": "{{ 'x'|center(10000000000) }}",
        "% width": "{{ '%10000000000s' % 'x' }}",
        "format width": "{{ '{:>10000000000}'.format('x') }}",
        "replace growth":
            "{{ ('x' * 1000000).replace('', 'yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy') }}",
        "batch fill": "{{ [1]|batch(10000000000, 0)|list }}",
        "slice count": "{{ [1]|slice(10000000000)|list }}",
        "indent width": "{{ 'a'|indent(10000000000) }}"
    ]

    @Test(arguments: memoryBlowups.keys.sorted())
    func memoryBlowupsAreLimitErrors(_ kind: String) {
        let e = error(Self.memoryBlowups[kind]!)
        #expect(e?.kind == .limit, "\(String(describing: e))")
    }

    static let deepExpressions: [String: String] = [
        "parentheses": String(repeating: "(", count: 3000) + "1" + String(repeating: ")", count: 3000),
        "lists": String(repeating: "[", count: 3000) + String(repeating: "]", count: 3000),
        "not": String(repeating: "not ", count: 3000) + "1",
        "negation": String(repeating: "-", count: 3000) + "1",
        "attributes": "x" + String(repeating: ".a", count: 3000),
        "additions": Array(repeating: "1", count: 3000).joined(separator: " + "),
        "filters": "'a'" + String(repeating: "|upper", count: 3000)
    ]

    @Test(arguments: deepExpressions.keys.sorted())
    func deepExpressionsFailWithoutCrashing(_ kind: String) {
        let e = error("{{ " + Self.deepExpressions[kind]! + " }}")
        #expect(e?.kind == .limit, "\(String(describing: e))")
    }

    @Test func deepStatementsFailWithoutCrashing() {
        let source = String(repeating: "{% if true %}", count: 2000) + "x" + String(repeating: "{% endif %}", count: 2000)
        #expect(error(source)?.kind == .limit)
    }

    @Test func deeplyNestedValuesFailWithoutCrashing() {
        let source = "{% set ns = namespace(v=[]) %}{% for i in range(5000) %}{% set ns.v = [ns.v] %}{% endfor %}{{ ns.v }}"
        #expect(error(source)?.kind == .limit)
        let json = "{% set ns = namespace(v=[]) %}{% for i in range(5000) %}{% set ns.v = [ns.v] %}{% endfor %}{{ ns.v|tojson }}"
        #expect(error(json)?.kind == .limit)
    }

    /// Random token soup (seeded): every template either renders or fails with an error of
    /// a kind jinja2 could raise for it, never crashes, and renders the same way twice.
    @Test func garbageNeverCrashes() {
        var generator = SplitMix64(seed: 0x6A17_2A00)
        let pieces = [
            "{{", "}}", "{%", "%}", "{#", "#}", "-", "+", "if", "for", "in", "endif", "endfor", "x", "(", ")",
            "[", "]", "{", "}", "'", "\"", "|", "is", "not", ".", ",", "=", "set", "macro", "endmacro", " ",
            "\n", "1", "1.5", "loop", "raw", "endraw", "~", "*", "**", "//", "%", "call", "caller", "else",
            // Undefined names, calls and division by zero make some renders fail.
            "y", "()", "/", "0", "x.", "x()"
        ]
        let context: [String: JSONValue] = ["x": [1, 2]]
        var rendered = 0, parseErrors = 0, renderErrors = 0
        for _ in 0..<2000 {
            let n = Int.random(in: 1...30, using: &generator)
            var source = (0..<n).map { _ in pieces.randomElement(using: &generator)! }.joined()
            // Half are wrapped in an output tag, so more of them are expressions that run.
            if Bool.random(using: &generator) { source = "{{ \(source) }}" }
            let template: ChatTemplate
            do throws(ChatTemplateError) {
                template = try ChatTemplate(source: source)
            } catch {
                parseErrors += 1
                #expect([.syntax, .assertion].contains(error.kind), "\(source.debugDescription): \(error)")
                continue
            }
            let first = Result { () throws(ChatTemplateError) in try template.render(context: context, options: .fixtures) }
            let second = Result { () throws(ChatTemplateError) in try template.render(context: context, options: .fixtures) }
            #expect(first == second, "\(source.debugDescription) renders differently twice")
            switch first {
            case .success: rendered += 1
            case .failure(let error):
                renderErrors += 1
                #expect(![.unsupported, .limit, .syntax].contains(error.kind), "\(source.debugDescription): \(error)")
            }
        }
        // The soup reaches all three outcomes (a generator stuck on one would test little).
        print("garbage: \(rendered) rendered, \(parseErrors) parse errors, \(renderErrors) render errors")
        #expect(rendered > 100 && parseErrors > 100 && renderErrors > 5, "\(rendered) \(parseErrors) \(renderErrors)")
    }

    @Test func templatesAreSharedAcrossThreads() async throws {
        let template = try ChatTemplate(source: Self.chatML)
        let outputs = try await withThrowingTaskGroup(of: String.self) { group in
            for i in 0..<16 {
                group.addTask { try template.render(messages: [["role": "user", "content": .string("m\(i)")]]) }
            }
            var all: [String] = []
            for try await o in group { all.append(o) }
            return all
        }
        #expect(Set(outputs).count == 16)
    }

    @Test func fixtureCasesRenderer() throws {
        let cases =
            #"[{"name": "a", "messages": [{"role": "user", "content": "x"}]}, {"name": "b", "add_generation_prompt": false, "messages": []}]"#
        let results = try renderFixtureCases(
            templateSource: "{{ bos_token }}{{ messages|length }}{{ add_generation_prompt }}{{ tools is defined }}", casesJSON: cases)
        #expect(results.map(\.fileName) == ["a.txt", "b.txt"])
        #expect(results.map(\.fileContents) == ["<s>1TrueFalse", "<s>0FalseFalse"])
        let failing = try renderFixtureCases(templateSource: "{{ raise_exception('no') }}", casesJSON: cases)
        #expect(failing.map(\.fileName) == ["a.error", "b.error"])
        #expect(failing[0].fileContents == "TemplateError: no\n")
        let broken = try renderFixtureCases(templateSource: "{% if %}", casesJSON: cases)
        #expect(
            broken.allSatisfy {
                if case .failure(let e) = $0.result { return e.kind == .syntax }
                return false
            })
        #expect(throws: (any Error).self) { try renderFixtureCases(templateSource: "", casesJSON: "{}") }
    }
}
