import LeapJSON

/// The keys of the compiler's normal form that are not JSON Schema keywords (see `flatten`).
/// They are spelled so that no real schema uses them (`$` names are reserved by JSON Schema).
enum NormalKey {
    /// `[[schema]]`: groups of alternatives; one branch of every group must hold (`anyOf`,
    /// and the rewritings of `not`, `if`, `dependent*`).
    static let anyOf = "$leap:anyOf"
    /// `[[schema]]`: groups of which exactly one branch must hold.
    static let oneOf = "$leap:oneOf"
    /// `[schema]`: schemas that must not hold.
    static let not = "$leap:not"
    /// `[[if, then, else]]`.
    static let ifThenElse = "$leap:ifThenElse"
    /// `[pattern]`: patterns the string must match (all of them).
    static let patterns = "$leap:patterns"
    /// `[format]`: formats the string must have.
    static let formats = "$leap:formats"
    /// `[schema]`: schemas every property name must satisfy.
    static let propertyNames = "$leap:propertyNames"
    /// `[schema]`, with the counts below: elements that must be present.
    static let contains = "$leap:contains"
    static let minContains = "$leap:minContains"
    static let maxContains = "$leap:maxContains"
    /// `true`: numbers that are not integers (`not: {type: integer}` among numbers).
    static let fractional = "$leap:fractional"
    /// `[{names, patterns, schema}]`: some member whose key is not in `names` and matches none
    /// of `patterns` has a value satisfying `schema` (from `not: {additionalProperties}`).
    static let someExtra = "$leap:someExtra"
    /// The resource base (`$id`) against which a rebased subschema's references resolve.
    static let base = "$leap:base"
}

/// Keywords that annotate or organize a schema and never constrain values.
let knownAnnotationKeys: Set<String> = [
    "$schema", "$id", "id", "$anchor", "$comment", "$vocabulary", "$defs", "definitions", "title", "description",
    "default", "examples", "example", "deprecated", "readOnly", "writeOnly", "contentEncoding", "contentMediaType",
    "contentSchema", "$dynamicAnchor", "$recursiveAnchor"
]

let alwaysUnsupported: Set<String> = ["$dynamicRef", "$recursiveRef"]

/// One compilation of a JSON Schema into grammar rules. The work is split by keyword family:
/// references (`+References`), the normal form (`+Normalization`), `allOf` merging (`+AllOf`),
/// combinators and negation (`+Combinators`), `enum`/`const` (`+Enums`), numbers, strings,
/// arrays and objects (one file each).
///
/// A subschema is compiled in three steps: `flatten` merges its `$ref` and `allOf` parts into
/// one object in the normal form (internal keys in `NormalKey`; nil means `false`);
/// `alternatives` rewrites `not` and `if` into `anyOf` groups and distributes the groups over
/// the siblings; `typedAlternatives` emits, per JSON type allowed, the rules of one value.
final class SchemaCompiler {
    let root: JSONValue
    let options: JSONSchemaCompiler.Options
    let budget: CompileBudget
    let draft: SchemaDraft
    var b: GrammarBuilder
    var memo: [MemoKey: GrammarBuilder.Symbol] = [:]
    var resources: [String: JSONValue] = [:]
    var anchors: [String: JSONValue] = [:]
    var rootBase = ""
    var patternCache: [String: CodePointDFA?] = [:]
    var undeclaredKeysCache: [[String]: CodePointDFA?] = [:]
    let ws: GrammarBuilder.Symbol
    /// Where the subschema being compiled sits in the document (a JSON Pointer).
    var location = ""
    /// The compiler that checks `enum` values against their sibling keywords (made on first
    /// use; it writes JSON literals whatever `literalStyle` says, and shares the budget).
    var enumChecker: SchemaCompiler?
    var isEnumChecker = false
    /// The `$ref` targets being flattened (a reference that comes back to itself through
    /// `$ref`/`allOf` alone is an endless schema).
    var refsBeingFlattened = Set<String>()

    struct MemoKey: Hashable {
        let schema: JSONValue
        let base: String
    }

    /// A schema with `$ref` and `allOf` merged in and keywords normalized; nil means `false`.
    typealias Flat = JSONObject?

    init(root: JSONValue, options: JSONSchemaCompiler.Options, builder: GrammarBuilder, budget: CompileBudget) {
        self.root = root
        self.options = options
        self.budget = budget
        self.b = builder
        ws = b.whitespace(maxRun: options.maxWhitespaceRun)
        if case .string(let uri)? = root["$schema"], let declared = SchemaDraft(schemaURI: uri) {
            draft = declared
        } else {
            draft = options.defaultDraft
        }
    }

