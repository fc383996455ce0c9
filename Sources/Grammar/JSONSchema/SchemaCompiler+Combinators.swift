import LeapJSON

/// `anyOf`, `oneOf`, `not`, `if`/`then`/`else`: negations rewritten as unions of positive
/// schemas, and every group distributed over its siblings, so that each alternative is a
/// plain schema of the typed rules.
extension SchemaCompiler {
    /// The keywords that constrain values.
    static let validationKeywords: Set<String> = [
        "type", "enum", "const", "properties", "required", "additionalProperties", "patternProperties", "items",
        "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "minLength", "maxLength", "pattern",
        "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "anyOf", "oneOf",
        "allOf", "not", "$ref", "minProperties", "maxProperties", "if", "then", "else", "propertyNames",
        "unevaluatedProperties", "unevaluatedItems", "contains", "minContains", "maxContains", "dependentRequired",
        "dependentSchemas", "dependencies", "$dynamicRef", "$recursiveRef", NormalKey.fractional, NormalKey.someExtra
    ]

    /// `not`: where the negation is expressible as a union of positive schemas, it becomes an
    /// anyOf group; the forms the typed rules enforce (pattern, string and literal enums) stay.
    /// Returns false when a negation leaves nothing (`not: {}`).
    func rewriteNegations(_ f: inout JSONObject, base: String) throws(SchemaError) -> Bool {
        guard let nots = f[NormalKey.not]?.arrayValue else { return true }
        var keep: [JSONValue] = []
        var groups = f[NormalKey.anyOf]?.arrayValue ?? []
        for n in nots {
            if case .object(let o) = n {
                let keys = Set(o.keys.filter { SchemaCompiler.validationKeywords.contains($0) })
                if keys == ["pattern"] || keys == ["enum"] || keys == ["const"] {
                    keep.append(n)
                    continue
                }
            }
            if let branches = try negate(n, base: base, depth: 0) {
                if branches.isEmpty { return false }
                groups.append(.array(branches))
            } else if let values = f["enum"]?.arrayValue, let kept = try valuesViolating(n, values, base: base) {
                f["enum"] = .array(kept)  // finitely many values: those the negated schema refuses
            } else {
                keep.append(n)
            }
        }
        f[NormalKey.not] = keep.isEmpty ? nil : .array(keep)
        if !groups.isEmpty { f[NormalKey.anyOf] = .array(groups) }
        return true
    }

    /// if/then/else: anyOf [allOf [if, then], allOf [not if, else]].
    func rewriteIfThenElse(_ f: inout JSONObject, base: String) throws(SchemaError) {
        guard let conditionals = f[NormalKey.ifThenElse]?.arrayValue else { return }
        f[NormalKey.ifThenElse] = nil
        var groups = f[NormalKey.anyOf]?.arrayValue ?? []
        for c in conditionals {
            guard case .array(let parts) = c, parts.count == 3 else { continue }
            guard let notIf = try negate(parts[0], base: base, depth: 0) else {
                throw .unsupported("if", "the negation of this 'if' cannot be expressed")
            }
            var branches: [JSONValue] = [.object(JSONObject([("allOf", .array([parts[0], parts[1]]))]))]
            if !notIf.isEmpty {
                branches.append(.object(JSONObject([("allOf", .array([.object(JSONObject([("anyOf", .array(notIf))])), parts[2]]))])))
            }
            groups.append(.array(branches))
        }
        f[NormalKey.anyOf] = .array(groups)
    }

