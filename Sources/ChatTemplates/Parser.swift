// The parser: tokens -> syntax tree, following jinja2's grammar and operator precedence
// (loosest first): `x if c else y`, `or`, `and`, `not`, comparisons and `in`, `+ -`,
// `~`, `* / // %`, `**` (left-associative, as in jinja2), unary `- +`, then postfix
// `.name [key] (call)` and finally filters `|f` and tests `is t` on the unary operand.

/// Filter names jinja2 knows. An unknown name fails when the template is compiled or,
/// in an `if` branch, when it is executed, as in jinja2 (see `CompileCheck`).
let jinjaFilterNames: Set<String> = [
    "abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape",
    "filesizeformat", "first", "float", "forceescape", "format", "groupby", "indent", "int", "items", "join",
    "last", "length", "list", "lower", "map", "max", "min", "pprint", "random", "reject", "rejectattr",
    "replace", "reverse", "round", "safe", "select", "selectattr", "slice", "sort", "string", "striptags",
    "sum", "title", "tojson", "trim", "truncate", "unique", "upper", "urlencode", "urlize", "wordcount",
    "wordwrap", "xmlattr"
]

/// Test names jinja2 knows.
let jinjaTestNames: Set<String> = [
    "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "escaped", "even", "false", "filter",
    "float", "ge", "gt", "greaterthan", "in", "integer", "iterable", "le", "lower", "lessthan", "lt", "mapping",
    "ne", "none", "number", "odd", "sameas", "sequence", "string", "test", "true", "undefined", "upper",
    "==", "!=", "<", "<=", ">", ">="
]

struct Parser {
    var tokens: [Token]
    var index = 0
    var depth = 0
    var loopDepth = 0
    static let maxDepth = 200
    let stack = StackGuard()

    init(tokens: [Token]) { self.tokens = tokens }

    var current: Token { tokens[index] }
    func peek(_ n: Int = 1) -> Token { tokens[min(index + n, tokens.count - 1)] }
    mutating func advance() -> Token {
        let t = tokens[index]
        if index < tokens.count - 1 { index += 1 }
        return t
    }

    func fail(_ message: String, _ line: Int? = nil) -> ChatTemplateError {
        ChatTemplateError(.syntax, message, line: line ?? current.line)
    }

    mutating func expectOp(_ op: String) throws {
        guard current.isOp(op) else {
            throw fail("expected token '\(op)', got '\(current.describe)'")
        }
        _ = advance()
    }

    mutating func expect(_ kind: TokenKind, _ what: String) throws -> Token {
        guard current.kind == kind else { throw fail("expected \(what), got '\(current.describe)'") }
        return advance()
    }

    mutating func expectName(_ n: String) throws {
        guard current.isName(n) else { throw fail("expected token '\(n)', got '\(current.describe)'") }
        _ = advance()
    }

    mutating func skipName(_ n: String) -> Bool {
        if current.isName(n) {
            _ = advance()
            return true
        }
        return false
    }

    mutating func skipOp(_ o: String) -> Bool {
        if current.isOp(o) {
            _ = advance()
            return true
        }
        return false
    }

    mutating func nest() throws {
        depth += 1
        if depth > Parser.maxDepth || stack.isExhausted() {
            throw ChatTemplateError(
                .limit, "template nesting deeper than \(Parser.maxDepth) levels or than the thread's stack allows", line: current.line)
        }
    }

    /// Left-nested chains (`a + b + c`, `x.a.b`, `x|f|g`) build trees as deep as they
    /// are long; each link counts as a level of nesting until the chain ends.
    mutating func link(_ links: inout Int) throws {
        links += 1
        try nest()
    }

    // MARK: Statements

    mutating func parseTemplate() throws -> [Node] {
        let body = try subparse(endTags: [])
        guard current.kind == .eof else { throw fail("unexpected '\(current.describe)'") }
        return body
    }

    /// Parses nodes until a block whose tag is one of `endTags` (left unconsumed, just
    /// after its `{%`) or the end of the template.
    mutating func subparse(endTags: Set<String>) throws -> [Node] {
        var body: [Node] = []
        while true {
            switch current.kind {
            case .data:
                body.append(.text(advance().text))
            case .variableBegin:
                let line = advance().line
                let expr = try parseTuple()
                _ = try expect(.variableEnd, "end of print statement")
                body.append(.output(expr, line: line))
            case .blockBegin:
                let begin = advance()
                if current.kind == .name, endTags.contains(current.text) { return body }
                if let node = try parseStatement(beginLine: begin.line) { body.append(node) }
                _ = try expect(.blockEnd, "end of statement block")
            case .eof:
                if !endTags.isEmpty {
                    throw fail(
                        "Unexpected end of template. Jinja was looking for the following tags: \(endTags.sorted().map { "'\($0)'" }.joined(separator: " or "))."
                    )
                }
                return body
            default:
                throw fail("unexpected '\(current.describe)'")
            }
        }
    }

