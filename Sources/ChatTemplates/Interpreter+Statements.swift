// The interpreter's statements: one function per kind of node, and assignment to targets.

extension Interpreter {
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
}
