// Calls: argument evaluation, calling a callable value, and binding a macro's arguments
// as jinja2's `Macro.__call__` does; `MacroObject` is a macro bound to its frame.

extension Interpreter {
    /// Evaluates call arguments. `extra` (a call block's `caller`) goes after the
    /// written keywords and before `**kwargs`, where jinja2 puts it.
    func evalArgs(_ args: CallArgs, _ frame: Frame, extra: (String, Value)? = nil) throws -> Arguments {
        var a = Arguments()
        a.positional = try args.positional.map { try eval($0, frame) }
        if let star = args.star { a.positional += try iterate(eval(star, frame)) }
        for (k, e) in args.keywords { a.keywords.append((k, try eval(e, frame))) }
        if let extra { a.keywords.append(extra) }
        if let starStar = args.starStar {
            guard case .dict(let d) = try eval(starStar, frame) else {
                throw ChatTemplateError(.type, "argument after ** must be a mapping")
            }
            for (k, v) in zip(d.keys, d.values) {
                guard case .string(let key) = k.plain else { throw ChatTemplateError(.type, "keywords must be strings") }
                if a.keywords.contains(where: { $0.0 == key }) {
                    throw ChatTemplateError(
                        .type, "jinja2.sandbox.SandboxedEnvironment.call() got multiple values for keyword argument '\(key)'")
                }
                a.keywords.append((key, v))
            }
        }
        return a
    }

    func evalCall(_ callee: Expr, _ args: CallArgs, _ frame: Frame, extra: (String, Value)?) throws -> Value {
        let f = try eval(callee, frame)
        return try call(f, try evalArgs(args, frame, extra: extra))
    }

    func call(_ f: Value, _ args: Arguments) throws -> Value {
        switch f {
        case .object(let o) where o.isCallable:
            callDepth += 1
            defer { callDepth -= 1 }
            if callDepth > options.limits.maxCallDepth {
                throw ChatTemplateError(
                    .limit, "calls nested deeper than \(options.limits.maxCallDepth) levels (runaway recursion?)", line: line)
            }
            return try o.call(args, self)
        case .undefined(let u):
            throw u.error
        default:
            throw ChatTemplateError(.type, "'\(f.typeName)' object is not callable")
        }
    }

    /// Calls a macro: binds arguments as jinja2's `Macro.__call__` does, with its
    /// order of checks (keywords before surplus positionals).
    func callMacro(_ macro: MacroObject, _ args: Arguments) throws -> Value {
        let m = macro.definition
        let frame = Frame(parent: macro.closure)
        let count = m.parameters.count
        var given = [Value?](repeating: nil, count: count)
        for (i, v) in args.positional.prefix(count).enumerated() { given[i] = v }
        var keywords = args.keywords
        func pop(_ name: String) -> Value? {
            guard let i = keywords.firstIndex(where: { $0.0 == name }) else { return nil }
            return keywords.remove(at: i).1
        }
        // Keywords fill only the parameters positional arguments left open.
        if args.positional.count < count {
            for i in args.positional.count..<count { given[i] = pop(m.parameters[i]) }
        }
        var caller: Value?
        if m.usesCaller { caller = pop("caller") }
        var kwargs = PyDict()
        if m.catchesKwargs {
            for (k, v) in keywords { kwargs.setString(k, v) }
        } else if let first = keywords.first {
            if keywords.contains(where: { $0.0 == "caller" }) {
                throw ChatTemplateError(
                    .type, "macro '\(m.name)' was invoked with two values for the special caller argument. This is most likely a bug.")
            }
            throw ChatTemplateError(.type, "macro '\(m.name)' takes no keyword argument '\(first.0)'")
        }
        var extra: [Value] = []
        if args.positional.count > count {
            guard m.catchesVarargs else {
                throw ChatTemplateError(.type, "macro '\(m.name)' takes not more than \(count) argument(s)")
            }
            extra = Array(args.positional[count...])
        }
        let firstDefault = m.parameters.count - m.defaults.count
        for (i, p) in m.parameters.enumerated() {
            if let v = given[i] {
                frame.vars[p] = v
            } else if i >= firstDefault {
                frame.vars[p] = try eval(m.defaults[i - firstDefault], frame)
            } else {
                frame.vars[p] = .undefinedHint("parameter '\(p)' was not provided")
            }
        }
        if m.catchesVarargs { frame.vars["varargs"] = .tuple(extra) }
        if m.catchesKwargs { frame.vars["kwargs"] = .dict(kwargs) }
        if m.usesCaller { frame.vars["caller"] = caller ?? .undefinedHint("No caller defined") }
        let savedLine = line
        defer { line = savedLine }
        return .string(try capture { _ = try exec(m.body, frame) })
    }
}

/// A macro (or a call block's `caller`) bound to the frame it was defined in.
final class MacroObject: PyObject {
    let definition: MacroDefinition
    let closure: Frame

    init(_ definition: MacroDefinition, closure: Frame) {
        self.definition = definition
        self.closure = closure
    }

    override var typeName: String { "Macro" }
    override var objectTypeRepr: String { "jinja2.runtime.Macro object" }
    override var isCallable: Bool { true }
    override func repr() throws -> String {
        definition.isAnonymous ? "<Macro anonymous>" : "<Macro \(pyReprString(definition.name))>"
    }
    override func call(_ args: Arguments, _ interp: Interpreter) throws -> Value { try interp.callMacro(self, args) }
    override func attribute(_ name: String, _ interp: Interpreter) throws -> Value? {
        switch name {
        case "name": return .string(definition.name)
        case "arguments": return .tuple(definition.parameters.map { .string($0) })
        case "catch_kwargs": return .bool(definition.catchesKwargs)
        case "catch_varargs": return .bool(definition.catchesVarargs)
        case "caller": return .bool(definition.usesCaller)
        default: return nil
        }
    }
}