    /// The schema's anyOf/oneOf groups distributed over its other keywords: one flat schema
    /// per combination of branches (nil when there are no groups).
    func distributeCombinators(_ flat: JSONObject, base: String) throws(SchemaError) -> [Flat]? {
        let anyGroups = flat[NormalKey.anyOf]?.arrayValue ?? []
        let oneGroups = flat[NormalKey.oneOf]?.arrayValue ?? []
        if anyGroups.isEmpty && oneGroups.isEmpty { return nil }
        var f = flat
        f[NormalKey.anyOf] = nil
        f[NormalKey.oneOf] = nil
        var combos: [Flat] = [f]
        for (gi, g) in (anyGroups + oneGroups).enumerated() {
            let raw = g.arrayValue ?? []
            var branches: [Flat] = []
            for s in raw { branches.append(try flatten(s, base: base)) }
            var next: [Flat] = []
            var exact: [Flat]?
            var relaxed = false
            for c in combos {
                var merged: [Flat] = []
                for br in branches { merged.append(try merge(c, br)) }
                if gi >= anyGroups.count && !options.oneOfAsAnyOf, let overlap = overlappingPair(merged, base: base) {
                    // Not provably exclusive: branch i and none of the others.
                    // When that cannot be expressed either, `budget.overlappingOneOfAsAnyOf` keeps the
                    // branches as an anyOf (wider than the schema), counted in the budget.
                    if exact == nil && !relaxed {
                        do { exact = try oneOfExactBranches(raw, base: base, overlap: overlap) } catch {
                            guard budget.overlappingOneOfAsAnyOf, case .unsupported = error.kind else { throw error }
                            relaxed = true
                            budget.oneOfsAsAnyOf.insert(location)
                        }
                    }
                    if let exactBranches = exact {
                        merged = []
                        for br in exactBranches { merged.append(try merge(c, br)) }
                    }
                }
                next += merged.filter { $0 != nil }
                if next.count > budget.limits.maxCombinations {
                    throw .limit(
                        "maxCombinations",
                        "anyOf/oneOf/if/dependencies make more than \(budget.limits.maxCombinations) combinations of branches")
                }
            }
            combos = next
        }
        return combos
    }

    /// Two branches that cannot be proven mutually exclusive, if any.
    func overlappingPair(_ branches: [Flat], base: String) -> (Int, Int)? {
        for i in 0..<branches.count {
            for j in (i + 1)..<max(i + 1, branches.count) where !disjoint(branches[i], branches[j], base: base, depth: 0) {
                return (i, j)
            }
        }
        return nil
    }

    /// oneOf [B1 ... Bn] as the union over i of Bi and not Bj for every j != i, when every
    /// branch's negation is expressible.
    func oneOfExactBranches(_ raw: [JSONValue], base: String, overlap: (Int, Int)) throws(SchemaError) -> [Flat] {
        var negations: [[JSONValue]] = []
        for b in raw {
            guard let n = try negate(b, base: base, depth: 0) else {
                throw .unsupported(
                    "oneOf", "branches \(overlap.0) and \(overlap.1) are not provably exclusive and a branch's negation is not expressible")
            }
            negations.append(n)
        }
        var out: [Flat] = []
        for (i, b) in raw.enumerated() {
            if negations.enumerated().contains(where: { $0.offset != i && $0.element.isEmpty }) { continue }  // some other branch is `true`
            var parts: [JSONValue] = [b]
            for (j, n) in negations.enumerated() where j != i { parts.append(.object(JSONObject([("anyOf", .array(n))]))) }
            out.append(try flatten(.object(JSONObject([("allOf", .array(parts))])), base: base))
        }
        return out
    }

    // MARK: Negation

    /// The negation of a schema as a union of schemas (empty: `false`), or nil when it is
    /// not expressible that way. A keyword that applies to one type only (maxLength, required,
    /// maximum...) is satisfied by every value of another type, so its negation contains only
    /// values of its type that violate it.
    func negate(_ n: JSONValue, base: String, depth: Int) throws(SchemaError) -> [JSONValue]? {
        if depth > 8 { return nil }
        switch n {
        case .bool(let v): return v ? [] : [.bool(true)]
        case .object(let o):
            if case .string(let ref)? = o["$ref"] {
                guard o.keys.allSatisfy({ $0 == "$ref" || !SchemaCompiler.validationKeywords.contains($0) }) else { return nil }
                let target = try resolveRef(ref, base: base)
                guard target.base == base else { return nil }
                return try negate(target.schema, base: base, depth: depth + 1)
            }
            var branches: [JSONValue] = []
            for (k, v) in o where SchemaCompiler.validationKeywords.contains(k) || alwaysUnsupported.contains(k) {
                guard let b = try negation(of: k, v, in: o, base: base, depth: depth) else { return nil }
                branches += b
            }
            return branches
        default:
            return nil
        }
    }

