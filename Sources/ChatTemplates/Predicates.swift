// jinja2's tests (`x is defined`, `x is string`, `x is divisibleby 3`...).

extension Interpreter {
    func applyTest(_ name: String, _ input: Value, _ args: Arguments, line: Int) throws -> Bool {
        let value = input.plain
        func argument() throws -> Value {
            let a = try args.bind(["other"], function: "test_\(name)")
            guard let v = a[0] else {
                throw ChatTemplateError(.type, "test_\(name)() missing 1 required positional argument")
            }
            return v
        }
        switch name {
        case "defined": return !value.isUndefined
        case "undefined": return value.isUndefined
        case "none": return value.isNone
        case "boolean":
            if case .bool = value { return true }
            return false
        case "true":
            if case .bool(true) = value { return true }
            return false
        case "false":
            if case .bool(false) = value { return true }
            return false
        case "string":
            if case .string = value { return true }
            return false
        case "number": return Number(value) != nil
        case "integer":
            if case .int = value { return true }
            return false
        case "float":
            if case .float = value { return true }
            return false
        case "mapping":
            if case .dict = value { return true }
            return false
        case "iterable":
            switch value {
            case .undefined, .string, .list, .tuple, .dict: return true
            case .object(let o): return try o.iterate() != nil || o is IteratorObject
            default: return false
            }
        case "sequence":
            switch value {
            case .undefined, .string, .list, .tuple, .dict: return true
            case .object(let o): return (o as? ViewObject)?.name == "range"
            default: return false
            }
        case "callable":
            switch value {
            case .undefined: return true  // jinja2's Undefined defines __call__
            case .object(let o): return o.isCallable
            default: return false
            }
        case "odd", "even":
            let r = try binary(.mod, value, .int(2))
            return pyEquals(r, .int(name == "odd" ? 1 : 0))
        case "divisibleby":
            return pyEquals(try binary(.mod, value, try argument()), .int(0))
        case "eq", "equalto", "==": return pyEquals(value, try argument())
        case "ne", "!=": return !pyEquals(value, try argument())
        case "lt", "lessthan", "<": return try pyCompare(value, try argument(), op: "<") < 0
        case "le", "<=": return try pyCompare(value, try argument(), op: "<=") <= 0
        case "gt", "greaterthan", ">": return try pyCompare(value, try argument(), op: ">") > 0
        case "ge", ">=": return try pyCompare(value, try argument(), op: ">=") >= 0
        case "in": return try contains(try argument(), value)
        case "lower": return PyText.isLower(try pyStr(value))
        case "upper": return PyText.isUpper(try pyStr(value))
        case "sameas":
            let other = try argument()
            switch (value, other) {
            case (.none, .none): return true
            case (.bool(let a), .bool(let b)): return a == b
            case (.int(let a), .int(let b)): return a == b && (-5...256).contains(a)
            case (.object(let a), .object(let b)): return a === b
            case (.string(let a), .string(let b)): return a.utf8.elementsEqual(b.utf8)  // interned literals
            default: return false
            }
        case "escaped": return input.isMarkup
        case "filter":
            if case .string(let s) = value { return jinjaFilterNames.contains(s) }
            return false
        case "test":
            if case .string(let s) = value { return jinjaTestNames.contains(s) }
            return false
        default:
            throw ChatTemplateError(.unsupported, "the '\(name)' test is not supported", line: line)
        }
    }
}