    /// Parses a statement body up to one of `endTags`; when `dropNeedle`, consumes the
    /// end tag's name (its `%}` is consumed by the caller's `subparse`).
    mutating func parseStatements(_ endTags: Set<String>, dropNeedle: Bool = false) throws -> [Node] {
        _ = skipOp(":")
        _ = try expect(.blockEnd, "end of statement block")
        try nest()
        defer { depth -= 1 }
        let body = try subparse(endTags: endTags)
        if current.kind == .eof { throw fail("unexpected end of template") }
        if dropNeedle { _ = advance() }
        return body
    }

    mutating func parseStatement(beginLine: Int) throws -> Node? {
        guard current.kind == .name else { throw fail("tag name expected") }
        let tag = current.text
        let line = current.line
        switch tag {
        case "if": return try parseIf()
        case "for": return try parseFor()
        case "set": return try parseSet()
        case "macro": return try parseMacro()
        case "call": return try parseCallBlock()
        case "filter": return try parseFilterBlock()
        case "with": return try parseWith()
        case "print":
            _ = advance()
            var items: [Expr] = [try parseExpression()]
            while skipOp(",") { items.append(try parseExpression()) }
            return .output(items.count == 1 ? items[0] : .tuple(items), line: line)
        case "break", "continue":
            _ = advance()
            guard loopDepth > 0 else { throw fail("'\(tag)' outside loop") }
            return tag == "break" ? .breakLoop(line: line) : .continueLoop(line: line)
        case "generation":
            // Hugging Face's AssistantTracker extension: renders its body unchanged.
            _ = advance()
            let body = try parseStatements(["endgeneration"], dropNeedle: true)
            return .with([], body: body, line: line)
        case "block", "extends", "include", "import", "from", "autoescape":
            throw ChatTemplateError(.unsupported, "the '{% \(tag) %}' tag is not supported (templates are rendered standalone)", line: line)
        default:
            throw fail("Encountered unknown tag '\(tag)'.")
        }
    }

    mutating func parseIf() throws -> Node {
        let line = advance().line
        var branches: [(Expr, [Node])] = []
        var elseBody: [Node] = []
        while true {
            let test = try parseTuple(withCondexpr: false)
            let body = try parseStatements(["elif", "else", "endif"])
            branches.append((test, body))
            let tag = advance()
            if tag.text == "elif" { continue }
            if tag.text == "else" { elseBody = try parseStatements(["endif"], dropNeedle: true) }
            break
        }
        return .ifChain(branches, elseBody: elseBody, line: line)
    }

    mutating func parseFor() throws -> Node {
        let line = advance().line
        let target = try parseAssignTarget(endNames: ["in"])
        try expectName("in")
        let iterable = try parseTuple(withCondexpr: false, endNames: ["recursive"])
        var condition: Expr?
        if skipName("if") { condition = try parseExpression() }
        let recursive = skipName("recursive")
        loopDepth += 1
        let body = try parseStatements(["endfor", "else"])
        loopDepth -= 1
        var elseBody: [Node] = []
        if advance().text == "else" { elseBody = try parseStatements(["endfor"], dropNeedle: true) }
        return .forLoop(
            ForLoop(
                target: target, iterable: iterable, condition: condition, recursive: recursive,
                body: body, elseBody: elseBody), line: line)
    }

    mutating func parseSet() throws -> Node {
        let line = advance().line
        let target = try parseAssignTarget(withNamespace: true)
        if skipOp("=") {
            return .set(target, try parseTuple(), line: line)
        }
        var filter: Expr?
        if current.isOp("|") { filter = try parseFilter(nil) }
        let body = try parseStatements(["endset"], dropNeedle: true)
        return .setBlock(target, filter: filter, body: body, line: line)
    }

    mutating func parseWith() throws -> Node {
        let line = advance().line
        var assignments: [(Target, Expr)] = []
        while current.kind != .blockEnd {
            if !assignments.isEmpty { try expectOp(",") }
            let target = try parseAssignTarget()
            try expectOp("=")
            assignments.append((target, try parseExpression()))
        }
        let body = try parseStatements(["endwith"], dropNeedle: true)
        return .with(assignments, body: body, line: line)
    }

    mutating func parseSignature() throws -> ([String], [Expr]) {
        try expectOp("(")
        var params: [String] = []
        var defaults: [Expr] = []
        while !current.isOp(")") {
            if !params.isEmpty { try expectOp(",") }
            let n = try expect(.name, "argument name")
            params.append(n.text)
            if skipOp("=") {
                defaults.append(try parseExpression())
            } else if !defaults.isEmpty {
                throw fail("non-default argument follows default argument")
            }
        }
        try expectOp(")")
        return (params, defaults)
    }

    mutating func parseMacro() throws -> Node {
        let line = advance().line
        let name = try expect(.name, "macro name").text
        let (params, defaults) = try parseSignature()
        let saved = loopDepth
        loopDepth = 0
        let body = try parseStatements(["endmacro"], dropNeedle: true)
        loopDepth = saved
        return .macro(makeMacro(name, params, defaults, body), line: line)
    }