    /// The values violating one keyword of a schema (`o`), as a union; nil when not expressible.
    func negation(of k: String, _ v: JSONValue, in o: JSONObject, base: String, depth: Int) throws(SchemaError) -> [JSONValue]? {
        switch k {
        case "type": return negatedType(v)
        case "enum", "const":
            let vals = k == "const" ? [v] : (v.arrayValue ?? [])
            guard vals.allSatisfy({ $0.stringValue != nil || $0 == .null || $0.boolValue != nil }) else { return nil }
            return [.object(JSONObject([("not", .object(JSONObject([("enum", .array(vals))])))]))]
        case "pattern": return [typed("string", [("not", .object(JSONObject([("pattern", v)])))])]
        case "maxLength", "minLength", "maxItems", "minItems", "maxProperties", "minProperties": return negatedCount(k, v)
        case "maximum": return [typed("number", [("exclusiveMinimum", v)])]
        case "minimum": return [typed("number", [("exclusiveMaximum", v)])]
        case "exclusiveMaximum", "exclusiveMinimum":
            guard v.doubleValue != nil else { return nil }
            return [typed("number", [(k == "exclusiveMaximum" ? "minimum" : "maximum", v)])]
        case "required", "properties", "additionalProperties": return negatedObjectKeyword(k, v, in: o)
        case "contains", "minContains", "maxContains", "items": return negatedArrayKeyword(k, v, in: o)
        case "not": return [v]
        case "allOf":
            var branches: [JSONValue] = []
            for item in v.arrayValue ?? [] {
                guard let b = try negate(item, base: base, depth: depth + 1) else { return nil }
                branches += b
            }
            return branches
        case "anyOf":
            var parts: [JSONValue] = []
            for item in v.arrayValue ?? [] {
                guard let b = try negate(item, base: base, depth: depth + 1) else { return nil }
                if b.isEmpty { return [] }  // some branch is `true`: the anyOf always holds
                parts.append(.object(JSONObject([("anyOf", .array(b))])))
            }
            return [.object(JSONObject([("allOf", .array(parts))]))]
        default:
            return nil
        }
    }

    /// Values of the other types (`not integer` among numbers: the non-integers).
    func negatedType(_ v: JSONValue) -> [JSONValue] {
        let ts = v.stringValue.map { [$0] } ?? v.arrayValue?.compactMap(\.stringValue) ?? []
        var branches: [JSONValue] = []
        var rest = Set(SchemaCompiler.allTypes).subtracting(ts)
        if ts.contains("number") { rest.remove("integer") }
        if ts.contains("integer") && rest.contains("number") {
            // Non-integer numbers: handled by the number terminal (`not integer`).
            rest.remove("number")
            branches.append(typed("number", [(NormalKey.fractional, .bool(true))]))
        }
        if rest.contains("number") { rest.remove("integer") }
        if !rest.isEmpty {
            branches.append(.object(JSONObject([("type", .array(SchemaCompiler.allTypes.filter(rest.contains).map { .string($0) }))])))
        }
        return branches
    }

    /// A length or count bound violated: the opposite bound, on values of its type.
    func negatedCount(_ k: String, _ v: JSONValue) -> [JSONValue]? {
        guard let m = v.intValue else { return nil }
        let (type, opposite): (String, String)
        switch k {
        case "maxLength", "minLength": (type, opposite) = ("string", k == "maxLength" ? "minLength" : "maxLength")
        case "maxItems", "minItems": (type, opposite) = ("array", k == "maxItems" ? "minItems" : "maxItems")
        default: (type, opposite) = ("object", k == "maxProperties" ? "minProperties" : "maxProperties")
        }
        if k.hasPrefix("max") {
            let (above, overflow) = m.addingReportingOverflow(1)
            return overflow ? [] : [typed(type, [(opposite, .integer(above))])]
        }
        return m > 0 ? [typed(type, [(opposite, .integer(m - 1))])] : []
    }

