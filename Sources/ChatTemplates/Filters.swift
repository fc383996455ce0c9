import Foundation

// jinja2's built-in filters, each with jinja2's signature and Python semantics.
// `tojson` is Hugging Face's override: `json.dumps(x, ensure_ascii=False, indent=...,
// separators=..., sort_keys=False)`, with no HTML escaping.

extension Interpreter {
    func applyFilter(_ name: String, _ input: Value, _ args: Arguments, line: Int) throws -> Value {
        // A Markup input acts as a plain string except where jinja2's filter keeps it
        // Markup (`string`, `upper`, `trim`, `indent`, `format`...).
        let value = input.plain
        let isMarkup = input.isMarkup
        func keep(_ result: String) -> Value { isMarkup ? .markup(result) : .string(result) }
        func bind(_ params: [String]) throws -> [Value?] { try args.bind(params, function: "do_\(name)") }
        func noArgs() throws {
            guard args.positional.isEmpty, args.keywords.isEmpty else {
                throw ChatTemplateError(.type, "do_\(name)() takes 1 positional argument but \(args.positional.count + 1) were given")
            }
        }
        func boolArg(_ v: Value?, _ d: Bool) -> Bool { v?.truthy ?? d }
        func str(_ v: Value) throws -> String { try pyStr(v) }

        switch name {
        case "abs":
            try noArgs()
            switch value {
            case .int(let i):
                guard i != Int.min else { throw overflow() }
                return .int(abs(i))
            case .bool(let b): return .int(b ? 1 : 0)
            case .float(let d): return .float(abs(d))
            default: throw ChatTemplateError(.type, "bad operand type for abs(): '\(input.typeName)'")
            }
        case "attr":
            let a = try bind(["name"])
            guard let n = a[0] else { throw ChatTemplateError(.type, "do_attr() missing 1 required positional argument: 'name'") }
            let attrName = try str(n)
            if case .undefined(let u) = value { throw u.error }
            return try attributeOnly(input, attrName)
                ?? .undefined(Undefined(reason: .attribute(owner: input.objectTypeRepr, name: attrName)))
        case "batch":
            let a = try bind(["linecount", "fill_with"])
            guard let lc = a[0] else { throw ChatTemplateError(.type, "do_batch() missing 1 required positional argument: 'linecount'") }
            let count = try intArgument(lc, "batch")
            if let fill = a[1], !fill.isNone { try checkItems(count) }
            var batches: [Value] = []
            var tmp: [Value] = []
            for item in try iterate(value) {
                if tmp.count == count {
                    batches.append(.list(tmp))
                    tmp = []
                }
                tmp.append(item)
            }
            if !tmp.isEmpty {
                if let fill = a[1], !fill.isNone, tmp.count < count { tmp += Array(repeating: fill, count: count - tmp.count) }
                batches.append(.list(tmp))
            }
            return .object(IteratorObject(batches))
        case "capitalize":
            try noArgs()
            return keep(PyText.capitalize(try str(value)))
        case "center":
            let a = try bind(["width"])
            let width = try a[0].map { try intArgument($0, "center") } ?? 80
            try checkSize(width)
            return keep(PyText.center(try str(value), width))
        case "count", "length":
            try noArgs()
            return .int(try length(value))
        case "d", "default":
            let a = try bind(["default_value", "boolean"])
            if value.isUndefined || (boolArg(a[1], false) && !value.truthy) { return a[0] ?? .string("") }
            return input
        case "dictsort":
            let a = try bind(["case_sensitive", "by", "reverse"])
            guard case .dict(let d) = value else {
                if case .undefined(let u) = value { throw u.error }
                throw ChatTemplateError(.attribute, "'\(input.typeName)' object has no attribute 'items'")
            }
            let byValue: Bool
            switch a[1] {
            case nil: byValue = false
            case .string("key")?: byValue = false
            case .string("value")?: byValue = true
            default: throw ChatTemplateError(.filterArgument, "You can only sort by either 'key' or 'value'")
            }
            let caseSensitive = boolArg(a[0], false)
            let pairs = zip(d.keys, d.values).map { Value.tuple([$0.0, $0.1]) }
            let sorted = try sortValues(pairs, reverse: boolArg(a[2], false)) { item in
                guard case .tuple(let kv) = item else { return item }
                let v = byValue ? kv[1] : kv[0]
                return caseSensitive ? v : ignoreCase(v)
            }
            return .list(sorted)
        case "e", "escape", "forceescape":
            try noArgs()
            if isMarkup && name != "forceescape" { return input }
            return .markup(htmlEscape(try str(value)))
        case "first":
            try noArgs()
            if case .object(let o) = value, let it = o as? IteratorObject {
                return it.next() ?? .undefinedHint("No first item, sequence was empty.")
            }
            return try iterate(value).first ?? .undefinedHint("No first item, sequence was empty.")
        case "last":
            try noArgs()
            switch value {
            case .object(let o) where !(o is ViewObject):
                throw ChatTemplateError(.type, "'\(o.typeName)' object is not reversible")
            case .none, .int, .float, .bool:
                throw ChatTemplateError(.type, "'\(value.typeName)' object is not reversible")
            default:
                return try iterate(value).last ?? .undefinedHint("No last item, sequence was empty.")
            }
        case "float":
            let a = try bind(["default"])
            switch value {
            case .float: return value
            case .int(let i): return .float(Double(i))
            case .bool(let b): return .float(b ? 1 : 0)
            case .string(let s):
                if let d = pyParseFloat(s) { return .float(d) }
                return a[0] ?? .float(0)
            case .undefined(let u): throw u.error
            default: return a[0] ?? .float(0)
            }
        case "format":
            if !args.positional.isEmpty && !args.keywords.isEmpty {
                throw ChatTemplateError(.filterArgument, "can't handle positional and keyword arguments at the same time")
            }
            let operand: Value
            if !args.keywords.isEmpty {
                var d = PyDict()
                for (k, v) in args.keywords { d.setString(k, v) }
                operand = .dict(d)
            } else {
                operand = .tuple(args.positional)
            }
            if isMarkup { return .markup(try percentFormat(try str(value), operand, escapeArguments: true)) }
            return .string(try percentFormat(try str(value), operand))
        case "groupby":
            let a = try bind(["attribute", "default", "case_sensitive"])
            guard let attribute = a[0] else {
                throw ChatTemplateError(.type, "do_groupby() missing 1 required positional argument: 'attribute'")
            }
            let caseSensitive = boolArg(a[2], false)
            let fallback = a[1].flatMap { $0.isNone ? nil : $0 }
            let getter = try attributeGetter(attribute, default: fallback)
            func key(_ v: Value) throws -> Value {
                let k = try getter(v)
                return caseSensitive ? k : ignoreCase(k)
            }
            let sorted = try sortValues(try iterate(value), reverse: false, key: key)
            var groups: [(Value, [Value])] = []
            for item in sorted {
                let k = try key(item)
                if let last = groups.last, pyEquals(last.0, k) {
                    groups[groups.count - 1].1.append(item)
                } else {
                    groups.append((k, [item]))
                }
            }
            return .list(
                try groups.map { group in
                    // The grouper is the first item's real value, not the lowercased key.
                    let grouper = caseSensitive ? group.0 : try getter(group.1[0])
                    return .object(NamedTupleObject("_GroupTuple", fields: ["grouper", "list"], values: [grouper, .list(group.1)]))
                })
        case "indent":
            let a = try bind(["width", "first", "blank"])
            guard case .string(var s) = value else {
                switch value {
                case .undefined(let u): throw u.error
                case .list: throw ChatTemplateError(.attribute, "'list' object has no attribute 'splitlines'")
                case .tuple: throw ChatTemplateError(.type, "can only concatenate tuple (not \"str\") to tuple")
                default: throw ChatTemplateError(.type, "unsupported operand type(s) for +=: '\(value.typeName)' and 'str'")
                }
            }
            var indention: String
            switch a[0]?.plain {
            case .string(let w)?: indention = w
            case let w?:
                let width = try intArgument(w, "indent")
                try checkSize(width)
                indention = String(repeating: " ", count: max(0, width))
            case nil: indention = "    "
            }
            // On a Markup, the plain-string indentation joins Markup lines and is escaped.
            if isMarkup && a[0]?.isMarkup != true { indention = htmlEscape(indention) }
            s += "\n"
            var rv: String
            var lines = PyText.splitlines(s)
            if boolArg(a[2], false) {
                rv = lines.joined(separator: "\n" + indention)
            } else {
                rv = lines.removeFirst()
                if !lines.isEmpty {
                    rv += "\n" + lines.map { $0.isEmpty ? $0 : indention + $0 }.joined(separator: "\n")
                }
            }
            if boolArg(a[1], false) { rv = indention + rv }
            return keep(rv)
        case "int":
            let a = try bind(["default", "base"])
            let fallback = a[0] ?? .int(0)
            switch value {
            case .int: return value
            case .bool(let b): return .int(b ? 1 : 0)
            case .float(let d):
                guard d.isFinite else {
                    if d.isNaN { return fallback }
                    throw ChatTemplateError(.overflow, "cannot convert float infinity to integer")
                }
                guard abs(d) < 9.2e18 else { throw overflow() }
                return .int(Int(d.rounded(.towardZero)))
            case .string(let s):
                let base = try a[1].map { try intArgument($0, "int") } ?? 10
                if let i = pyParseInt(s, base: base) { return .int(i) }
                if let d = pyParseFloat(s), d.isFinite, abs(d) < 9.2e18 { return .int(Int(d.rounded(.towardZero))) }
                return fallback
            case .undefined(let u): throw u.error
            default: return fallback
            }
        case "items":
            try noArgs()
            switch value {
            case .undefined: return .object(IteratorObject([]))
            case .dict(let d): return .object(IteratorObject(zip(d.keys, d.values).map { .tuple([$0.0, $0.1]) }))
            default: throw ChatTemplateError(.type, "Can only get item pairs from a mapping.")
            }
        case "join":
            let a = try bind(["d", "attribute"])
            let sep = try a[0].map(str) ?? ""
            var items = try iterate(value)
            if let attr = a[1], !attr.isNone {
                let getter = try attributeGetter(attr)
                items = try items.map(getter)
            }
            return .string(try items.map(str).joined(separator: sep))
        case "list":
            try noArgs()
            return .list(try iterate(value))
        case "lower":
            try noArgs()
            return keep(PyText.lower(try str(value)))
        case "upper":
            try noArgs()
            return keep(PyText.upper(try str(value)))
        case "title":
            try noArgs()
            return .string(PyText.jinjaTitle(try str(value)))
        case "map":
            // jinja2 checks truthiness before iterating: `false|map(...)` is empty.
            let items = value.truthy ? try iterate(value) : []
            if args.positional.isEmpty, let attr = args.keyword("attribute") {
                var fallback: Value?
                for (k, v) in args.keywords where k != "attribute" {
                    guard k == "default" else { throw ChatTemplateError(.filterArgument, "Unexpected keyword argument '\(k)'") }
                    fallback = v
                }
                let getter = try attributeGetter(attr, default: fallback)
                return .object(IteratorObject(try items.map(getter)))
            }
            guard let first = args.positional.first else { throw ChatTemplateError(.filterArgument, "map requires a filter argument") }
            let filterName = try str(first)
            guard jinjaFilterNames.contains(filterName) else {
                throw ChatTemplateError(.runtime, "No filter named '\(filterName)'.")
            }
            let rest = Arguments(Array(args.positional.dropFirst()), args.keywords)
            return .object(IteratorObject(try items.map { try applyFilter(filterName, $0, rest, line: line) }))
        case "max", "min":
            let a = try bind(["case_sensitive", "attribute"])
            let items = try iterate(value)
            guard var best = items.first else { return .undefinedHint("No aggregated item, sequence was empty.") }
            let caseSensitive = boolArg(a[0], false)
            let getter = try attributeGetter(a[1] ?? .none)
            func key(_ v: Value) throws -> Value {
                let k = try getter(v)
                return caseSensitive ? k : ignoreCase(k)
            }
            var bestKey = try key(best)
            for item in items.dropFirst() {
                let k = try key(item)
                let better = name == "max" ? try pyCompare(k, bestKey, op: ">") > 0 : try pyCompare(k, bestKey, op: "<") < 0
                if better {
                    best = item
                    bestKey = k
                }
            }
            return best
        case "reject", "select", "rejectattr", "selectattr":
            let byAttribute = name.hasSuffix("attr")
            let keep = name.hasPrefix("select")
            var rest = args.positional
            var getter: (Value) throws -> Value = { $0 }
            if byAttribute {
                guard !rest.isEmpty else { throw ChatTemplateError(.runtime, "Missing parameter for attribute name") }
                getter = try attributeGetter(rest.removeFirst())
            }
            var test: ((Value) throws -> Bool)?
            if !rest.isEmpty {
                let testName = try str(rest.removeFirst())
                guard jinjaTestNames.contains(testName) else { throw ChatTemplateError(.runtime, "No test named '\(testName)'.") }
                let testArgs = Arguments(rest, args.keywords)
                test = { [unowned self] v in try self.applyTest(testName, v, testArgs, line: line) }
            }
            var kept: [Value] = []
            if value.truthy {
                for item in try iterate(value) {
                    let subject = try getter(item)
                    let result = try test?(subject) ?? subject.truthy
                    if result == keep { kept.append(item) }
                }
            }
            return .object(IteratorObject(kept))
        case "replace":
            let a = try bind(["old", "new", "count"])
            guard let old = a[0], let new = a[1] else {
                throw ChatTemplateError(.type, "do_replace() missing required positional arguments 'old' and 'new'")
            }
            var count = -1
            if let c = a[2], !c.isNone { count = try intArgument(c, "replace") }
            let (text, oldText, newText) = (try str(value), try str(old), try str(new))
            let occurrences = oldText.isEmpty ? text.pyLength + 1 : PyText.count(text.scalars, oldText.scalars)
            try checkSize(text.utf8.count + min(occurrences, count < 0 ? occurrences : count) * newText.utf8.count)
            return .string(PyText.replace(try str(value), try str(old), try str(new), count: count))
        case "reverse":
            try noArgs()
            switch value {
            case .string(let s): return keep(String(scalars: s.unicodeScalars.reversed()))
            case .list(let items): return .object(IteratorObject(items.reversed(), typeName: "list_reverseiterator"))
            case .tuple(let items): return .object(IteratorObject(items.reversed(), typeName: "reversed"))
            case .dict(let d): return .object(IteratorObject(d.keys.reversed(), typeName: "dict_reversekeyiterator"))
            default:
                do {
                    return .list(try iterate(value).reversed())
                } catch let error as ChatTemplateError where error.kind == .type {
                    throw ChatTemplateError(.filterArgument, "argument must be iterable")
                }
            }
        case "round":
            let a = try bind(["precision", "method"])
            let precision = try a[0].map { try intArgument($0, "round") } ?? 0
            let method = try a[1].map(str) ?? "common"
            guard ["common", "ceil", "floor"].contains(method) else {
                throw ChatTemplateError(.filterArgument, "method must be common, ceil or floor")
            }
            guard let n = Number(value) else {
                if case .undefined(let u) = value, method != "common" { throw u.error }
                throw ChatTemplateError(.type, "type \(input.typeName) doesn't define __round__ method")
            }
            if method == "common" {
                switch n {
                case .int(let i):
                    if precision >= 0 { return .int(i) }
                    return .int(try roundInt(i, precision))
                case .float(let d): return .float(pyRound(d, precision))
                }
            }
            let scale = Foundation.pow(10.0, Double(precision))
            let scaled = n.double * scale
            guard scaled.isFinite else { throw ChatTemplateError(.overflow, "cannot convert float infinity to integer") }
            let r = method == "ceil" ? scaled.rounded(.up) : scaled.rounded(.down)
            return .float(r / scale)
        case "safe":
            try noArgs()
            return .markup(try str(value))
        case "slice":
            let a = try bind(["slices", "fill_with"])
            guard let sv = a[0] else { throw ChatTemplateError(.type, "do_slice() missing 1 required positional argument: 'slices'") }
            let slices = try intArgument(sv, "slice")
            try checkItems(slices)
            let seq = try iterate(value)
            guard slices > 0 else {
                if slices == 0 { throw ChatTemplateError(.zeroDivision, "integer division or modulo by zero") }
                return .object(IteratorObject([]))
            }
            let per = seq.count / slices, extra = seq.count % slices
            var offset = 0
            var out: [Value] = []
            for n in 0..<slices {
                let start = offset + n * per
                if n < extra { offset += 1 }
                let end = offset + (n + 1) * per
                var tmp = Array(seq[min(start, seq.count)..<min(end, seq.count)])
                if let fill = a[1], !fill.isNone, n >= extra { tmp.append(fill) }
                out.append(.list(tmp))
            }
            return .object(IteratorObject(out))
        case "sort":
            let a = try bind(["reverse", "case_sensitive", "attribute"])
            let caseSensitive = boolArg(a[1], false)
            // jinja2's make_multi_attrgetter: `attribute` may list several keys ("age,name"),
            // and the sort key is always a list of them, compared element-wise (so equal
            // items, undefined ones included, never raise).
            var getters: [(Value) throws -> Value] = []
            if case .string(let spec)? = a[2]?.plain {
                getters = try spec.split(separator: ",", omittingEmptySubsequences: false).map { try attributeGetter(.string(String($0))) }
            } else {
                getters = [try attributeGetter(a[2] ?? .none)]
            }
            let sorted = try sortValues(try iterate(value), reverse: boolArg(a[0], false)) { v in
                .list(
                    try getters.map { getter in
                        let k = try getter(v)
                        return caseSensitive ? k : ignoreCase(k)
                    })
            }
            return .list(sorted)
        case "string":
            try noArgs()
            return keep(try str(value))
        case "sum":
            let a = try bind(["attribute", "start"])
            var total = a[1] ?? .int(0)
            let getter = try attributeGetter(a[0] ?? .none)
            for item in try iterate(value) { total = try binary(.add, total, getter(item)) }
            return total
        case "tojson":
            let a = try bind(["ensure_ascii", "indent", "separators", "sort_keys"])
            var separators: (String, String)?
            if let sep = a[2], !sep.isNone {
                let parts = try iterate(sep)
                guard parts.count == 2, case .string(let item) = parts[0], case .string(let key) = parts[1] else {
                    throw ChatTemplateError(.value, "separators must be a (item_separator, key_separator) pair of strings")
                }
                separators = (item, key)
            }
            return .string(
                try jsonDumps(
                    value, ensureASCII: boolArg(a[0], false), indent: a[1] ?? .none,
                    separators: separators, sortKeys: boolArg(a[3], false)))
        case "trim":
            let a = try bind(["chars"])
            var chars: String?
            if let c = a[0], !c.isNone { chars = try str(c) }
            if isMarkup { return .markup(PyText.strip(try str(value), chars, left: true, right: true)) }
            return .string(PyText.strip(try str(value), chars, left: true, right: true))
        case "truncate":
            let a = try bind(["length", "killwords", "end", "leeway"])
            let len = try a[0].map { try intArgument($0, "truncate") } ?? 255
            let end = try a[2].map(str) ?? "..."
            let leeway = try a[3].flatMap { $0.isNone ? nil : try intArgument($0, "truncate") } ?? 5
            guard len >= end.pyLength else { throw ChatTemplateError(.runtime, "expected length >= \(end.pyLength), got \(len)") }
            guard leeway >= 0 else { throw ChatTemplateError(.runtime, "expected leeway >= 0, got \(leeway)") }
            // jinja2 does not convert the value to a string: short sequences come back as they are.
            if try length(value) <= len + leeway { return input }
            guard case .string(let s) = value else {
                if boolArg(a[1], false) {
                    return try binary(.add, try slice(value, nil, len - end.pyLength, nil), .string(end))
                }
                throw ChatTemplateError(.attribute, "'\(value.typeName)' object has no attribute 'rsplit'")
            }
            let head = String(scalars: s.scalars.prefix(len - end.pyLength))
            // On a Markup, `+ end` escapes the plain-string end.
            let tail = isMarkup && a[2]?.isMarkup != true ? htmlEscape(end) : end
            if boolArg(a[1], false) { return keep(head + tail) }
            return keep((try PyText.rsplit(head, " ", maxsplit: 1)).first! + tail)
        case "unique":
            let a = try bind(["case_sensitive", "attribute"])
            let caseSensitive = boolArg(a[0], false)
            let getter = try attributeGetter(a[1] ?? .none)
            var seen = Set<HashKey>()
            var out: [Value] = []
            for item in try iterate(value) {
                var k = try getter(item)
                if !caseSensitive { k = ignoreCase(k) }
                if seen.insert(try HashKey(k)).inserted { out.append(item) }
            }
            return .object(IteratorObject(out))
        case "wordcount":
            try noArgs()
            var count = 0
            var inWord = false
            for u in try str(value).unicodeScalars {
                let w = PyText.isWord(u)
                if w && !inWord { count += 1 }
                inWord = w
            }
            return .int(count)
        default:
            throw ChatTemplateError(.unsupported, "the '\(name)' filter is not supported", line: line)
        }
    }

