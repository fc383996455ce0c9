// Python methods of str, list, tuple and dict that templates call (`s.strip()`,
// `d.items()`, `d.get(k, v)`...). Methods that mutate (`list.append`, `dict.update`...)
// are refused as Hugging Face's immutable sandbox refuses them: the attribute is an
// undefined value that raises `SecurityError` when called.

private let strMethodNames: Set<String> = [
    "capitalize", "casefold", "center", "count", "encode", "endswith", "expandtabs", "find", "format",
    "format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier", "islower",
    "isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower", "lstrip", "maketrans",
    "partition", "removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust", "rpartition", "rsplit",
    "rstrip", "split", "splitlines", "startswith", "strip", "swapcase", "title", "translate", "upper", "zfill"
]

private let listMutators: Set<String> = ["append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"]
private let dictMutators: Set<String> = ["clear", "pop", "popitem", "setdefault", "update"]
private let numberMethodNames: Set<String> = [
    "as_integer_ratio", "bit_count", "bit_length", "conjugate", "denominator", "from_bytes", "fromhex", "hex",
    "imag", "is_integer", "numerator", "real", "to_bytes"
]

extension Interpreter {
    /// The Python attribute `name` of a built-in value (a bound method), or nil.
    func boundMethod(_ obj: Value, _ name: String) -> Value? {
        func method(_ body: @escaping (Arguments, Interpreter) throws -> Value) -> Value {
            .object(BuiltinFunction(name, bound: true, body))
        }
        func unsupported(_ type: String) -> Value {
            method { _, _ in throw ChatTemplateError(.unsupported, "\(type).\(name)() is not supported") }
        }
        switch obj {
        case .string(let s):
            guard strMethodNames.contains(name) else { return nil }
            return method { args, interp in try interp.callStringMethod(s, name, args) }
        case .markup(let s):
            if name == "striptags" || name == "unescape" { return unsupported("Markup") }
            guard strMethodNames.contains(name) else { return nil }
            return method { args, interp in try interp.callMarkupMethod(s, name, args) }
        case .list(let items):
            if listMutators.contains(name) { return .undefined(Undefined(reason: .unsafe(attribute: name, typeName: "list"))) }
            switch name {
            case "copy": return method { _, _ in .list(items) }
            case "count", "index": return method { args, interp in try interp.sequenceMethod(items, "list", name, args) }
            default: return nil
            }
        case .tuple(let items):
            switch name {
            case "count", "index": return method { args, interp in try interp.sequenceMethod(items, "tuple", name, args) }
            default: return nil
            }
        case .dict(let d):
            if dictMutators.contains(name) { return .undefined(Undefined(reason: .unsafe(attribute: name, typeName: "dict"))) }
            switch name {
            case "get":
                return method { args, _ in
                    guard (1...2).contains(args.positional.count), args.keywords.isEmpty else {
                        throw ChatTemplateError(.type, "get expected at most 2 arguments, got \(args.positional.count)")
                    }
                    _ = try HashKey(args.positional[0])
                    return d.get(args.positional[0]) ?? (args.positional.count > 1 ? args.positional[1] : .none)
                }
            case "items": return method { _, _ in dictItems(d) }
            case "keys":
                return method { _, _ in .object(ViewObject(d.keys, typeName: "dict_keys")) }
            case "values":
                return method { _, _ in .object(ViewObject(d.values, typeName: "dict_values")) }
            case "copy": return method { _, _ in .dict(d) }
            case "fromkeys": return unsupported("dict")
            default: return nil
            }
        case .int, .bool, .float:
            guard numberMethodNames.contains(name) else { return nil }
            if name == "is_integer", case .float(let d) = obj {
                return method { _, _ in .bool(d.isFinite && d.rounded() == d) }
            }
            if name == "real", let n = Number(obj) {
                if case .int(let i) = n { return .int(i) }
                return obj
            }
            return unsupported(obj.typeName)
        default:
            return nil
        }
    }