    func negatedObjectKeyword(_ k: String, _ v: JSONValue, in o: JSONObject) -> [JSONValue]? {
        switch k {
        case "required":
            // Some required name is absent.
            let names = v.arrayValue?.compactMap(\.stringValue) ?? []
            return names.map { typed("object", [("properties", .object(JSONObject([($0, .bool(false))])))]) }
        case "properties":
            // Some listed property is present and violates its schema.
            guard case .object(let props) = v else { return nil }
            var branches: [JSONValue] = []
            for (name, sub) in props where sub != .bool(true) && sub != .object(JSONObject()) {
                branches.append(
                    typed(
                        "object",
                        [
                            ("required", .array([.string(name)])),
                            ("properties", .object(JSONObject([(name, .object(JSONObject([("not", sub)])))])))
                        ]))
            }
            return branches
        default:  // additionalProperties
            if v == .bool(true) || v == .object(JSONObject()) { return [] }
            // Some key that `properties` and `patternProperties` do not name has a value violating it.
            let names = (o["properties"]?.objectValue?.keys ?? []).map { JSONValue.string($0) }
            let patterns = (o["patternProperties"]?.objectValue?.keys ?? []).map { JSONValue.string($0) }
            let witness = JSONObject([
                ("names", .array(names)), ("patterns", .array(patterns)), ("schema", .object(JSONObject([("not", v)])))
            ])
            return [typed("object", [(NormalKey.someExtra, .object(witness))])]
        }
    }

    func negatedArrayKeyword(_ k: String, _ v: JSONValue, in o: JSONObject) -> [JSONValue]? {
        switch k {
        case "contains":
            // No element matches (minContains/maxContains change the meaning).
            if o["minContains"] != nil || o["maxContains"] != nil { return nil }
            return [typed("array", [("items", .object(JSONObject([("not", v)])))])]
        case "minContains", "maxContains":
            return o["contains"] == nil ? [] : nil
        default:  // items
            if v == .bool(true) || v == .object(JSONObject()) { return [] }
            if o["prefixItems"] == nil, v.arrayValue == nil, v != .bool(false) {
                // Some element violates the item schema.
                return [typed("array", [("contains", .object(JSONObject([("not", v)])))])]
            }
            guard v == .bool(false) else { return nil }
            return [typed("array", [("minItems", .integer(1))])]
        }
    }

    // MARK: Disjointness

    /// A sound (incomplete) test that no value satisfies both schemas. Keywords that only
    /// narrow a schema (anyOf groups, not, if) can be ignored: a proof without them holds with them.
    func disjoint(_ a: Flat, _ c: Flat, base: String, depth: Int) -> Bool {
        guard let a, let c else { return true }
        if depth > 4 { return false }
        let ta = effectiveTypes(a), tc = effectiveTypes(c)
        var common = ta.intersection(tc)
        if ta.contains("number") && tc.contains("integer") || tc.contains("number") && ta.contains("integer") { common.insert("integer") }
        if common.contains("number") { common.remove("integer") }
        if common.isEmpty { return true }
        if let ea = a["enum"]?.arrayValue, let ec = c["enum"]?.arrayValue, SchemaCompiler.intersectEnums(ea, ec).isEmpty { return true }
        return common.allSatisfy { t in
            switch t {
            case "string": return disjointStrings(a, c)
            case "integer", "number": return disjointNumbers(a, c)
            case "array": return disjointArrays(a, c, base: base, depth: depth)
            case "object": return disjointObjects(a, c, base: base, depth: depth)
            default: return false
            }
        }
    }

