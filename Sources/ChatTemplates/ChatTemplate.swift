import Foundation
import LeapJSON

/// Limits that keep a hostile or broken template from exhausting the stack, the CPU or
/// memory. Exceeding one fails the render with a `.limit` error.
public struct RenderLimits: Sendable, Equatable {
    /// Nested macro and function calls (recursive macros).
    public var maxCallDepth: Int
    /// Nested expression evaluation, across calls.
    public var maxEvaluationDepth: Int
    /// Loop iterations over the whole render.
    public var maxLoopIterations: Int
    /// Size of the rendered text, and of strings built by repetition.
    public var maxOutputBytes: Int

    /// The defaults suit any real chat template with a wide margin.
    public init(
        maxCallDepth: Int = 64, maxEvaluationDepth: Int = 256, maxLoopIterations: Int = 1_000_000,
        maxOutputBytes: Int = 64 << 20
    ) {
        self.maxCallDepth = maxCallDepth
        self.maxEvaluationDepth = maxEvaluationDepth
        self.maxLoopIterations = maxLoopIterations
        self.maxOutputBytes = maxOutputBytes
    }
}

/// Settings of one render.
public struct RenderOptions: Sendable {
    /// The time `strftime_now(format)` reads. Real time unless replaced.
    public var clock: @Sendable () -> Date
    /// The zone in which `strftime_now` prints the clock (Python's naive local time).
    public var timeZone: TimeZone
    /// Resource limits of the render.
    public var limits: RenderLimits

    /// Real time in the current zone and default limits unless given.
    public init(
        clock: @escaping @Sendable () -> Date = { Date() }, timeZone: TimeZone = .current,
        limits: RenderLimits = RenderLimits()
    ) {
        self.clock = clock
        self.timeZone = timeZone
        self.limits = limits
    }

    /// A clock stopped at the given UTC wall time, printed in UTC.
    public static func fixedClock(
        year: Int, month: Int, day: Int, hour: Int = 0, minute: Int = 0,
        second: Int = 0
    ) -> RenderOptions {
        var calendar = Calendar(identifier: .gregorian)
        let utc = TimeZone(identifier: "UTC")!
        calendar.timeZone = utc
        let date =
            calendar.date(
                from: DateComponents(
                    year: year, month: month, day: day, hour: hour,
                    minute: minute, second: second)) ?? Date(timeIntervalSince1970: 0)
        return RenderOptions(clock: { date }, timeZone: utc)
    }

    /// The settings the chat-template fixtures were rendered with: `strftime_now` at
    /// 2026-01-15 09:30.
    public static var fixtures: RenderOptions { fixedClock(year: 2026, month: 1, day: 15, hour: 9, minute: 30) }
}

/// A parsed chat template (a Jinja template as found in `tokenizer_config.json` or in
/// GGUF metadata `tokenizer.chat_template`), rendered as Hugging Face's
/// `apply_chat_template` renders it with Python's jinja2: `trim_blocks`,
/// `lstrip_blocks`, the `loopcontrols` extension, the immutable sandbox, `tojson`
/// without HTML or ASCII escaping, and the globals `raise_exception` and
/// `strftime_now`.
///
/// Parse once, render many times; a `ChatTemplate` is immutable and can be shared
/// across threads.
///
/// ```swift
/// let template = try ChatTemplate(source: source)
/// let prompt = try template.render(messages: [["role": "user", "content": "Hi"]],
///                                  bosToken: "<s>", eosToken: "</s>")
/// ```
public struct ChatTemplate: Sendable {
    /// The template text as given.
    public let source: String
    let nodes: [Node]

    /// Parses `source`. Throws a `.syntax` error for malformed templates, `.assertion`
    /// for unknown filters or tests outside `if` branches (inside them, as in jinja2,
    /// they fail only when executed), `.unsupported` for tags leap-ref does not
    /// implement (`extends`, `include`, `import`...).
    public init(source: String) throws(ChatTemplateError) {
        self.source = source
        do {
            var lexer = Lexer(normalizeNewlines(source))
            var parser = Parser(tokens: try lexer.tokenize())
            nodes = try parser.parseTemplate()
            try CompileCheck.check(nodes)
        } catch let error as ChatTemplateError {
            throw error
        } catch {
            throw ChatTemplateError(.runtime, String(describing: error))
        }
    }

    /// Renders with the given variables (JSON objects become ordered dicts, arrays
    /// lists). Errors raised by the template (`raise_exception`) come back as
    /// `.templateError` with the template's message.
    public func render(context: [String: JSONValue], options: RenderOptions = RenderOptions()) throws(ChatTemplateError) -> String {
        var values: [String: Value] = [:]
        for (k, v) in context { values[k] = Value(json: v) }
        return try render(values: values, options: options)
    }

