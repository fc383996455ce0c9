// The evaluator: walks the syntax tree with jinja2's scoping and Python's semantics.
//
// Scopes follow jinja2: the render variables sit below the template's top level;
// `for` bodies, macro calls, `with`, `filter` and block-`set` bodies get their own frame (a `set` inside a
// loop does not leak out, which is why templates use `namespace()`); `if` blocks do
// not. Macros look free names up through the frame they were defined in, at call time.

/// One scope of variables.
final class Frame {
    var vars: [String: Value] = [:]
    let parent: Frame?

    init(parent: Frame?) { self.parent = parent }

    func lookup(_ name: String) -> Value? {
        var frame: Frame? = self
        while let f = frame {
            if let v = f.vars[name] { return v }
            frame = f.parent
        }
        return nil
    }
}

/// How a statement list ended: normally, or by `{% break %}` / `{% continue %}`.
enum Flow { case normal, breakLoop, continueLoop }

final class Interpreter {
    let options: RenderOptions
    var out = ""
    var depth = 0
    var callDepth = 0
    var iterations = 0
    /// The template line being executed, for error locations.
    var line = 0
    let stack = StackGuard()

    init(options: RenderOptions) { self.options = options }

    func render(_ nodes: [Node], context: [String: Value]) throws -> String {
        let contextFrame = Frame(parent: nil)
        contextFrame.vars = context
        let root = Frame(parent: contextFrame)
        do {
            _ = try exec(nodes, root)
        } catch var error as ChatTemplateError {
            if error.line == nil { error.line = line }
            throw error
        }
        return out
    }

    // MARK: Statements

    func exec(_ nodes: [Node], _ frame: Frame) throws -> Flow {
        for node in nodes {
            let flow = try exec(node, frame)
            if flow != .normal { return flow }
        }
        return .normal
    }

    /// Executes one statement (a thin dispatcher, like `eval`).
    func exec(_ node: Node, _ frame: Frame) throws -> Flow {
        if stack.isExhausted() {
            throw ChatTemplateError(.limit, "statements nested deeper than the thread's stack allows", line: line)
        }
        switch node {
        case .text(let s):
            out += s
            try checkOutputSize()
            return .normal
        case .output(let e, let line):
            self.line = line
            try emit(eval(e, frame))
            return .normal
        case .ifChain(let branches, let elseBody, let line):
            self.line = line
            return try execIf(branches, elseBody, frame)
        case .forLoop(let loop, let line):
            self.line = line
            return try runFor(loop, frame, iterable: nil, depth: 1)
        case .set(let target, let e, let line):
            self.line = line
            try assign(target, eval(e, frame), frame)
            return .normal
        case .setBlock(let target, let filter, let body, let line):
            self.line = line
            return try execSetBlock(target, filter, body, frame)
        case .macro(let m, _):
            frame.vars[m.name] = .object(MacroObject(m, closure: frame))
            return .normal
        case .callBlock(let caller, let call, let line):
            self.line = line
            try execCallBlock(caller, call, frame)
            return .normal
        case .filterBlock(let filter, let body, let line):
            self.line = line
            return try execFilterBlock(filter, body, frame)
        case .with(let assignments, let body, let line):
            self.line = line
            return try execWith(assignments, body, frame)
        case .breakLoop:
            return .breakLoop
        case .continueLoop:
            return .continueLoop
        }
    }

    func emit(_ value: Value) throws {
        out += try pyStr(value)
        try checkOutputSize()
    }

    func execIf(_ branches: [(Expr, [Node])], _ elseBody: [Node], _ frame: Frame) throws -> Flow {
        for (cond, body) in branches {
            if try eval(cond, frame).truthy { return try exec(body, frame) }
        }
        return try exec(elseBody, frame)
    }

    func execSetBlock(_ target: Target, _ filter: Expr?, _ body: [Node], _ frame: Frame) throws -> Flow {
        // The body is a scope of its own: names it sets do not leak (jinja2's inner frame).
        let inner = Frame(parent: frame)
        var flow = Flow.normal
        var value = Value.string(try capture { flow = try exec(body, inner) })
        // `break`/`continue` inside leave the loop; the captured text is dropped.
        if flow != .normal { return flow }
        if let filter { value = try evalFilterChain(filter, hole: value, frame) }
        try assign(target, value, frame)
        return .normal
    }

