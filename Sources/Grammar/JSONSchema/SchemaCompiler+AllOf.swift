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
        guard var x = a, var y = c else { return nil }
        if SchemaCompiler.objectKeys.contains(where: { x[$0] != y[$0] }),
            x["patternProperties"] != nil || y["patternProperties"] != nil
        {
            // patternProperties on either side: the key-value keywords are merged by keys.
            let merged = try mergedObjectKeys(x, y)
            for k in SchemaCompiler.objectKeys {
                x[k] = merged[k]
                y[k] = nil
            }
            mergeItems(&x, y)
            let first = x
            for (k, v) in y where k != "prefixItems" && k != "items" {
                guard let old = x[k] else {
                    x[k] = v
                    continue
                }
                x[k] = try mergeKeyword(k, old, v, first: first, second: y)
            }
            return x
        }
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

    static let objectKeys = ["properties", "patternProperties", "additionalProperties"]

    /// `properties`, `patternProperties` and `additionalProperties` of `allOf [x, y]`, when
    /// some side has patterns. A declared name gets its schemas on each side, or that side's
    /// additionalProperties when no pattern of the side matches it (matching patterns apply
    /// through the merged patternProperties); patterns are united; keys matching a pattern of
    /// one side only get the other side's additionalProperties through a pattern made of
    /// lookaheads (`^(?=[\s\S]*(?:p1|p2))(?![\s\S]*(?:q1|q2))(?!(?:n1|n2)$)`, n the names the
    /// other side declares); the remaining keys get both additionalProperties. (A key that the
    /// ECMA-262 and Python readings of `$` split, `n1` plus a final newline, is then refused.)
    func mergedObjectKeys(_ x: JSONObject, _ y: JSONObject) throws(SchemaError) -> JSONObject {
        let px = x["properties"]?.objectValue ?? JSONObject(), py = y["properties"]?.objectValue ?? JSONObject()
        let ppx = x["patternProperties"]?.objectValue ?? JSONObject(), ppy = y["patternProperties"]?.objectValue ?? JSONObject()
        func nontrivial(_ a: JSONValue?) -> JSONValue? { a == nil || a == .bool(true) ? nil : a }
        let ax = nontrivial(x["additionalProperties"]), ay = nontrivial(y["additionalProperties"])
        func matchesAny(_ pp: JSONObject, _ name: String) throws(SchemaError) -> Bool {
            var any = false
            for (p, _) in pp {
                let strict = try patternDFA(p)?.accepts(name) ?? false
                let lenient = try patternDFA(p, lenient: true)?.accepts(name) ?? false
                if strict != lenient { throw .unsupported("allOf", "/\(p)/ reads '\(name)' differently in ECMA-262 and Python") }
                any = any || strict
            }
            return any
        }
        func both(_ parts: [JSONValue]) -> JSONValue {
            parts.isEmpty ? .bool(true) : parts.count == 1 ? parts[0] : .object(JSONObject([("allOf", .array(parts))]))
        }
        var props = JSONObject()
        for n in px.keys + py.keys.filter({ px[$0] == nil }) {
            var parts: [JSONValue] = []
            if let s = px[n] { parts.append(s) } else if let ax, try !matchesAny(ppx, n) { parts.append(ax) }
            if let s = py[n] { parts.append(s) } else if let ay, try !matchesAny(ppy, n) { parts.append(ay) }
            props[n] = both(parts)
        }
        var patterns = ppx
        for (p, s) in ppy { patterns[p] = patterns[p].map { allOf2($0, s) } ?? s }
        // Keys of one side's patterns only, judged by the other side's additionalProperties.
        for (add, mine, theirs, theirNames) in [(ay, ppx, ppy, py), (ax, ppy, ppx, px)] {
            guard let add, !mine.isEmpty else { continue }
            // Names the other side declares are judged by their own schemas: left out.
            var declared: [String] = []
            for n in theirNames.keys {
                if try matchesAny(mine, n), try !matchesAny(theirs, n) { declared.append(try SchemaCompiler.regexLiteral(n)) }
            }
            let any = "[\\s\\S]*(?:"
            var p = "^(?=" + any + mine.keys.joined(separator: "|") + "))"
            if !theirs.isEmpty { p += "(?!" + any + theirs.keys.joined(separator: "|") + "))" }
            if !declared.isEmpty { p += "(?!(?:" + declared.joined(separator: "|") + ")$)" }
            patterns[p] = patterns[p].map { allOf2($0, add) } ?? add
        }
        var out = JSONObject()
        if !props.isEmpty { out["properties"] = .object(props) }
        if !patterns.isEmpty { out["patternProperties"] = .object(patterns) }
        if let ax, let ay { out["additionalProperties"] = allOf2(ax, ay) } else if let a = ax ?? ay { out["additionalProperties"] = a }
        return out
    }

    /// A pattern matching exactly `name` from where it starts: letters and digits as they are,
    /// any other character as `\uHHHH` (characters beyond the BMP are refused).
    static func regexLiteral(_ name: String) throws(SchemaError) -> String {
        var out = ""
        for u in name.unicodeScalars {
            if u.isASCII, u.properties.isAlphabetic || ("0"..."9").contains(u) {
                out.unicodeScalars.append(u)
            } else if u.value <= 0xFFFF {
                let hex = String(u.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            } else {
                throw .unsupported("allOf", "property name '\(name)' beside patternProperties")
            }
        }
        return out
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
