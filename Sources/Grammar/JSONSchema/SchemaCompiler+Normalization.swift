import LeapJSON

/// The normal form: one schema object with its `$ref` and `allOf` parts merged in, keyword
/// spellings of every draft unified, and the applicators the typed rules cannot read directly
/// moved to `NormalKey`s.
extension SchemaCompiler {
    /// A schema with `$ref` and `allOf` merged in and keywords normalized; nil means `false`.
    func flatten(_ schema: JSONValue, base: String) throws(SchemaError) -> Flat {
        try budget.enter()
        defer { budget.leave() }
        switch schema {
        case .bool(let v): return v ? JSONObject() : nil
        case .object(let o):
            // Subschemas of the result are relative to the caller's base; parts coming from
            // another resource are rebased (wrapped with their absolute base).
            let myBase = idBase(schema, base)
            if draft.refOverridesSiblings, case .string(let ref)? = o["$ref"] {
                return try flattenRef(ref, base: base)
            }
            var own = JSONObject()
            for (k, v) in o where k != "$ref" && k != "allOf" && !knownAnnotationKeys.contains(k) { own[k] = v }
            var parts: [Flat] = [try normalize(own, original: o)]
            if case .string(let ref)? = o["$ref"] { parts.append(try flattenRef(ref, base: myBase)) }
            if let all = o["allOf"] {
                guard case .array(let items) = all, !items.isEmpty else { throw .invalid("allOf must be a non-empty array") }
                for it in items { parts.append(try flatten(it, base: myBase)) }
            }
            var acc: Flat = JSONObject()
            for p in parts { acc = try merge(acc, p) }
            return myBase == base ? acc : rebase(acc, myBase)
        default:
            throw .invalid("a schema must be an object or a boolean")
        }
    }

    /// The flat form of a reference's target, relative to `base`. A reference that comes back
    /// to itself through `$ref`/`allOf` alone (without descending into a value) never ends.
    func flattenRef(_ ref: String, base: String) throws(SchemaError) -> Flat {
        let target = try resolveRef(ref, base: base)
        let key = target.base + "#" + target.pointer
        guard refsBeingFlattened.insert(key).inserted else {
            throw .invalid("$ref '\(ref)' refers back to itself through $ref/allOf without an intervening value")
        }
        defer { refsBeingFlattened.remove(key) }
        let part = try flatten(target.schema, base: target.base)
        return target.base == base ? part : rebase(part, target.base)
    }

    /// Makes every subschema of a flat schema carry its resource base, so that it can be
    /// compiled from anywhere.
    func rebase(_ flat: Flat, _ base: String) -> Flat {
        guard var f = flat else { return nil }
        func wrap(_ s: JSONValue) -> JSONValue {
            if case .object(let o) = s, o[NormalKey.base] == nil {
                return .object(JSONObject([(NormalKey.base, .string(base)), ("allOf", .array([s]))]))
            }
            return s
        }
        func wrapAll(_ v: JSONValue?) -> JSONValue? { v?.arrayValue.map { .array($0.map(wrap)) } }
        func wrapGroups(_ v: JSONValue?) -> JSONValue? { v?.arrayValue.map { .array($0.map { wrapAll($0) ?? $0 }) } }
        for key in ["properties", "patternProperties"] {
            if case .object(let o)? = f[key] {
                var n = JSONObject()
                for (k, v) in o { n[k] = wrap(v) }
                f[key] = .object(n)
            }
        }
        for key in ["additionalProperties", "items"] { if let v = f[key] { f[key] = wrap(v) } }
        for key in ["prefixItems", NormalKey.not] { if let v = wrapAll(f[key]) { f[key] = v } }
        for key in [NormalKey.anyOf, NormalKey.oneOf, NormalKey.ifThenElse] { if let v = wrapGroups(f[key]) { f[key] = v } }
        return f
    }

    // MARK: Keywords

    /// Rewrites one schema object's keywords into the normal form.
    func normalize(_ o: JSONObject, original: JSONObject) throws(SchemaError) -> Flat {
        var out = JSONObject()
        for (k, v) in o {
            switch k {
            case "type": out["type"] = .array(try normalizedTypes(v))
            case "const", "enum": try normalizeEnum(k, v, into: &out)
            case "anyOf", "oneOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas", "dependencies":
                try normalizeApplicator(k, v, o, into: &out)
            case "pattern", "format", "propertyNames": try normalizeString(k, v, into: &out)
            case "items", "additionalItems", "contains", "minContains", "maxContains", "prefixItems":
                try normalizeArray(k, v, o, into: &out)
            case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf": try normalizeNumber(k, v, o, into: &out)
            case "minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties":
                out[k] = .integer(try count(k, v))
            case "uniqueItems":
                if case .bool(true) = v { out[k] = v }
            case "unevaluatedProperties", "unevaluatedItems": try normalizeUnevaluated(k, v, o, original: original, into: &out)
            case NormalKey.fractional: out[k] = v  // internal: numbers that are not integers
            case NormalKey.someExtra: out[k] = .array([v])  // internal: see objectAlternatives
            case "properties", "required", "additionalProperties", "patternProperties": out[k] = v
            default:
                if alwaysUnsupported.contains(k) { throw .unsupported(k) }
            // Anything else is an annotation or an unknown keyword: ignored.
            }
        }
        return out
    }