    func sequenceMethod(_ items: [Value], _ type: String, _ name: String, _ args: Arguments) throws -> Value {
        guard args.positional.count >= 1, args.keywords.isEmpty else {
            throw ChatTemplateError(.type, "\(name)() takes at least 1 argument (0 given)")
        }
        let x = args.positional[0]
        if name == "count" { return .int(items.filter { pyEquals($0, x) }.count) }
        let start = args.positional.count > 1 ? try intArgument(args.positional[1], "index") : 0
        let end = args.positional.count > 2 ? try intArgument(args.positional[2], "index") : items.count
        let (lo, hi, _) = try pySliceIndices(length: items.count, start: start, stop: end, step: 1)
        if lo < hi, let i = items[lo..<hi].firstIndex(where: { pyEquals($0, x) }) { return .int(i) }
        if type == "tuple" { throw ChatTemplateError(.value, "tuple.index(x): x not in tuple") }
        throw ChatTemplateError(.value, "\(try pyRepr(x)) is not in list")
    }

    func intArgument(_ v: Value, _ function: String) throws -> Int {
        switch v {
        case .int(let i): return i
        case .bool(let b): return b ? 1 : 0
        case .undefined(let u): throw u.error
        default: throw ChatTemplateError(.type, "'\(v.typeName)' object cannot be interpreted as an integer")
        }
    }

    func stringArgument(_ v: Value, _ function: String) throws -> String {
        switch v {
        case .string(let s): return s
        default: throw ChatTemplateError(.type, "\(function)() argument must be str, not \(v.typeName)")
        }
    }

    /// `start`/`end` arguments of `find`, `count`, `startswith`...: slice semantics.
    private func range(_ args: [Value?], length: Int) throws -> (Int, Int) {
        func opt(_ v: Value?) throws -> Int? {
            guard let v else { return nil }
            if case .none = v { return nil }
            return try intArgument(v, "slice")
        }
        let start = try opt(args.count > 0 ? args[0] : nil)
        let end = try opt(args.count > 1 ? args[1] : nil)
        var lo = start ?? 0, hi = end ?? length
        if lo < 0 { lo = max(0, lo + length) }
        if hi < 0 { hi = max(0, hi + length) }
        return (lo, min(hi, length))
    }

    /// A str method called on a `Markup`, as markupsafe 3 defines them: most return
    /// `Markup`; `replace` escapes its replacement, `ljust`/`rjust`/`center` their fill,
    /// `join` and `format` what they insert.
    func callMarkupMethod(_ s: String, _ name: String, _ args: Arguments) throws -> Value {
        func wrap(_ v: Value) -> Value {
            switch v {
            case .string(let t): return .markup(t)
            case .list(let items): return .list(items.map(wrap))
            case .tuple(let items): return .tuple(items.map(wrap))
            default: return v
            }
        }
        func escapingArgument(_ index: Int) -> Arguments {
            var a = args
            if index < a.positional.count, case .string(let t) = a.positional[index] { a.positional[index] = .markup(htmlEscape(t)) }
            return a
        }
        switch name {
        case "capitalize", "casefold", "title", "lower", "upper", "lstrip", "rstrip", "strip", "swapcase", "zfill",
            "expandtabs", "translate", "removeprefix", "removesuffix", "partition", "rpartition", "split", "rsplit",
            "splitlines":
            return wrap(try callStringMethod(s, name, args))
        case "replace":
            return wrap(try callStringMethod(s, name, escapingArgument(1)))
        case "ljust", "rjust", "center":
            return wrap(try callStringMethod(s, name, escapingArgument(1)))
        case "join":
            guard args.positional.count == 1, args.keywords.isEmpty else {
                throw ChatTemplateError(.type, "join() takes exactly one argument (\(args.positional.count) given)")
            }
            let parts = try iterate(args.positional[0]).map { item -> String in
                if case .markup(let t) = item { return t }
                return htmlEscape(try pyStr(item))
            }
            return .markup(parts.joined(separator: s))
        case "format":
            return .markup(try strFormat(s, args, escapeFields: true))
        default:
            return try callStringMethod(s, name, args)
        }
    }

