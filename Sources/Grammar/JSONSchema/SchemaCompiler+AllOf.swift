import LeapJSON

/// `allOf`: two flat schemas merged into one whose instances satisfy both (types
/// intersected, bounds tightened, properties and items merged per name and position, the
/// applicators concatenated).
extension SchemaCompiler {
    /// `allOf [x, y]` as a schema, without the wrapper when one side is `true` or both are equal.
    func allOf2(_ x: JSONValue, _ y: JSONValue) -> JSONValue {
        if x == .bool(true) || x == y { return y }
        if y == .bool(true) { return x }
        return .object(JSONObject([("allOf", .array([x, y]))]))
    }

    func merge(_ a: Flat, _ c: Flat) throws(SchemaError) -> Flat {
        guard var x = a, let y = c else { return nil }
        let first = x
        try checkPatternPropertiesMerge(x, y)
        mergeItems(&x, y)
        for (k, v) in y where k != "prefixItems" && k != "items" {
            guard let old = x[k] else {
                x[k] = v
                continue
            }
            x[k] = try mergeKeyword(k, old, v, first: first, second: y)
        }
        // Properties declared on one side only are still subject to the other side's
        // additionalProperties (merged per name above when both sides have properties).
        if (first["properties"] == nil) != (y["properties"] == nil) {
            let (withProps, other) = first["properties"] != nil ? (first, y) : (y, first)
            if let add = other["additionalProperties"], add != .bool(true), case .object(let po)? = withProps["properties"] {
                if other["patternProperties"] != nil { throw .unsupported("allOf", "merging properties with patternProperties") }
                var merged = JSONObject()
                for (name, s) in po { merged[name] = .object(JSONObject([("allOf", .array([s, add]))])) }
                x["properties"] = .object(merged)
            }
        }
        return x
    }

    /// One side's additionalProperties judges the keys that *its* properties and patterns do
    /// not name; the other side's patternProperties would change that set.
    func checkPatternPropertiesMerge(_ x: JSONObject, _ y: JSONObject) throws(SchemaError) {
        let apX = x["additionalProperties"], apY = y["additionalProperties"]
        let ppX = x["patternProperties"], ppY = y["patternProperties"]
        if (ppX != nil && apY != nil && apY != .bool(true)) || (ppY != nil && apX != nil && apX != .bool(true)),
            !(ppX == ppY && apX == apY && x["properties"] == y["properties"])
        {
            throw .unsupported("allOf", "patternProperties beside another subschema's additionalProperties")
        }
    }

    /// Arrays: element i is constrained by each side's prefixItems[i], or its items beyond.
    func mergeItems(_ x: inout JSONObject, _ y: JSONObject) {
        if x["prefixItems"] != nil || y["prefixItems"] != nil, x["prefixItems"] != y["prefixItems"] || x["items"] != y["items"] {
            let pa = x["prefixItems"]?.arrayValue ?? [], pb = y["prefixItems"]?.arrayValue ?? []
            let ia = x["items"] ?? .bool(true), ib = y["items"] ?? .bool(true)
            var prefix: [JSONValue] = []
            for i in 0..<max(pa.count, pb.count) {
                prefix.append(allOf2(i < pa.count ? pa[i] : ia, i < pb.count ? pb[i] : ib))
            }
            x["prefixItems"] = .array(prefix)
            x["items"] = allOf2(ia, ib)
        } else if let ia = x["items"], let ib = y["items"] {
            x["items"] = allOf2(ia, ib)
        } else if let ib = y["items"] {
            x["items"] = ib
        }
    }

    /// The merged value of keyword `k` present on both sides (`old` from the first, `v` from
    /// the second).
    func mergeKeyword(_ k: String, _ old: JSONValue, _ v: JSONValue, first: JSONObject, second: JSONObject) throws(SchemaError)
        -> JSONValue
    {
        switch k {
        case "type": return .array(mergedTypes(old.arrayValue ?? [], v.arrayValue ?? []))
        case "enum": return .array(SchemaCompiler.intersectEnums(old.arrayValue ?? [], v.arrayValue ?? []))
        case NormalKey.anyOf, NormalKey.oneOf, NormalKey.patterns, NormalKey.formats, NormalKey.not, NormalKey.ifThenElse,
            NormalKey.propertyNames, NormalKey.contains, NormalKey.someExtra:
            return .array((old.arrayValue ?? []) + (v.arrayValue ?? []))
        case "required":
            var r = old.arrayValue ?? []
            for n in v.arrayValue ?? [] where !r.contains(n) { r.append(n) }
            return .array(r)
        case "minLength", "minItems", "minProperties", "minimum", "exclusiveMinimum":
            return (old.doubleValue ?? 0) >= (v.doubleValue ?? 0) ? old : v
        case "maxLength", "maxItems", "maxProperties", "maximum", "exclusiveMaximum":
            return (old.doubleValue ?? 0) <= (v.doubleValue ?? 0) ? old : v
        case "uniqueItems": return old
        case "additionalProperties": return allOf2(old, v)
        case "properties": return try mergedProperties(old, v, first: first, second: second)
        case "multipleOf": return try mergedMultipleOf(old, v)
        default:
            if old != v { throw .unsupported("allOf", "cannot merge two values of '\(k)'") }
            return old
        }
    }

    /// The types in both lists (`integer` is in `number`).
    func mergedTypes(_ a: [JSONValue], _ b: [JSONValue]) -> [JSONValue] {
        var set: [JSONValue] = []
        for t in a {
            if b.contains(t) {
                set.append(t)
            } else if t == "integer", b.contains("number") {
                set.append(t)
            } else if t == "number", b.contains("integer") {
                set.append("integer")
            }
        }
        return set
    }

    /// Properties named on both sides get both schemas; a name on one side only gets the
    /// other side's additionalProperties.
    func mergedProperties(_ old: JSONValue, _ v: JSONValue, first: JSONObject, second: JSONObject) throws(SchemaError) -> JSONValue {
        guard case .object(let po) = old, case .object(let pv) = v else { throw .invalid("properties must be an object") }
        if first["patternProperties"] != nil || second["patternProperties"] != nil {
            throw .unsupported("allOf", "merging properties together with patternProperties")
        }
        var merged = JSONObject()
        let addX = first["additionalProperties"], addY = second["additionalProperties"]
        for (name, s) in po {
            if let t = pv[name] {
                merged[name] = s == t ? s : .object(JSONObject([("allOf", .array([s, t]))]))
            } else if let addY {
                merged[name] = .object(JSONObject([("allOf", .array([s, addY]))]))
            } else {
                merged[name] = s
            }
        }
        for (name, t) in pv where po[name] == nil {
            if let addX { merged[name] = .object(JSONObject([("allOf", .array([t, addX]))])) } else { merged[name] = t }
        }
        return .object(merged)
    }

    /// Integer divisors merge into their least common multiple.
    func mergedMultipleOf(_ old: JSONValue, _ v: JSONValue) throws(SchemaError) -> JSONValue {
        guard let p = old.intValue, let q = v.intValue, p > 0, q > 0 else {
            if old == v { return old }
            throw .unsupported("multipleOf", "merging non-integer divisors")
        }
        var g = p, h = q
        while h != 0 { (g, h) = (h, g % h) }
        let (lcm, overflow) = (p / g).multipliedReportingOverflow(by: q)
        if overflow { throw .unsupported("multipleOf", "the least common multiple of \(p) and \(q) is beyond the 64-bit range") }
        return .integer(lcm)
    }
}