    /// jinja2's `make_attrgetter`: `"a.b.0"` looks up `x["a"]["b"][0]` (items first,
    /// then attributes). A none attribute is the identity.
    func attributeGetter(_ attribute: Value, default fallback: Value? = nil) throws -> (Value) throws -> Value {
        var parts: [Value]
        switch attribute {
        case .none: return { $0 }
        case .string(let s):
            parts = s.split(separator: ".", omittingEmptySubsequences: false).map { p in
                let part = String(p)
                if let i = Int(part), part.allSatisfy(\.isASCII) { return .int(i) }
                return .string(part)
            }
        case .int: parts = [attribute]
        default: parts = [attribute]
        }
        return { [unowned self] item in
            var v = item
            for part in parts {
                v = try self.getItem(v, part)
                if let fallback, !fallback.isNone, v.isUndefined { v = fallback }
            }
            return v
        }
    }

    /// Python's stable `sorted(items, key=key, reverse=reverse)`.
    func sortValues(_ items: [Value], reverse: Bool, key: (Value) throws -> Value) throws -> [Value] {
        let keyed = try items.map { (try key($0), $0) }
        // Merge sort: stable, and its comparator may throw (mixed types raise TypeError).
        func less(_ a: (Value, Value), _ b: (Value, Value)) throws -> Bool {
            reverse ? try pyCompare(b.0, a.0) < 0 : try pyCompare(a.0, b.0) < 0
        }
        var a = keyed
        var buffer = keyed
        var width = 1
        while width < a.count {
            var i = 0
            while i < a.count {
                let mid = min(i + width, a.count), hi = min(i + 2 * width, a.count)
                var l = i, r = mid, k = i
                while l < mid && r < hi {
                    if try less(a[r], a[l]) {
                        buffer[k] = a[r]
                        r += 1
                    } else {
                        buffer[k] = a[l]
                        l += 1
                    }
                    k += 1
                }
                while l < mid {
                    buffer[k] = a[l]
                    l += 1
                    k += 1
                }
                while r < hi {
                    buffer[k] = a[r]
                    r += 1
                    k += 1
                }
                i += 2 * width
            }
            swap(&a, &buffer)
            width *= 2
        }
        return a.map(\.1)
    }

