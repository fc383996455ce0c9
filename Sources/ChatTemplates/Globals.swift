import Foundation
import LeapJSON

// The global functions a chat template can call: jinja2's (`range`, `dict`,
// `namespace`, `cycler`, `joiner`) and Hugging Face's (`raise_exception`,
// `strftime_now`); plus `json.dumps` as Hugging Face's `tojson` calls it.

/// jinja2's sandbox refuses `range()`s longer than this.
let sandboxMaxRange = 100_000

extension Interpreter {
    func builtinGlobal(_ name: String) -> Value? {
        func function(_ body: @escaping (Arguments, Interpreter) throws -> Value) -> Value {
            .object(BuiltinFunction(name, body))
        }
        switch name {
        case "range":
            return function { args, interp in try interp.makeRange(args) }
        case "dict":
            return function { args, interp in .dict(try interp.makeDict(args, function: "dict")) }
        case "namespace":
            return function { args, interp in
                let ns = NamespaceObject()
                ns.attrs = try interp.makeDict(args, function: "namespace")
                return .object(ns)
            }
        case "cycler":
            return function { args, _ in .object(CyclerObject(args.positional)) }
        case "joiner":
            return function { args, _ in
                let a = try args.bind(["sep"], function: "joiner")
                return .object(JoinerObject(separator: try a[0].map(pyStr) ?? ", "))
            }
        case "raise_exception":
            return function { args, _ in
                let message = try args.positional.first.map(pyStr) ?? ""
                throw ChatTemplateError(.templateError, message)
            }
        case "strftime_now":
            return function { args, interp in
                guard args.positional.count == 1, case .string(let format) = args.positional[0] else {
                    throw ChatTemplateError(.type, "strftime_now() takes exactly one string argument")
                }
                var calendar = Calendar(identifier: .gregorian)
                calendar.timeZone = interp.options.timeZone
                let parts = calendar.dateComponents(
                    [.year, .month, .day, .hour, .minute, .second, .weekday, .dayOfYear],
                    from: interp.options.clock())
                return .string(try strftime(format, parts))
            }
        case "lipsum":
            return function { _, _ in throw ChatTemplateError(.unsupported, "lipsum() is not supported") }
        default:
            return nil
        }
    }

    func makeRange(_ args: Arguments) throws -> Value {
        guard args.keywords.isEmpty else { throw ChatTemplateError(.type, "range() takes no keyword arguments") }
        let ints = try args.positional.map { try intArgument($0, "range") }
        var start = 0, stop = 0, step = 1
        switch ints.count {
        case 1: stop = ints[0]
        case 2:
            start = ints[0]
            stop = ints[1]
        case 3:
            start = ints[0]
            stop = ints[1]
            step = ints[2]
        default: throw ChatTemplateError(.type, "range expected at most 3 arguments, got \(ints.count)")
        }
        guard step != 0 else { throw ChatTemplateError(.value, "range() arg 3 must not be zero") }
        return try makeRangeObject(start: start, stop: stop, step: step)
    }