    func execCallBlock(_ caller: MacroDefinition, _ call: Expr, _ frame: Frame) throws {
        guard case .call(let callee, let args, _) = call else { return }
        let callerMacro = MacroObject(caller, closure: frame)
        try emit(evalCall(callee, args, frame, extra: ("caller", .object(callerMacro))))
    }

    func execFilterBlock(_ filter: Expr, _ body: [Node], _ frame: Frame) throws -> Flow {
        let inner = Frame(parent: frame)
        var flow = Flow.normal
        let text = try capture { flow = try exec(body, inner) }
        if flow != .normal { return flow }
        try emit(evalFilterChain(filter, hole: .string(text), frame))
        return .normal
    }

    func execWith(_ assignments: [(Target, Expr)], _ body: [Node], _ frame: Frame) throws -> Flow {
        let inner = Frame(parent: frame)
        for (target, e) in assignments { try assign(target, eval(e, frame), inner) }
        return try exec(body, inner)
    }

    func checkOutputSize() throws {
        if out.utf8.count > options.limits.maxOutputBytes {
            throw ChatTemplateError(.limit, "output exceeds \(options.limits.maxOutputBytes) bytes", line: line)
        }
    }

    /// Refuses to build a string or list of `size` bytes or items beyond the output
    /// limit (doubling a string in a loop would otherwise exhaust memory).
    func checkSize(_ size: Int) throws {
        if size > options.limits.maxOutputBytes {
            throw ChatTemplateError(
                .limit, "a value of \(size) bytes or items exceeds the output limit of \(options.limits.maxOutputBytes)", line: line)
        }
    }

    /// Refuses to build a list of more than a 64th of the output limit in items (a
    /// million by default): an item takes far more memory than a byte.
    func checkItems(_ count: Int) throws {
        if count > options.limits.maxOutputBytes / 64 {
            throw ChatTemplateError(
                .limit, "a list of \(count) items exceeds the limit of \(options.limits.maxOutputBytes / 64)", line: line)
        }
    }

    /// Renders `body` into a string of its own instead of the output.
    func capture(_ body: () throws -> Void) throws -> String {
        let saved = out
        out = ""
        defer { out = saved }
        try body()
        return out
    }

    func countIteration() throws {
        iterations += 1
        if iterations > options.limits.maxLoopIterations {
            throw ChatTemplateError(.limit, "more than \(options.limits.maxLoopIterations) loop iterations", line: line)
        }
    }

    /// Runs a loop. Returns the flow of its `else` body: a `break` there leaves the
    /// enclosing loop, as in jinja2's generated code.
    @discardableResult
    func runFor(_ f: ForLoop, _ frame: Frame, iterable: Value?, depth: Int) throws -> Flow {
        let source = try iterable ?? eval(f.iterable, frame)
        let items = try iterate(source)
        // Names assigned in the body live for one iteration: each starts from the
        // enclosing scope again, as in jinja2.
        let filterScope = Frame(parent: frame)
        var accept: ((Value) throws -> Bool)?
        if let cond = f.condition {
            // jinja2 filters lazily, interleaved with the body, in a scope of its own.
            let filterFrame = Frame(parent: filterScope)
            // Strong captures: a `loop` stored away (`{% set ns.l = loop %}`) may be
            // used after this function returns, always within the same render.
            accept = { item in
                try self.assign(f.target, item, filterFrame)
                return try self.eval(cond, filterFrame).truthy
            }
        }
        let iterator = LoopIterator(items, accept: accept)
        let loop = LoopObject(iterator: iterator, depth: depth)
        if f.recursive {
            loop.recurse = { value in
                try self.capture { try self.runFor(f, frame, iterable: value, depth: depth + 1) }
            }
        }
        var iterated = false
        while let item = try iterator.next() {
            iterated = true
            try countIteration()
            loop.advance(to: item)
            let loopFrame = Frame(parent: frame)
            try assign(f.target, item, loopFrame)
            loopFrame.vars["loop"] = .object(loop)
            if try exec(f.body, loopFrame) == .breakLoop { break }
        }
        if !iterated && !f.elseBody.isEmpty {
            return try exec(f.elseBody, Frame(parent: frame))
        }
        return .normal
    }

