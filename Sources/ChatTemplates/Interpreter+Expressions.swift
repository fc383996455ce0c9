// The interpreter's expressions: name lookup and one function per kind of node (calls
// are in Interpreter+Calls.swift, attribute and item access in Interpreter+Lookups.swift).

extension Interpreter {
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
}