    /// Enumerated strings against the other side's constraints, or content automata and lengths.
    func disjointStrings(_ a: JSONObject, _ c: JSONObject) -> Bool {
        // (stringSpec is nil when no string qualifies; an error means "unknown".)
        func spec(_ f: JSONObject) -> (known: Bool, spec: StringSpec?) {
            do { return (true, try stringSpec(f, notPatterns: [], notStrings: [], lenient: true)) } catch { return (false, nil) }
        }
        let (knownA, optA) = spec(a), (knownC, optC) = spec(c)
        if (knownA && optA == nil) || (knownC && optC == nil) { return true }
        guard let specA = optA, let specC = optC else { return false }
        for (x, spec) in [(a, specC), (c, specA)] {
            if let e = x["enum"]?.arrayValue {
                let strings = e.compactMap(\.stringValue)
                if strings.allSatisfy({ !StringSpec.accepts(spec, $0) }) { return true }
            }
        }
        let lo = max(specA.minLength, specC.minLength)
        if let hi = [specA.maxLength, specC.maxLength].compactMap({ $0 }).min(), hi < lo { return true }
        if let da = specA.dfa, let dc = specC.dfa {
            do { return try da.intersection(dc, limits: budget.automaton) == nil } catch { return false }
        }
        return false
    }

    func disjointNumbers(_ a: JSONObject, _ c: JSONObject) -> Bool {
        func range(_ f: JSONObject) -> (lo: Double, loX: Bool, hi: Double, hiX: Bool) {
            var r = (lo: -Double.infinity, loX: false, hi: Double.infinity, hiX: false)
            if let m = f["minimum"]?.doubleValue, m > r.lo { r = (m, false, r.hi, r.hiX) }
            if let m = f["exclusiveMinimum"]?.doubleValue, m >= r.lo { r = (m, true, r.hi, r.hiX) }
            if let m = f["maximum"]?.doubleValue, m < r.hi { r = (r.lo, r.loX, m, false) }
            if let m = f["exclusiveMaximum"]?.doubleValue, m <= r.hi { r = (r.lo, r.loX, m, true) }
            return r
        }
        let ra = range(a), rc = range(c)
        let lo = max(ra.lo, rc.lo), hi = min(ra.hi, rc.hi)
        if lo > hi { return true }
        if lo == hi {
            let loX = (ra.lo == lo && ra.loX) || (rc.lo == lo && rc.loX)
            let hiX = (ra.hi == hi && ra.hiX) || (rc.hi == hi && rc.hiX)
            if loX || hiX { return true }
        }
        return false
    }

    /// Lengths that cannot agree, or both non-empty with disjoint first elements.
    func disjointArrays(_ a: JSONObject, _ c: JSONObject, base: String, depth: Int) -> Bool {
        let lo = max(a["minItems"]?.intValue ?? 0, c["minItems"]?.intValue ?? 0)
        if let hi = [a["maxItems"]?.intValue, c["maxItems"]?.intValue].compactMap({ $0 }).min(), hi < lo { return true }
        guard lo >= 1 else { return false }
        func first(_ f: JSONObject) -> JSONValue { f["prefixItems"]?.arrayValue?.first ?? f["items"] ?? .bool(true) }
        guard let fa = try? flatten(first(a), base: base), let fc = try? flatten(first(c), base: base) else { return false }
        return disjoint(fa, fc, base: base, depth: depth + 1)
    }

    /// One requires a property the other forbids, or both require one with disjoint schemas.
    func disjointObjects(_ a: JSONObject, _ c: JSONObject, base: String, depth: Int) -> Bool {
        let ra = Set(a["required"]?.arrayValue?.compactMap(\.stringValue) ?? [])
        let rc = Set(c["required"]?.arrayValue?.compactMap(\.stringValue) ?? [])
        func forbids(_ s: JSONObject, _ name: String) -> Bool {
            if let p = s["properties"]?[name] { return p == .bool(false) }
            return s["additionalProperties"] == .bool(false) && s["patternProperties"] == nil
        }
        if ra.contains(where: { forbids(c, $0) }) || rc.contains(where: { forbids(a, $0) }) { return true }
        for n in ra.intersection(rc) {
            if let pa = a["properties"]?[n], let pc = c["properties"]?[n],
                let fa = try? flatten(pa, base: base), let fc = try? flatten(pc, base: base),
                disjoint(fa, fc, base: base, depth: depth + 1)
            {
                return true
            }
        }
        return false
    }
}
