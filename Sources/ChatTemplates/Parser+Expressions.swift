// The parser's expressions, following jinja2's operator precedence (loosest first):
// `x if c else y`, `or`, `and`, `not`, comparisons and `in`, `+ -`, `~`, `* / // %`,
// `**` (left-associative, as in jinja2), unary `- +`, then postfix `.name [key] (call)`
// and finally filters `|f` and tests `is t` on the unary operand.

extension Parser {
    func isTupleEnd(_ endNames: Set<String>) -> Bool {
        switch current.kind {
        case .variableEnd, .blockEnd: return true
        case .op: return current.text == ")"
        case .name: return endNames.contains(current.text)
        default: return false
        }
    }

    /// jinja2's `parse_tuple`: an expression, or a tuple when commas follow.
    mutating func parseTuple(withCondexpr: Bool = true, endNames: Set<String> = [], explicitParentheses: Bool = false) throws -> Expr {
        var items: [Expr] = []
        var isTuple = false
        while true {
            if !items.isEmpty { try expectOp(",") }
            if isTupleEnd(endNames) { break }
            items.append(withCondexpr ? try parseExpression() : try parseOr())
            if current.isOp(",") { isTuple = true } else { break }
        }
        if !isTuple {
            if let only = items.first { return only }
            if !explicitParentheses { throw fail("Expected an expression, got '\(current.describe)'") }
        }
        return .tuple(items)
    }

    mutating func parseExpression() throws -> Expr {
        try nest()
        defer { depth -= 1 }
        var expr = try parseOr()
        while current.isName("if") {
            let line = advance().line
            let cond = try parseOr()
            var otherwise: Expr?
            if skipName("else") { otherwise = try parseExpression() }
            expr = .conditional(cond: cond, then: expr, otherwise: otherwise, line: line)
        }
        return expr
    }

    mutating func parseOr() throws -> Expr {
        var links = 0
        defer { depth -= links }
        var left = try parseAnd()
        while skipName("or") {
            try link(&links)
            left = .or(left, try parseAnd())
        }
        return left
    }

    mutating func parseAnd() throws -> Expr {
        var links = 0
        defer { depth -= links }
        var left = try parseNot()
        while skipName("and") {
            try link(&links)
            left = .and(left, try parseNot())
        }
        return left
    }

    mutating func parseNot() throws -> Expr {
        if current.isName("not") {
            _ = advance()
            try nest()
            defer { depth -= 1 }
            return .not(try parseNot())
        }
        return try parseCompare()
    }

    mutating func parseCompare() throws -> Expr {
        let line = current.line
        let left = try parseMath1()
        var ops: [(CompareOp, Expr)] = []
        while true {
            if current.kind == .op, let op = CompareOp(rawValue: current.text), op != .in, op != .notIn {
                _ = advance()
                ops.append((op, try parseMath1()))
            } else if skipName("in") {
                ops.append((.in, try parseMath1()))
            } else if current.isName("not"), peek().isName("in") {
                _ = advance()
                _ = advance()
                ops.append((.notIn, try parseMath1()))
            } else {
                break
            }
        }
        return ops.isEmpty ? left : .compare(left, ops, line: line)
    }

    mutating func parseMath1() throws -> Expr {
        var links = 0
        defer { depth -= links }
        var left = try parseConcat()
        while current.isOp("+") || current.isOp("-") {
            let t = advance()
            try link(&links)
            left = .binary(t.text == "+" ? .add : .sub, left, try parseConcat(), line: t.line)
        }
        return left
    }

    mutating func parseConcat() throws -> Expr {
        var items = [try parseMath2()]
        while skipOp("~") { items.append(try parseMath2()) }
        return items.count == 1 ? items[0] : .concat(items)
    }

    mutating func parseMath2() throws -> Expr {
        var links = 0
        defer { depth -= links }
        var left = try parsePow()
        while current.kind == .op, ["*", "/", "//", "%"].contains(current.text) {
            let t = advance()
            try link(&links)
            left = .binary(BinaryOp(rawValue: t.text)!, left, try parsePow(), line: t.line)
        }
        return left
    }

    mutating func parsePow() throws -> Expr {
        var links = 0
        defer { depth -= links }
        var left = try parseUnary()
        while current.isOp("**") {
            let t = advance()
            try link(&links)
            let right = try parseUnary()
            left = Parser.powerNode(left, right, line: t.line)
        }
        return left
    }

