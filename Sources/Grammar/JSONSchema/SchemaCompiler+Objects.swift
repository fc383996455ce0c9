import LeapJSON

/// `object`: declared properties in schema order (each at most once, required ones never
/// skipped), extra keys partitioned by the patterns they match, `propertyNames`, property
/// counts, and the witness members of a negated `additionalProperties`.
extension SchemaCompiler {
    /// The keys an object schema names and the schemas of their values.
    struct ObjectMembers {
        var names: [String] = []
        var schemas: [JSONValue] = []
        var isRequired: [Bool] = []
        /// Extra keys' value schema when no pattern matches them.
        var additional: JSONValue
        /// patternProperties: (ECMA-reading DFA, value schema) and the lenient-reading DFA.
        var patterns: [(dfa: CodePointDFA?, schema: JSONValue, source: String)] = []
        var lenientPatterns: [CodePointDFA?] = []
        var requiredCount: Int { isRequired.filter { $0 }.count }
    }

    /// Some member whose key `exclude` accepts (not in `names`, matching none of `patterns`)
    /// must have a value satisfying `value` (from `not: {additionalProperties}`).
    struct Witness {
        var exclude: CodePointDFA?
        var value: JSONValue
        var names: [String]
        var patterns: [CodePointDFA?]

        func isWitnessKey(_ name: String) -> Bool {
            if names.contains(where: { $0.unicodeScalars.elementsEqual(name.unicodeScalars) }) { return false }
            return !patterns.contains { $0?.accepts(name) ?? false }
        }
    }

    func objectAlternatives(_ f: JSONObject, base: String) throws(SchemaError) -> [[GrammarBuilder.Symbol]] {
        var members = try objectMembers(f)
        let minProperties = f["minProperties"]?.intValue ?? 0
        let emptyOnly: [[GrammarBuilder.Symbol]] =
            members.requiredCount == 0 && minProperties == 0 && f[NormalKey.someExtra] == nil
            ? [[b.literal("{"), ws, b.literal("}")]] : []
        guard let nameSpec = try propertyNameSpec(f, base: base) else { return emptyOnly }
        if let ns = nameSpec.spec {
            for (i, n) in members.names.enumerated() where !StringSpec.accepts(ns, n) { members.schemas[i] = .bool(false) }
        }
        var witness: Witness?
        if let someExtra = f[NormalKey.someExtra]?.arrayValue {
            guard let w = try witnessSpec(someExtra) else { return [] }
            witness = w
        }
        let (extraAlts, witnessExtraAlts) = try extraKeyAlternatives(members, nameSpec: nameSpec.spec, witness: witness, base: base)
        let extra = extraAlts.isEmpty ? nil : b.rule("extra", extraAlts)
        guard let kv = try memberRules(members, base: base) else { return [] }
        if let w = witness {
            if f["minProperties"] != nil || f["maxProperties"] != nil || members.names.count > 160 {
                throw .unsupported("not", "negated additionalProperties with property counts or very many properties")
            }
            let witnessKV = try witnessMemberRules(members, kv: kv, witness: w, base: base)
            let witnessExtra = witnessExtraAlts.isEmpty ? nil : b.rule("extra-witness", witnessExtraAlts)
            return witnessObjectAlternatives(
                kv: kv, witnessKV: witnessKV, isRequired: members.isRequired, extra: extra, witnessExtra: witnessExtra)
        }
        var minProps = minProperties
        var maxProps = f["maxProperties"]?.intValue
        if minProps <= max(members.requiredCount, 1) && minProps > 1 { minProps = 1 }  // implied by required
        if let m = maxProps {
            let possible = extra != nil ? Int.max : kv.compactMap { $0 }.count
            if m == 0 { return members.requiredCount == 0 && minProps == 0 ? [[b.literal("{"), ws, b.literal("}")]] : [] }
            if m >= possible { maxProps = nil }
        }
        if minProps > 1 || maxProps != nil {
            return try countedObjectAlternatives(
                kv: kv, isRequired: members.isRequired, extra: extra, minProps: minProps, maxProps: maxProps)
        }
        let allowEmpty = members.requiredCount == 0 && minProps < 1
        if options.propertyOrder == .any {
            return anyOrderObjectAlternatives(kv: kv, isRequired: members.isRequired, extra: extra, allowEmpty: allowEmpty)
        }
        return orderedObjectAlternatives(kv: kv, isRequired: members.isRequired, extra: extra, allowEmpty: allowEmpty)
    }