    func makeMacro(_ name: String, _ params: [String], _ defaults: [Expr], _ body: [Node]) -> MacroDefinition {
        var names = Set<String>()
        NameCollector.collect(body, into: &names)
        return MacroDefinition(
            name: name, parameters: params, defaults: defaults, body: body,
            catchesVarargs: names.contains("varargs"), catchesKwargs: names.contains("kwargs"),
            usesCaller: names.contains("caller"))
    }

    mutating func parseCallBlock() throws -> Node {
        let line = advance().line
        var params: [String] = []
        var defaults: [Expr] = []
        if current.isOp("(") { (params, defaults) = try parseSignature() }
        let call = try parseExpression()
        guard case .call(_, let args, _) = call else { throw fail("expected call", line) }
        if args.keywords.contains(where: { $0.0 == "caller" }) { throw fail("keyword argument repeated: caller", line) }
        let saved = loopDepth
        loopDepth = 0
        let body = try parseStatements(["endcall"], dropNeedle: true)
        loopDepth = saved
        var caller = makeMacro("caller", params, defaults, body)
        caller.isAnonymous = true
        return .callBlock(caller: caller, call: call, line: line)
    }

    mutating func parseFilterBlock() throws -> Node {
        let line = advance().line
        let filter = try parseFilter(nil, startInline: true)
        let body = try parseStatements(["endfilter"], dropNeedle: true)
        return .filterBlock(filter, body: body, line: line)
    }

    mutating func parseAssignTarget(endNames: Set<String> = [], withNamespace: Bool = false) throws -> Target {
        if withNamespace, current.kind == .name, peek().isOp(".") {
            let ns = advance().text
            _ = advance()
            let attr = try expect(.name, "attribute name").text
            return .namespaceAttribute(ns, attr)
        }
        var names: [Target] = []
        var isTuple = false
        while true {
            if !names.isEmpty { try expectOp(",") }
            if isTupleEnd(endNames) { break }
            names.append(try parseTargetPrimary())
            if current.isOp(",") { isTuple = true } else { break }
        }
        if !isTuple {
            guard let only = names.first else { throw fail("expected an assignment target") }
            return only
        }
        return .tuple(names)
    }

    mutating func parseTargetPrimary() throws -> Target {
        if current.kind == .name {
            let n = advance().text
            if ["true", "false", "none", "True", "False", "None"].contains(n) { throw fail("can't assign to '\(n)'") }
            return .name(n)
        }
        if current.isOp("(") {
            _ = advance()
            let t = try parseAssignTarget()
            try expectOp(")")
            return t
        }
        throw fail("can't assign to '\(current.describe)'")
    }

    // MARK: Expressions

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

/// Collects every variable name read in a body (jinja2's check for `varargs`, `kwargs`
/// and `caller` in macros).
enum NameCollector {
    static func collect(_ nodes: [Node], into names: inout Set<String>) {
        for node in nodes {
            node.forEachPart(
                expression: { e, _ in collect(e, into: &names) },
                body: { b, _ in collect(b, into: &names) })
        }
    }

    static func collect(_ expr: Expr, into names: inout Set<String>) {
        if case .name(let n, _) = expr { names.insert(n) }
        expr.forEachChild { child, _ in collect(child, into: &names) }
    }
}

/// What jinja2 checks when it compiles a parsed template: an unknown filter or test
/// name is a `TemplateAssertionError` ("No filter named 'x'.") unless it sits in a
/// "soft" frame, that is inside an `if` statement or a conditional expression with no
/// loop, macro, call block, filter block, `with` or block `set` in between. There
/// jinja2 (3.x) defers the check to run time, so a template whose tool branch calls a
/// filter jinja2 lacks still renders every conversation that skips the branch, and
/// fails with `TemplateRuntimeError` ("No filter named 'x' found.") when it takes it.
///
/// Not reproduced: jinja2 first folds constant expressions (`false and (x|nosuch)` is
/// the constant `False`, so its unknown filter is never compiled); here such a filter in
/// a non-soft place is still reported.
enum CompileCheck {
    static func check(_ nodes: [Node], soft: Bool = false) throws(ChatTemplateError) {
        for node in nodes {
            try node.forEachPart(
                expression: { (e, scope) throws(ChatTemplateError) in try check(e, soft: inner(soft, scope)) },
                body: { (b, scope) throws(ChatTemplateError) in try check(b, soft: inner(soft, scope)) })
        }
    }

    private static func inner(_ soft: Bool, _ scope: FrameScope) -> Bool {
        switch scope {
        case .same: soft
        case .soft: true
        case .inner: false
        }
    }

    static func check(_ expr: Expr, soft: Bool) throws(ChatTemplateError) {
        if !soft {
            switch expr {
            case .filter(_, let name, _, let line) where !jinjaFilterNames.contains(name):
                throw ChatTemplateError(.assertion, "No filter named '\(name)'.", line: line)
            case .test(_, let name, _, _, let line) where !jinjaTestNames.contains(name):
                throw ChatTemplateError(.assertion, "No test named '\(name)'.", line: line)
            default: break
            }
        }
        try expr.forEachChild { (child, inConditional) throws(ChatTemplateError) in try check(child, soft: soft || inConditional) }
    }
}
