// The syntax tree. Immutable and Sendable: a parsed template is shared by every render.

/// A literal constant.
enum Constant: Sendable {
    case none
    case bool(Bool)
    case int(Int)
    case float(Double)
    case string(String)
}

enum BinaryOp: String, Sendable {
    case add = "+"
    case sub = "-"
    case mul = "*"
    case div = "/"
    case floorDiv = "//"
    case mod = "%"
    case pow = "**"
}

enum CompareOp: String, Sendable {
    case eq = "=="
    case ne = "!="
    case lt = "<"
    case le = "<="
    case gt = ">"
    case ge = ">="
    case `in` = "in"
    case notIn = "not in"
}

/// Arguments written at a call, filter or test: `f(a, b, k=v, *args, **kwargs)`.
struct CallArgs: Sendable {
    var positional: [Expr] = []
    var keywords: [(String, Expr)] = []
    var star: Expr?
    var starStar: Expr?
}

indirect enum Expr: Sendable {
    case constant(Constant)
    case name(String, line: Int)
    case list([Expr])
    case tuple([Expr])
    case dict([(Expr, Expr)])
    /// `x.name`
    case attribute(Expr, String, line: Int)
    /// `x[key]`
    case item(Expr, Expr, line: Int)
    /// `x[a:b:c]`
    case slice(Expr, Expr?, Expr?, Expr?, line: Int)
    case call(Expr, CallArgs, line: Int)
    /// `x | name(args)`; the operand is nil inside `{% filter %}` and block `set`.
    case filter(Expr?, String, CallArgs, line: Int)
    /// `x is [not] name(args)`
    case test(Expr, String, CallArgs, negated: Bool, line: Int)
    case negate(Expr, line: Int)
    case plus(Expr, line: Int)
    case not(Expr)
    case and(Expr, Expr)
    case or(Expr, Expr)
    case binary(BinaryOp, Expr, Expr, line: Int)
    /// `a ~ b ~ c`
    case concat([Expr])
    /// `a < b <= c`: Python chained comparison.
    case compare(Expr, [(CompareOp, Expr)], line: Int)
    /// `a if cond else b`; without `else`, an undefined value.
    case conditional(cond: Expr, then: Expr, otherwise: Expr?, line: Int)
}

/// The left side of an assignment or a loop variable.
indirect enum Target: Sendable {
    case name(String)
    case tuple([Target])
    /// `ns.attr` (only `set` can assign to a namespace attribute).
    case namespaceAttribute(String, String)
}

/// A macro's or call block's signature and body.
struct MacroDefinition: Sendable {
    var name: String
    var parameters: [String]
    /// Defaults for the trailing parameters.
    var defaults: [Expr]
    var body: [Node]
    /// Whether the body mentions `varargs`, `kwargs`, `caller` (jinja2 only accepts
    /// extra arguments when it does).
    var catchesVarargs: Bool
    var catchesKwargs: Bool
    var usesCaller: Bool
    /// A call block's `caller` (jinja2 prints it as `<Macro anonymous>`).
    var isAnonymous = false
}

struct ForLoop: Sendable {
    var target: Target
    var iterable: Expr
    var condition: Expr?
    var recursive: Bool
    var body: [Node]
    var elseBody: [Node]
}

indirect enum Node: Sendable {
    case text(String)
    case output(Expr, line: Int)
    case ifChain([(Expr, [Node])], elseBody: [Node], line: Int)
    case forLoop(ForLoop, line: Int)
    case set(Target, Expr, line: Int)
    /// `{% set x | filters %}...{% endset %}`
    case setBlock(Target, filter: Expr?, body: [Node], line: Int)
    case macro(MacroDefinition, line: Int)
    /// `{% call(args) macro(...) %}body{% endcall %}`
    case callBlock(caller: MacroDefinition, call: Expr, line: Int)
    /// `{% filter f %}body{% endfilter %}`
    case filterBlock(Expr, body: [Node], line: Int)
    case with([(Target, Expr)], body: [Node], line: Int)
    case breakLoop(line: Int)
    case continueLoop(line: Int)
}

