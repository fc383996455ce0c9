// Python's protocols as jinja2's sandbox applies them: attribute and item access,
// slicing, `iter(x)` and `len(x)`.

extension Interpreter {
    /// jinja2's sandboxed `getattr(obj, name)`: a Python attribute first (methods of
    /// str, list, dict...), then for a dict the key `name`.
    func getAttribute(_ obj: Value, _ name: String) throws -> Value {
        if case .undefined(let u) = obj { throw u.error }
        if let v = try attributeOnly(obj, name) { return v }
        if case .dict(let d) = obj, let v = d.get(string: name) { return v }
        return .undefined(Undefined(reason: .attribute(owner: obj.objectTypeRepr, name: name)))
    }

    /// A Python attribute of `obj` (not a dict key), or nil.
    func attributeOnly(_ obj: Value, _ name: String) throws -> Value? {
        if name.hasPrefix("__") && name.hasSuffix("__") && name.count > 4 {
            return .undefined(Undefined(reason: .unsafe(attribute: name, typeName: obj.typeName)))
        }
        if case .object(let o) = obj { return try o.attribute(name, self) }
        return boundMethod(obj, name)
    }

    /// jinja2's sandboxed `getitem(obj, key)`: `obj[key]`, else for a string key the
    /// attribute of that name, else an undefined value.
    func getItem(_ obj: Value, _ key: Value) throws -> Value {
        func index(_ count: Int) -> Int? {
            let i: Int
            switch key {
            case .int(let v): i = v
            case .bool(let b): i = b ? 1 : 0
            default: return nil
            }
            let j = i < 0 ? i + count : i
            return j >= 0 && j < count ? j : nil
        }
        switch obj {
        case .undefined(let u):
            throw u.error
        case .dict(let d):
            if let v = d.get(key) { return v }
        case .list(let items), .tuple(let items):
            if let i = index(items.count) { return items[i] }
        case .string(let s):
            let scalars = s.scalars
            if let i = index(scalars.count) { return .string(String(scalars[i])) }
        case .markup(let s):
            let scalars = s.scalars
            if let i = index(scalars.count) { return .markup(String(scalars[i])) }
        case .object(let o):
            if let view = o as? ViewObject, view.name == "range", let i = index(view.items.count) { return view.items[i] }
            if let v = try o.item(key) { return v }
        default:
            break
        }
        if case .string(let name) = key {
            if let v = try attributeOnly(obj, name) { return v }
            return .undefined(Undefined(reason: .attribute(owner: obj.objectTypeRepr, name: name)))
        }
        return .undefined(Undefined(reason: .element(owner: obj.objectTypeRepr, keyRepr: (try? pyRepr(key)) ?? "?")))
    }

    func slice(_ obj: Value, _ start: Int?, _ stop: Int?, _ step: Int?) throws -> Value {
        switch obj {
        case .undefined(let u): throw u.error
        case .list(let items): return .list(try pySlice(items, start, stop, step))
        case .tuple(let items): return .tuple(try pySlice(items, start, stop, step))
        case .string(let s): return .string(String(scalars: try pySlice(s.scalars, start, stop, step)))
        case .markup(let s): return .markup(String(scalars: try pySlice(s.scalars, start, stop, step)))
        case .object(let o):
            if let view = o as? ViewObject, let (rStart, _, rStep) = view.range {
                let (lo, hi, st) = try pySliceIndices(length: view.items.count, start: start, stop: stop, step: step)
                return try makeRangeObject(start: rStart + lo * rStep, stop: rStart + hi * rStep, step: rStep * st)
            }
        default: break
        }
        func r(_ v: Int?) -> String { v.map(String.init) ?? "None" }
        return .undefined(Undefined(reason: .element(owner: obj.objectTypeRepr, keyRepr: "slice(\(r(start)), \(r(stop)), \(r(step)))")))
    }

    /// Python's `iter(x)`, materialized.
    func iterate(_ v: Value) throws -> [Value] {
        switch v {
        case .undefined: return []
        case .list(let items), .tuple(let items): return items
        case .string(let s), .markup(let s): return s.unicodeScalars.map { .string(String($0)) }
        case .dict(let d): return d.keys
        case .object(let o):
            if let items = try o.iterate() { return items }
            throw ChatTemplateError(.type, "'\(o.typeName)' object is not iterable")
        default:
            throw ChatTemplateError(.type, "'\(v.typeName)' object is not iterable")
        }
    }

    /// Python's `len(x)`.
    func length(_ v: Value) throws -> Int {
        switch v {
        case .undefined: return 0
        case .list(let items), .tuple(let items): return items.count
        case .string(let s), .markup(let s): return s.pyLength
        case .dict(let d): return d.count
        case .object(let o):
            if let n = o.length { return n }
            throw ChatTemplateError(.type, "object of type '\(o.typeName)' has no len()")
        default:
            throw ChatTemplateError(.type, "object of type '\(v.typeName)' has no len()")
        }
    }
}
