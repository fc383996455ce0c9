import LeapJSON

/// Why a JSON Schema could not be compiled.
public struct SchemaError: Error, Sendable, CustomStringConvertible, Equatable {
    public enum Kind: Sendable, Equatable {
        /// A keyword (named) that the compiler cannot enforce exactly.
        case unsupported(keyword: String)
        /// The schema itself is malformed (wrong keyword value, unresolvable `$ref`, bad pattern...).
        case invalid
        /// No JSON value satisfies the schema.
        case unsatisfiable
    }
    public let kind: Kind
    public let message: String
    public var description: String {
        switch kind {
        case .unsupported(let k): return "unsupported keyword '\(k)': \(message)"
        case .invalid: return "invalid schema: \(message)"
        case .unsatisfiable: return "unsatisfiable schema: \(message)"
        }
    }
    static func unsupported(_ keyword: String, _ message: String = "cannot be enforced exactly") -> SchemaError {
        SchemaError(kind: .unsupported(keyword: keyword), message: message)
    }
    static func invalid(_ message: String) -> SchemaError { SchemaError(kind: .invalid, message: message) }
}

/// Compiles JSON Schema (draft 2020-12, with the draft-04..2019-09 spellings `definitions`,
/// array-form `items` + `additionalItems`, and boolean `exclusiveMinimum`) to a `Grammar` whose
/// language is the set of JSON texts valid under the schema, in the compiler's canonical
/// shape: object properties in schema order, any JSON whitespace between tokens, no whitespace
/// before or after the document.
///
/// Exactness first: a validation keyword that cannot be enforced exactly is a compile error
/// naming it (`SchemaError.Kind.unsupported`), never a silent widening. Annotations and
/// unknown keywords are ignored. See docs/structured-output.md for the keyword table.
public enum JSONSchemaCompiler {
    /// Compilation options.
    public struct Options: Sendable {
        /// The meaning of a missing `additionalProperties`: true (the JSON Schema default: other
        /// properties are allowed, after or between the declared ones) or false (only declared
        /// properties; closer to what generation usually wants).
        public var additionalPropertiesDefault: Bool = true
        /// Treat `oneOf` as `anyOf` even when the branches cannot be proven mutually exclusive.
        /// Off by default: such a `oneOf` is then a compile error.
        public var oneOfAsAnyOf: Bool = false
        /// The longest run of whitespace allowed between JSON tokens: nil (the default) allows
        /// any JSON whitespace; 0 allows none (compact JSON); a small number stops a model from
        /// emitting whitespace forever. Restricting whitespace never admits an invalid document.
        public var maxWhitespaceRun: Int? = nil
        /// Enforce `format` for the supported formats (date, time, date-time, uuid, email, ipv4).
        /// When false every format is an annotation.
        public var assertFormat: Bool = true
        /// How `null`, `true` and `false` are spelled, everywhere in the value (including
        /// inside `enum`/`const` values): `.json` (the default) or `.python` (`None`, `True`,
        /// `False`, for Python-literal tool calls). Everything else (strings, numbers, arrays,
        /// objects) keeps its JSON spelling, which Python's literal syntax also reads.
        public var literalStyle: LiteralStyle = .json
        /// Integers are written as plain digits that fit in 64 bits: no `.0` fraction (which
        /// JSON Schema counts as an integer) and no 30-digit numbers. Never admits an invalid
        /// document; useful for generation, whose output is decoded into `Int`s.
        public var plainIntegers: Bool = false
        public init() {}
    }

    /// The spelling of the JSON literals `null`, `true` and `false` in the compiled grammar.
    public enum LiteralStyle: Sendable, Equatable {
        /// `null`, `true`, `false`.
        case json
        /// `None`, `True`, `False` (Python literals); strings, numbers, lists and dicts stay
        /// in JSON form, which is also Python literal syntax.
        case python

        /// The text of `null` in this style.
        public var null: String { self == .json ? "null" : "None" }
        /// The text of a boolean in this style.
        public func bool(_ value: Bool) -> String {
            switch self {
            case .json: return value ? "true" : "false"
            case .python: return value ? "True" : "False"
            }
        }
    }

    /// Compiles a schema given as a JSON value.
    public static func compile(_ schema: JSONValue, options: Options = Options()) throws(SchemaError) -> Grammar {
        var builder = GrammarBuilder()
        let root = try addSchema(schema, to: &builder, options: options)
        do { return try builder.build(root: root) } catch { throw SchemaError(kind: .unsatisfiable, message: error.message) }
    }

    /// Compiles a schema given as JSON text.
    public static func compile(_ schemaText: String, options: Options = Options()) throws(SchemaError) -> Grammar {
        let value: JSONValue
        do { value = try JSONValue.parse(schemaText) } catch { throw .invalid("not JSON: \(error)") }
        return try compile(value, options: options)
    }

    /// Adds the schema's rules to a builder and returns the rule for one value valid under it,
    /// so that schema-constrained JSON can be composed with literal text (tool-call formats).
    public static func addSchema(_ schema: JSONValue, to builder: inout GrammarBuilder, options: Options = Options()) throws(SchemaError)
        -> GrammarBuilder.Symbol
    {
        let c = SchemaCompiler(root: schema, options: options, builder: builder)
        try c.indexResources(schema, base: "")
        let sym = try c.compileNode(schema, base: c.rootBase)
        builder = c.b
        return sym
    }
}

/// The keywords that constrain values (anything else is an annotation and ignored).
private let knownAnnotationKeys: Set<String> = [
    "$schema", "$id", "id", "$anchor", "$comment", "$vocabulary", "$defs", "definitions", "title", "description",
    "default", "examples", "example", "deprecated", "readOnly", "writeOnly", "contentEncoding", "contentMediaType",
    "contentSchema", "$dynamicAnchor", "$recursiveAnchor"
]

private let alwaysUnsupported: Set<String> = [
    "$dynamicRef", "$recursiveRef"
]

final class SchemaCompiler {
    let root: JSONValue
    let options: JSONSchemaCompiler.Options
    var b: GrammarBuilder
    var memo: [MemoKey: GrammarBuilder.Symbol] = [:]
    var resources: [String: JSONValue] = [:]
    var anchors: [String: JSONValue] = [:]
    var rootBase = ""
    var patternCache: [String: CodePointDFA?] = [:]
    var ws: GrammarBuilder.Symbol!
    var anyValue: GrammarBuilder.Symbol?
    var depth = 0
    /// Drafts 4 to 7: keywords beside `$ref` are ignored.
    var refOverridesSiblings = false

    struct MemoKey: Hashable {
        let schema: JSONValue
        let base: String
    }

    init(root: JSONValue, options: JSONSchemaCompiler.Options, builder: GrammarBuilder) {
        self.root = root
        self.options = options
        self.b = builder
        ws = b.whitespace(maxRun: options.maxWhitespaceRun)
        if case .string(let dialect)? = root["$schema"] {
            refOverridesSiblings = ["draft-03", "draft-04", "draft-05", "draft-06", "draft-07"].contains { dialect.contains($0) }
        }
    }

    // MARK: References

    func indexResources(_ s: JSONValue, base: String) throws(SchemaError) {
        guard case .object(let o) = s else {
            if case .array(let a) = s { for x in a { try indexResources(x, base: base) } }
            return
        }
        var here = base
        if case .string(let id)? = o["$id"] {
            here = resolveURI(base: base, ref: id)
            if let hash = here.firstIndex(of: "#") { here = String(here[..<hash]) }
            resources[here] = s
            if base.isEmpty && rootBase.isEmpty { rootBase = here }
        } else if base.isEmpty && resources[""] == nil {
            resources[""] = s
        }
        if case .string(let a)? = o["$anchor"] { anchors[here + "#" + a] = s }
        if case .string(let a)? = o["$dynamicAnchor"], anchors[here + "#" + a] == nil { anchors[here + "#" + a] = s }
        for (k, v) in o where k != "enum" && k != "const" && k != "default" && k != "examples" {
            try indexResources(v, base: here)
        }
    }

    func resolveURI(base: String, ref: String) -> String {
        if ref.contains("://") || ref.hasPrefix("urn:") { return ref }
        if ref.hasPrefix("#") { return base + ref }
        if base.isEmpty { return ref }
        var b = base
        if let hash = b.firstIndex(of: "#") { b = String(b[..<hash]) }
        if ref.hasPrefix("/") {
            if let r = schemeEnd(b), let slash = b[r...].firstIndex(of: "/") { return String(b[..<slash]) + ref }
            return ref
        }
        if let slash = b.lastIndex(of: "/") { return String(b[...slash]) + ref }
        return ref
    }

    func schemeEnd(_ s: String) -> String.Index? {
        var i = s.startIndex
        while i < s.endIndex {
            if s[i...].hasPrefix("://") { return s.index(i, offsetBy: 3) }
            i = s.index(after: i)
        }
        return nil
    }