    /// Builds the grammar of `root`, mapping the builder's errors to schema errors.
    static func build(_ builder: GrammarBuilder, root: GrammarBuilder.Symbol, budget: CompileBudget) throws(SchemaError) -> Grammar {
        try budget.checkTime()
        do { return try builder.build(root: root, limits: budget.limits, deadline: budget.deadline) } catch {
            if let limit = error.limit { throw SchemaError.limit(limit, error.message) }
            throw SchemaError(kind: .unsatisfiable, message: error.message)
        }
    }

    // MARK: Nodes

    /// The rule of one subschema (memoized, so that recursive schemas make recursive rules).
    /// `pointer` is the subschema's place in the document, for error messages.
    func compileNode(_ schema: JSONValue, base: String, at pointer: String) throws(SchemaError) -> GrammarBuilder.Symbol {
        let key = MemoKey(schema: schema, base: base)
        if let s = memo[key] { return s }
        let rule = b.declareRule()
        memo[key] = rule
        let outer = location
        location = pointer
        defer { location = outer }
        do {
            try budget.enter()
            defer { budget.leave() }
            b.define(rule, try nodeAlternatives(schema, base: base))
            try budget.checkGrammarSize(b.size)
        } catch {
            throw error.at(pointer)
        }
        return rule
    }

    func nodeAlternatives(_ schema: JSONValue, base: String) throws(SchemaError) -> [[GrammarBuilder.Symbol]] {
        // A lone $ref (plus annotations) switches resource.
        if case .object(let o) = schema, case .string(let ref)? = o["$ref"],
            draft.refOverridesSiblings || o.keys.allSatisfy({ $0 == "$ref" || knownAnnotationKeys.contains($0) && $0 != "$id" })
        {
            let target = try resolveRef(ref, base: base)
            return [[try compileNode(target.schema, base: target.base, at: target.pointer)]]
        }
        return try alternatives(try flatten(schema, base: base), base: base)
    }

    /// The alternatives for a flat schema: `not` and `if` rewritten into `anyOf` groups, the
    /// groups distributed over the siblings, then one rule per JSON type.
    func alternatives(_ flat: Flat, base: String) throws(SchemaError) -> [[GrammarBuilder.Symbol]] {
        guard var f = flat else { return [] }
        try budget.enter()
        defer { budget.leave() }
        guard try rewriteNegations(&f, base: base) else { return [] }
        try rewriteIfThenElse(&f, base: base)
        if let combos = try distributeCombinators(f, base: base) {
            var alts: [[GrammarBuilder.Symbol]] = []
            for c in combos {
                let r = b.declareRule()
                b.define(r, try alternatives(c, base: base))
                alts.append([r])
            }
            return alts
        }
        return try typedAlternatives(f, base: base)
    }

    /// The negations that the typed rules apply themselves (types, patterns, string and
    /// literal exclusions), gathered from `$leap:not`.
    struct TypedNegations {
        var types: Set<String>
        var fractionalOnly: Bool
        var patterns: [String] = []
        var strings: [String] = []
        var literals: [JSONValue] = []
    }

    /// One alternative per JSON type the schema allows.
    func typedAlternatives(_ f: JSONObject, base: String) throws(SchemaError) -> [[GrammarBuilder.Symbol]] {
        var types = Set(f["type"]?.arrayValue?.compactMap(\.stringValue) ?? SchemaCompiler.allTypes)
        if types.contains("number") { types.remove("integer") }
        var fractionalOnly = f[NormalKey.fractional] == .bool(true)
        if fractionalOnly {
            types.remove("integer")
            if !types.contains("number") { fractionalOnly = false }
        }
        guard let negations = try typedNegations(f, types: types, fractionalOnly: fractionalOnly) else { return [] }
        if let e = f["enum"]?.arrayValue {
            var rest = f
            rest["enum"] = nil
            return try enumAlternatives(e, rest: rest, negations: negations, base: base)
        }
        var alts: [[GrammarBuilder.Symbol]] = []
        for t in SchemaCompiler.allTypes where negations.types.contains(t) {
            alts += try alternatives(ofType: t, f, negations: negations, base: base)
        }
        return alts
    }

