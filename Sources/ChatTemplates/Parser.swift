// The parser: tokens -> syntax tree, following jinja2's grammar. This file holds the
// token cursor and the nesting guard; statements are parsed in Parser+Statements.swift,
// expressions in Parser+Expressions.swift, and CompileCheck.swift checks the parsed tree
// for unknown filter and test names as jinja2 does when it compiles.

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
}