    func roundInt(_ i: Int, _ precision: Int) throws -> Int {
        // round(1234, -2) == 1200, halves to even.
        guard precision > -19 else { return 0 }
        var p = 1
        for _ in 0..<(-precision) { p *= 10 }
        let q = i / p, r = i % p
        var result = q
        if abs(r) * 2 > p || (abs(r) * 2 == p && q % 2 != 0) { result += i < 0 ? -1 : 1 }
        let (v, o) = result.multipliedReportingOverflow(by: p)
        if o { throw overflow() }
        return v
    }
}

/// jinja2's `ignore_case`: strings compare lowercased.
func ignoreCase(_ v: Value) -> Value {
    if case .string(let s) = v { return .string(PyText.lower(s)) }
    return v
}

/// markupsafe's `escape` for a string.
func htmlEscape(_ s: String) -> String {
    var out = ""
    for u in s.unicodeScalars {
        switch u {
        case "&": out += "&amp;"
        case "<": out += "&lt;"
        case ">": out += "&gt;"
        case "\"": out += "&#34;"
        case "'": out += "&#39;"
        default: out.unicodeScalars.append(u)
        }
    }
    return out
}

/// Python's `round(x, n)` for a float: the correctly rounded decimal, halves to even.
func pyRound(_ d: Double, _ n: Int) -> Double {
    guard d.isFinite else { return d }
    if n == 0 { return d.rounded(.toNearestOrEven) }
    if n > 0 {
        if n > 300 { return d }
        // printf rounds the exact binary value correctly, as Python's round does.
        return Double(String(format: "%.\(n)f", d)) ?? d
    }
    let p = Foundation.pow(10.0, Double(-n))
    return (d / p).rounded(.toNearestOrEven) * p
}