    /// Declared names (in schema order), then required names not declared, with their value
    /// schemas (a declared name matching a pattern gets both schemas).
    func objectMembers(_ f: JSONObject) throws(SchemaError) -> ObjectMembers {
        let props = f["properties"]?.objectValue ?? JSONObject()
        let required = (f["required"]?.arrayValue ?? []).compactMap(\.stringValue)
        let requiredSet = Set(required)
        var m = ObjectMembers(additional: f["additionalProperties"] ?? .bool(options.additionalPropertiesDefault))
        let patterns = f["patternProperties"]?.objectValue ?? JSONObject()
        if patterns.count > SchemaCompiler.maxPatternProperties {
            throw .unsupported("patternProperties", "more than \(SchemaCompiler.maxPatternProperties) patterns")
        }
        for (p, s) in patterns {
            m.patterns.append((try patternDFA(p), s, p))
            m.lenientPatterns.append(try patternDFA(p, lenient: true))
        }
        func schemaFor(_ name: String, declared: JSONValue?) -> JSONValue {
            var parts: [JSONValue] = declared.map { [$0] } ?? []
            for (i, p) in m.patterns.enumerated() where m.lenientPatterns[i]?.accepts(name) ?? false { parts.append(p.schema) }
            if parts.isEmpty { return m.additional }
            return parts.count == 1 ? parts[0] : .object(JSONObject([("allOf", .array(parts))]))
        }
        var named = Set<String>()
        for (n, s) in props {
            m.names.append(n)
            m.schemas.append(schemaFor(n, declared: s))
            named.insert(n)
        }
        for r in required where named.insert(r).inserted {
            m.names.append(r)
            m.schemas.append(schemaFor(r, declared: nil))
        }
        m.isRequired = m.names.map { requiredSet.contains($0) }
        return m
    }

    /// What `propertyNames` allows of every key: `.spec(nil)` when unconstrained; nil when no
    /// key is allowed.
    enum NameSpec {
        case spec(StringSpec?)
        var spec: StringSpec? {
            if case .spec(let s) = self { return s }
            return nil
        }
    }

    func propertyNameSpec(_ f: JSONObject, base: String) throws(SchemaError) -> NameSpec? {
        var nameSpec: StringSpec?
        for p in f[NormalKey.propertyNames]?.arrayValue ?? [] {
            guard let fp = try flatten(p, base: base) else { return nil }
            let allowed: Set<String> = ["type", "enum", "minLength", "maxLength", NormalKey.patterns, NormalKey.formats]
            if let other = Set(fp.keys).subtracting(allowed).first {
                throw .unsupported("propertyNames", "'\(other)' on property names")
            }
            guard effectiveTypes(fp).contains("string"), var spec = try stringSpec(fp, notPatterns: [], notStrings: []) else { return nil }
            if let e = fp["enum"]?.arrayValue {
                guard let lit = CodePointDFA.literals(e.compactMap(\.stringValue)) else { return nil }
                if let cur = spec.dfa {
                    guard let both = try intersect(cur, lit) else { return nil }
                    spec.dfa = both
                } else {
                    spec.dfa = lit
                }
            }
            guard var cur = nameSpec else {
                nameSpec = spec
                continue
            }
            cur.minLength = max(cur.minLength, spec.minLength)
            if let m = spec.maxLength { cur.maxLength = min(cur.maxLength ?? m, m) }
            if let d = spec.dfa {
                if let c = cur.dfa {
                    guard let both = try intersect(c, d) else { return nil }
                    cur.dfa = both
                } else {
                    cur.dfa = d
                }
            }
            if let m = cur.maxLength, m < cur.minLength { return nil }
            nameSpec = cur
        }
        return .spec(nameSpec)
    }

    /// The witness of a negated additionalProperties; nil when no key can be one.
    func witnessSpec(_ someExtra: [JSONValue]) throws(SchemaError) -> Witness? {
        guard someExtra.count == 1, case .object(let w) = someExtra[0] else {
            throw .unsupported("not", "several negated additionalProperties on one object")
        }
        let names = (w["names"]?.arrayValue ?? []).compactMap(\.stringValue)
        var patterns: [CodePointDFA?] = []
        for p in (w["patterns"]?.arrayValue ?? []).compactMap(\.stringValue) { patterns.append(try patternDFA(p, lenient: true)) }
        // Keys outside the names and not matching any pattern under either reading.
        var exclude: CodePointDFA?
        if !names.isEmpty {
            guard let c = CodePointDFA.literals(names)?.complement() else { return nil }
            exclude = c
        }
        for d in patterns {
            guard let d else { continue }
            guard let c = d.complement() else { return nil }
            if let cur = exclude {
                guard let both = try intersect(cur, c) else { return nil }
                exclude = both
            } else {
                exclude = c
            }
        }
        return Witness(exclude: exclude, value: w["schema"] ?? .bool(true), names: names, patterns: patterns)
    }

