// The parser's statements: the template body, `{% ... %}` tags and their bodies,
// macro signatures and assignment targets.

extension Parser {
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
