import LeapJSON

/// The text format in which a model writes its function calls.
public enum ToolCallSyntax: Sendable, Equatable {
    /// LFM2's Pythonic call list: `start` + `[name(key=value, ...), ...]` + `end`.
    /// Values are Python literals: JSON strings and numbers, `True`/`False`/`None`, lists
    /// `[a, b]` and dicts `{"k": v}`.
    case pythonic(start: String = "<|tool_call_start|>", end: String = "<|tool_call_end|>")
    /// Hermes' JSON call: `start` + `{"name": "fn", "arguments": {...}}` + `end`, with optional
    /// whitespace (newlines) right after `start` and right before `end`.
    case json(start: String = "<tool_call>", end: String = "</tool_call>")

    /// LFM2's syntax with its markers `<|tool_call_start|>` and `<|tool_call_end|>`.
    public static let lfm2 = ToolCallSyntax.pythonic()
    /// The Hermes syntax with its markers `<tool_call>` and `</tool_call>`.
    public static let hermes = ToolCallSyntax.json()

    /// The text that opens a call.
    public var startMarker: String {
        switch self {
        case .pythonic(let start, _), .json(let start, _): return start
        }
    }

    /// The text that closes a call.
    public var endMarker: String {
        switch self {
        case .pythonic(_, let end), .json(_, let end): return end
        }
    }
}

/// Builds the grammar of a model's function calls for a set of registered functions, so that
/// constrained decoding produces only calls to those functions whose arguments satisfy each
/// function's parameters JSON Schema (required arguments present, enums, types and every
/// other keyword `JSONSchemaCompiler` enforces).
///
/// ```swift
/// let grammar = try ToolCallGrammar.build(
///     functions: [(name: "get_weather", parameters: weatherSchema)], syntax: .lfm2)
/// let m = GrammarMatcher(grammar: grammar)
/// m.accept(#"<|tool_call_start|>[get_weather(city="NYC")]<|tool_call_end|>"#)  // true
/// ```
///
/// Two ways to use it: in *forced-call* mode the grammar starts at the first generated token
/// (`includeStartMarker: true`); when calls are optional, generation is free until the model
/// emits the start marker and the engine then switches to a grammar built with
/// `includeStartMarker: false`, which begins right after it.
///
/// The languages, exactly (see docs/structured-output.md, "Tool-call grammars"):
/// - `.pythonic`: `start [call, call, ...] end` with one or more calls separated by `", "`;
///   `call` is `name(key=value, key=value)` with arguments separated by `", "`, no spaces
///   around `=`. Arguments follow the order of the schema's `properties` (required names
///   missing from `properties` come after them); optional ones may be skipped, required ones
///   may not, and undeclared keyword arguments are never produced (even where the schema's
///   `additionalProperties` would allow them: narrowing, never widening). Values are compiled
///   from each property's schema with `JSONSchemaCompiler.LiteralStyle.python`.
/// - `.json`: `start ws {"name": "fn", "arguments": ARGS} ws end`, one call per block, where
///   `ARGS` is an object valid under the function's schema, compiled as by `JSONSchemaCompiler`
///   (properties in schema order) and `ws` is optional JSON whitespace (also allowed between
///   the tokens of the call object).
public enum ToolCallGrammar {
    /// The compiler options used by default: objects are closed unless a schema says
    /// otherwise (`additionalPropertiesDefault = false`, so no unknown arguments), and
    /// whitespace runs are at most 4 characters long so a model cannot pad forever, and
    /// integers are plain digits that fit in 64 bits (`plainIntegers`), so that a parsed
    /// integer argument is an `Int`.
    public static var defaultOptions: JSONSchemaCompiler.Options {
        var o = JSONSchemaCompiler.Options()
        o.additionalPropertiesDefault = false
        o.maxWhitespaceRun = 4
        o.plainIntegers = true
        return o
    }

    /// Builds the call grammar.
    ///
    /// - Parameters:
    ///   - functions: the registered functions: a name and a JSON Schema for the parameters
    ///     (an object schema; `true` and `{}` mean "no parameters" in Python syntax and "any
    ///     closed object", that is `{}`, in JSON syntax under the default options).
    ///   - syntax: the call format and its markers.
    ///   - includeStartMarker: whether the grammar begins with the start marker (forced calls)
    ///     or right after it (the model has already opened the call).
    ///   - includeEndMarker: whether the grammar ends with the end marker (the default) or
    ///     right before it, for engines where the end marker is a special token that the
    ///     mask allows exactly when the grammar can end.
    ///   - options: JSON Schema compiler options for the argument values; `literalStyle` is set
    ///     by the syntax (Python literals for `.pythonic`, JSON for `.json`).
    /// - Throws: `SchemaError` whose message names the function, when a parameters schema
    ///   cannot be compiled (or nothing satisfies it), when a name cannot be written in the
    ///   syntax, when two functions share a name, or when there are no functions.
    public static func build(
        functions: [(name: String, parameters: JSONValue)], syntax: ToolCallSyntax,
        includeStartMarker: Bool = true, includeEndMarker: Bool = true,
        options: JSONSchemaCompiler.Options = defaultOptions
    ) throws(SchemaError) -> Grammar {
        try LargeStack.run(needing: LargeStack.bytesNeeded(maxDepth: options.limits.maxDepth)) { () throws(SchemaError) in
            try buildHere(
                functions: functions, syntax: syntax, includeStartMarker: includeStartMarker, includeEndMarker: includeEndMarker,
                options: options)
        }
    }