    /// Extra keys, partitioned by which patterns they match: one alternative per class of keys
    /// (key automaton, value schema), and the same for witness members.
    func extraKeyAlternatives(_ m: ObjectMembers, nameSpec: StringSpec?, witness: Witness?, base: String) throws(SchemaError)
        -> (extra: [[GrammarBuilder.Symbol]], witness: [[GrammarBuilder.Symbol]])
    {
        var extraAlts: [[GrammarBuilder.Symbol]] = [], witnessAlts: [[GrammarBuilder.Symbol]] = []
        let colon = b.literal(":")
        let exclude = undeclaredKeys(m.names)
        if !m.names.isEmpty && exclude == nil { return ([], []) }  // every string is declared
        for (dfa, parts, path) in try keyClasses(m, exclude: exclude) {
            let valueSchema: JSONValue =
                parts.isEmpty ? m.additional : (parts.count == 1 ? parts[0] : .object(JSONObject([("allOf", .array(parts))])))
            if valueSchema == .bool(false) { continue }
            guard let keySpec = try restrictKey(StringSpec(dfa: dfa), nameSpec) else { continue }
            let value = try compileNode(valueSchema, base: base, at: pointer(path))
            extraAlts.append([b.terminal(.string(keySpec)), ws, colon, ws, value])
            guard let w = witness else { continue }
            var wSpec = keySpec
            if let ex = w.exclude {
                if let cur = keySpec.dfa {
                    guard let both = try intersect(cur, ex) else { continue }
                    wSpec.dfa = both
                } else {
                    wSpec.dfa = ex
                }
            }
            let wValue = JSONValue.object(JSONObject([("allOf", .array([valueSchema, w.value]))]))
            witnessAlts.append([b.terminal(.string(wSpec)), ws, colon, ws, try compileNode(wValue, base: base, at: pointer(path))])
        }
        return (extraAlts, witnessAlts)
    }

    /// The keys other than `names` (memoized: merged and referenced objects repeat their names).
    func undeclaredKeys(_ names: [String]) -> CodePointDFA? {
        if let known = undeclaredKeysCache[names] { return known }
        let dfa = CodePointDFA.literals(names)?.complement()
        undeclaredKeysCache[names] = dfa
        return dfa
    }

    /// Most patternProperties on one object, and most classes of keys they partition the
    /// undeclared keys into (patterns that cannot match one key together make no class).
    static let maxPatternProperties = 16
    static let maxKeyClasses = 64

    /// The undeclared keys partitioned by the patterns they match, only the classes that hold
    /// some key: each as its automaton (nil: any key), the value schemas of the patterns
    /// matched, and the keyword path for errors. Found depth first, pattern by pattern, so
    /// that an empty intersection prunes every class below it.
    func keyClasses(_ m: ObjectMembers, exclude: CodePointDFA?) throws(SchemaError) -> [(CodePointDFA?, [JSONValue], [String])] {
        var out: [(CodePointDFA?, [JSONValue], [String])] = []
        func visit(_ i: Int, _ dfa: CodePointDFA?, _ parts: [JSONValue], _ path: [String]) throws(SchemaError) {
            if i == m.patterns.count {
                if out.count == SchemaCompiler.maxKeyClasses {
                    throw .unsupported("patternProperties", "more than \(SchemaCompiler.maxKeyClasses) classes of keys")
                }
                out.append((dfa, parts, path))
                return
            }
            // Keys not matching pattern i (under either reading), then keys matching it (ECMA).
            if let lenient = m.lenientPatterns[i] {
                if let side = lenient.complement() {
                    if let next = try narrow(dfa, side) { try visit(i + 1, next, parts, path) }
                }
            } else {
                try visit(i + 1, dfa, parts, path)
            }
            if let pd = m.patterns[i].dfa, let next = try narrow(dfa, pd) {
                try visit(i + 1, next, parts + [m.patterns[i].schema], ["patternProperties", m.patterns[i].source])
            }
        }
        try visit(0, m.names.isEmpty ? nil : exclude, [], ["additionalProperties"])
        return out
    }

    /// `side` within `dfa` (nil `dfa`: every key); nil when no key is left.
    private func narrow(_ dfa: CodePointDFA?, _ side: CodePointDFA) throws(SchemaError) -> CodePointDFA?? {
        guard let cur = dfa else { return .some(side) }
        guard let both = try intersect(cur, side) else { return nil }
        return .some(both)
    }