    /// A non-negative integer keyword value (`minItems`, `maxLength`...).
    func count(_ keyword: String, _ v: JSONValue) throws(SchemaError) -> Int {
        guard let n = v.intValue, n >= 0 else { throw .invalid("\(keyword) must be a non-negative integer") }
        return n
    }

    func normalizedTypes(_ v: JSONValue) throws(SchemaError) -> [JSONValue] {
        let names: [JSONValue]
        switch v {
        case .string: names = [v]
        case .array(let ts): names = ts
        default: throw .invalid("type must be a string or an array")
        }
        for t in names {
            guard let name = t.stringValue else { throw .invalid("type entries must be strings") }
            if !SchemaCompiler.allTypes.contains(name) { throw .invalid("unknown type '\(name)'") }
        }
        return names
    }

    func normalizeEnum(_ k: String, _ v: JSONValue, into out: inout JSONObject) throws(SchemaError) {
        let values: [JSONValue]
        if k == "const" {
            values = [v]
        } else {
            guard case .array(let a) = v else { throw .invalid("enum must be an array") }
            values = a
        }
        if values.count > budget.limits.maxEnumValues {
            throw .limit("maxEnumValues", "enum has \(values.count) values, more than \(budget.limits.maxEnumValues)")
        }
        if case .array(let prev)? = out["enum"] {
            out["enum"] = .array(SchemaCompiler.intersectEnums(prev, values))
        } else {
            out["enum"] = .array(values)
        }
    }

    /// `anyOf`/`oneOf` become groups; `not`, `if`/`then`/`else` and the dependencies keywords
    /// become their normal-form applicators.
    func normalizeApplicator(_ k: String, _ v: JSONValue, _ o: JSONObject, into out: inout JSONObject) throws(SchemaError) {
        switch k {
        case "anyOf", "oneOf":
            guard case .array(let a) = v, !a.isEmpty else { throw .invalid("\(k) must be a non-empty array") }
            let key = k == "anyOf" ? NormalKey.anyOf : NormalKey.oneOf
            out[key] = .array((out[key]?.arrayValue ?? []) + [v])
        case "not": out[NormalKey.not] = .array([v])
        case "if":
            if o["then"] != nil || o["else"] != nil {
                out[NormalKey.ifThenElse] = .array([.array([v, o["then"] ?? .bool(true), o["else"] ?? .bool(true)])])
            }
        case "dependentRequired", "dependentSchemas", "dependencies":
            guard case .object(let deps) = v else { throw .invalid("\(k) must be an object") }
            let groups = try dependencyGroups(deps)
            if !groups.isEmpty { out[NormalKey.anyOf] = .array((out[NormalKey.anyOf]?.arrayValue ?? []) + groups) }
        default: break  // then, else: read with `if`
        }
    }

    /// If `name` is present then ...: one group `anyOf [name absent, name present and ...]` per entry.
    func dependencyGroups(_ deps: JSONObject) throws(SchemaError) -> [JSONValue] {
        var groups: [JSONValue] = []
        for (name, dep) in deps {
            let absent = JSONValue.object(JSONObject([("properties", .object(JSONObject([(name, .bool(false))])))]))
            let present: JSONValue
            switch dep {
            case .array(let names):
                guard names.allSatisfy({ $0.stringValue != nil }) else { throw .invalid("dependencies must list property names") }
                present = .object(JSONObject([("required", .array(names + [.string(name)]))]))
            case .object, .bool:
                present = .object(
                    JSONObject([("allOf", .array([.object(JSONObject([("required", .array([.string(name)]))])), dep]))]))
            default: throw .invalid("a dependency must be a list of names or a schema")
            }
            groups.append(.array([absent, present]))
        }
        return groups
    }

    func normalizeString(_ k: String, _ v: JSONValue, into out: inout JSONObject) throws(SchemaError) {
        switch k {
        case "pattern":
            guard case .string = v else { throw .invalid("pattern must be a string") }
            out[NormalKey.patterns] = .array([v])
        case "format":
            guard case .string(let f) = v else { throw .invalid("format must be a string") }
            if !options.assertFormat || (!Formats.isEnforced(f) && !Formats.unenforceable.contains(f)) { return }
            if Formats.unenforceable.contains(f) { throw .unsupported("format", "format '\(f)' cannot be enforced") }
            out[NormalKey.formats] = .array([v])
        default:  // propertyNames
            if case .bool(true) = v { return }
            if case .object(let po) = v, po.keys.allSatisfy({ knownAnnotationKeys.contains($0) }) { return }
            out[NormalKey.propertyNames] = .array([v])
        }
    }