    func assign(_ target: Target, _ value: Value, _ frame: Frame) throws {
        switch target {
        case .name(let n):
            frame.vars[n] = value
        case .tuple(let targets):
            switch value {
            case .none, .bool, .int, .float:
                throw ChatTemplateError(.type, "cannot unpack non-iterable \(value.typeName) object")
            default: break
            }
            let items = try iterate(value)
            if items.count < targets.count {
                throw ChatTemplateError(.value, "not enough values to unpack (expected \(targets.count), got \(items.count))")
            }
            if items.count > targets.count {
                throw ChatTemplateError(.value, "too many values to unpack (expected \(targets.count))")
            }
            for (t, v) in zip(targets, items) { try assign(t, v, frame) }
        case .namespaceAttribute(let name, let attr):
            guard case .object(let o)? = frame.lookup(name), let ns = o as? NamespaceObject else {
                throw ChatTemplateError(.runtime, "cannot assign attribute on non-namespace object")
            }
            ns.attrs.setString(attr, value)
        }
    }

    // MARK: Expressions

    func lookup(_ name: String, _ frame: Frame) -> Value {
        if let v = frame.lookup(name) { return v }
        if let g = builtinGlobal(name) { return g }
        return .undefinedName(name)
    }

    /// Evaluates an expression. A thin dispatcher: the work of each kind of node lives
    /// in its own function, which keeps this recursive frame small (debug builds give
    /// a function stack for the locals of all its cases).
    func eval(_ e: Expr, _ frame: Frame) throws -> Value {
        depth += 1
        defer { depth -= 1 }
        if depth > options.limits.maxEvaluationDepth || stack.isExhausted() {
            throw ChatTemplateError(
                .limit,
                "expressions and calls nested deeper than \(options.limits.maxEvaluationDepth) levels or than the thread's stack allows",
                line: line)
        }
        switch e {
        case .constant(let c): return constant(c)
        case .name(let n, _): return lookup(n, frame)
        default: return try evalCompound(e, frame)
        }
    }

    /// The non-leaf expressions, kept out of `eval` so that its recursive frame stays
    /// small; each case hands its node to a function of its own.
    @inline(never)
    func evalCompound(_ e: Expr, _ frame: Frame) throws -> Value {
        switch e {
        case .constant, .name: return try eval(e, frame)
        case .list(let items): return .list(try evalAll(items, frame))
        case .tuple(let items): return .tuple(try evalAll(items, frame))
        case .dict(let pairs): return try evalDict(pairs, frame)
        case .attribute(let base, let name, _): return try getAttribute(eval(base, frame), name)
        case .item(let base, let key, _): return try evalItem(base, key, frame)
        case .slice(let base, let start, let stop, let step, _): return try evalSlice(base, start, stop, step, frame)
        case .call(let callee, let args, _): return try evalCall(callee, args, frame, extra: nil)
        case .filter(let base, let name, let args, let line): return try evalFilter(base, name, args, line, frame)
        case .test(let base, let name, let args, let negated, let line): return try evalTest(base, name, args, negated, line, frame)
        case .negate(let x, _): return try negate(eval(x, frame))
        case .plus(let x, _): return try unaryPlus(eval(x, frame))
        case .not(let x): return .bool(!(try eval(x, frame).truthy))
        case .and(let a, let b): return try evalAnd(a, b, frame)
        case .or(let a, let b): return try evalOr(a, b, frame)
        case .binary(let op, let a, let b, _): return try evalBinary(op, a, b, frame)
        case .concat(let items): return try evalConcat(items, frame)
        case .compare(let first, let ops, _): return try evalCompare(first, ops, frame)
        case .conditional(let cond, let then, let otherwise, let line): return try evalConditional(cond, then, otherwise, line, frame)
        }
    }

    func constant(_ c: Constant) -> Value {
        switch c {
        case .none: return .none
        case .bool(let b): return .bool(b)
        case .int(let i): return .int(i)
        case .float(let d): return .float(d)
        case .string(let s): return .string(s)
        }
    }

    func evalAll(_ items: [Expr], _ frame: Frame) throws -> [Value] {
        var out: [Value] = []
        out.reserveCapacity(items.count)
        for item in items { out.append(try eval(item, frame)) }
        return out
    }

    func evalDict(_ pairs: [(Expr, Expr)], _ frame: Frame) throws -> Value {
        var d = PyDict()
        for (k, v) in pairs {
            let key = try eval(k, frame)
            try d.set(key, try eval(v, frame))
        }
        return .dict(d)
    }

    func evalItem(_ base: Expr, _ key: Expr, _ frame: Frame) throws -> Value {
        let b = try eval(base, frame)
        return try getItem(b, eval(key, frame))
    }