    static func buildHere(
        functions: [(name: String, parameters: JSONValue)], syntax: ToolCallSyntax, includeStartMarker: Bool, includeEndMarker: Bool,
        options: JSONSchemaCompiler.Options
    ) throws(SchemaError) -> Grammar {
        guard !functions.isEmpty else { throw .invalid("no functions to call") }
        var seen = Set<String>()
        for f in functions where !seen.insert(f.name).inserted {
            throw .invalid("two functions are named '\(f.name)'")
        }
        var b = GrammarBuilder()
        let budget = CompileBudget(options.limits)
        var calls: [[GrammarBuilder.Symbol]] = []
        var opts = options
        switch syntax {
        case .pythonic: opts.literalStyle = .python
        case .json: opts.literalStyle = .json
        }
        for f in functions {
            let call: GrammarBuilder.Symbol
            do throws(SchemaError) {
                switch syntax {
                case .pythonic: call = try pythonicCall(name: f.name, parameters: f.parameters, builder: &b, options: opts, budget: budget)
                case .json: call = try jsonCall(name: f.name, parameters: f.parameters, builder: &b, options: opts, budget: budget)
                }
                // Each function must be callable on its own.
                var probe = b
                let root = probe.rule("probe", [[call]])
                do { _ = try SchemaCompiler.build(probe, root: root, budget: budget) } catch {
                    if case .limitExceeded = error.kind { throw error }
                    throw SchemaError(kind: .unsatisfiable, message: "no arguments satisfy the parameters schema")
                }
            } catch {
                throw SchemaError(kind: error.kind, message: "function '\(f.name)': \(error.message)", location: error.location)
            }
            calls.append([call])
        }
        let anyCall = b.rule("call", calls)
        let start = includeStartMarker ? [b.literal(syntax.startMarker)] : []
        let end = includeEndMarker ? [b.literal(syntax.endMarker)] : []
        let root: GrammarBuilder.Symbol
        switch syntax {
        case .pythonic:
            // list = "[" call more; more = "]" | ", " call more
            let more = b.declareRule("more-calls")
            b.define(more, [[b.literal("]")], [b.literal(", "), anyCall, more]])
            root = b.rule("tool-calls", [start + [b.literal("["), anyCall, more] + end])
        case .json:
            let ws = b.whitespace(maxRun: opts.maxWhitespaceRun)
            root = b.rule("tool-call", [start + [ws, anyCall, ws] + end])
        }
        return try SchemaCompiler.build(b, root: root, budget: budget)
    }

    // MARK: Hermes JSON