    func alternatives(ofType t: String, _ f: JSONObject, negations n: TypedNegations, base: String) throws(SchemaError)
        -> [[GrammarBuilder.Symbol]]
    {
        switch t {
        case "null": return n.literals.contains(.null) ? [] : [[b.literal(options.literalStyle.null)]]
        case "boolean":
            return [true, false].filter { !n.literals.contains(.bool($0)) }.map { [b.literal(options.literalStyle.bool($0))] }
        case "integer", "number":
            guard let spec = try numberSpec(f, integer: t == "integer", fractionalOnly: n.fractionalOnly),
                !(spec.integerOnly && spec.fractionalOnly)
            else { return [] }
            return [[b.terminal(.number(spec))]]
        case "string":
            guard let spec = try stringSpec(f, notPatterns: n.patterns, notStrings: n.strings) else { return [] }
            return [[b.terminal(.string(spec))]]
        case "array": return try arrayAlternatives(f, base: base)
        case "object": return try objectAlternatives(f, base: base)
        default: return []
        }
    }

    /// The `not` forms that the typed rules enforce directly; nil when one of them is
    /// `not: true` (nothing is valid).
    func typedNegations(_ f: JSONObject, types: Set<String>, fractionalOnly: Bool) throws(SchemaError) -> TypedNegations? {
        var n = TypedNegations(types: types, fractionalOnly: fractionalOnly)
        for negated in f[NormalKey.not]?.arrayValue ?? [] {
            switch negated {
            case .bool(true): return nil
            case .bool(false): continue
            case .object(let o):
                let keys = o.keys.filter { !knownAnnotationKeys.contains($0) }
                if keys.isEmpty { return nil }
                if keys == ["type"], let t = o["type"] {
                    for name in t.stringValue.map({ [$0] }) ?? t.arrayValue?.compactMap(\.stringValue) ?? [] {
                        n.types.remove(name)
                        if name == "number" { n.types.remove("integer") }
                        if name == "integer" && n.types.contains("number") { n.fractionalOnly = true }
                    }
                } else if keys == ["pattern"], case .string(let p)? = o["pattern"] {
                    // Every non-string satisfies `pattern`, so `not pattern` leaves strings only.
                    n.patterns.append(p)
                    n.types = n.types.intersection(["string"])
                } else if keys == ["enum"] || keys == ["const"] {
                    for v in o["enum"]?.arrayValue ?? o["const"].map({ [$0] }) ?? [] {
                        switch v {
                        case .string(let s): n.strings.append(s)
                        case .null, .bool: n.literals.append(v)
                        default: throw .unsupported("not", "not of a non-string, non-literal enum")
                        }
                    }
                } else {
                    throw .unsupported("not")
                }
            default: throw .invalid("not must be a schema")
            }
        }
        return n
    }

    // MARK: Types

    static let allTypes: [String] = ["null", "boolean", "integer", "number", "string", "array", "object"]

    /// The JSON types a flat schema admits (`integer` included with `number`), narrowed by its enum.
    func effectiveTypes(_ f: JSONObject) -> Set<String> {
        var t = Set(f["type"]?.arrayValue?.compactMap(\.stringValue) ?? SchemaCompiler.allTypes)
        if t.contains("number") { t.insert("integer") }
        if let e = f["enum"]?.arrayValue {
            var et = Set<String>()
            for v in e { et.formUnion(types(of: v)) }
            t.formIntersection(et)
        }
        return t
    }

    /// The JSON Schema types of a value under the schema's draft: an integral number is an
    /// `integer` too, except a number written with a fraction (`1.0`) in drafts 3 and 4.
    func types(of v: JSONValue) -> Set<String> {
        switch v {
        case .null: return ["null"]
        case .bool: return ["boolean"]
        case .integer: return ["integer", "number"]
        case .double(let d): return isInteger(d) ? ["integer", "number"] : ["number"]
        case .string: return ["string"]
        case .array: return ["array"]
        case .object: return ["object"]
        }
    }

    /// Whether a number parsed as a double (written with a fraction or an exponent) is an
    /// integer in this draft.
    func isInteger(_ d: Double) -> Bool { !draft.integersHaveNoFraction && d.isFinite && d.rounded() == d }

    /// A flat schema of one type with extra keywords.
    func typed(_ t: String, _ pairs: [(String, JSONValue)]) -> JSONValue {
        .object(JSONObject([("type", .array([.string(t)]))] + pairs))
    }

    // MARK: Pointers

    /// A JSON Pointer reference token: `~` and `/` escaped (RFC 6901).
    static func escapePointerToken(_ s: String) -> String {
        var out = ""
        for c in s {
            switch c {
            case "~": out += "~0"
            case "/": out += "~1"
            default: out.append(c)
            }
        }
        return out
    }
}
