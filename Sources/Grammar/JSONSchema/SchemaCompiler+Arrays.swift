import LeapJSON

/// `array`: `prefixItems`/`items` per position, `minItems`/`maxItems` and `contains` with its
/// counts, by unrolled position rules (`maxRepetition` bounds the unrolling).
extension SchemaCompiler {
    /// What the array rules count: element positions up to `last`, matches of `contains` up to `cap`.
    struct ArrayShape {
        var prefix: [JSONValue]
        var items: JSONValue
        var minItems: Int
        var maxItems: Int?
        var contains: JSONValue?
        var minContains = 0
        var maxContains: Int?
        /// Matching elements are counted up to this number.
        var cap: Int { contains == nil ? 0 : (maxContains ?? minContains) }
        func itemSchema(_ i: Int) -> JSONValue { i < prefix.count ? prefix[i] : items }
    }

    func arrayAlternatives(_ f: JSONObject, base: String) throws(SchemaError) -> [[GrammarBuilder.Symbol]] {
        guard let shape = try arrayShape(f) else { return [] }
        let open = b.literal("["), close = b.literal("]"), comma = b.literal(",")
        // tails[i][c]: after i elements, c of them counted as matching.
        let last = max(shape.maxItems ?? max(shape.prefix.count, shape.minItems), 1)
        let (cells, overflow) = (last + 1).multipliedReportingOverflow(by: shape.cap + 1)
        try budget.checkGrammarSize(overflow ? Int.max : b.size + 4 * cells)
        var tails: [[GrammarBuilder.Symbol]] = []
        for _ in 0...last { tails.append((0...shape.cap).map { _ in b.declareRule("arr-tail") }) }
        let minMatches = shape.contains == nil ? 0 : shape.minContains
        for i in 1...last {
            if i & 1023 == 0 { try budget.checkTime() }
            let opts = (shape.maxItems.map { i < $0 } ?? true) ? try elementChoices(shape, i, base: base) : []
            for c in 0...shape.cap {
                var alts: [[GrammarBuilder.Symbol]] = []
                if i >= shape.minItems && c >= minMatches { alts.append([ws, close]) }
                for (sym, counts) in opts {
                    guard let c2 = nextCount(shape, c, counts) else { continue }
                    let target = shape.maxItems == nil && i == last ? tails[i][c2] : tails[i + 1][c2]
                    alts.append([ws, comma, ws, sym, target])
                }
                b.define(tails[i][c], alts)
            }
        }
        var out: [[GrammarBuilder.Symbol]] = []
        if shape.minItems == 0 && minMatches == 0 { out.append([open, ws, close]) }
        if shape.maxItems != 0 {
            for (sym, counts) in try elementChoices(shape, 0, base: base) {
                guard let c2 = nextCount(shape, 0, counts) else { continue }
                out.append([open, ws, sym, tails[1][c2]])
            }
        }
        return out
    }

    /// The counts of an array schema, or nil when no array satisfies them.
    func arrayShape(_ f: JSONObject) throws(SchemaError) -> ArrayShape? {
        let prefix = f["prefixItems"]?.arrayValue ?? []
        let items = f["items"] ?? .bool(true)
        var shape = ArrayShape(prefix: prefix, items: items, minItems: f["minItems"]?.intValue ?? 0, maxItems: f["maxItems"]?.intValue)
        if items == .bool(false) { shape.maxItems = min(shape.maxItems ?? prefix.count, prefix.count) }
        if let m = shape.maxItems, m < shape.minItems { return nil }
        if f["uniqueItems"] == .bool(true), (shape.maxItems ?? 2) > 1 {
            throw .unsupported(
                "uniqueItems",
                "items must all differ, which a grammar cannot check against every earlier item (enforced only when at most one item fits)")
        }
        try budget.checkRepetition(shape.minItems, keyword: "minItems")
        if let m = shape.maxItems { try budget.checkRepetition(m, keyword: "maxItems") }
        // contains / minContains / maxContains: count the elements that match, up to `cap`.
        if let cs = f[NormalKey.contains]?.arrayValue {
            guard cs.count == 1 else { throw .unsupported("contains", "several contains constraints on one array") }
            shape.contains = cs[0]
            shape.minContains = f[NormalKey.minContains]?.intValue ?? 1
            shape.maxContains = f[NormalKey.maxContains]?.intValue
            if let m = shape.maxContains, m < shape.minContains { return nil }
            if let m = shape.maxItems, m < shape.minContains { return nil }
            try budget.checkRepetition(shape.minContains, keyword: "minContains")
            if let m = shape.maxContains { try budget.checkRepetition(m, keyword: "maxContains") }
        }
        return shape
    }

    /// The ways to write element i: (rule, whether it counts as matching `contains`).
    func elementChoices(_ shape: ArrayShape, _ i: Int, base: String) throws(SchemaError) -> [(GrammarBuilder.Symbol, Bool)] {
        let path = i < shape.prefix.count ? ["prefixItems", String(i)] : ["items"]
        guard let c = shape.contains else {
            return [(try compileNode(shape.itemSchema(i), base: base, at: pointer(path)), false)]
        }
        let matching = try compileNode(
            .object(JSONObject([("allOf", .array([shape.itemSchema(i), c]))])), base: base, at: pointer(["contains"]))
        // Without maxContains, a matching element may also be counted as not matching
        // (undercounting only makes acceptance harder); with it, it must not match.
        let other: JSONValue =
            shape.maxContains == nil
            ? shape.itemSchema(i)
            : .object(JSONObject([("allOf", .array([shape.itemSchema(i), .object(JSONObject([("not", c)]))]))]))
        return [(matching, true), (try compileNode(other, base: base, at: pointer(path)), false)]
    }

    /// The count of matching elements after one more, or nil when that exceeds maxContains.
    func nextCount(_ shape: ArrayShape, _ c: Int, _ counts: Bool) -> Int? {
        guard counts else { return c }
        if let m = shape.maxContains, c + 1 > m { return nil }
        return min(c + 1, shape.cap)
    }

    /// The location of the node being compiled extended by `path`.
    func pointer(_ path: [String]) -> String {
        path.reduce(location) { $0 + "/" + SchemaCompiler.escapePointerToken($1) }
    }
}
