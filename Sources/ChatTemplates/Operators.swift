import Foundation

// Python's operators on template values: arithmetic with int/float distinction,
// comparisons, equality and `in`.

enum Number {
    case int(Int)
    case float(Double)

    init?(_ v: Value) {
        switch v {
        case .int(let i): self = .int(i)
        case .bool(let b): self = .int(b ? 1 : 0)
        case .float(let d): self = .float(d)
        default: return nil
        }
    }

    var double: Double {
        switch self {
        case .int(let i): return Double(i)
        case .float(let d): return d
        }
    }
}

/// Python's `==`.
func pyEquals(_ a: Value, _ b: Value) -> Bool {
    switch (a.plain, b.plain) {
    case (.undefined, .undefined): return true
    case (.undefined, _), (_, .undefined): return false
    case (.none, .none): return true
    case (.string(let x), .string(let y)): return x.utf8.elementsEqual(y.utf8)
    case (.list(let x), .list(let y)), (.tuple(let x), .tuple(let y)):
        return x.count == y.count && zip(x, y).allSatisfy { pyEquals($0, $1) }
    case (.dict(let x), .dict(let y)):
        guard x.count == y.count else { return false }
        for (k, v) in zip(x.keys, x.values) {
            guard let w = y.get(k), pyEquals(v, w) else { return false }
        }
        return true
    case (.object(let x), .object(let y)):
        if x === y { return true }
        if let vx = x as? ViewObject, let vy = y as? ViewObject, vx.name == vy.name, vx.name == "range" {
            return vx.items.count == vy.items.count && zip(vx.items, vy.items).allSatisfy { pyEquals($0, $1) }
        }
        return false
    default:
        if let x = Number(a), let y = Number(b) {
            switch (x, y) {
            case (.int(let i), .int(let j)): return i == j
            default: return x.double == y.double
            }
        }
        return false
    }
}

/// Compares two values for ordering as Python's `<` does: -1, 0 or 1.
func pyCompare(_ original: Value, _ other: Value, op: String = "<") throws -> Int {
    let a = original.plain, b = other.plain
    if case .undefined(let u) = a { throw u.error }
    if case .undefined(let u) = b { throw u.error }
    if let x = Number(a), let y = Number(b) {
        if case .int(let i) = x, case .int(let j) = y { return i < j ? -1 : i > j ? 1 : 0 }
        let (p, q) = (x.double, y.double)
        return p < q ? -1 : p > q ? 1 : 0
    }
    switch (a, b) {
    case (.string(let x), .string(let y)):
        var i = x.unicodeScalars.makeIterator(), j = y.unicodeScalars.makeIterator()
        while true {
            switch (i.next(), j.next()) {
            case (nil, nil): return 0
            case (nil, _): return -1
            case (_, nil): return 1
            case (let p?, let q?): if p != q { return p.value < q.value ? -1 : 1 }
            }
        }
    case (.list(let x), .list(let y)), (.tuple(let x), .tuple(let y)):
        for (p, q) in zip(x, y) where !pyEquals(p, q) { return try pyCompare(p, q, op: op) }
        return x.count < y.count ? -1 : x.count > y.count ? 1 : 0
    default:
        throw ChatTemplateError(.type, "'\(op)' not supported between instances of '\(original.typeName)' and '\(other.typeName)'")
    }
}

extension Interpreter {
    func compare(_ op: CompareOp, _ a: Value, _ b: Value) throws -> Bool {
        switch op {
        case .eq: return pyEquals(a, b)
        case .ne: return !pyEquals(a, b)
        case .lt: return try pyCompare(a, b, op: "<") < 0
        case .le: return try pyCompare(a, b, op: "<=") <= 0
        case .gt: return try pyCompare(a, b, op: ">") > 0
        case .ge: return try pyCompare(a, b, op: ">=") >= 0
        case .in: return try contains(b, a)
        case .notIn: return !(try contains(b, a))
        }
    }

