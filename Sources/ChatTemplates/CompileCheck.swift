// The check jinja2 runs when it compiles a parsed template: filter and test names must
// be known, except where jinja2 defers the check to run time.

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