    func evalSlice(_ base: Expr, _ start: Expr?, _ stop: Expr?, _ step: Expr?, _ frame: Frame) throws -> Value {
        let b = try eval(base, frame)
        func index(_ x: Expr?) throws -> Int? {
            guard let x else { return nil }
            switch try eval(x, frame) {
            case .none: return nil
            case .int(let i): return i
            case .bool(let v): return v ? 1 : 0
            case .undefined(let u): throw u.error
            default: throw ChatTemplateError(.type, "slice indices must be integers or None or have an __index__ method")
            }
        }
        return try slice(b, index(start), index(stop), index(step))
    }

    func evalFilter(_ base: Expr?, _ name: String, _ args: CallArgs, _ line: Int, _ frame: Frame) throws -> Value {
        guard let base else { throw ChatTemplateError(.syntax, "filter without an operand", line: line) }
        let value = try eval(base, frame)
        let arguments = try evalArgs(args, frame)
        // Only an `if` branch can hold an unknown name (CompileCheck rejects the others).
        guard jinjaFilterNames.contains(name) else { throw ChatTemplateError(.runtime, "No filter named '\(name)' found.", line: line) }
        return try applyFilter(name, value, arguments, line: line)
    }

    func evalTest(_ base: Expr, _ name: String, _ args: CallArgs, _ negated: Bool, _ line: Int, _ frame: Frame) throws -> Value {
        let value = try eval(base, frame)
        let arguments = try evalArgs(args, frame)
        guard jinjaTestNames.contains(name) else { throw ChatTemplateError(.runtime, "No test named '\(name)' found.", line: line) }
        let result = try applyTest(name, value, arguments, line: line)
        return .bool(negated ? !result : result)
    }

    func negate(_ v: Value) throws -> Value {
        switch v {
        case .int(let i):
            let (r, o) = (0).subtractingReportingOverflow(i)
            if o { throw overflow() }
            return .int(r)
        case .bool(let b): return .int(b ? -1 : 0)
        case .float(let d): return .float(-d)
        case .undefined(let u): throw u.error
        default: throw ChatTemplateError(.type, "bad operand type for unary -: '\(v.typeName)'")
        }
    }

    func unaryPlus(_ v: Value) throws -> Value {
        switch v {
        case .int(let i): return .int(i)
        case .bool(let b): return .int(b ? 1 : 0)
        case .float(let d): return .float(d)
        case .undefined(let u): throw u.error
        default: throw ChatTemplateError(.type, "bad operand type for unary +: '\(v.typeName)'")
        }
    }

    func evalAnd(_ a: Expr, _ b: Expr, _ frame: Frame) throws -> Value {
        let l = try eval(a, frame)
        return l.truthy ? try eval(b, frame) : l
    }

    func evalOr(_ a: Expr, _ b: Expr, _ frame: Frame) throws -> Value {
        let l = try eval(a, frame)
        return l.truthy ? l : try eval(b, frame)
    }

    func evalBinary(_ op: BinaryOp, _ a: Expr, _ b: Expr, _ frame: Frame) throws -> Value {
        let l = try eval(a, frame)
        return try binary(op, l, eval(b, frame))
    }

    func evalConcat(_ items: [Expr], _ frame: Frame) throws -> Value {
        var s = ""
        for item in items {
            s += try pyStr(eval(item, frame))
            try checkSize(s.utf8.count)
        }
        return .string(s)
    }

    func evalCompare(_ first: Expr, _ ops: [(CompareOp, Expr)], _ frame: Frame) throws -> Value {
        var left = try eval(first, frame)
        for (op, rhs) in ops {
            let right = try eval(rhs, frame)
            if !(try compare(op, left, right)) { return .bool(false) }
            left = right
        }
        return .bool(true)
    }

    func evalConditional(_ cond: Expr, _ then: Expr, _ otherwise: Expr?, _ line: Int, _ frame: Frame) throws -> Value {
        if try eval(cond, frame).truthy { return try eval(then, frame) }
        if let otherwise { return try eval(otherwise, frame) }
        return .undefinedHint("the inline if-expression on line \(line) evaluated to false and no else section was defined.")
    }

    /// Applies a filter chain written without an operand (`{% filter upper %}`,
    /// `{% set x | trim %}`) to `hole`.
    func evalFilterChain(_ e: Expr, hole: Value, _ frame: Frame) throws -> Value {
        guard case .filter(let base, let name, let args, let line) = e else { return try eval(e, frame) }
        let value = try base.map { try evalFilterChain($0, hole: hole, frame) } ?? hole
        return try applyFilter(name, value, evalArgs(args, frame), line: line)
    }

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

