/// Why a chat template could not be parsed or rendered.
///
/// `kind` names the Python exception jinja2 would raise for the same template and
/// input (`TemplateError` for the template's own `raise_exception(...)`,
/// `UndefinedError`, `TypeError`, ...), and `message` is that exception's text, so
/// `description` (`"TemplateError: Tool call IDs should be ..."`) reads as Python's
/// `f"{type(e).__name__}: {e}"` does (syntax errors, whose wording is leap-ref's, and
/// leap-ref's own kinds add the line). Two kinds are leap-ref's own: `.unsupported`
/// (a construct jinja2 has but leap-ref does not implement: it fails rather than
/// render different text) and `.limit` (a resource limit that protects the process).
public struct ChatTemplateError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// Raised by the template itself through `raise_exception(message)`.
        case templateError = "TemplateError"
        /// The template does not parse (the wording is leap-ref's, not jinja2's).
        case syntax = "TemplateSyntaxError"
        /// An unknown filter or test name (jinja2 rejects it when compiling).
        case assertion = "TemplateAssertionError"
        /// jinja2's `TemplateRuntimeError`, e.g. assigning an attribute of a non-namespace.
        case runtime = "TemplateRuntimeError"
        /// An undefined value was called, indexed, asked for an attribute or computed with.
        case undefined = "UndefinedError"
        /// An operation the immutable sandbox forbids, such as `list.append`.
        case security = "SecurityError"
        /// Python's `TypeError` (`can only concatenate str (not "dict") to str`, ...).
        case type = "TypeError"
        /// Python's `AttributeError` raised inside a filter.
        case attribute = "AttributeError"
        /// A filter called with arguments it cannot use (jinja2's `FilterArgumentError`).
        case filterArgument = "FilterArgumentError"
        /// Python's `ValueError` (`not enough values to unpack`, `substring not found`, ...).
        case value = "ValueError"
        /// Python's `ZeroDivisionError`.
        case zeroDivision = "ZeroDivisionError"
        /// Python's `OverflowError` (`range()` beyond the sandbox's limit, ...).
        case overflow = "OverflowError"
        /// A jinja2 or Python feature that leap-ref does not implement.
        case unsupported = "UnsupportedError"
        /// A resource limit (recursion depth, loop iterations, output size).
        case limit = "LimitError"
    }

    /// Which Python exception (or leap-ref condition) this is.
    public var kind: Kind
    /// The exception text, as Python would print it.
    public var message: String
    /// The template line being rendered when the error happened, when known.
    public var line: Int?

    /// An error of `kind` with Python's `message`.
    public init(_ kind: Kind, _ message: String, line: Int? = nil) {
        self.kind = kind
        self.message = message
        self.line = line
    }

    /// `"Kind: message"`, the way Python prints `f"{type(e).__name__}: {e}"`. Errors that
    /// are leap-ref's own, and syntax errors, also name the line.
    public var description: String {
        switch kind {
        case .syntax, .unsupported, .limit:
            if let line { return "\(kind.rawValue): \(message) (line \(line))" }
            return "\(kind.rawValue): \(message)"
        default:
            return "\(kind.rawValue): \(message)"
        }
    }
}