    func percentDecoded(_ s: String) -> String {
        var out: [UInt8] = []
        let u = Array(s.utf8)
        var i = 0
        while i < u.count {
            if u[i] == 0x25, i + 2 < u.count, let h = StringLexer.hexValue(u[i + 1]), let l = StringLexer.hexValue(u[i + 2]) {
                out.append(UInt8(h * 16 + l))
                i += 3
            } else {
                out.append(u[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    func unescapePointer(_ s: String) -> String {
        var out = ""
        var it = s.makeIterator()
        while let c = it.next() {
            if c == "~" {
                let n = it.next()
                out.append(n == "1" ? "/" : n == "0" ? "~" : "~\(n.map(String.init) ?? "")")
            } else {
                out.append(c)
            }
        }
        return out
    }

    func resolveRef(_ ref: String, base: String) throws(SchemaError) -> (JSONValue, String) {
        let full = resolveURI(base: base, ref: ref)
        var doc = full, frag = ""
        if let hash = full.firstIndex(of: "#") {
            doc = String(full[..<hash])
            frag = String(full[full.index(after: hash)...])
        }
        guard let resource = resources[doc] ?? (doc.isEmpty ? Optional(root) : nil) else {
            throw .unsupported("$ref", "reference '\(ref)' is not local to the schema (remote references are not supported)")
        }
        frag = percentDecoded(frag)
        if frag.isEmpty { return (resource, doc) }
        if !frag.hasPrefix("/") {
            guard let s = anchors[doc + "#" + frag] else { throw .invalid("unresolvable $ref '\(ref)'") }
            return (s, doc)
        }
        var cur = resource
        for raw in frag.dropFirst().split(separator: "/", omittingEmptySubsequences: false) {
            let token = unescapePointer(String(raw))
            switch cur {
            case .object(let o):
                guard let next = o[token] else { throw .invalid("unresolvable $ref '\(ref)'") }
                cur = next
            case .array(let a):
                guard let i = Int(token), i >= 0, i < a.count else { throw .invalid("unresolvable $ref '\(ref)'") }
                cur = a[i]
            default: throw .invalid("unresolvable $ref '\(ref)'")
            }
        }
        return (cur, doc)
    }

    // MARK: Compilation

    func compileNode(_ schema: JSONValue, base: String) throws(SchemaError) -> GrammarBuilder.Symbol {
        let key = MemoKey(schema: schema, base: base)
        if let s = memo[key] { return s }
        let rule = b.declareRule()
        memo[key] = rule
        depth += 1
        defer { depth -= 1 }
        if depth > 400 { throw .invalid("schema nesting too deep") }
        // A lone $ref (plus annotations) switches resource.
        if case .object(let o) = schema, case .string(let ref)? = o["$ref"],
            refOverridesSiblings || o.keys.allSatisfy({ $0 == "$ref" || knownAnnotationKeys.contains($0) && $0 != "$id" })
        {
            let (target, tbase) = try resolveRef(ref, base: base)
            let sym = try compileNode(target, base: tbase)
            b.define(rule, [[sym]])
            return rule
        }
        let flat = try flatten(schema, base: base, depth: 0)
        b.define(rule, try alternatives(flat, base: base))
        return rule
    }

    func idBase(_ schema: JSONValue, _ base: String) -> String {
        if case .string(let b)? = schema["x-base"] { return b }
        if case .string(let id)? = schema["$id"] {
            var here = resolveURI(base: base, ref: id)
            if let hash = here.firstIndex(of: "#") { here = String(here[..<hash]) }
            return here
        }
        return base
    }

    /// A schema with `$ref` and `allOf` merged in and keywords normalized; nil means `false`.
    typealias Flat = JSONObject?

    func flatten(_ schema: JSONValue, base: String, depth: Int) throws(SchemaError) -> Flat {
        if depth > 64 { throw .unsupported("$ref", "reference cycle through allOf/$ref without an intervening value") }
        switch schema {
        case .bool(let v): return v ? JSONObject() : nil
        case .object(let o):
            // Subschemas of the result are relative to the caller's base; parts coming from
            // another resource are rebased (wrapped with their absolute base).
            let myBase = idBase(schema, base)
            if refOverridesSiblings, case .string(let ref)? = o["$ref"] {
                let (target, tbase) = try resolveRef(ref, base: base)
                let part = try flatten(target, base: tbase, depth: depth + 1)
                return tbase == base ? part : rebase(part, tbase)
            }
            var own = JSONObject()
            var parts: [Flat] = []
            for (k, v) in o {
                if k == "$ref" || k == "allOf" || knownAnnotationKeys.contains(k) { continue }
                own[k] = v
            }
            parts.append(try normalize(own, original: o))
            if case .string(let ref)? = o["$ref"] {
                let (target, tbase) = try resolveRef(ref, base: myBase)
                let part = try flatten(target, base: tbase, depth: depth + 1)
                parts.append(tbase == myBase ? part : rebase(part, tbase))
            }
            if let all = o["allOf"] {
                guard case .array(let items) = all, !items.isEmpty else { throw .invalid("allOf must be a non-empty array") }
                for it in items { parts.append(try flatten(it, base: myBase, depth: depth + 1)) }
            }
            var acc: Flat = JSONObject()
            for p in parts { acc = try merge(acc, p) }
            return myBase == base ? acc : rebase(acc, myBase)
        default:
            throw .invalid("a schema must be an object or a boolean")
        }
    }

    /// Makes every subschema of a flat schema carry its resource base, so that it can be
    /// compiled from anywhere.
    func rebase(_ flat: Flat, _ base: String) -> Flat {
        guard var f = flat else { return nil }
        func wrap(_ s: JSONValue) -> JSONValue {
            if case .object(let o) = s, o["x-base"] == nil {
                return .object(JSONObject([("x-base", .string(base)), ("allOf", .array([s]))]))
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
        for key in ["prefixItems", "x-not"] { if let v = wrapAll(f[key]) { f[key] = v } }
        for key in ["x-anyOf", "x-oneOf", "x-ite"] { if let v = wrapGroups(f[key]) { f[key] = v } }
        return f
    }

    /// Rewrites one schema object's keywords into the internal normal form.
    func normalize(_ o: JSONObject, original: JSONObject) throws(SchemaError) -> Flat {
        var out = JSONObject()
        for (k, v) in o {
            switch k {
            case "type":
                switch v {
                case .string(let t): out["type"] = .array([.string(t)])
                case .array(let ts):
                    for t in ts { guard case .string = t else { throw .invalid("type entries must be strings") } }
                    out["type"] = .array(ts)
                default: throw .invalid("type must be a string or an array")
                }
                for t in out["type"]!.arrayValue!
                where !["null", "boolean", "integer", "number", "string", "array", "object"].contains(t.stringValue!) {
                    throw .invalid("unknown type '\(t.stringValue!)'")
                }
            case "const":
                if let prev = out["enum"] { out["enum"] = .array(intersectEnums(prev.arrayValue!, [v])) } else { out["enum"] = .array([v]) }
            case "enum":
                guard case .array = v else { throw .invalid("enum must be an array") }
                if let prev = out["enum"] { out["enum"] = .array(intersectEnums(prev.arrayValue!, v.arrayValue!)) } else { out["enum"] = v }
            case "anyOf", "oneOf":
                guard case .array(let a) = v, !a.isEmpty else { throw .invalid("\(k) must be a non-empty array") }
                out["x-" + k] = .array((out["x-" + k]?.arrayValue ?? []) + [v])
            case "pattern":
                guard case .string = v else { throw .invalid("pattern must be a string") }
                out["x-patterns"] = .array([v])
            case "format":
                guard case .string(let f) = v else { throw .invalid("format must be a string") }
                if !options.assertFormat || (Formats.enforced[f] == nil && !Formats.unenforceable.contains(f)) { continue }
                if Formats.unenforceable.contains(f) { throw .unsupported("format", "format '\(f)' cannot be enforced") }
                out["x-formats"] = .array([v])
            case "not": out["x-not"] = .array([v])
            case "items":
                if case .array(let a) = v {
                    out["prefixItems"] = .array(a)
                    out["items"] = o["additionalItems"] ?? o["unevaluatedItems"] ?? .bool(true)
                } else {
                    out["items"] = v
                }
            case "additionalItems":
                continue  // only meaningful with array-form items (handled there)
            case "exclusiveMinimum", "exclusiveMaximum":
                if case .bool(let flag) = v {
                    // draft-04: modifies minimum/maximum
                    let plain = k == "exclusiveMinimum" ? "minimum" : "maximum"
                    if flag, let m = o[plain] { out[k] = m }
                } else {
                    out[k] = v
                }
            case "minimum", "maximum":
                if case .bool(true)? = o[k == "minimum" ? "exclusiveMinimum" : "exclusiveMaximum"] { continue }
                out[k] = v
            case "uniqueItems":
                if case .bool(true) = v { out[k] = v }
            case "if":
                if o["then"] != nil || o["else"] != nil {
                    out["x-ite"] = .array([.array([v, o["then"] ?? .bool(true), o["else"] ?? .bool(true)])])
                }
            case "then", "else":
                continue
            case "x-fractional":
                out[k] = v  // internal: numbers that are not integers
            case "x-someExtra":
                out[k] = .array([v])  // internal: see objectAlternatives
            case "contains":
                out["x-contains"] = .array([v])
            case "minContains", "maxContains":
                guard let n = v.intValue, n >= 0 else { throw .invalid("\(k) must be a non-negative integer") }
                if o["contains"] != nil { out["x-" + k] = .integer(n) }
            case "dependentRequired", "dependentSchemas", "dependencies":
                // if `name` is present then ...: anyOf [name absent, name present and ...].
                guard case .object(let deps) = v else { throw .invalid("\(k) must be an object") }
                var groups = out["x-anyOf"]?.arrayValue ?? []
                for (name, dep) in deps {
                    let absent = JSONValue.object(JSONObject([("properties", .object(JSONObject([(name, .bool(false))])))]))
                    let present: JSONValue
                    if case .array(let names) = dep {
                        present = .object(JSONObject([("required", .array(names + [.string(name)]))]))
                    } else {
                        present = .object(
                            JSONObject([("allOf", .array([.object(JSONObject([("required", .array([.string(name)]))])), dep]))]))
                    }
                    groups.append(.array([absent, present]))
                }
                if !groups.isEmpty { out["x-anyOf"] = .array(groups) }
            case "unevaluatedProperties", "unevaluatedItems":
                // Without in-place applicators, only this object's own keywords evaluate
                // properties/items, so these are additionalProperties / items.
                let applicators = ["allOf", "anyOf", "oneOf", "$ref", "$dynamicRef", "if", "then", "else", "dependentSchemas", "contains"]
                if let a = applicators.first(where: { original[$0] != nil }) {
                    throw .unsupported(k, "\(k) next to '\(a)'")
                }
                if v == .bool(true) { continue }
                if k == "unevaluatedProperties" {
                    if o["additionalProperties"] == nil { out["additionalProperties"] = v }
                } else if case .array? = o["items"] {
                    if o["additionalItems"] == nil { out["items"] = v }
                } else if o["items"] == nil {
                    out["items"] = v
                }
            case "propertyNames":
                if case .bool(true) = v { continue }
                if case .object(let po) = v, po.keys.allSatisfy({ knownAnnotationKeys.contains($0) }) { continue }
                out["x-propertyNames"] = .array([v])
            default:
                if alwaysUnsupported.contains(k) { throw .unsupported(k) }
                if knownAnnotationKeys.contains(k) { continue }
                if [
                    "properties", "required", "additionalProperties", "patternProperties", "prefixItems", "minItems",
                    "maxItems", "minLength", "maxLength", "multipleOf", "minProperties", "maxProperties"
                ].contains(k) {
                    out[k] = v
                }
            // Anything else is an unknown keyword: an annotation.
            }
        }
        return out
    }

    static func numericEqual(_ a: JSONValue, _ b: JSONValue) -> Bool {
        switch (a, b) {
        case (.integer, .double), (.double, .integer), (.double, .double), (.integer, .integer):
            return a.doubleValue == b.doubleValue && (a.intValue == nil) == (b.intValue == nil)
        case (.string(let x), .string(let y)):
            // Code points, not canonical equivalence.
            return x.unicodeScalars.elementsEqual(y.unicodeScalars)
        case (.array(let x), .array(let y)): return x.count == y.count && zip(x, y).allSatisfy { numericEqual($0, $1) }
        case (.object(let x), .object(let y)):
            return x.count == y.count && x.keys.allSatisfy { k in y[k].map { numericEqual(x[k]!, $0) } ?? false }
        default: return a == b
        }
    }

    func intersectEnums(_ a: [JSONValue], _ b: [JSONValue]) -> [JSONValue] {
        a.filter { x in b.contains { SchemaCompiler.numericEqual(x, $0) } }
    }

    func allOf2(_ x: JSONValue, _ y: JSONValue) -> JSONValue {
        if x == .bool(true) || x == y { return y }
        if y == .bool(true) { return x }
        return .object(JSONObject([("allOf", .array([x, y]))]))
    }

    func merge(_ a: Flat, _ bb: Flat) throws(SchemaError) -> Flat {
        guard var x = a, let y = bb else { return nil }
        // One side's additionalProperties judges the keys that *its* properties and patterns do
        // not name; the other side's patternProperties would change that set.
        let apX = x["additionalProperties"], apY = y["additionalProperties"]
        let ppX = x["patternProperties"], ppY = y["patternProperties"]
        if (ppX != nil && apY != nil && apY != .bool(true)) || (ppY != nil && apX != nil && apX != .bool(true)),
            !(ppX == ppY && apX == apY && x["properties"] == y["properties"])
        {
            throw .unsupported("allOf", "patternProperties beside another subschema's additionalProperties")
        }
        // Arrays: element i is constrained by each side's prefixItems[i], or its items beyond.
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
        let original = x
        for (k, v) in y {
            if k == "prefixItems" || k == "items" { continue }
            guard let old = x[k] else {
                x[k] = v
                continue
            }
            switch k {
            case "type":
                var set: [JSONValue] = []
                for t in old.arrayValue! {
                    if y["type"]!.arrayValue!.contains(t) {
                        set.append(t)
                    } else if t == "integer", v.arrayValue!.contains("number") {
                        set.append(t)
                    } else if t == "number", v.arrayValue!.contains("integer") {
                        set.append("integer")
                    }
                }
                x[k] = .array(set)
            case "enum": x[k] = .array(intersectEnums(old.arrayValue!, v.arrayValue!))
            case "x-anyOf", "x-oneOf", "x-patterns", "x-formats", "x-not", "x-ite", "x-propertyNames", "x-contains", "x-someExtra":
                x[k] = .array(old.arrayValue! + v.arrayValue!)
            case "required":
                var r = old.arrayValue!
                for n in v.arrayValue ?? [] where !r.contains(n) { r.append(n) }
                x[k] = .array(r)
            case "minLength", "minItems", "minProperties", "minimum", "exclusiveMinimum":
                x[k] = (old.doubleValue ?? 0) >= (v.doubleValue ?? 0) ? old : v
            case "maxLength", "maxItems", "maxProperties", "maximum", "exclusiveMaximum":
                x[k] = (old.doubleValue ?? 0) <= (v.doubleValue ?? 0) ? old : v
            case "uniqueItems": break
            case "additionalProperties":
                x[k] = allOf2(old, v)
            case "properties":
                guard case .object(let po) = old, case .object(let pv) = v else { throw .invalid("properties must be an object") }
                if original["patternProperties"] != nil || y["patternProperties"] != nil {
                    throw .unsupported("allOf", "merging properties together with patternProperties")
                }
                var merged = JSONObject()
                let addX = original["additionalProperties"], addY = y["additionalProperties"]
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
                x[k] = .object(merged)
            case "multipleOf":
                guard let p = old.intValue, let q = v.intValue, p > 0, q > 0 else {
                    if old == v { continue }
                    throw .unsupported("multipleOf", "merging non-integer divisors")
                }
                var g = p, h = q
                while h != 0 { (g, h) = (h, g % h) }
                x[k] = .integer(p / g * q)
            default:
                if old != v { throw .unsupported("allOf", "cannot merge two values of '\(k)'") }
            }
        }
        // Properties declared on one side only are still subject to the other side's
        // additionalProperties (handled above when both have properties).
        if (a?["properties"] == nil) != (bb?["properties"] == nil) {
            let withProps = a?["properties"] != nil ? a! : bb!
            let other = a?["properties"] != nil ? bb! : a!
            if let add = other["additionalProperties"], add != .bool(true), case .object(let po)? = withProps["properties"] {
                if other["patternProperties"] != nil { throw .unsupported("allOf", "merging properties with patternProperties") }
                var merged = JSONObject()
                for (name, s) in po { merged[name] = .object(JSONObject([("allOf", .array([s, add]))])) }
                x["properties"] = .object(merged)
            }
        }
        return x
    }

    // MARK: Alternatives for a flat schema

    func alternatives(_ flat: Flat, base: String) throws(SchemaError) -> [[GrammarBuilder.Symbol]] {
        guard var f = flat else { return [] }
        // `not`: where the negation is expressible as a union of positive schemas, it becomes an
        // anyOf group; the remaining forms are handled (or refused) per type below.
        if let nots = f["x-not"]?.arrayValue {
            var keep: [JSONValue] = []
            var groups = f["x-anyOf"]?.arrayValue ?? []
            for n in nots {
                // Forms negated natively by the string/literal terminals.
                if case .object(let o) = n {
                    let keys = Set(o.keys.filter { SchemaCompiler.validationKeywords.contains($0) })
                    if keys == ["pattern"] || keys == ["enum"] || keys == ["const"] {
                        keep.append(n)
                        continue
                    }
                }
                if let branches = try negate(n, base: base, depth: 0) {
                    if branches.isEmpty { return [] }
                    groups.append(.array(branches))
                } else {
                    keep.append(n)
                }
            }
            f["x-not"] = keep.isEmpty ? nil : .array(keep)
            if !groups.isEmpty { f["x-anyOf"] = .array(groups) }
        }
        // if/then/else: anyOf [allOf [if, then], allOf [not if, else]].
        if let ites = f["x-ite"]?.arrayValue {
            f["x-ite"] = nil
            var groups = f["x-anyOf"]?.arrayValue ?? []
            for ite in ites {
                let parts = ite.arrayValue!
                guard let notIf = try negate(parts[0], base: base, depth: 0) else {
                    throw .unsupported("if", "the negation of this 'if' cannot be expressed")
                }
                var branches: [JSONValue] = [.object(JSONObject([("allOf", .array([parts[0], parts[1]]))]))]
                if !notIf.isEmpty {
                    branches.append(.object(JSONObject([("allOf", .array([.object(JSONObject([("anyOf", .array(notIf))])), parts[2]]))])))
                }
                groups.append(.array(branches))
            }
            f["x-anyOf"] = .array(groups)
        }
        // Distribute anyOf / oneOf.
        let anyGroups = f["x-anyOf"]?.arrayValue ?? []
        let oneGroups = f["x-oneOf"]?.arrayValue ?? []
        if !anyGroups.isEmpty || !oneGroups.isEmpty {
            f["x-anyOf"] = nil
            f["x-oneOf"] = nil
            var combos: [Flat] = [f]
            for (gi, g) in (anyGroups + oneGroups).enumerated() {
                let isOne = gi >= anyGroups.count
                var branches: [Flat] = []
                for s in g.arrayValue! { branches.append(try flatten(s, base: base, depth: 1)) }
                var next: [Flat] = []
                var exact: [Flat]?
                for c in combos {
                    var merged: [Flat] = []
                    for br in branches { merged.append(try merge(c, br)) }
                    if isOne && !options.oneOfAsAnyOf {
                        var overlap: (Int, Int)?
                        for i in 0..<merged.count where overlap == nil {
                            for j in (i + 1)..<max(i + 1, merged.count) where overlap == nil {
                                if !disjoint(merged[i], merged[j], base: base, depth: 0) { overlap = (i, j) }
                            }
                        }
                        if let (i, j) = overlap {
                            // Not provably exclusive: branch i and none of the others.
                            if exact == nil { exact = try oneOfExactBranches(g.arrayValue!, base: base, overlap: (i, j)) }
                            merged = []
                            for br in exact! { merged.append(try merge(c, br)) }
                        }
                    }
                    next += merged.filter { $0 != nil }
                }
                combos = next
                if combos.count > 2048 { throw .unsupported("anyOf", "too many combinations of anyOf/oneOf/allOf") }
            }
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

    static let validationKeywords: Set<String> = [
        "type", "enum", "const", "properties", "required", "additionalProperties", "patternProperties", "items",
        "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "minLength", "maxLength", "pattern",
        "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "anyOf", "oneOf",
        "allOf", "not", "$ref", "minProperties", "maxProperties", "if", "then", "else", "propertyNames",
        "unevaluatedProperties", "unevaluatedItems", "contains", "minContains", "maxContains", "dependentRequired",
        "dependentSchemas", "dependencies", "$dynamicRef", "$recursiveRef", "x-fractional", "x-someExtra"
    ]

    func typed(_ t: String, _ pairs: [(String, JSONValue)]) -> JSONValue {
        .object(JSONObject([("type", .array([.string(t)]))] + pairs))
    }

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
                let (target, tbase) = try resolveRef(ref, base: base)
                guard tbase == base else { return nil }
                return try negate(target, base: base, depth: depth + 1)
            }
            var branches: [JSONValue] = []
            for (k, v) in o where SchemaCompiler.validationKeywords.contains(k) || alwaysUnsupported.contains(k) {
                switch k {
                case "type":
                    let ts = v.stringValue.map { [$0] } ?? v.arrayValue?.compactMap(\.stringValue) ?? []
                    var rest = Set(SchemaCompiler.allTypes).subtracting(ts)
                    if ts.contains("number") { rest.remove("integer") }
                    if ts.contains("integer") && rest.contains("number") {
                        // Non-integer numbers: handled by the number terminal (`not integer`).
                        rest.remove("number")
                        branches.append(typed("number", [("x-fractional", .bool(true))]))
                    }
                    if rest.contains("number") { rest.remove("integer") }
                    if !rest.isEmpty {
                        branches.append(
                            .object(JSONObject([("type", .array(SchemaCompiler.allTypes.filter(rest.contains).map { .string($0) }))])))
                    }
                case "maxLength":
                    guard let m = v.intValue else { return nil }
                    branches.append(typed("string", [("minLength", .integer(m + 1))]))
                case "minLength":
                    guard let m = v.intValue else { return nil }
                    if m > 0 { branches.append(typed("string", [("maxLength", .integer(m - 1))])) }
                case "maxItems":
                    guard let m = v.intValue else { return nil }
                    branches.append(typed("array", [("minItems", .integer(m + 1))]))
                case "minItems":
                    guard let m = v.intValue else { return nil }
                    if m > 0 { branches.append(typed("array", [("maxItems", .integer(m - 1))])) }
                case "minProperties":
                    guard let m = v.intValue else { return nil }
                    if m >= 1 { branches.append(typed("object", [("maxProperties", .integer(m - 1))])) }
                case "maxProperties":
                    guard let m = v.intValue else { return nil }
                    branches.append(typed("object", [("minProperties", .integer(m + 1))]))
                case "maximum": branches.append(typed("number", [("exclusiveMinimum", v)]))
                case "minimum": branches.append(typed("number", [("exclusiveMaximum", v)]))
                case "exclusiveMaximum":
                    guard v.doubleValue != nil else { return nil }
                    branches.append(typed("number", [("minimum", v)]))
                case "exclusiveMinimum":
                    guard v.doubleValue != nil else { return nil }
                    branches.append(typed("number", [("maximum", v)]))
                case "required":
                    let names = v.arrayValue?.compactMap(\.stringValue) ?? []
                    if names.isEmpty { continue }
                    for name in names { branches.append(typed("object", [("properties", .object(JSONObject([(name, .bool(false))])))])) }
                case "pattern":
                    branches.append(typed("string", [("not", .object(JSONObject([("pattern", v)])))]))
                case "enum", "const":
                    let vals = k == "const" ? [v] : (v.arrayValue ?? [])
                    guard vals.allSatisfy({ $0.stringValue != nil || $0 == .null || $0.boolValue != nil }) else { return nil }
                    branches.append(.object(JSONObject([("not", .object(JSONObject([("enum", .array(vals))])))])))
                case "properties":
                    // Some listed property is present and violates its schema.
                    guard case .object(let props) = v else { return nil }
                    for (name, sub) in props {
                        if sub == .bool(true) || sub == .object(JSONObject()) { continue }
                        branches.append(
                            typed(
                                "object",
                                [
                                    ("required", .array([.string(name)])),
                                    ("properties", .object(JSONObject([(name, .object(JSONObject([("not", sub)])))])))
                                ]))
                    }
                case "additionalProperties":
                    if v == .bool(true) || v == .object(JSONObject()) { continue }
                    // Some key that `properties` and `patternProperties` do not name has a value
                    // violating it.
                    let names = (o["properties"]?.objectValue?.keys ?? []).map { JSONValue.string($0) }
                    let patterns = (o["patternProperties"]?.objectValue?.keys ?? []).map { JSONValue.string($0) }
                    branches.append(
                        typed(
                            "object",
                            [
                                (
                                    "x-someExtra",
                                    .object(
                                        JSONObject([
                                            ("names", .array(names)), ("patterns", .array(patterns)),
                                            ("schema", .object(JSONObject([("not", v)])))
                                        ]))
                                )
                            ]))
                case "contains":
                    // No element matches (minContains/maxContains change the meaning).
                    if o["minContains"] != nil || o["maxContains"] != nil { return nil }
                    branches.append(typed("array", [("items", .object(JSONObject([("not", v)])))]))
                case "minContains", "maxContains":
                    if o["contains"] == nil { continue }
                    return nil
                case "items":
                    if v == .bool(true) || v == .object(JSONObject()) { continue }
                    if o["prefixItems"] == nil, v.arrayValue == nil, v != .bool(false) {
                        // Some element violates the item schema.
                        branches.append(typed("array", [("contains", .object(JSONObject([("not", v)])))]))
                        continue
                    }
                    guard v == .bool(false) else { return nil }
                    branches.append(typed("array", [("minItems", .integer(1))]))
                case "not": branches.append(v)
                case "allOf":
                    for item in v.arrayValue ?? [] {
                        guard let b = try negate(item, base: base, depth: depth + 1) else { return nil }
                        branches += b
                    }
                case "anyOf":
                    var parts: [JSONValue] = []
                    var isFalse = false
                    for item in v.arrayValue ?? [] {
                        guard let b = try negate(item, base: base, depth: depth + 1) else { return nil }
                        if b.isEmpty { isFalse = true }
                        parts.append(.object(JSONObject([("anyOf", .array(b))])))
                    }
                    if !isFalse { branches.append(.object(JSONObject([("allOf", .array(parts))]))) }
                default:
                    return nil
                }
            }
            return branches
        default:
            return nil
        }
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
            out.append(try flatten(.object(JSONObject([("allOf", .array(parts))])), base: base, depth: 1))
        }
        return out
    }

    static let allTypes: [String] = ["null", "boolean", "integer", "number", "string", "array", "object"]

    func effectiveTypes(_ f: JSONObject) -> Set<String> {
        var t = Set(f["type"]?.arrayValue?.compactMap(\.stringValue) ?? SchemaCompiler.allTypes)
        if t.contains("number") { t.insert("integer") }
        if let e = f["enum"]?.arrayValue {
            var et = Set<String>()
            for v in e { et.formUnion(SchemaCompiler.types(of: v)) }
            t.formIntersection(et)
        }
        return t
    }

    static func types(of v: JSONValue) -> Set<String> {
        switch v {
        case .null: return ["null"]
        case .bool: return ["boolean"]
        case .integer: return ["integer", "number"]
        case .double(let d): return d.rounded() == d ? ["integer", "number"] : ["number"]
        case .string: return ["string"]
        case .array: return ["array"]
        case .object: return ["object"]
        }
    }

    /// A sound (incomplete) test that no value satisfies both schemas.
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
        if let ea = a["enum"]?.arrayValue, let ec = c["enum"]?.arrayValue, intersectEnums(ea, ec).isEmpty { return true }
        return common.allSatisfy { disjoint(a, c, type: $0, base: base, depth: depth) }
    }

    func disjoint(_ a: JSONObject, _ c: JSONObject, type: String, base: String, depth: Int) -> Bool {
        switch type {
        case "string":
            // Enumerated strings against the other side's constraints, or content DFAs and lengths.
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
            let sa = specA, sc = specC
            let lo = max(sa.minLength, sc.minLength)
            if let hi = [sa.maxLength, sc.maxLength].compactMap({ $0 }).min(), hi < lo { return true }
            if let da = sa.dfa, let dc = sc.dfa, da.intersection(dc) == nil { return true }
            return false
        case "integer", "number":
            func range(_ f: JSONObject) -> (lo: Double, loX: Bool, hi: Double, hiX: Bool) {
                var r = (lo: -Double.infinity, loX: false, hi: Double.infinity, hiX: false)
                if let m = f["minimum"]?.doubleValue, m > r.lo {
                    r.lo = m
                    r.loX = false
                }
                if let m = f["exclusiveMinimum"]?.doubleValue, m >= r.lo {
                    r.lo = m
                    r.loX = true
                }
                if let m = f["maximum"]?.doubleValue, m < r.hi {
                    r.hi = m
                    r.hiX = false
                }
                if let m = f["exclusiveMaximum"]?.doubleValue, m <= r.hi {
                    r.hi = m
                    r.hiX = true
                }
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
        case "array":
            let lo = max(a["minItems"]?.intValue ?? 0, c["minItems"]?.intValue ?? 0)
            if let hi = [a["maxItems"]?.intValue, c["maxItems"]?.intValue].compactMap({ $0 }).min(), hi < lo { return true }
            // Both non-empty, and their first elements are disjoint.
            if lo >= 1 {
                func first(_ f: JSONObject) -> JSONValue { f["prefixItems"]?.arrayValue?.first ?? f["items"] ?? .bool(true) }
                if let fa = try? flatten(first(a), base: base, depth: 1), let fc = try? flatten(first(c), base: base, depth: 1),
                    disjoint(fa, fc, base: base, depth: depth + 1)
                {
                    return true
                }
            }
            return false
        case "object":
            let ra = Set(a["required"]?.arrayValue?.compactMap(\.stringValue) ?? [])
            let rc = Set(c["required"]?.arrayValue?.compactMap(\.stringValue) ?? [])
            func forbids(_ s: JSONObject, _ name: String) -> Bool {
                if let p = s["properties"]?[name] { return p == .bool(false) }
                return s["additionalProperties"] == .bool(false) && s["patternProperties"] == nil
            }
            for n in ra where forbids(c, n) { return true }
            for n in rc where forbids(a, n) { return true }
            for n in ra.intersection(rc) {
                if let pa = a["properties"]?[n], let pc = c["properties"]?[n],
                    let fa = try? flatten(pa, base: base, depth: 1), let fc = try? flatten(pc, base: base, depth: 1),
                    disjoint(fa, fc, base: base, depth: depth + 1)
                {
                    return true
                }
            }
            return false
        default:
            return false
        }
    }

    func typedAlternatives(_ f: JSONObject, base: String) throws(SchemaError) -> [[GrammarBuilder.Symbol]] {
        var types = Set(f["type"]?.arrayValue?.compactMap(\.stringValue) ?? SchemaCompiler.allTypes)
        if types.contains("number") { types.remove("integer") }
        // not
        var notPatterns: [String] = []
        var notStrings: [String] = []
        var notLiterals: [JSONValue] = []
        var fractionalOnly = f["x-fractional"] == .bool(true)
        if fractionalOnly {
            types.remove("integer")
            if !types.contains("number") { fractionalOnly = false }
        }
        for n in f["x-not"]?.arrayValue ?? [] {
            switch n {
            case .bool(true): return []
            case .bool(false): continue
            case .object(let o):
                let keys = o.keys.filter { !knownAnnotationKeys.contains($0) }
                if keys.isEmpty { return [] }
                if keys == ["type"] {
                    let ts = o["type"]!.stringValue.map { [$0] } ?? o["type"]!.arrayValue?.compactMap(\.stringValue) ?? []
                    for t in ts {
                        types.remove(t)
                        if t == "number" { types.remove("integer") }
                        if t == "integer" && types.contains("number") { fractionalOnly = true }
                    }
                } else if keys == ["pattern"], case .string(let p)? = o["pattern"] {
                    // Every non-string satisfies `pattern`, so `not pattern` leaves strings only.
                    notPatterns.append(p)
                    types = types.intersection(["string"])
                } else if keys == ["enum"] || keys == ["const"] {
                    let vals = o["enum"]?.arrayValue ?? [o["const"]!]
                    for v in vals {
                        switch v {
                        case .string(let s): notStrings.append(s)
                        case .null, .bool: notLiterals.append(v)
                        default: throw .unsupported("not", "not of a non-string, non-literal enum")
                        }
                    }
                } else {
                    throw .unsupported("not")
                }
            default: throw .invalid("not must be a schema")
            }
        }
        if let e = f["enum"] {
            var rest = f
            rest["enum"] = nil
            var values = e.arrayValue!
            if fractionalOnly { values.removeAll { $0.intValue != nil } }
            return try enumAlternatives(
                values, rest: rest, types: types, notStrings: notStrings, notLiterals: notLiterals, notPatterns: notPatterns, base: base)
        }
        var alts: [[GrammarBuilder.Symbol]] = []
        for t in SchemaCompiler.allTypes where types.contains(t) {
            switch t {
            case "null": if !notLiterals.contains(.null) { alts.append([b.literal(options.literalStyle.null)]) }
            case "boolean":
                if !notLiterals.contains(.bool(true)) { alts.append([b.literal(options.literalStyle.bool(true))]) }
                if !notLiterals.contains(.bool(false)) { alts.append([b.literal(options.literalStyle.bool(false))]) }
            case "integer", "number":
                if let spec = try numberSpec(f, integer: t == "integer", fractionalOnly: fractionalOnly),
                    !(spec.integerOnly && spec.fractionalOnly)
                {
                    alts.append([b.terminal(.number(spec))])
                }
            case "string":
                if let spec = try stringSpec(f, notPatterns: notPatterns, notStrings: notStrings) {
                    alts.append([b.terminal(.string(spec))])
                }
            case "array": alts += try arrayAlternatives(f, base: base)
            case "object": alts += try objectAlternatives(f, base: base)
            default: break
            }
        }
        return alts
    }

    // MARK: enum

    func enumAlternatives(
        _ values: [JSONValue], rest: JSONObject, types: Set<String>, notStrings: [String], notLiterals: [JSONValue],
        notPatterns: [String], base: String
    ) throws(SchemaError) -> [[GrammarBuilder.Symbol]] {
        var kept: [JSONValue] = []
        var seenStrings = Set<[Unicode.Scalar]>()
        let typeOnly = rest.keys.allSatisfy { $0 == "type" }
        var checker: GrammarMatcher?
        if !typeOnly {
            var restNoNot = rest
            restNoNot["x-not"] = nil
            var sub = GrammarBuilder()
            // The checker reads the values' compact JSON serialization, whatever the output style.
            var checkOptions = options
            checkOptions.literalStyle = .json
            let c = SchemaCompiler(root: root, options: checkOptions, builder: sub)
            c.resources = resources
            c.anchors = anchors
            c.rootBase = rootBase
            let sym = c.b.rule("enum-check", try c.alternatives(restNoNot, base: base))
            sub = c.b
            if let g = try? sub.build(root: sym) { checker = GrammarMatcher(grammar: g) } else { return [] }
        }
        for v in values {
            if !SchemaCompiler.types(of: v).contains(where: { types.contains($0) || ($0 == "integer" && types.contains("number")) }) {
                continue
            }
            if case .string(let s) = v, notStrings.contains(s) { continue }
            if notLiterals.contains(v) { continue }
            if case .string(let s) = v, !notPatterns.isEmpty {
                var bad = false
                for p in notPatterns { if let d = try patternDFA(p, lenient: true), d.accepts(s) { bad = true } }
                if bad { continue }
            }
            if let m = checker {
                m.reset()
                if !(m.accept(v.serialized(.compact)) && m.canAcceptEnd) { continue }
            }
            if case .string(let str) = v {
                if seenStrings.insert(Array(str.unicodeScalars)).inserted { kept.append(v) }
            } else if !kept.contains(where: { SchemaCompiler.numericEqual($0, v) }) {
                kept.append(v)
            }
        }
        var alts: [[GrammarBuilder.Symbol]] = []
        let strings = kept.compactMap(\.stringValue)
        if !strings.isEmpty, let dfa = CodePointDFA.literals(strings) {
            alts.append([b.terminal(.string(StringSpec(dfa: dfa)))])
        }
        for v in kept where v.stringValue == nil { alts.append([valueLiteral(v)]) }
        return alts
    }

    /// A rule for exactly this JSON value (whitespace allowed between tokens; object keys in the given order).
    func valueLiteral(_ v: JSONValue) -> GrammarBuilder.Symbol {
        switch v {
        case .null: return b.literal(options.literalStyle.null)
        case .bool(let x): return b.literal(options.literalStyle.bool(x))
        case .integer(let i): return b.rule("num", [[b.literal(String(i))], [b.literal("\(i).0")]])
        case .double(let d):
            if d.rounded() == d, abs(d) < 1e15 {
                let i = Int(d)
                return b.rule("num", [[b.literal(String(i))], [b.literal("\(i).0")]])
            }
            return b.literal(JSONValue.pythonFloatRepr(d))
        case .string(let s):
            guard let dfa = CodePointDFA.literals([s]) else { return b.literal(v.serialized(.compact)) }
            return b.terminal(.string(StringSpec(dfa: dfa)))
        case .array(let a):
            if a.isEmpty { return b.rule("arr", [[b.literal("["), ws, b.literal("]")]]) }
            var seq: [GrammarBuilder.Symbol] = [b.literal("["), ws]
            for (i, x) in a.enumerated() {
                if i > 0 { seq += [ws, b.literal(","), ws] }
                seq.append(valueLiteral(x))
            }
            seq += [ws, b.literal("]")]
            return b.rule("arr", [seq])
        case .object(let o):
            if o.isEmpty { return b.rule("obj", [[b.literal("{"), ws, b.literal("}")]]) }
            var seq: [GrammarBuilder.Symbol] = [b.literal("{"), ws]
            for (i, (k, x)) in o.enumerated() {
                if i > 0 { seq += [ws, b.literal(","), ws] }
                seq += [b.literal(JSONValue.string(k).serialized(.compact)), ws, b.literal(":"), ws, valueLiteral(x)]
            }
            seq += [ws, b.literal("}")]
            return b.rule("obj", [seq])
        }
    }

    // MARK: numbers

    func numberSpec(_ f: JSONObject, integer: Bool, fractionalOnly: Bool = false) throws(SchemaError) -> NumberSpec? {
        var spec = NumberSpec(integerOnly: integer)
        spec.fractionalOnly = fractionalOnly
        spec.plainIntegers = options.plainIntegers
        if let m = f["multipleOf"] {
            guard let d = m.doubleValue, d > 0 else { throw .invalid("multipleOf must be a positive number") }
            if let k = m.intValue, k > 0 {
                if k > 1 { spec.multipleOf = Int64(k) }
                spec.integerOnly = true
            } else if integer, (1 / d).rounded() == 1 / d {
                // every integer is a multiple of 1/n
            } else {
                throw .unsupported("multipleOf", "a non-integer multipleOf (\(d))")
            }
        }
        func bound(_ key: String, lower: Bool, exclusive: Bool) throws(SchemaError) -> NumberBound? {
            guard let v = f[key] else { return nil }
            if case .integer(let i) = v { return NumberBound(value: Int64(i), exclusive: exclusive) }
            guard let d = v.doubleValue else { throw .invalid("\(key) must be a number") }
            if d.rounded() == d {
                guard abs(d) < 9.2e18 else { throw .unsupported(key, "bound \(d) beyond the 64-bit range") }
                return NumberBound(value: Int64(d), exclusive: exclusive)
            }
            guard spec.integerOnly else { throw .unsupported(key, "non-integer bound \(d) on a number") }
            guard abs(d) < 9.2e18 else { throw .unsupported(key, "bound \(d) beyond the 64-bit range") }
            // On integers: x >= 2.5 <=> x >= 3; x <= 2.5 <=> x <= 2 (exclusive or not).
            return NumberBound(value: Int64(lower ? d.rounded(.up) : d.rounded(.down)), exclusive: false)
        }
        func tighter(_ x: NumberBound?, _ y: NumberBound?, lower: Bool) -> NumberBound? {
            guard let x else { return y }
            guard let y else { return x }
            if x.value != y.value { return (x.value > y.value) == lower ? x : y }
            return x.exclusive ? x : y
        }
        // Numbers with a non-integer bound: exact decimal comparison.
        let boundKeys = ["minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"]
        if !spec.integerOnly, boundKeys.contains(where: { k in f[k].map { $0.intValue == nil } ?? false }) {
            func signed(_ key: String) throws(SchemaError) -> (Bool, Dec)? {
                guard let v = f[key] else { return nil }
                let text: String
                switch v {
                case .integer(let i): text = String(i)
                case .double(let d) where d.isFinite: text = "\(d)"
                default: throw .invalid("\(key) must be a number")
                }
                guard let dec = Dec(text: text) else { throw .unsupported(key, "bound \(text) out of the supported range") }
                return (text.hasPrefix("-") && (dec.int != 0 || !dec.frac.isEmpty), dec)
            }
            func less(_ a: (Bool, Dec), _ b: (Bool, Dec)) -> Bool {
                if a.0 != b.0 { return a.0 }
                return a.0 ? b.1 < a.1 : a.1 < b.1
            }
            func pick(_ inc: (Bool, Dec)?, _ exc: (Bool, Dec)?, lower: Bool) -> ((Bool, Dec)?, Bool) {
                guard let inc else { return (exc, exc != nil) }
                guard let exc else { return (inc, false) }
                if inc.0 == exc.0 && inc.1 == exc.1 { return (exc, true) }
                return less(inc, exc) == lower ? (exc, true) : (inc, false)
            }
            let (lo, loStrict) = pick(try signed("minimum"), try signed("exclusiveMinimum"), lower: true)
            let (hi, hiStrict) = pick(try signed("maximum"), try signed("exclusiveMaximum"), lower: false)
            let db = DecimalBounds(lo: lo, loStrict: loStrict, hi: hi, hiStrict: hiStrict)
            if db.positive.impossible && db.negative.impossible { return nil }
            spec.decimal = db
            return spec
        }
        spec.minimum = tighter(
            try bound("minimum", lower: true, exclusive: false), try bound("exclusiveMinimum", lower: true, exclusive: true), lower: true)
        spec.maximum = tighter(
            try bound("maximum", lower: false, exclusive: false), try bound("exclusiveMaximum", lower: false, exclusive: true), lower: false
        )
        // Empty range?
        if !NumberLexer.feasible(spec, LexState()) { return nil }
        return spec
    }

    // MARK: strings

    /// `^(?=...)(?!...)rest`: lookaheads at the very start of an anchored pattern whose rest has
    /// no top-level alternation. Returns nil for any other shape.
    static func leadingLookaheads(_ p: String) -> ([(Bool, String)], String)? {
        let c = Array(p.unicodeScalars)
        guard c.count > 4, c[0] == "^", c[1] == "(", c[2] == "?", c[3] == "!" || c[3] == "=" else { return nil }
        var looks: [(Bool, String)] = []
        var i = 1
        while i + 2 < c.count, c[i] == "(", c[i + 1] == "?", c[i + 2] == "!" || c[i + 2] == "=" {
            let negative = c[i + 2] == "!"
            var depth = 1, j = i + 3, inClass = false
            while j < c.count && depth > 0 {
                if c[j] == "\\" {
                    j += 2
                    continue
                }
                if inClass {
                    if c[j] == "]" { inClass = false }
                } else if c[j] == "[" {
                    inClass = true
                } else if c[j] == "(" {
                    depth += 1
                } else if c[j] == ")" {
                    depth -= 1
                    if depth == 0 { break }
                }
                j += 1
            }
            guard j < c.count, depth == 0 else { return nil }
            looks.append((negative, String(String.UnicodeScalarView(c[(i + 3)..<j]))))
            i = j + 1
        }
        let rest = String(String.UnicodeScalarView(c[i...]))
        if ["(?=", "(?!", "(?<=", "(?<!"].contains(where: { rest.contains($0) }) { return nil }
        guard let node = try? RegexParser.parse("^" + rest) else { return nil }
        if case .alt = node { return nil }
        return (looks, rest)
    }

    /// A pattern's DFA: `lenient` for negated uses (see `RegexCompiler.compilePattern`).
    func patternDFA(_ p: String, lenient: Bool = false) throws(SchemaError) -> CodePointDFA? {
        let key = lenient ? "\u{0}lenient:" + p : p
        if let d = patternCache[key] { return d }
        do {
            let d: CodePointDFA?
            if let (looks, rest) = SchemaCompiler.leadingLookaheads(p) {
                // ^(?=Z)(?!X)Y: Y, and Z, and not X, all from the start of the string.
                var acc = try RegexCompiler.compilePattern("^" + rest, lenientDollar: lenient)
                for (negative, body) in looks where acc != nil {
                    guard let part = try RegexCompiler.compilePattern("^(?:" + body + ")", lenientDollar: negative ? !lenient : lenient)
                    else {
                        if !negative { acc = nil }
                        continue
                    }
                    guard let side = negative ? part.complement() : part else {
                        acc = nil
                        continue
                    }
                    acc = acc!.intersection(side)
                }
                d = acc
            } else {
                d = try RegexCompiler.compilePattern(p, lenientDollar: lenient)
            }
            patternCache[key] = d
            return d
        } catch {
            throw .unsupported("pattern", "\(error.message) in /\(p)/")
        }
    }

    /// `lenient`: patterns read with Python's `$` too (a superset: for disjointness proofs).
    func stringSpec(_ f: JSONObject, notPatterns: [String], notStrings: [String], lenient: Bool = false) throws(SchemaError) -> StringSpec?
    {
        var spec = StringSpec()
        if let v = f["minLength"] {
            guard let n = v.intValue, n >= 0 else { throw .invalid("minLength must be a non-negative integer") }
            spec.minLength = n
        }
        if let v = f["maxLength"] {
            guard let n = v.intValue, n >= 0 else { throw .invalid("maxLength must be a non-negative integer") }
            spec.maxLength = n
        }
        if let m = spec.maxLength, m < spec.minLength { return nil }
        var dfa: CodePointDFA?
        func and(_ d: CodePointDFA?) -> Bool {
            guard let d else { return false }
            if let cur = dfa {
                dfa = cur.intersection(d)
                return dfa != nil
            }
            dfa = d
            return true
        }
        for p in f["x-patterns"]?.arrayValue ?? [] { if !and(try patternDFA(p.stringValue!, lenient: lenient)) { return nil } }
        // (Formats are left out of the lenient reading: validators' format checkers may be laxer.)
        for fm in lenient ? [] : f["x-formats"]?.arrayValue ?? [] {
            guard let d = Formats.compiled[fm.stringValue!] else { throw .unsupported("format", "format '\(fm.stringValue!)'") }
            if !and(d) { return nil }
        }
        for p in notPatterns {
            guard let d = try patternDFA(p, lenient: true) else { continue }
            if !and(d.complement()) { return nil }
        }
        if !notStrings.isEmpty, let lit = CodePointDFA.literals(notStrings) { if !and(lit.complement()) { return nil } }
        spec.dfa = dfa
        if let d = dfa, let m = spec.maxLength, Int(d.minToAccept[Int(d.start)]) > m { return nil }
        if let d = dfa, d.maxToAccept[Int(d.start)] != Int32.max, Int(d.maxToAccept[Int(d.start)]) < spec.minLength { return nil }
        return spec
    }

    // MARK: arrays

    func arrayAlternatives(_ f: JSONObject, base: String) throws(SchemaError) -> [[GrammarBuilder.Symbol]] {
        let prefix = f["prefixItems"]?.arrayValue ?? []
        let items = f["items"] ?? .bool(true)
        let minItems = f["minItems"]?.intValue ?? 0
        var maxItems = f["maxItems"]?.intValue
        if items == .bool(false) { maxItems = min(maxItems ?? prefix.count, prefix.count) }
        if let m = maxItems, m < minItems { return [] }
        if f["uniqueItems"] == .bool(true), (maxItems ?? 2) > 1 { throw .unsupported("uniqueItems") }
        let unrolled = max(prefix.count, minItems)
        if let m = maxItems, m > 5000 {
            maxItems = nil
            if m < unrolled { return [] }
        }
        if let m = maxItems, m > 1000 { throw .unsupported("maxItems", "maxItems \(m) is too large to unroll") }
        if minItems > 1000 { throw .unsupported("minItems", "minItems \(minItems) is too large to unroll") }
        // contains / minContains / maxContains: count the elements that match, up to `cap`.
        var containsSchema: JSONValue?
        var minContains = 0, maxContains: Int?
        if let cs = f["x-contains"]?.arrayValue {
            guard cs.count == 1 else { throw .unsupported("contains", "several contains constraints on one array") }
            containsSchema = cs[0]
            minContains = f["x-minContains"]?.intValue ?? 1
            maxContains = f["x-maxContains"]?.intValue
            if let m = maxContains, m < minContains { return [] }
            if let m = maxItems, m < minContains { return [] }
        }
        let cap = containsSchema == nil ? 0 : (maxContains ?? minContains)
        func itemSchema(_ i: Int) -> JSONValue { i < prefix.count ? prefix[i] : items }
        /// The ways to write element i: (rule, whether it counts as matching `contains`).
        func choices(_ i: Int) throws(SchemaError) -> [(GrammarBuilder.Symbol, Bool)] {
            guard let c = containsSchema else { return [(try compileNode(itemSchema(i), base: base), false)] }
            let matching = try compileNode(.object(JSONObject([("allOf", .array([itemSchema(i), c]))])), base: base)
            // Without maxContains, a matching element may also be counted as not matching
            // (undercounting only makes acceptance harder); with it, it must not match.
            let other: JSONValue =
                maxContains == nil
                ? itemSchema(i)
                : .object(JSONObject([("allOf", .array([itemSchema(i), .object(JSONObject([("not", c)]))]))]))
            return [(matching, true), (try compileNode(other, base: base), false)]
        }
        let open = b.literal("["), close = b.literal("]"), comma = b.literal(",")
        // tails[i][c]: after i elements, c of them counted as matching.
        let last = max(maxItems ?? unrolled, 1)
        if (last + 1) * (cap + 1) > 5000 {
            throw .unsupported(containsSchema != nil ? "minContains" : "maxItems", "too many counted positions")
        }
        var tails: [[GrammarBuilder.Symbol]] = []
        for _ in 0...last { tails.append((0...cap).map { _ in b.declareRule("arr-tail") }) }
        func next(_ c: Int, _ counts: Bool) -> Int? {
            guard counts else { return c }
            if let m = maxContains, c + 1 > m { return nil }
            return min(c + 1, cap)
        }
        for i in 1...last {
            let opts = (maxItems.map { i < $0 } ?? true) ? try choices(i) : []
            for c in 0...cap {
                var alts: [[GrammarBuilder.Symbol]] = []
                if i >= minItems && c >= (containsSchema == nil ? 0 : minContains) { alts.append([ws, close]) }
                for (sym, counts) in opts {
                    guard let c2 = next(c, counts) else { continue }
                    let target = maxItems == nil && i == last ? tails[i][c2] : tails[i + 1][c2]
                    alts.append([ws, comma, ws, sym, target])
                }
                b.define(tails[i][c], alts)
            }
        }
        var out: [[GrammarBuilder.Symbol]] = []
        if minItems == 0 && (containsSchema == nil || minContains == 0) { out.append([open, ws, close]) }
        if maxItems != 0 {
            for (sym, counts) in try choices(0) {
                guard let c2 = next(0, counts) else { continue }
                out.append([open, ws, sym, tails[1][c2]])
            }
        }
        return out
    }

    // MARK: objects

    func objectAlternatives(_ f: JSONObject, base: String) throws(SchemaError) -> [[GrammarBuilder.Symbol]] {
        let props = f["properties"]?.objectValue ?? JSONObject()
        let required = (f["required"]?.arrayValue ?? []).compactMap(\.stringValue)
        let additional = f["additionalProperties"] ?? .bool(options.additionalPropertiesDefault)
        let patterns = f["patternProperties"]?.objectValue ?? JSONObject()
        if patterns.count > 6 { throw .unsupported("patternProperties", "more than 6 patterns") }
        var patternDFAs: [(CodePointDFA?, JSONValue)] = []
        var lenientDFAs: [CodePointDFA?] = []
        for (p, s) in patterns {
            patternDFAs.append((try patternDFA(p), s))
            lenientDFAs.append(try patternDFA(p, lenient: true))
        }
        func schemaFor(_ name: String, declared: JSONValue?) -> JSONValue {
            var parts: [JSONValue] = declared.map { [$0] } ?? []
            for (i, (_, s)) in patternDFAs.enumerated() where lenientDFAs[i]?.accepts(name) ?? false { parts.append(s) }
            if parts.isEmpty { return additional }
            return parts.count == 1 ? parts[0] : .object(JSONObject([("allOf", .array(parts))]))
        }
        var names: [String] = []
        var schemas: [JSONValue] = []
        for (n, s) in props {
            names.append(n)
            schemas.append(schemaFor(n, declared: s))
        }
        for r in required where props[r] == nil && !names.contains(r) {
            names.append(r)
            schemas.append(schemaFor(r, declared: nil))
        }
        let isRequired = names.map { required.contains($0) }
        // propertyNames: a string constraint on every key.
        var nameSpec: StringSpec?
        for p in f["x-propertyNames"]?.arrayValue ?? [] {
            guard let fp = try flatten(p, base: base, depth: 1) else {
                nameSpec = nil
                return requiredCount(names, required) == 0 && (f["minProperties"]?.intValue ?? 0) == 0 && f["x-someExtra"] == nil
                    ? [[b.literal("{"), ws, b.literal("}")]] : []
            }
            if let other = Set(fp.keys).subtracting(["type", "enum", "minLength", "maxLength", "x-patterns", "x-formats"]).first {
                throw .unsupported("propertyNames", "'\(other)' on property names")
            }
            var sp: StringSpec? = effectiveTypes(fp).contains("string") ? try stringSpec(fp, notPatterns: [], notStrings: []) : nil
            if var s = sp, let e = fp["enum"]?.arrayValue {
                let lit = CodePointDFA.literals(e.compactMap(\.stringValue))
                if let cur = s.dfa, let lit { s.dfa = cur.intersection(lit) } else { s.dfa = lit }
                sp = s.dfa == nil ? nil : s
            }
            guard let spec = sp else {
                return requiredCount(names, required) == 0 && (f["minProperties"]?.intValue ?? 0) == 0 && f["x-someExtra"] == nil
                    ? [[b.literal("{"), ws, b.literal("}")]] : []
            }
            if var cur = nameSpec {
                cur.minLength = max(cur.minLength, spec.minLength)
                if let m = spec.maxLength { cur.maxLength = min(cur.maxLength ?? m, m) }
                if let d = spec.dfa { if let c = cur.dfa { cur.dfa = c.intersection(d) } else { cur.dfa = d } }
                nameSpec = cur
            } else {
                nameSpec = spec
            }
        }
        if let ns = nameSpec {
            for (i, n) in names.enumerated() where !StringSpec.accepts(ns, n) { schemas[i] = .bool(false) }
        }
        // x-someExtra (from `not additionalProperties`): some member whose key another schema
        // does not name (not in `names`, matching none of `patterns`) must have a value
        // satisfying `schema`.
        var witness: (exclude: CodePointDFA?, value: JSONValue, names: [String], patterns: [CodePointDFA?])?
        if let someExtra = f["x-someExtra"]?.arrayValue {
            guard someExtra.count == 1, case .object(let w) = someExtra[0] else {
                throw .unsupported("not", "several negated additionalProperties on one object")
            }
            let wNames = (w["names"]?.arrayValue ?? []).compactMap(\.stringValue)
            var wPatterns: [CodePointDFA?] = []
            for p in (w["patterns"]?.arrayValue ?? []).compactMap(\.stringValue) { wPatterns.append(try patternDFA(p, lenient: true)) }
            // Keys outside the names and not matching any pattern under either reading.
            var ex: CodePointDFA? = wNames.isEmpty ? nil : CodePointDFA.literals(wNames)?.complement()
            var none = !wNames.isEmpty && ex == nil
            for d in wPatterns where !none {
                guard let d else { continue }
                guard let c = d.complement() else {
                    none = true
                    break
                }
                if let cur = ex {
                    ex = cur.intersection(c)
                    if ex == nil { none = true }
                } else {
                    ex = c
                }
            }
            if none { return [] }
            witness = (ex, w["schema"] ?? .bool(true), wNames, wPatterns)
        }
        func isWitnessKey(_ name: String) -> Bool {
            guard let w = witness else { return false }
            if w.names.contains(where: { $0.unicodeScalars.elementsEqual(name.unicodeScalars) }) { return false }
            return !w.patterns.contains { $0?.accepts(name) ?? false }
        }
        // Extra keys: partition by which patterns they match.
        var extraAlts: [[GrammarBuilder.Symbol]] = []
        var witnessExtraAlts: [[GrammarBuilder.Symbol]] = []
        let colon = b.literal(":")
        let exclude = CodePointDFA.literals(names)?.complement()
        if !names.isEmpty && exclude == nil { /* every string is declared: impossible */  }
        let k = patternDFAs.count
        for mask in 0..<(1 << k) {
            var dfa: CodePointDFA? = names.isEmpty ? nil : exclude
            var empty = !names.isEmpty && exclude == nil
            var parts: [JSONValue] = []
            for i in 0..<k where !empty {
                // Matching keys: the ECMA reading; non-matching keys: not matching under either reading.
                let matching = mask & (1 << i) != 0
                guard let pd = matching ? patternDFAs[i].0 : lenientDFAs[i] else {
                    if matching { empty = true }
                    continue
                }
                let side = matching ? pd : pd.complement()
                if mask & (1 << i) != 0 { parts.append(patternDFAs[i].1) }
                guard let side else {
                    empty = true
                    break
                }
                if let cur = dfa {
                    dfa = cur.intersection(side)
                    if dfa == nil { empty = true }
                } else {
                    dfa = side
                }
            }
            if empty { continue }
            let valueSchema: JSONValue =
                parts.isEmpty ? additional : (parts.count == 1 ? parts[0] : .object(JSONObject([("allOf", .array(parts))])))
            if valueSchema == .bool(false) { continue }
            var keySpec = StringSpec(dfa: dfa)
            if let ns = nameSpec {
                keySpec.minLength = ns.minLength
                keySpec.maxLength = ns.maxLength
                if let d = ns.dfa {
                    if let cur = dfa {
                        guard let both = cur.intersection(d) else { continue }
                        keySpec.dfa = both
                    } else {
                        keySpec.dfa = d
                    }
                }
                if let m = keySpec.maxLength, m < keySpec.minLength { continue }
            }
            let key = b.terminal(.string(keySpec))
            extraAlts.append([key, ws, colon, ws, try compileNode(valueSchema, base: base)])
            if let w = witness {
                var wSpec = keySpec
                if let ex = w.exclude {
                    if let cur = keySpec.dfa {
                        guard let both = cur.intersection(ex) else { continue }
                        wSpec.dfa = both
                    } else {
                        wSpec.dfa = ex
                    }
                }
                let wValue = JSONValue.object(JSONObject([("allOf", .array([valueSchema, w.value]))]))
                witnessExtraAlts.append([b.terminal(.string(wSpec)), ws, colon, ws, try compileNode(wValue, base: base)])
            }
        }
        let hasExtras = !extraAlts.isEmpty
        let extra = hasExtras ? b.rule("extra", extraAlts) : nil
        let witnessExtra = witnessExtraAlts.isEmpty ? nil : b.rule("extra-witness", witnessExtraAlts)
        // Declared members.
        var kv: [GrammarBuilder.Symbol?] = []
        var impossible = false
        for (i, n) in names.enumerated() {
            if schemas[i] == .bool(false) {
                kv.append(nil)
                if isRequired[i] { impossible = true }
                continue
            }
            let keyLit = b.literal(JSONValue.string(n).serialized(.compact))
            kv.append(b.rule("member", [[keyLit, ws, colon, ws, try compileNode(schemas[i], base: base)]]))
        }
        if impossible { return [] }
        if let w = witness {
            var witnessKV: [GrammarBuilder.Symbol?] = []
            for (i, n) in names.enumerated() {
                guard kv[i] != nil, isWitnessKey(n) else {
                    witnessKV.append(nil)
                    continue
                }
                let keyLit = b.literal(JSONValue.string(n).serialized(.compact))
                let value = JSONValue.object(JSONObject([("allOf", .array([schemas[i], w.value]))]))
                witnessKV.append(b.rule("member-witness", [[keyLit, ws, colon, ws, try compileNode(value, base: base)]]))
            }
            if f["minProperties"] != nil || f["maxProperties"] != nil || names.count > 160 {
                throw .unsupported("not", "negated additionalProperties with property counts or very many properties")
            }
            return witnessObjectAlternatives(kv: kv, witnessKV: witnessKV, isRequired: isRequired, extra: extra, witnessExtra: witnessExtra)
        }
        let requiredCount = isRequired.filter { $0 }.count
        var minProps = f["minProperties"]?.intValue ?? 0
        var maxProps = f["maxProperties"]?.intValue
        if minProps <= max(requiredCount, 1) && minProps > 1 { minProps = 1 }  // implied by required
        if let m = maxProps {
            let possible = hasExtras ? Int.max : kv.compactMap { $0 }.count
            if m == 0 { return requiredCount == 0 && minProps == 0 ? [[b.literal("{"), ws, b.literal("}")]] : [] }
            if m >= possible { maxProps = nil }
        }
        if minProps > 1 || maxProps != nil {
            return try countedObjectAlternatives(kv: kv, isRequired: isRequired, extra: extra, minProps: minProps, maxProps: maxProps)
        }
        let n = names.count
        let comma = b.literal(","), close = b.literal("}"), open = b.literal("{")
        var rest: [GrammarBuilder.Symbol] = [], first: [GrammarBuilder.Symbol] = []
        for _ in 0...n {
            rest.append(b.declareRule("obj-rest"))
            first.append(b.declareRule("obj-first"))
        }
        if n <= 160 {
            // Unambiguous form: rest[i] = after a member, next declared index >= i;
            // first[i] = the next member (declared j >= i without skipping a required one, or an extra).
            for i in 0...n {
                var fa: [[GrammarBuilder.Symbol]] = []
                var j = i
                while j < n {
                    if let m = kv[j] { fa.append([m, rest[j + 1]]) }
                    if isRequired[j] { break }
                    j += 1
                }
                if let extra { fa.append([extra, rest[i]]) }
                b.define(first[i], fa)
                var ra: [[GrammarBuilder.Symbol]] = [[ws, comma, ws, first[i]]]
                if !isRequired[i...].contains(true) { ra.append([ws, close]) }
                b.define(rest[i], ra)
            }
        } else {
            // Linear-size form for very many properties (ambiguous where extras are allowed).
            for i in 0...n {
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
        var out: [[GrammarBuilder.Symbol]] = [[open, ws, first[0]]]
        // first[i] ends with rest[...] which closes the object.
        if requiredCount == 0 && minProps < 1 { out.append([open, ws, close]) }
        return out
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

    func requiredCount(_ names: [String], _ required: [String]) -> Int { names.filter { required.contains($0) }.count }

    /// Objects with `minProperties`/`maxProperties`: the member rules also count the members
    /// so far (counts above the largest bound that matters are merged).
    func countedObjectAlternatives(
        kv: [GrammarBuilder.Symbol?], isRequired: [Bool], extra: GrammarBuilder.Symbol?,
        minProps: Int, maxProps: Int?
    ) throws(SchemaError) -> [[GrammarBuilder.Symbol]] {
        let n = kv.count
        let cap = maxProps ?? minProps  // counts are tracked up to cap
        if (n + 1) * (cap + 1) > 2_000 {
            throw .unsupported(maxProps != nil ? "maxProperties" : "minProperties", "bound too large for this object")
        }
        let comma = b.literal(","), close = b.literal("}"), open = b.literal("{")
        var rest: [[GrammarBuilder.Symbol]] = [], first: [[GrammarBuilder.Symbol]] = []
        for _ in 0...n {
            rest.append((0...cap).map { _ in b.declareRule("obj-rest-n") })
            first.append((0...cap).map { _ in b.declareRule("obj-first-n") })
        }
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
                if !isRequired[i...].contains(true) && c >= minProps { ra.append([ws, close]) }
                b.define(rest[i][c], ra)
            }
        }
        var out: [[GrammarBuilder.Symbol]] = [[open, ws, first[0][0]]]
        if !isRequired.contains(true) && minProps == 0 { out.append([open, ws, close]) }
        return out
    }
}