    /// A key spec further restricted by propertyNames; nil when no key is left.
    func restrictKey(_ key: StringSpec, _ nameSpec: StringSpec?) throws(SchemaError) -> StringSpec? {
        guard let ns = nameSpec else { return key }
        var spec = key
        spec.minLength = ns.minLength
        spec.maxLength = ns.maxLength
        if let d = ns.dfa {
            if let cur = spec.dfa {
                guard let both = try intersect(cur, d) else { return nil }
                spec.dfa = both
            } else {
                spec.dfa = d
            }
        }
        if let m = spec.maxLength, m < spec.minLength { return nil }
        return spec
    }

    /// The rule of each declared member (`"name": value`), nil for a name that allows no
    /// value; nil overall when a required member allows none.
    func memberRules(_ m: ObjectMembers, base: String) throws(SchemaError) -> [GrammarBuilder.Symbol?]? {
        let colon = b.literal(":")
        var kv: [GrammarBuilder.Symbol?] = []
        for (i, n) in m.names.enumerated() {
            if m.schemas[i] == .bool(false) {
                if m.isRequired[i] { return nil }
                kv.append(nil)
                continue
            }
            let keyLit = b.literal(JSONValue.string(n).serialized(.compact))
            let schema = try compileNode(m.schemas[i], base: base, at: pointer(["properties", n]))
            kv.append(b.rule("member", [[keyLit, ws, colon, ws, schema]]))
        }
        return kv
    }

    /// The witness form of each declared member whose key can be a witness.
    func witnessMemberRules(_ m: ObjectMembers, kv: [GrammarBuilder.Symbol?], witness w: Witness, base: String) throws(SchemaError)
        -> [GrammarBuilder.Symbol?]
    {
        let colon = b.literal(":")
        var out: [GrammarBuilder.Symbol?] = []
        for (i, n) in m.names.enumerated() {
            guard kv[i] != nil, w.isWitnessKey(n) else {
                out.append(nil)
                continue
            }
            let keyLit = b.literal(JSONValue.string(n).serialized(.compact))
            let value = JSONValue.object(JSONObject([("allOf", .array([m.schemas[i], w.value]))]))
            out.append(
                b.rule("member-witness", [[keyLit, ws, colon, ws, try compileNode(value, base: base, at: pointer(["properties", n]))]]))
        }
        return out
    }

    /// Members in declared order, each at most once, required ones never skipped, extras
    /// anywhere between them.
    func orderedObjectAlternatives(kv: [GrammarBuilder.Symbol?], isRequired: [Bool], extra: GrammarBuilder.Symbol?, allowEmpty: Bool)
        -> [[GrammarBuilder.Symbol]]
    {
        let n = kv.count
        let comma = b.literal(","), close = b.literal("}"), open = b.literal("{")
        var rest: [GrammarBuilder.Symbol] = [], first: [GrammarBuilder.Symbol] = []
        for _ in 0...n {
            rest.append(b.declareRule("obj-rest"))
            first.append(b.declareRule("obj-first"))
        }
        // requiredAfter[i]: some member at index >= i is required.
        var requiredAfter = [Bool](repeating: false, count: n + 1)
        for i in stride(from: n - 1, through: 0, by: -1) { requiredAfter[i] = requiredAfter[i + 1] || isRequired[i] }
        for i in 0...n {
            if n <= 160 {
                // Unambiguous form: rest[i] = after a member, next declared index >= i;
                // first[i] = the next member (declared j >= i without skipping a required one, or an extra).
                var fa: [[GrammarBuilder.Symbol]] = []
                var j = i
                while j < n {
                    if let m = kv[j] { fa.append([m, rest[j + 1]]) }
                    if isRequired[j] { break }
                    j += 1
                }
                if let extra { fa.append([extra, rest[i]]) }
                b.define(first[i], fa)
                b.define(rest[i], requiredAfter[i] ? [[ws, comma, ws, first[i]]] : [[ws, comma, ws, first[i]], [ws, close]])
            } else {
                // Linear-size form for very many properties (ambiguous where extras are allowed).
                var ra: [[GrammarBuilder.Symbol]] = [], fa: [[GrammarBuilder.Symbol]] = []
                if i < n {
                    if let m = kv[i] {
                        ra.append([ws, comma, ws, m, rest[i + 1]])
                        fa.append([m, rest[i + 1]])
                    }
                    if !isRequired[i] {
                        ra.append([rest[i + 1]])
                        fa.append([first[i + 1]])
                    }
                } else {
                    ra.append([ws, close])
                }
                if let extra {
                    ra.append([ws, comma, ws, extra, rest[i]])
                    fa.append([extra, rest[i]])
                }
                b.define(rest[i], ra)
                b.define(first[i], fa)
            }
        }
        // first[i] ends with rest[...] which closes the object.
        return allowEmpty ? [[open, ws, first[0]], [open, ws, close]] : [[open, ws, first[0]]]
    }

