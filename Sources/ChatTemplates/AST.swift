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