    static func jsonCall(
        name: String, parameters: JSONValue, builder b: inout GrammarBuilder,
        options: JSONSchemaCompiler.Options, budget: CompileBudget
    ) throws(SchemaError) -> GrammarBuilder.Symbol {
        let c = SchemaCompiler(root: parameters, options: options, builder: b, budget: budget)
        try c.indexResources(parameters, base: "")
        let args = try c.compileNode(try objectSchema(parameters), base: c.rootBase, at: "")
        b = c.b
        let ws = b.whitespace(maxRun: options.maxWhitespaceRun)
        let colon = b.literal(":"), comma = b.literal(",")
        let nameText = JSONValue.string(name).serialized(.compact)
        return b.rule(
            "call-" + name,
            [
                [
                    b.literal("{"), ws, b.literal(#""name""#), ws, colon, ws, b.literal(nameText), ws, comma, ws,
                    b.literal(#""arguments""#), ws, colon, ws, args, ws, b.literal("}")
                ]
            ])
    }

    /// The parameters schema restricted to objects (`type` added or narrowed to `object`).
    static func objectSchema(_ parameters: JSONValue) throws(SchemaError) -> JSONValue {
        switch parameters {
        case .bool(true): return .object(JSONObject([("type", .string("object"))]))
        case .bool(false): throw SchemaError(kind: .unsatisfiable, message: "the parameters schema is false")
        case .object(var o):
            switch o["type"] {
            case nil: o["type"] = .string("object")
            case .string("object")?: break
            case .array(let types)? where types.contains(.string("object")): o["type"] = .string("object")
            case let other?: throw .invalid("the parameters schema must describe an object (its type is \(other.serialized(.compact)))")
            }
            return .object(o)
        default:
            throw .invalid("the parameters schema must be a JSON Schema object or boolean")
        }
    }

    // MARK: LFM2 Pythonic

    /// Object keywords that keyword arguments cannot express (after normalization).
    static let unsupportedArgumentKeywords: [(internal: String, keyword: String)] = [
        (NormalKey.anyOf, "anyOf"), (NormalKey.oneOf, "oneOf"), (NormalKey.not, "not"), (NormalKey.ifThenElse, "if"),
        ("enum", "enum"), ("patternProperties", "patternProperties"), ("minProperties", "minProperties"),
        ("maxProperties", "maxProperties"), (NormalKey.propertyNames, "propertyNames"), (NormalKey.someExtra, "not")
    ]

    static func pythonicCall(
        name: String, parameters: JSONValue, builder b: inout GrammarBuilder,
        options: JSONSchemaCompiler.Options, budget: CompileBudget
    ) throws(SchemaError) -> GrammarBuilder.Symbol {
        guard isPythonName(name, dotted: true) else {
            throw .invalid("the name is not a Python identifier (or dotted identifiers), so it cannot be written as a call")
        }
        let c = SchemaCompiler(root: parameters, options: options, builder: b, budget: budget)
        try c.indexResources(parameters, base: "")
        guard let flat = try c.flatten(try objectSchema(parameters), base: c.rootBase) else {
            throw SchemaError(kind: .unsatisfiable, message: "the parameters schema is false")
        }
        if let types = flat["type"]?.arrayValue, !types.contains(.string("object")) {
            throw .invalid("the parameters schema must describe an object")
        }
        for (key, keyword) in unsupportedArgumentKeywords where flat[key] != nil {
            throw .unsupported(keyword, "keyword arguments cannot express '\(keyword)' on the parameters object")
        }
        let properties = flat["properties"]?.objectValue ?? JSONObject()
        let required = (flat["required"]?.arrayValue ?? []).compactMap(\.stringValue)
        var names: [String] = []
        var schemas: [JSONValue] = []
        for (n, s) in properties {
            names.append(n)
            schemas.append(s)
        }
        for r in required where properties[r] == nil && !names.contains(r) {
            names.append(r)
            schemas.append(flat["additionalProperties"] ?? .bool(options.additionalPropertiesDefault))
        }
        // Members: key=value, or nil when no value is allowed.
        var members: [GrammarBuilder.Symbol?] = []
        var isRequired: [Bool] = []
        for (i, n) in names.enumerated() {
            guard isPythonName(n, dotted: false) else {
                throw .invalid("parameter '\(n)' is not a Python identifier, so it cannot be a keyword argument")
            }
            let req = required.contains(n)
            isRequired.append(req)
            if schemas[i] == .bool(false) {
                if req { throw SchemaError(kind: .unsatisfiable, message: "required parameter '\(n)' allows no value") }
                members.append(nil)
                continue
            }
            let value = try c.compileNode(schemas[i], base: c.rootBase, at: "/properties/" + SchemaCompiler.escapePointerToken(n))
            members.append(c.b.rule("kwarg-" + n, [[c.b.literal(n + "="), value]]))
        }
        b = c.b
        // first[i]: the next argument, declared at index >= i, skipping only optional ones;
        // rest[i]: after an argument, the next one being at index >= i.
        let count = names.count
        let open = b.literal(name + "("), close = b.literal(")"), separator = b.literal(", ")
        var first: [GrammarBuilder.Symbol] = [], rest: [GrammarBuilder.Symbol] = []
        for _ in 0...count {
            first.append(b.declareRule("kwargs-first"))
            rest.append(b.declareRule("kwargs-rest"))
        }
        for i in 0...count {
            var alternatives: [[GrammarBuilder.Symbol]] = []
            var j = i
            while j < count {
                if let m = members[j] { alternatives.append([m, rest[j + 1]]) }
                if isRequired[j] { break }
                j += 1
            }
            b.define(first[i], alternatives)
            var after: [[GrammarBuilder.Symbol]] = [[separator, first[i]]]
            if !isRequired[i...].contains(true) { after.append([close]) }
            b.define(rest[i], after)
        }
        var alternatives: [[GrammarBuilder.Symbol]] = [[open, first[0]]]
        if !isRequired.contains(true) { alternatives.append([open, close]) }
        return b.rule("call-" + name, alternatives)
    }

    /// ASCII Python identifiers (`dotted`: several joined by dots, as in `module.function`).
    static func isPythonName(_ s: String, dotted: Bool) -> Bool {
        let parts = dotted ? s.split(separator: ".", omittingEmptySubsequences: false).map(Array.init) : [Array(s)]
        return parts.allSatisfy { p in
            guard let head = p.first, head == "_" || (head.isASCII && head.isLetter) else { return false }
            return p.allSatisfy { $0 == "_" || ($0.isASCII && ($0.isLetter || $0.isNumber)) }
        }
    }
}