    /// Objects that need at least one witness member: the unambiguous member rules doubled by
    /// a flag "a witness has been seen"; the object can close only once it is set.
    func witnessObjectAlternatives(
        kv: [GrammarBuilder.Symbol?], witnessKV: [GrammarBuilder.Symbol?], isRequired: [Bool],
        extra: GrammarBuilder.Symbol?, witnessExtra: GrammarBuilder.Symbol?
    ) -> [[GrammarBuilder.Symbol]] {
        let n = kv.count
        let comma = b.literal(","), close = b.literal("}"), open = b.literal("{")
        var rest: [[GrammarBuilder.Symbol]] = [], first: [[GrammarBuilder.Symbol]] = []
        for _ in 0...n {
            rest.append([b.declareRule("obj-rest-w0"), b.declareRule("obj-rest-w1")])
            first.append([b.declareRule("obj-first-w0"), b.declareRule("obj-first-w1")])
        }
        for i in 0...n {
            for e in 0...1 {
                var fa: [[GrammarBuilder.Symbol]] = []
                var j = i
                while j < n {
                    if let m = kv[j] { fa.append([m, rest[j + 1][e]]) }
                    if let m = witnessKV[j] { fa.append([m, rest[j + 1][1]]) }
                    if isRequired[j] { break }
                    j += 1
                }
                if let extra { fa.append([extra, rest[i][e]]) }
                if let witnessExtra { fa.append([witnessExtra, rest[i][1]]) }
                b.define(first[i][e], fa)
                var ra: [[GrammarBuilder.Symbol]] = [[ws, comma, ws, first[i][e]]]
                if e == 1 && !isRequired[i...].contains(true) { ra.append([ws, close]) }
                b.define(rest[i][e], ra)
            }
        }
        return [[open, ws, first[0][0]]]
    }

    /// Objects with `minProperties`/`maxProperties`: the member rules also count the members
    /// so far (counts above the largest bound that matters are merged).
    func countedObjectAlternatives(
        kv: [GrammarBuilder.Symbol?], isRequired: [Bool], extra: GrammarBuilder.Symbol?,
        minProps: Int, maxProps: Int?
    ) throws(SchemaError) -> [[GrammarBuilder.Symbol]] {
        let n = kv.count
        let cap = maxProps ?? minProps  // counts are tracked up to cap
        try budget.checkRepetition(cap, keyword: maxProps != nil ? "maxProperties" : "minProperties")
        // Each (position, count) cell lists the members that may come next: up to n of them.
        let (cells, o1) = (n + 1).multipliedReportingOverflow(by: cap + 1)
        let (size, o2) = cells.multipliedReportingOverflow(by: n + 6)
        try budget.checkGrammarSize(o1 || o2 ? Int.max : b.size + size)
        let comma = b.literal(","), close = b.literal("}"), open = b.literal("{")
        var rest: [[GrammarBuilder.Symbol]] = [], first: [[GrammarBuilder.Symbol]] = []
        for _ in 0...n {
            rest.append((0...cap).map { _ in b.declareRule("obj-rest-n") })
            first.append((0...cap).map { _ in b.declareRule("obj-first-n") })
        }
        var requiredAfter = [Bool](repeating: false, count: n + 1)
        for i in stride(from: n - 1, through: 0, by: -1) { requiredAfter[i] = requiredAfter[i + 1] || isRequired[i] }
        for i in 0...n {
            for c in 0...cap {
                // first[i][c]: the (c+1)-th member; rest[i][c]: after c members.
                let next = min(c + 1, cap)
                var fa: [[GrammarBuilder.Symbol]] = []
                if maxProps == nil || c < cap {
                    var j = i
                    while j < n {
                        if let m = kv[j] { fa.append([m, rest[j + 1][next]]) }
                        if isRequired[j] { break }
                        j += 1
                    }
                    if let extra { fa.append([extra, rest[i][next]]) }
                }
                b.define(first[i][c], fa)
                var ra: [[GrammarBuilder.Symbol]] = [[ws, comma, ws, first[i][c]]]
                if !requiredAfter[i] && c >= minProps { ra.append([ws, close]) }
                b.define(rest[i][c], ra)
            }
        }
        var out: [[GrammarBuilder.Symbol]] = [[open, ws, first[0][0]]]
        if !isRequired.contains(true) && minProps == 0 { out.append([open, ws, close]) }
        return out
    }
}