/// Python's `float(str)`: surrounding whitespace, underscores between digits,
/// `inf`/`nan`/`infinity` in any case.
func pyParseFloat(_ s: String) -> Double? {
    let t = PyText.strip(s, nil, left: true, right: true)
    guard !t.isEmpty else { return nil }
    let lower = t.lowercased()
    var body = Substring(lower)
    var negative = false
    if body.first == "+" || body.first == "-" {
        negative = body.first == "-"
        body = body.dropFirst()
    }
    if body == "inf" || body == "infinity" { return negative ? -.infinity : .infinity }
    if body == "nan" { return .nan }
    guard body.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == "." || $0 == "e" || $0 == "_" || $0 == "+" || $0 == "-") }) else {
        return nil
    }
    if body.contains("_") {
        let chars = Array(body)
        for (i, c) in chars.enumerated() where c == "_" {
            guard i > 0, i + 1 < chars.count, chars[i - 1].isNumber, chars[i + 1].isNumber else { return nil }
        }
    }
    return Double(lower.replacingOccurrences(of: "_", with: ""))
}

/// Python's `int(str, base)`: whitespace, a sign, underscores between digits, and a
/// `0x`/`0o`/`0b` prefix that matches the base.
func pyParseInt(_ s: String, base: Int) -> Int? {
    var t = Substring(PyText.strip(s, nil, left: true, right: true).lowercased())
    var negative = false
    if t.first == "+" || t.first == "-" {
        negative = t.first == "-"
        t = t.dropFirst()
    }
    var radix = base
    let prefixes: [(String, Int)] = [("0x", 16), ("0o", 8), ("0b", 2)]
    for (p, r) in prefixes where t.hasPrefix(p) && (base == r || base == 0) {
        t = t.dropFirst(2)
        if t.first == "_" { t = t.dropFirst() }
        radix = r
    }
    if radix == 0 { radix = 10 }
    guard !t.isEmpty, t.first != "_", t.last != "_", !t.contains("__") else { return nil }
    let digits = t.replacingOccurrences(of: "_", with: "")
    guard digits.allSatisfy(\.isASCII), let v = Int(digits, radix: radix) else { return nil }
    return negative ? -v : v
}