// MARK: - Traversal

/// How jinja2's compiler scopes a part of a statement (its `Frame`s): the rules for
/// unknown filters and tests depend on it (`CompileCheck`).
enum FrameScope {
    /// Compiled in the enclosing frame.
    case same
    /// An `if` statement's test and branches: the enclosing frame made "soft".
    case soft
    /// A new frame: loop bodies and loop filters, macro and call-block bodies and
    /// defaults, filter blocks, `with` and block-`set` bodies.
    case inner
}

extension Node {
    /// Calls `expression` for each expression and `body` for each nested body directly
    /// inside this statement, in source order, with the scope jinja2 compiles it in.
    func forEachPart<E: Error>(
        expression: (Expr, FrameScope) throws(E) -> Void, body: ([Node], FrameScope) throws(E) -> Void
    ) throws(E) {
        switch self {
        case .text, .breakLoop, .continueLoop: break
        case .output(let e, _), .set(_, let e, _): try expression(e, .same)
        case .ifChain(let branches, let elseBody, _):
            for (condition, branch) in branches {
                try expression(condition, .soft)
                try body(branch, .soft)
            }
            try body(elseBody, .soft)
        case .forLoop(let loop, _):
            try expression(loop.iterable, .same)
            if let condition = loop.condition { try expression(condition, .inner) }
            try body(loop.body, .inner)
            try body(loop.elseBody, .inner)
        case .setBlock(_, let filter, let nodes, _):
            if let filter { try expression(filter, .inner) }
            try body(nodes, .inner)
        case .macro(let m, _):
            for d in m.defaults { try expression(d, .inner) }
            try body(m.body, .inner)
        case .callBlock(let caller, let call, _):
            try expression(call, .same)
            for d in caller.defaults { try expression(d, .inner) }
            try body(caller.body, .inner)
        case .filterBlock(let filter, let nodes, _):
            try expression(filter, .inner)
            try body(nodes, .inner)
        case .with(let assignments, let nodes, _):
            for (_, e) in assignments { try expression(e, .same) }
            try body(nodes, .inner)
        }
    }
}

extension CallArgs {
    /// The argument expressions, in source order.
    var expressions: [Expr] {
        positional + keywords.map(\.1) + [star, starStar].compactMap { $0 }
    }
}

extension Expr {
    /// The expressions directly inside this one, in source order. `inConditional` is true
    /// for the three parts of `a if c else b` (jinja2 compiles them in a soft frame).
    func forEachChild<E: Error>(_ visit: (Expr, _ inConditional: Bool) throws(E) -> Void) throws(E) {
        switch self {
        case .constant, .name: break
        case .list(let items), .tuple(let items), .concat(let items):
            for e in items { try visit(e, false) }
        case .dict(let pairs):
            for (k, v) in pairs {
                try visit(k, false)
                try visit(v, false)
            }
        case .attribute(let e, _, _), .negate(let e, _), .plus(let e, _), .not(let e):
            try visit(e, false)
        case .item(let a, let b, _), .and(let a, let b), .or(let a, let b), .binary(_, let a, let b, _):
            try visit(a, false)
            try visit(b, false)
        case .slice(let e, let a, let b, let c, _):
            try visit(e, false)
            for x in [a, b, c] { if let x { try visit(x, false) } }
        case .call(let e, let args, _):
            try visit(e, false)
            for a in args.expressions { try visit(a, false) }
        case .filter(let e, _, let args, _):
            if let e { try visit(e, false) }
            for a in args.expressions { try visit(a, false) }
        case .test(let e, _, let args, _, _):
            try visit(e, false)
            for a in args.expressions { try visit(a, false) }
        case .compare(let e, let ops, _):
            try visit(e, false)
            for (_, x) in ops { try visit(x, false) }
        case .conditional(let c, let t, let o, _):
            try visit(t, true)
            try visit(c, true)
            if let o { try visit(o, true) }
        }
    }
}