    // MARK: Lookups

    /// jinja2's sandboxed `getattr(obj, name)`: a Python attribute first (methods of
    /// str, list, dict...), then for a dict the key `name`.
    func getAttribute(_ obj: Value, _ name: String) throws -> Value {
        if case .undefined(let u) = obj { throw u.error }
        if let v = try attributeOnly(obj, name) { return v }
        if case .dict(let d) = obj, let v = d.get(string: name) { return v }
        return .undefined(Undefined(reason: .attribute(owner: obj.objectTypeRepr, name: name)))
    }

    /// A Python attribute of `obj` (not a dict key), or nil.
    func attributeOnly(_ obj: Value, _ name: String) throws -> Value? {
        if name.hasPrefix("__") && name.hasSuffix("__") && name.count > 4 {
            return .undefined(Undefined(reason: .unsafe(attribute: name, typeName: obj.typeName)))
        }
        if case .object(let o) = obj { return try o.attribute(name, self) }
        return boundMethod(obj, name)
    }

    /// jinja2's sandboxed `getitem(obj, key)`: `obj[key]`, else for a string key the
    /// attribute of that name, else an undefined value.
    func getItem(_ obj: Value, _ key: Value) throws -> Value {
        func index(_ count: Int) -> Int? {
            let i: Int
            switch key {
            case .int(let v): i = v
            case .bool(let b): i = b ? 1 : 0
            default: return nil
            }
            let j = i < 0 ? i + count : i
            return j >= 0 && j < count ? j : nil
        }
        switch obj {
        case .undefined(let u):
            throw u.error
        case .dict(let d):
            if let v = d.get(key) { return v }
        case .list(let items), .tuple(let items):
            if let i = index(items.count) { return items[i] }
        case .string(let s):
            let scalars = s.scalars
            if let i = index(scalars.count) { return .string(String(scalars[i])) }
        case .markup(let s):
            let scalars = s.scalars
            if let i = index(scalars.count) { return .markup(String(scalars[i])) }
        case .object(let o):
            if let view = o as? ViewObject, view.name == "range", let i = index(view.items.count) { return view.items[i] }
            if let v = try o.item(key) { return v }
        default:
            break
        }
        if case .string(let name) = key {
            if let v = try attributeOnly(obj, name) { return v }
            return .undefined(Undefined(reason: .attribute(owner: obj.objectTypeRepr, name: name)))
        }
        return .undefined(Undefined(reason: .element(owner: obj.objectTypeRepr, keyRepr: (try? pyRepr(key)) ?? "?")))
    }

    func slice(_ obj: Value, _ start: Int?, _ stop: Int?, _ step: Int?) throws -> Value {
        switch obj {
        case .undefined(let u): throw u.error
        case .list(let items): return .list(try pySlice(items, start, stop, step))
        case .tuple(let items): return .tuple(try pySlice(items, start, stop, step))
        case .string(let s): return .string(String(scalars: try pySlice(s.scalars, start, stop, step)))
        case .markup(let s): return .markup(String(scalars: try pySlice(s.scalars, start, stop, step)))
        case .object(let o):
            if let view = o as? ViewObject, let (rStart, _, rStep) = view.range {
                let (lo, hi, st) = try pySliceIndices(length: view.items.count, start: start, stop: stop, step: step)
                return try makeRangeObject(start: rStart + lo * rStep, stop: rStart + hi * rStep, step: rStep * st)
            }
        default: break
        }
        func r(_ v: Int?) -> String { v.map(String.init) ?? "None" }
        return .undefined(Undefined(reason: .element(owner: obj.objectTypeRepr, keyRepr: "slice(\(r(start)), \(r(stop)), \(r(step)))")))
    }

    /// Python's `iter(x)`, materialized.
    func iterate(_ v: Value) throws -> [Value] {
        switch v {
        case .undefined: return []
        case .list(let items), .tuple(let items): return items
        case .string(let s), .markup(let s): return s.unicodeScalars.map { .string(String($0)) }
        case .dict(let d): return d.keys
        case .object(let o):
            if let items = try o.iterate() { return items }
            throw ChatTemplateError(.type, "'\(o.typeName)' object is not iterable")
        default:
            throw ChatTemplateError(.type, "'\(v.typeName)' object is not iterable")
        }
    }

