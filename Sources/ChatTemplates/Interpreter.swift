// The evaluator: walks the syntax tree with jinja2's scoping and Python's semantics.
// This file holds its state, the output and the resource limits; the work is split by
// job: Interpreter+Statements.swift (executing statements), Interpreter+Loops.swift
// (`for` and jinja2's `loop`), Interpreter+Expressions.swift (evaluating expressions),
// Interpreter+Calls.swift (calls, macros) and Interpreter+Lookups.swift (Python's
// attribute, item, slice, `iter` and `len`).
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

    func emit(_ value: Value) throws {
        out += try pyStr(value)
        try checkOutputSize()
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

    func overflow() -> ChatTemplateError {
        ChatTemplateError(.unsupported, "integer overflow: Python integers are unbounded, leap-ref's are 64-bit", line: line)
    }
}