    /// Python's `item in container`.
    func contains(_ container: Value, _ item: Value) throws -> Bool {
        let item = item.plain
        switch container.plain {
        case .undefined: return false
        case .string(let s):
            guard case .string(let needle) = item else {
                throw ChatTemplateError(.type, "'in <string>' requires string as left operand, not \(item.typeName)")
            }
            return PyText.find(s.scalars, needle.scalars) != nil
        case .list(let items), .tuple(let items):
            return items.contains { pyEquals($0, item) }
        case .dict(let d):
            return try d.contains(item)
        case .object(let o):
            if let items = try o.iterate() { return items.contains { pyEquals($0, item) } }
            throw ChatTemplateError(.type, "argument of type '\(o.typeName)' is not iterable")
        default:
            throw ChatTemplateError(.type, "argument of type '\(container.typeName)' is not iterable")
        }
    }

    func binary(_ op: BinaryOp, _ a: Value, _ b: Value) throws -> Value {
        if case .undefined(let u) = a { throw u.error }
        // `str % undefined` formats (an Undefined counts as a mapping); other uses raise.
        if op == .mod, case .string(let format) = a, b.isUndefined { return .string(try percentFormat(format, b)) }
        if case .undefined(let u) = b { throw u.error }
        func unsupported() -> ChatTemplateError {
            let symbol = op == .pow ? "** or pow()" : op.rawValue
            return ChatTemplateError(.type, "unsupported operand type(s) for \(symbol): '\(a.typeName)' and '\(b.typeName)'")
        }
        if let x = Number(a), let y = Number(b) { return try arithmetic(op, x, y) }
        if a.isMarkup || b.isMarkup, let result = try markupBinary(op, a, b) { return result }
        switch op {
        case .add:
            switch (a, b) {
            case (.string(let x), .string(let y)):
                try checkSize(x.utf8.count + y.utf8.count)
                return .string(x + y)
            case (.list(let x), .list(let y)):
                try checkItems(x.count + y.count)
                return .list(x + y)
            case (.tuple(let x), .tuple(let y)):
                try checkItems(x.count + y.count)
                return .tuple(x + y)
            case (.string, _), (.list, _), (.tuple, _):
                throw ChatTemplateError(.type, "can only concatenate \(a.typeName) (not \"\(b.typeName)\") to \(a.typeName)")
            default: throw unsupported()
            }
        case .mul:
            func repeatCount(_ n: Value, _ seq: Value) throws -> Int {
                guard let count = Number(n), case .int(let c) = count else {
                    throw ChatTemplateError(.type, "can't multiply sequence by non-int of type '\(n.typeName)'")
                }
                let (size, overflow) = max(c, 0).multipliedReportingOverflow(by: max((try? length(seq)) ?? 0, 1))
                if overflow { throw ChatTemplateError(.limit, "sequence repetition too large", line: line) }
                if case .string = seq { try checkSize(size) } else { try checkItems(size) }
                return max(c, 0)
            }
            // The sequence on the left decides, as Python tries `a.__mul__` first.
            func repeated(_ seq: Value, _ n: Value) throws -> Value? {
                switch seq {
                case .string(let s): return .string(String(repeating: s, count: try repeatCount(n, seq)))
                case .list(let x): return .list(Array([[Value]](repeating: x, count: try repeatCount(n, seq)).joined()))
                case .tuple(let x): return .tuple(Array([[Value]](repeating: x, count: try repeatCount(n, seq)).joined()))
                default: return nil
                }
            }
            if let r = try repeated(a, b) { return r }
            if Number(a) != nil, let r = try repeated(b, a) { return r }
            switch b {
            case .string, .list, .tuple:
                // b.__rmul__(a) refuses the non-integer a.
                throw ChatTemplateError(.type, "can't multiply sequence by non-int of type '\(a.typeName)'")
            default:
                throw unsupported()
            }
        case .mod:
            if case .string(let format) = a { return .string(try percentFormat(format, b)) }
            throw unsupported()
        default:
            throw unsupported()
        }
    }