    func callStringMethod(_ s: String, _ name: String, _ rawArgs: Arguments) throws -> Value {
        // Markup arguments act as the strings they are.
        let args = Arguments(rawArgs.positional.map(\.plain), rawArgs.keywords.map { ($0.0, $0.1.plain) })
        let p = args.positional
        func noKeywords() throws {
            if let k = args.keywords.first { throw ChatTemplateError(.type, "str.\(name)() takes no keyword arguments (got '\(k.0)')") }
        }
        func arity(_ lo: Int, _ hi: Int) throws {
            try noKeywords()
            guard p.count >= lo && p.count <= hi else {
                throw ChatTemplateError(
                    .type, "\(name)() takes \(lo == hi ? "exactly \(lo)" : "from \(lo) to \(hi)") argument(s) (\(p.count) given)")
            }
        }
        func chars(_ i: Int) throws -> String? {
            guard i < p.count else { return nil }
            switch p[i] {
            case .none: return nil
            case .string(let c): return c
            default: throw ChatTemplateError(.type, "\(name) arg must be None or str")
            }
        }
        switch name {
        case "strip", "lstrip", "rstrip":
            try arity(0, 1)
            return .string(PyText.strip(s, try chars(0), left: name != "rstrip", right: name != "lstrip"))
        case "upper":
            try arity(0, 0)
            return .string(PyText.upper(s))
        case "lower", "casefold":
            try arity(0, 0)
            return .string(PyText.lower(s))
        case "title":
            try arity(0, 0)
            return .string(PyText.title(s))
        case "capitalize":
            try arity(0, 0)
            return .string(PyText.capitalize(s))
        case "swapcase":
            try arity(0, 0)
            return .string(PyText.swapcase(s))
        case "split", "rsplit":
            let slots = try args.bind(["sep", "maxsplit"], function: name)
            var sep: String?
            if let v = slots[0], !v.isNone { sep = try stringArgument(v, name) }
            let maxsplit = try slots[1].map { try intArgument($0, name) } ?? -1
            let parts = name == "split" ? try PyText.split(s, sep, maxsplit: maxsplit) : try PyText.rsplit(s, sep, maxsplit: maxsplit)
            return .list(parts.map { .string($0) })
        case "splitlines":
            let slots = try args.bind(["keepends"], function: name)
            return .list(PyText.splitlines(s, keepends: slots[0]?.truthy ?? false).map { .string($0) })
        case "startswith", "endswith":
            try arity(1, 3)
            var candidates: [String] = []
            switch p[0] {
            case .string(let x): candidates = [x]
            case .tuple(let xs):
                for x in xs {
                    guard case .string(let t) = x else {
                        throw ChatTemplateError(.type, "tuple for \(name) must only contain str, not \(x.typeName)")
                    }
                    candidates.append(t)
                }
            default:
                throw ChatTemplateError(.type, "\(name) first arg must be str or a tuple of str, not \(p[0].typeName)")
            }
            let a = s.scalars
            let (lo, hi) = try range(Array(p.dropFirst()).map { $0 }, length: a.count)
            guard lo <= hi || (lo <= a.count && candidates.contains("")) else { return .bool(false) }
            let window = lo <= hi ? a[lo..<hi] : a[lo..<lo]
            for c in candidates {
                let n = c.scalars
                if name == "startswith" ? window.starts(with: n) : window.reversed().starts(with: n.reversed()) { return .bool(true) }
            }
            return .bool(false)
        case "replace":
            try arity(2, 3)
            for (i, v) in p.prefix(2).enumerated() {
                guard case .string = v else {
                    throw ChatTemplateError(.type, "replace() argument \(i + 1) must be str, not \(v.typeName)")
                }
            }
            let old = try stringArgument(p[0], "replace"), new = try stringArgument(p[1], "replace")
            let count = p.count > 2 ? try intArgument(p[2], "replace") : -1
            let occurrences = old.isEmpty ? s.pyLength + 1 : PyText.count(s.scalars, old.scalars)
            try checkSize(s.utf8.count + min(occurrences, count < 0 ? occurrences : count) * new.utf8.count)
            return .string(PyText.replace(s, old, new, count: count))
        case "find", "rfind", "index", "rindex", "count":
            try arity(1, 3)
            guard case .string(let needleText) = p[0] else {
                throw ChatTemplateError(.type, "must be str, not \(p[0].typeName)")
            }
            let needle = needleText.scalars
            let a = s.scalars
            let (lo, hi) = try range(Array(p.dropFirst()).map { $0 }, length: a.count)
            if name == "count" { return .int(lo > hi ? 0 : PyText.count(a, needle, from: lo, to: hi)) }
            let found =
                lo > hi ? nil : name.hasPrefix("r") ? PyText.rfind(a, needle, from: lo, to: hi) : PyText.find(a, needle, from: lo, to: hi)
            if let found { return .int(found) }
            if name.hasSuffix("index") { throw ChatTemplateError(.value, "substring not found") }
            return .int(-1)
        case "join":
            try arity(1, 1)
            var parts: [String] = []
            for (i, item) in try iterate(p[0]).enumerated() {
                guard case .string(let t) = item else {
                    throw ChatTemplateError(.type, "sequence item \(i): expected str instance, \(item.typeName) found")
                }
                parts.append(t)
            }
            return .string(parts.joined(separator: s))
        case "format":
            return .string(try strFormat(s, args))
        case "center", "ljust", "rjust":
            try arity(1, 2)
            let width = try intArgument(p[0], name)
            try checkSize(width)
            var fill: Unicode.Scalar = " "
            if p.count > 1 {
                guard case .string(let f) = p[1], f.pyLength == 1 else {
                    throw ChatTemplateError(.type, "The fill character must be exactly one character long")
                }
                fill = f.unicodeScalars.first!
            }
            let n = s.pyLength
            if width <= n { return .string(s) }
            let padding = String(repeating: String(fill), count: width - n)
            switch name {
            case "ljust": return .string(s + padding)
            case "rjust": return .string(padding + s)
            default: return .string(PyText.center(s, width, fill: fill))
            }
        case "zfill":
            try arity(1, 1)
            let width = try intArgument(p[0], name)
            try checkSize(width)
            let a = s.scalars
            guard width > a.count else { return .string(s) }
            let zeros = String(repeating: "0", count: width - a.count)
            if let first = a.first, first == "+" || first == "-" {
                return .string(String(first) + zeros + String(scalars: a.dropFirst()))
            }
            return .string(zeros + s)
        case "partition", "rpartition":
            try arity(1, 1)
            let sep = try stringArgument(p[0], name)
            guard !sep.isEmpty else { throw ChatTemplateError(.value, "empty separator") }
            let a = s.scalars, n = sep.scalars
            let found = name == "partition" ? PyText.find(a, n) : PyText.rfind(a, n)
            guard let i = found else {
                return name == "partition" ? .tuple([.string(s), .string(""), .string("")]) : .tuple([.string(""), .string(""), .string(s)])
            }
            return .tuple([.string(String(scalars: a[..<i])), .string(sep), .string(String(scalars: a[(i + n.count)...]))])
        case "removeprefix", "removesuffix":
            try arity(1, 1)
            let affix = try stringArgument(p[0], name).scalars
            let a = s.scalars
            if name == "removeprefix", a.starts(with: affix) { return .string(String(scalars: a.dropFirst(affix.count))) }
            if name == "removesuffix", !affix.isEmpty, a.count >= affix.count, a.suffix(affix.count).elementsEqual(affix) {
                return .string(String(scalars: a.dropLast(affix.count)))
            }
            return .string(s)
        case "isalpha", "isdigit", "isalnum", "isspace", "isdecimal", "isnumeric", "isascii", "islower", "isupper",
            "istitle", "isidentifier", "isprintable":
            try arity(0, 0)
            let a = s.scalars
            switch name {
            case "isalpha": return .bool(!a.isEmpty && a.allSatisfy(PyText.isAlpha))
            case "isdigit": return .bool(!a.isEmpty && a.allSatisfy(PyText.isDigit))
            case "isdecimal": return .bool(!a.isEmpty && a.allSatisfy(PyText.isDecimal))
            case "isnumeric": return .bool(!a.isEmpty && a.allSatisfy(PyText.isNumeric))
            case "isalnum": return .bool(!a.isEmpty && a.allSatisfy { PyText.isAlpha($0) || PyText.isNumeric($0) })
            case "isspace": return .bool(!a.isEmpty && a.allSatisfy(isPySpace))
            case "isascii": return .bool(a.allSatisfy { $0.isASCII })
            case "islower": return .bool(PyText.isLower(s))
            case "isupper": return .bool(PyText.isUpper(s))
            case "isprintable": return .bool(a.allSatisfy(isPrintable))
            case "istitle": return .bool(!a.isEmpty && PyText.title(s) == s && a.contains { $0.properties.isCased })
            default:
                guard let first = a.first else { return .bool(false) }
                return .bool((first == "_" || PyText.isAlpha(first)) && a.allSatisfy { PyText.isWord($0) })
            }
        default:
            throw ChatTemplateError(.unsupported, "str.\(name)() is not supported")
        }
    }
}

/// `dict.items()` as a `dict_items` view of `(key, value)` tuples.
func dictItems(_ d: PyDict) -> Value {
    .object(ViewObject(zip(d.keys, d.values).map { .tuple([$0.0, $0.1]) }, typeName: "dict_items"))
}