    func makeRangeObject(start: Int, stop: Int, step: Int) throws -> Value {
        var count = 0
        if step > 0, start < stop { count = (stop - start + step - 1) / step }
        if step < 0, start > stop { count = (start - stop - step - 1) / -step }
        if count > sandboxMaxRange {
            throw ChatTemplateError(.overflow, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (\(sandboxMaxRange)).")
        }
        let items = (0..<count).map { Value.int(start + $0 * step) }
        let repr = step == 1 ? "range(\(start), \(stop))" : "range(\(start), \(stop), \(step))"
        return .object(ViewObject(items, typeName: "range", repr: repr, range: (start, stop, step)))
    }

    /// `dict(mapping_or_pairs, **kwargs)`.
    func makeDict(_ args: Arguments, function: String) throws -> PyDict {
        var d = PyDict()
        guard args.positional.count <= 1 else {
            throw ChatTemplateError(.type, "\(function) expected at most 1 argument, got \(args.positional.count)")
        }
        if let source = args.positional.first {
            switch source {
            case .dict(let src): d = src
            case .object(let o as NamespaceObject) where function == "namespace": d = o.attrs
            default:
                for (i, pair) in try iterate(source).enumerated() {
                    let kv = try iterate(pair)
                    guard kv.count == 2 else {
                        throw ChatTemplateError(.value, "dictionary update sequence element #\(i) has length \(kv.count); 2 is required")
                    }
                    try d.set(kv[0], kv[1])
                }
            }
        }
        for (k, v) in args.keywords { d.setString(k, v) }
        return d
    }

    /// Python's `json.dumps(value, ensure_ascii=, indent=, separators=, sort_keys=)`.
    func jsonDumps(
        _ value: Value, ensureASCII: Bool, indent: Value, separators: (String, String)?,
        sortKeys: Bool
    ) throws -> String {
        var indentUnit: String?
        switch indent {
        case .none: indentUnit = nil
        case .string(let s): indentUnit = s
        default: indentUnit = String(repeating: " ", count: max(0, try intArgument(indent, "dumps")))
        }
        let (itemSeparator, keySeparator) = separators ?? (indentUnit == nil ? (", ", ": ") : (",", ": "))
        let format = JSONFormat(asciiOnly: ensureASCII)
        var out = ""
        func newline(_ level: Int) {
            guard let indentUnit else { return }
            out += "\n" + String(repeating: indentUnit, count: level)
        }
        func floatText(_ d: Double) -> String {
            if d.isNaN { return "NaN" }
            if d.isInfinite { return d < 0 ? "-Infinity" : "Infinity" }
            return JSONValue.pythonFloatRepr(d)
        }
        func write(_ v: Value, _ level: Int) throws {
            if level > maxValueNesting {
                throw ChatTemplateError(.limit, "value nested deeper than \(maxValueNesting) levels", line: line)
            }
            switch v {
            case .none: out += "null"
            case .bool(let b): out += b ? "true" : "false"
            case .int(let i): out += String(i)
            case .float(let d): out += floatText(d)
            case .string(let s), .markup(let s): JSONValue.writeString(s, into: &out, format: format)
            case .list(let items), .tuple(let items):
                if items.isEmpty {
                    out += "[]"
                    return
                }
                out += "["
                newline(level + 1)
                for (i, item) in items.enumerated() {
                    if i > 0 {
                        out += itemSeparator
                        newline(level + 1)
                    }
                    try write(item, level + 1)
                }
                newline(level)
                out += "]"
            case .dict(let d):
                if d.isEmpty {
                    out += "{}"
                    return
                }
                var pairs = Array(zip(d.keys, d.values))
                if sortKeys {
                    let order = try sortValues(pairs.indices.map { Value.int($0) }, reverse: false) { idx in
                        guard case .int(let i) = idx else { return idx }
                        return pairs[i].0
                    }
                    pairs = order.map { idx in
                        guard case .int(let i) = idx else { return pairs[0] }
                        return pairs[i]
                    }
                }
                out += "{"
                newline(level + 1)
                for (i, (k, item)) in pairs.enumerated() {
                    if i > 0 {
                        out += itemSeparator
                        newline(level + 1)
                    }
                    let key: String
                    switch k {
                    case .string(let s), .markup(let s): key = s
                    case .int(let n): key = String(n)
                    case .float(let x): key = floatText(x)
                    case .bool(let b): key = b ? "true" : "false"
                    case .none: key = "null"
                    default: throw ChatTemplateError(.type, "keys must be str, int, float, bool or None, not \(k.typeName)")
                    }
                    JSONValue.writeString(key, into: &out, format: format)
                    out += keySeparator
                    try write(item, level + 1)
                }
                newline(level)
                out += "}"
            case .object(let o as NamedTupleObject):
                try write(.tuple(o.values), level)
            case .undefined, .object:
                throw ChatTemplateError(.type, "Object of type \(v.typeName) is not JSON serializable")
            }
        }
        try write(value, 0)
        return out
    }
}

/// jinja2's `cycler(*items)`.
final class CyclerObject: PyObject {
    let items: [Value]
    var position = 0

    init(_ items: [Value]) { self.items = items }

    override var typeName: String { "Cycler" }
    override var objectTypeRepr: String { "jinja2.utils.Cycler object" }
    override func attribute(_ name: String, _ interp: Interpreter) throws -> Value? {
        switch name {
        case "current":
            guard !items.isEmpty else { throw ChatTemplateError(.unsupported, "an empty cycler") }
            return items[position]
        case "next":
            return .object(
                BuiltinFunction("next", bound: true) { _, _ in
                    guard !self.items.isEmpty else { throw ChatTemplateError(.unsupported, "an empty cycler") }
                    let v = self.items[self.position]
                    self.position = (self.position + 1) % self.items.count
                    return v
                })
        case "reset":
            return .object(
                BuiltinFunction("reset", bound: true) { _, _ in
                    self.position = 0
                    return .none
                })
        case "items":
            return .list(items)
        default:
            return nil
        }
    }
}

/// jinja2's `joiner(sep)`: returns "" the first time it is called, then `sep`.
final class JoinerObject: PyObject {
    let separator: String
    var used = false

    init(separator: String) { self.separator = separator }

    override var typeName: String { "Joiner" }
    override var objectTypeRepr: String { "jinja2.utils.Joiner object" }
    override var isCallable: Bool { true }
    override func call(_ args: Arguments, _ interp: Interpreter) throws -> Value {
        if !used {
            used = true
            return .string("")
        }
        return .string(separator)
    }
}