    /// Python's `len(x)`.
    func length(_ v: Value) throws -> Int {
        switch v {
        case .undefined: return 0
        case .list(let items), .tuple(let items): return items.count
        case .string(let s), .markup(let s): return s.pyLength
        case .dict(let d): return d.count
        case .object(let o):
            if let n = o.length { return n }
            throw ChatTemplateError(.type, "object of type '\(o.typeName)' has no len()")
        default:
            throw ChatTemplateError(.type, "object of type '\(v.typeName)' has no len()")
        }
    }

    func overflow() -> ChatTemplateError {
        ChatTemplateError(.unsupported, "integer overflow: Python integers are unbounded, leap-ref's are 64-bit", line: line)
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

/// The items of a `for` loop, pulled one at a time so that an inline `if` filter runs
/// interleaved with the body, and peeked only when `loop.last`, `loop.nextitem` or
/// `loop.length` ask, as jinja2's `LoopContext` does.
final class LoopIterator {
    private let items: [Value]
    private var position = 0
    private var buffer: [Value] = []
    private var bufferStart = 0
    private let accept: ((Value) throws -> Bool)?

    init(_ items: [Value], accept: ((Value) throws -> Bool)?) {
        self.items = items
        self.accept = accept
    }

    private func pull() throws -> Value? {
        while position < items.count {
            let v = items[position]
            position += 1
            if try accept?(v) ?? true { return v }
        }
        return nil
    }

    func next() throws -> Value? {
        if bufferStart < buffer.count {
            defer { bufferStart += 1 }
            return buffer[bufferStart]
        }
        return try pull()
    }

    func peek() throws -> Value? {
        if bufferStart < buffer.count { return buffer[bufferStart] }
        guard let v = try pull() else { return nil }
        buffer.append(v)
        return v
    }

    /// How many items remain after the current one.
    func remaining() throws -> Int {
        if accept == nil { return buffer.count - bufferStart + items.count - position }
        while let v = try pull() { buffer.append(v) }
        return buffer.count - bufferStart
    }
}

/// jinja2's `loop` variable.
final class LoopObject: PyObject {
    let iterator: LoopIterator
    let depth: Int
    var index0 = -1
    var current: Value?
    var previous: Value?
    var recurse: ((Value) throws -> String)?
    var lastChanged: [Value]?

    init(iterator: LoopIterator, depth: Int) {
        self.iterator = iterator
        self.depth = depth
    }

    func advance(to item: Value) {
        previous = current
        current = item
        index0 += 1
    }

    func loopLength() throws -> Int { index0 + 1 + (try iterator.remaining()) }

    override var typeName: String { "LoopContext" }
    override var objectTypeRepr: String { "jinja2.runtime.LoopContext object" }
    override var isCallable: Bool { recurse != nil }
    override func repr() throws -> String { "<LoopContext \(index0 + 1)/\(try loopLength())>" }

    override func call(_ args: Arguments, _ interp: Interpreter) throws -> Value {
        guard let recurse else {
            throw ChatTemplateError(.type, "The loop must have the 'recursive' marker to be called recursively.")
        }
        guard args.positional.count == 1 else { throw ChatTemplateError(.type, "loop() takes exactly one argument") }
        return .string(try recurse(args.positional[0]))
    }

    override func attribute(_ name: String, _ interp: Interpreter) throws -> Value? {
        switch name {
        case "index0": return .int(index0)
        case "index": return .int(index0 + 1)
        case "revindex": return .int(try loopLength() - index0)
        case "revindex0": return .int(try loopLength() - index0 - 1)
        case "first": return .bool(index0 == 0)
        case "last": return .bool(try iterator.peek() == nil)
        case "length": return .int(try loopLength())
        case "depth": return .int(depth)
        case "depth0": return .int(depth - 1)
        case "previtem": return previous ?? .undefinedHint("there is no previous item")
        case "nextitem": return try iterator.peek() ?? .undefinedHint("there is no next item")
        case "cycle":
            return .object(
                BuiltinFunction("cycle", bound: true) { args, _ in
                    guard !args.positional.isEmpty else { throw ChatTemplateError(.type, "no items for cycling given") }
                    return args.positional[self.index0 % args.positional.count]
                })
        case "changed":
            return .object(
                BuiltinFunction("changed", bound: true) { args, _ in
                    if let last = self.lastChanged, last.count == args.positional.count,
                        zip(last, args.positional).allSatisfy({ pyEquals($0, $1) })
                    {
                        return .bool(false)
                    }
                    self.lastChanged = args.positional
                    return .bool(true)
                })
        default: return nil
        }
    }
}