    func arithmetic(_ op: BinaryOp, _ x: Number, _ y: Number) throws -> Value {
        if case .int(let i) = x, case .int(let j) = y {
            switch op {
            case .add:
                let (r, o) = i.addingReportingOverflow(j)
                if o { throw overflow() }
                return .int(r)
            case .sub:
                let (r, o) = i.subtractingReportingOverflow(j)
                if o { throw overflow() }
                return .int(r)
            case .mul:
                let (r, o) = i.multipliedReportingOverflow(by: j)
                if o { throw overflow() }
                return .int(r)
            case .div:
                if j == 0 { throw ChatTemplateError(.zeroDivision, "division by zero") }
                return .float(Double(i) / Double(j))
            case .floorDiv:
                if j == 0 { throw ChatTemplateError(.zeroDivision, "integer division or modulo by zero") }
                if i == Int.min && j == -1 { throw overflow() }
                var q = i / j
                if (i % j != 0) && ((i < 0) != (j < 0)) { q -= 1 }
                return .int(q)
            case .mod:
                if j == 0 { throw ChatTemplateError(.zeroDivision, "integer modulo by zero") }
                if j == -1 { return .int(0) }
                var r = i % j
                if r != 0 && ((r < 0) != (j < 0)) { r += j }
                return .int(r)
            case .pow:
                if j < 0 {
                    if i == 0 { throw ChatTemplateError(.zeroDivision, "0.0 cannot be raised to a negative power") }
                    return .float(Foundation.pow(Double(i), Double(j)))
                }
                var result = 1, base = i, e = j
                while e > 0 {
                    if e & 1 == 1 {
                        let (r, o) = result.multipliedReportingOverflow(by: base)
                        if o { throw overflow() }
                        result = r
                    }
                    e >>= 1
                    if e > 0 {
                        let (b2, o) = base.multipliedReportingOverflow(by: base)
                        if o { throw overflow() }
                        base = b2
                    }
                }
                return .int(result)
            }
        }
        let (p, q) = (x.double, y.double)
        switch op {
        case .add: return .float(p + q)
        case .sub: return .float(p - q)
        case .mul: return .float(p * q)
        case .div:
            if q == 0 { throw ChatTemplateError(.zeroDivision, "float division by zero") }
            return .float(p / q)
        case .floorDiv:
            if q == 0 { throw ChatTemplateError(.zeroDivision, "float floor division by zero") }
            return .float(floatDivmod(p, q).0)
        case .mod:
            if q == 0 { throw ChatTemplateError(.zeroDivision, "float modulo") }
            return .float(floatDivmod(p, q).1)
        case .pow:
            if p == 0 && q < 0 { throw ChatTemplateError(.zeroDivision, "0.0 cannot be raised to a negative power") }
            if p < 0 && q.rounded() != q {
                throw ChatTemplateError(.unsupported, "a negative number raised to a fractional power is complex in Python", line: line)
            }
            return .float(Foundation.pow(p, q))
        }
    }

    /// `+`, `*` and `%` where a `Markup` is involved: the plain string side is escaped
    /// and the result is `Markup`. Nil when Python would not use Markup's operators.
    func markupBinary(_ op: BinaryOp, _ a: Value, _ b: Value) throws -> Value? {
        switch (op, a, b) {
        case (.add, .markup(let x), .markup(let y)):
            try checkSize(x.utf8.count + y.utf8.count)
            return .markup(x + y)
        case (.add, .markup(let x), .string(let y)): return .markup(x + htmlEscape(y))
        case (.add, .string(let x), .markup(let y)): return .markup(htmlEscape(x) + y)
        case (.mul, .markup, _), (.mul, _, .markup):
            // Markup's __mul__/__rmul__ call str.__mul__ with the other operand.
            let (text, count) = a.isMarkup ? (a, b) : (b, a)
            guard let n = Number(count), case .int = n else {
                throw ChatTemplateError(.type, "'\(count.typeName)' object cannot be interpreted as an integer")
            }
            guard case .string(let s) = try binary(.mul, text.plain, count) else { return nil }
            return .markup(s)
        case (.mod, .markup(let format), _):
            return .markup(try percentFormat(format, b, escapeArguments: true))
        default:
            return nil
        }
    }

    /// Python's `float_divmod`: floor quotient and modulo with the divisor's sign.
    func floatDivmod(_ vx: Double, _ wx: Double) -> (Double, Double) {
        var mod = fmod(vx, wx)
        var div = (vx - mod) / wx
        if mod != 0 {
            if (wx < 0) != (mod < 0) {
                mod += wx
                div -= 1
            }
        } else {
            mod = copysign(0, wx)
        }
        var floordiv: Double
        if div != 0 {
            floordiv = floor(div)
            if div - floordiv > 0.5 { floordiv += 1 }
        } else {
            floordiv = copysign(0, vx / wx)
        }
        return (floordiv, mod)
    }
}