    /// Renders with the variables of a JSON object.
    public func render(context: JSONObject, options: RenderOptions = RenderOptions()) throws(ChatTemplateError) -> String {
        var values: [String: Value] = [:]
        for (k, v) in context { values[k] = Value(json: v) }
        return try render(values: values, options: options)
    }

    /// Renders a conversation the way `apply_chat_template` does.
    ///
    /// - Parameters:
    ///   - messages: `{"role", "content", ...}` objects (tool calls, tool results and any
    ///     other fields pass through unchanged).
    ///   - tools: OpenAI-style tool definitions; when nil the variable `tools` is left
    ///     undefined (pass `"tools": null` in `extraVariables` to define it as none).
    ///   - addGenerationPrompt: `add_generation_prompt`.
    ///   - bosToken, eosToken: `bos_token`, `eos_token`; left undefined when nil.
    ///   - extraVariables: anything else the template reads (`enable_thinking`,
    ///     `documents`, `date_string`...). They override the named parameters.
    public func render(
        messages: [JSONValue], tools: [JSONValue]? = nil, addGenerationPrompt: Bool = true,
        bosToken: String? = nil, eosToken: String? = nil,
        extraVariables: [String: JSONValue] = [:],
        options: RenderOptions = RenderOptions()
    ) throws(ChatTemplateError) -> String {
        var context: [String: JSONValue] = ["messages": .array(messages), "add_generation_prompt": .bool(addGenerationPrompt)]
        if let tools { context["tools"] = .array(tools) }
        if let bosToken { context["bos_token"] = .string(bosToken) }
        if let eosToken { context["eos_token"] = .string(eosToken) }
        for (k, v) in extraVariables { context[k] = v }
        return try render(context: context, options: options)
    }

    func render(values: [String: Value], options: RenderOptions) throws(ChatTemplateError) -> String {
        let interpreter = Interpreter(options: options)
        do {
            return try interpreter.render(nodes, context: values)
        } catch let error as ChatTemplateError {
            throw error
        } catch {
            throw ChatTemplateError(.runtime, String(describing: error))
        }
    }
}

/// One conversation of a fixture file rendered by `renderFixtureCases`.
public struct FixtureCaseResult: Sendable {
    /// The case's `name`.
    public let name: String
    /// The rendered text, or why rendering failed.
    public let result: Result<String, ChatTemplateError>

    /// `<name>.txt`, or `<name>.error` when rendering failed.
    public var fileName: String {
        switch result {
        case .success: return name + ".txt"
        case .failure: return name + ".error"
        }
    }

    /// The rendered text, or the error as `"Kind: message\n"` (Python's
    /// `f"{type(e).__name__}: {e}"` plus a newline, as the fixtures store it).
    public var fileContents: String {
        switch result {
        case .success(let text): return text
        case .failure(let error): return error.description + "\n"
        }
    }
}

/// Renders `templateSource` for every conversation in a chat-template fixture file
/// (`cases.json`: `[{"name", "messages", "tools"?, "add_generation_prompt"?}]`) with the
/// fixtures' settings: `bos_token` `<s>`, `eos_token` `</s>`, `add_generation_prompt`
/// true unless the case says otherwise, `tools` only when the case has them, and
/// `strftime_now` at 2026-01-15 09:30 (unless `options` says otherwise).
///
/// A template that fails to parse yields its error for every case. Throws only when
/// `casesJSON` is not a list of cases.
public func renderFixtureCases(
    templateSource: String, casesJSON: String,
    options: RenderOptions = .fixtures
) throws -> [FixtureCaseResult] {
    guard case .array(let cases) = try JSONValue.parse(casesJSON) else {
        throw ChatTemplateError(.value, "cases JSON must be a list of {\"name\", \"messages\", ...} objects")
    }
    let template: Result<ChatTemplate, ChatTemplateError>
    do throws(ChatTemplateError) {
        template = .success(try ChatTemplate(source: templateSource))
    } catch {
        template = .failure(error)
    }
    var results: [FixtureCaseResult] = []
    for (index, c) in cases.enumerated() {
        guard case .object(let object) = c, case .string(let name)? = object["name"],
            case .array(let messages)? = object["messages"]
        else {
            throw ChatTemplateError(.value, "case #\(index) needs a string \"name\" and a \"messages\" list")
        }
        var tools: [JSONValue]?
        if case .array(let t)? = object["tools"] { tools = t }
        let addGenerationPrompt = object["add_generation_prompt"]?.boolValue ?? true
        let result: Result<String, ChatTemplateError>
        switch template {
        case .failure(let error):
            result = .failure(error)
        case .success(let t):
            do throws(ChatTemplateError) {
                result = .success(
                    try t.render(
                        messages: messages, tools: tools, addGenerationPrompt: addGenerationPrompt,
                        bosToken: "<s>", eosToken: "</s>", options: options))
            } catch {
                result = .failure(error)
            }
        }
        results.append(FixtureCaseResult(name: name, result: result))
    }
    return results
}