    func normalizeArray(_ k: String, _ v: JSONValue, _ o: JSONObject, into out: inout JSONObject) throws(SchemaError) {
        switch k {
        case "items":
            if case .array(let a) = v {
                out["prefixItems"] = .array(a)
                out["items"] = o["additionalItems"] ?? o["unevaluatedItems"] ?? .bool(true)
            } else {
                out["items"] = v
            }
        case "prefixItems":
            guard case .array = v else { throw .invalid("prefixItems must be an array") }
            if out["prefixItems"] == nil { out["prefixItems"] = v }
        case "contains": out[NormalKey.contains] = .array([v])
        case "minContains", "maxContains":
            let n = try count(k, v)
            if o["contains"] != nil { out[k == "minContains" ? NormalKey.minContains : NormalKey.maxContains] = .integer(n) }
        default: break  // additionalItems: only meaningful with array-form items (read there)
        }
    }

    func normalizeNumber(_ k: String, _ v: JSONValue, _ o: JSONObject, into out: inout JSONObject) throws(SchemaError) {
        switch k {
        case "exclusiveMinimum", "exclusiveMaximum":
            if case .bool(let flag) = v {
                // draft-04: modifies minimum/maximum
                let plain = k == "exclusiveMinimum" ? "minimum" : "maximum"
                if flag, let m = o[plain] { out[k] = m }
            } else {
                out[k] = v
            }
        case "minimum", "maximum":
            if case .bool(true)? = o[k == "minimum" ? "exclusiveMinimum" : "exclusiveMaximum"] { return }
            out[k] = v
        default: out[k] = v  // multipleOf
        }
        if let bound = out[k], bound.doubleValue == nil { throw .invalid("\(k) must be a number") }
    }

    func normalizeUnevaluated(_ k: String, _ v: JSONValue, _ o: JSONObject, original: JSONObject, into out: inout JSONObject)
        throws(SchemaError)
    {
        // Without in-place applicators, only this object's own keywords evaluate
        // properties/items, so these are additionalProperties / items.
        let applicators = ["allOf", "anyOf", "oneOf", "$ref", "$dynamicRef", "if", "then", "else", "dependentSchemas", "contains"]
        if let a = applicators.first(where: { original[$0] != nil }) {
            throw .unsupported(k, "\(k) next to '\(a)'")
        }
        if v == .bool(true) { return }
        if k == "unevaluatedProperties" {
            if o["additionalProperties"] == nil { out["additionalProperties"] = v }
        } else if case .array? = o["items"] {
            if o["additionalItems"] == nil { out["items"] = v }
        } else if o["items"] == nil {
            out["items"] = v
        }
    }

    // MARK: Enumerations

    /// A key under which two JSON values are equal exactly when JSON Schema says so: numbers
    /// by value (`1` and `1.0` are equal), strings by code points, objects whatever their key
    /// order, `true` never equal to `1`.
    static func equalityKey(_ v: JSONValue) -> [UInt8] {
        var out: [UInt8] = []
        appendEqualityKey(v, to: &out)
        return out
    }

    static func appendEqualityKey(_ v: JSONValue, to out: inout [UInt8]) {
        func length(_ n: Int) { withUnsafeBytes(of: UInt64(n).littleEndian) { out += $0 } }
        switch v {
        case .null: out.append(0)
        case .bool(let b): out.append(b ? 2 : 1)
        case .integer(let i): out += [3] + Array(String(i).utf8) + [0]
        case .double(let d):
            if d.isFinite, d.rounded() == d, abs(d) < 9.2e18 {
                out += [3] + Array(String(Int(d)).utf8) + [0]
            } else {
                out.append(4)
                withUnsafeBytes(of: d.bitPattern.littleEndian) { out += $0 }
            }
        case .string(let s):
            out.append(5)
            length(s.utf8.count)
            out += s.utf8
        case .array(let a):
            out.append(6)
            length(a.count)
            for x in a { appendEqualityKey(x, to: &out) }
        case .object(let o):
            out.append(7)
            length(o.count)
            let members = o.map { (equalityKey(.string($0.0)), equalityKey($0.1)) }.sorted { $0.0.lexicographicallyPrecedes($1.0) }
            for (k, x) in members { out += k + x }
        }
    }

    /// The values of `a` that are also in `b` (JSON Schema equality), in `a`'s order.
    static func intersectEnums(_ a: [JSONValue], _ b: [JSONValue]) -> [JSONValue] {
        let keys = Set(b.map(equalityKey))
        return a.filter { keys.contains(equalityKey($0)) }
    }
}