    /// jinja2 folds constant subexpressions and writes a negative constant into the
    /// generated Python without parentheses, so `-2 ** n` with a variable `n` computes
    /// `-(2 ** n)`, while `-2 ** 2` (all constant) is `(-2) ** 2`. Reproduce that.
    static func powerNode(_ left: Expr, _ right: Expr, line: Int) -> Expr {
        guard isConstant(left), !isConstant(right) else { return .binary(.pow, left, right, line: line) }
        let folder = Interpreter(options: RenderOptions())
        switch try? folder.eval(left, Frame(parent: nil)) {
        case .int(let i)? where i < 0 && i != Int.min:
            return .negate(.binary(.pow, .constant(.int(-i)), right, line: line), line: line)
        case .float(let d)? where d < 0:
            return .negate(.binary(.pow, .constant(.float(-d)), right, line: line), line: line)
        default:
            return .binary(.pow, left, right, line: line)
        }
    }

    /// Whether jinja2's optimizer can fold `e` to a constant (literals and operators on them).
    static func isConstant(_ e: Expr) -> Bool {
        switch e {
        case .constant: return true
        case .negate(let x, _), .plus(let x, _), .not(let x): return isConstant(x)
        case .binary(_, let a, let b, _), .and(let a, let b), .or(let a, let b): return isConstant(a) && isConstant(b)
        case .tuple(let items), .list(let items), .concat(let items): return items.allSatisfy(isConstant)
        default: return false
        }
    }

    mutating func parseUnary(withFilter: Bool = true) throws -> Expr {
        var node: Expr
        if current.isOp("-") || current.isOp("+") {
            let t = advance()
            try nest()
            defer { depth -= 1 }
            let operand = try parseUnary(withFilter: false)
            node = t.text == "-" ? .negate(operand, line: t.line) : .plus(operand, line: t.line)
        } else {
            node = try parsePostfix(try parsePrimary())
        }
        if withFilter { node = try parseFilterExpr(node) }
        return node
    }

    mutating func parsePrimary() throws -> Expr {
        let t = current
        switch t.kind {
        case .name:
            _ = advance()
            switch t.text {
            case "true", "True": return .constant(.bool(true))
            case "false", "False": return .constant(.bool(false))
            case "none", "None": return .constant(.none)
            default: return .name(t.text, line: t.line)
            }
        case .string:
            var s = advance().text
            while current.kind == .string { s += advance().text }
            return .constant(.string(s))
        case .integer:
            _ = advance()
            return .constant(.int(t.int))
        case .float:
            _ = advance()
            return .constant(.float(t.float))
        case .op where t.text == "(":
            _ = advance()
            try nest()
            defer { depth -= 1 }
            let e = try parseTuple(explicitParentheses: true)
            try expectOp(")")
            return e
        case .op where t.text == "[":
            _ = advance()
            try nest()
            defer { depth -= 1 }
            var items: [Expr] = []
            while !current.isOp("]") {
                if !items.isEmpty { try expectOp(",") }
                if current.isOp("]") { break }
                items.append(try parseExpression())
            }
            try expectOp("]")
            return .list(items)
        case .op where t.text == "{":
            _ = advance()
            try nest()
            defer { depth -= 1 }
            var pairs: [(Expr, Expr)] = []
            while !current.isOp("}") {
                if !pairs.isEmpty { try expectOp(",") }
                if current.isOp("}") { break }
                let key = try parseExpression()
                try expectOp(":")
                pairs.append((key, try parseExpression()))
            }
            try expectOp("}")
            return .dict(pairs)
        default:
            throw fail("unexpected '\(t.describe)'")
        }
    }

    mutating func parsePostfix(_ base: Expr) throws -> Expr {
        var links = 0
        defer { depth -= links }
        var node = base
        while true {
            if current.isOp(".") || current.isOp("[") || current.isOp("(") { try link(&links) }
            if current.isOp(".") {
                let line = advance().line
                let t = advance()
                if t.kind == .name {
                    node = .attribute(node, t.text, line: line)
                } else if t.kind == .integer {
                    node = .item(node, .constant(.int(t.int)), line: line)
                } else {
                    throw fail("expected name or number", line)
                }
            } else if current.isOp("[") {
                let line = advance().line
                var args: [Expr] = []
                var slice: (Expr?, Expr?, Expr?)?
                while !current.isOp("]") {
                    if !args.isEmpty || slice != nil { try expectOp(",") }
                    let (e, s) = try parseSubscribed()
                    if let s {
                        guard args.isEmpty, slice == nil else {
                            throw ChatTemplateError(.unsupported, "extended (tuple) slicing is not supported", line: line)
                        }
                        slice = s
                    } else if let e {
                        guard slice == nil else {
                            throw ChatTemplateError(.unsupported, "extended (tuple) slicing is not supported", line: line)
                        }
                        args.append(e)
                    }
                }
                try expectOp("]")
                if let (a, b, c) = slice {
                    node = .slice(node, a, b, c, line: line)
                } else if args.count == 1 {
                    node = .item(node, args[0], line: line)
                } else {
                    node = .item(node, .tuple(args), line: line)
                }
            } else if current.isOp("(") {
                let line = current.line
                node = .call(node, try parseCallArgs(), line: line)
            } else {
                return node
            }
        }
    }

    /// One subscript: an expression, or a slice `a:b:c` (any part may be missing).
    mutating func parseSubscribed() throws -> (Expr?, (Expr?, Expr?, Expr?)?) {
        var start: Expr?
        if current.isOp(":") {
            _ = advance()
        } else {
            let e = try parseExpression()
            guard current.isOp(":") else { return (e, nil) }
            _ = advance()
            start = e
        }
        var stop: Expr?
        if !current.isOp(":") && !current.isOp("]") && !current.isOp(",") { stop = try parseExpression() }
        var step: Expr?
        if skipOp(":") {
            if !current.isOp("]") && !current.isOp(",") { step = try parseExpression() }
        }
        return (nil, (start, stop, step))
    }

    mutating func parseCallArgs() throws -> CallArgs {
        try expectOp("(")
        var args = CallArgs()
        var requireComma = false
        while !current.isOp(")") {
            if requireComma {
                try expectOp(",")
                if current.isOp(")") { break }
            }
            if current.isOp("*") {
                guard args.star == nil, args.starStar == nil else { throw fail("invalid syntax for function call expression") }
                _ = advance()
                args.star = try parseExpression()
            } else if current.isOp("**") {
                guard args.starStar == nil else { throw fail("invalid syntax for function call expression") }
                _ = advance()
                args.starStar = try parseExpression()
            } else if current.kind == .name, peek().isOp("=") {
                guard args.starStar == nil else { throw fail("invalid syntax for function call expression") }
                let key = advance().text
                if args.keywords.contains(where: { $0.0 == key }) { throw fail("keyword argument repeated: \(key)") }
                _ = advance()
                args.keywords.append((key, try parseExpression()))
            } else {
                guard args.star == nil, args.starStar == nil, args.keywords.isEmpty else {
                    throw fail("invalid syntax for function call expression")
                }
                args.positional.append(try parseExpression())
            }
            requireComma = true
        }
        try expectOp(")")
        return args
    }

    mutating func parseFilterExpr(_ base: Expr) throws -> Expr {
        var links = 0
        defer { depth -= links }
        var node = base
        while true {
            if current.isOp("|") || current.isName("is") || current.isOp("(") { try link(&links) }
            if current.isOp("|") {
                node = try parseFilter(node)
            } else if current.isName("is") {
                node = try parseTest(node)
            } else if current.isOp("(") {
                let line = current.line
                node = .call(node, try parseCallArgs(), line: line)
            } else {
                return node
            }
        }
    }

    mutating func parseFilter(_ base: Expr?, startInline: Bool = false) throws -> Expr {
        var links = 0
        defer { depth -= links }
        var node = base
        var inline = startInline
        while current.isOp("|") || inline {
            try link(&links)
            if !inline { _ = advance() }
            inline = false
            let t = try expect(.name, "filter name")
            var name = t.text
            while current.isOp(".") {
                _ = advance()
                name += "." + (try expect(.name, "filter name")).text
            }
            let args = current.isOp("(") ? try parseCallArgs() : CallArgs()
            node = .filter(node, name, args, line: t.line)
        }
        return node!
    }

    mutating func parseTest(_ base: Expr) throws -> Expr {
        let line = advance().line  // `is`
        let negated = skipName("not")
        let t = current
        guard t.kind == .name else {
            throw fail("expected test name, got '\(t.describe)'")
        }
        _ = advance()
        var name = t.text
        while current.isOp(".") {
            _ = advance()
            name += "." + (try expect(.name, "test name")).text
        }
        var args = CallArgs()
        if current.isOp("(") {
            args = try parseCallArgs()
        } else if [.name, .string, .integer, .float].contains(current.kind) || current.isOp("[") || current.isOp("{"),
            !current.isName("else"), !current.isName("or"), !current.isName("and")
        {
            if current.isName("is") { throw fail("You cannot chain multiple tests with is") }
            args.positional = [try parsePostfix(try parsePrimary())]
        }
        return .test(base, name, args, negated: negated, line: line)
    }
}
