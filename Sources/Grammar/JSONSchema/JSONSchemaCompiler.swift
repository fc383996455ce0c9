import LeapJSON

/// Why a JSON Schema could not be compiled.
///
/// The `description` is written for the author of the schema (a server returns it as the
/// body of an HTTP 400): what is wrong, which keyword or limit, and where in the schema.
public struct SchemaError: Error, Sendable, CustomStringConvertible, Equatable {
    public enum Kind: Sendable, Equatable {
        /// A keyword (named) that the compiler cannot enforce exactly.
        case unsupported(keyword: String)
        /// The schema itself is malformed (wrong keyword value, unresolvable `$ref`, bad pattern...).
        case invalid
        /// No JSON value satisfies the schema.
        case unsatisfiable
        /// The schema needs more work than a limit of `JSONSchemaCompiler.Limits` allows; `limit`
        /// is the name of that property (`maxDepth`, `compileTimeBudget`...).
        case limitExceeded(limit: String)
    }
    public let kind: Kind
    public let message: String
    /// Where in the schema the error was found, as a JSON Pointer (RFC 6901) into the schema
    /// document (`""` is the root; a location inside a `$ref` target is the target's pointer,
    /// prefixed by its resource's `$id` when that is not the root). Nil when not known.
    public var location: String?

    public init(kind: Kind, message: String, location: String? = nil) {
        self.kind = kind
        self.message = message
        self.location = location
    }

    public var description: String {
        let place = location.map { " (at \($0.isEmpty ? "the schema's root" : $0))" } ?? ""
        switch kind {
        case .unsupported(let k): return "unsupported keyword '\(k)'\(place): \(message)"
        case .invalid: return "invalid schema\(place): \(message)"
        case .unsatisfiable: return "unsatisfiable schema\(place): \(message)"
        case .limitExceeded(let limit): return "schema too complex\(place): \(message) (limit \(limit))"
        }
    }

    static func unsupported(_ keyword: String, _ message: String = "cannot be enforced exactly") -> SchemaError {
        SchemaError(kind: .unsupported(keyword: keyword), message: message)
    }
    static func invalid(_ message: String) -> SchemaError { SchemaError(kind: .invalid, message: message) }
    static func limit(_ name: String, _ message: String) -> SchemaError { SchemaError(kind: .limitExceeded(limit: name), message: message) }

    /// The error with `location` set, unless an inner location is already known.
    func at(_ pointer: String) -> SchemaError {
        guard location == nil else { return self }
        var e = self
        e.location = pointer
        return e
    }
}

/// The JSON Schema dialects whose meanings differ in what the compiler enforces.
public enum SchemaDraft: Sendable, Equatable, CaseIterable {
    case draft3, draft4, draft6, draft7, draft2019_09, draft2020_12

    /// The dialect named by a `$schema` URI, or nil when it names none of these.
    public init?(schemaURI: String) {
        let table: [(String, SchemaDraft)] = [
            ("draft-03", .draft3), ("draft-04", .draft4), ("draft-05", .draft4), ("draft-06", .draft6),
            ("draft-07", .draft7), ("2019-09", .draft2019_09), ("2020-12", .draft2020_12)
        ]
        guard let hit = table.first(where: { schemaURI.contains($0.0) }) else { return nil }
        self = hit.1
    }

    /// Drafts 3 to 7: keywords beside `$ref` are ignored.
    var refOverridesSiblings: Bool { [.draft3, .draft4, .draft6, .draft7].contains(self) }
    /// Drafts 3 and 4: an `integer` is a number written without fraction or exponent, so
    /// `1.0` is a number but not an integer (from draft 6 on, any number with a zero
    /// fractional part is an integer).
    var integersHaveNoFraction: Bool { self == .draft3 || self == .draft4 }
}

/// Compiles JSON Schema (draft 2020-12, with the draft-04..2019-09 spellings `definitions`,
/// array-form `items` + `additionalItems`, and boolean `exclusiveMinimum`) to a `Grammar` whose
/// language is the set of JSON texts valid under the schema, in the compiler's canonical
/// shape: object properties in schema order, any JSON whitespace between tokens, no whitespace
/// before or after the document.
///
/// Exactness first: a validation keyword that cannot be enforced exactly is a compile error
/// naming it (`SchemaError.Kind.unsupported`), never a silent widening. Annotations and
/// unknown keywords are ignored. Every schema compiles or fails with a `SchemaError`: the work
/// is bounded by `Options.limits`. See docs/structured-output.md for the keyword table and
/// the limits.
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
        /// The dialect of a schema that does not name one with `$schema` (a `$schema` naming
        /// a known draft always wins).
        public var defaultDraft: SchemaDraft = .draft2020_12
        /// The order of an object's properties: `.schema` (the default: the order of
        /// `properties`, then required names not declared) or `.any` (any order, each at most
        /// once; see `PropertyOrder`).
        public var propertyOrder: PropertyOrder = .schema
        /// Bounds on the work one schema may cause (compile time, grammar size, nesting...).
        public var limits = Limits()
        public init() {}
    }

    /// The order in which the compiled grammar lets an object's properties come.
    public enum PropertyOrder: String, Sendable, Equatable, CaseIterable {
        /// The schema's order: the declared properties in the order of `properties`, then the
        /// required names not declared; extra properties anywhere between them. The documents
        /// read like the schema, and it is what OpenAI's strict mode writes.
        case schema
        /// Any order, as JSON Schema itself allows: each declared property at most once, every
        /// required one before the object closes, extras anywhere. The grammar tracks the set
        /// of properties seen (its size does not grow with the orders). Objects with
        /// `minProperties`/`maxProperties` or a negated `additionalProperties` keep the
        /// schema's order.
        case any
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
        try LargeStack.run(needing: LargeStack.bytesNeeded(maxDepth: options.limits.maxDepth)) { () throws(SchemaError) in
            try compileHere(schema, options: options)
        }
    }

    /// Compiles a schema given as JSON text.
    public static func compile(_ schemaText: String, options: Options = Options()) throws(SchemaError) -> Grammar {
        try LargeStack.run(needing: LargeStack.bytesNeeded(maxDepth: options.limits.maxDepth)) { () throws(SchemaError) in
            let value: JSONValue
            do { value = try JSONValue.parse(schemaText) } catch { throw .invalid("not JSON: \(error)") }
            return try compileHere(value, options: options)
        }
    }

    /// Compiles on the current thread (the public entry points run this on a large stack).
    /// `budget`: one set up by the caller, to read after (`compileReporting`).
    static func compileHere(_ schema: JSONValue, options: Options, budget: CompileBudget? = nil) throws(SchemaError) -> Grammar {
        var builder = GrammarBuilder()
        let budget = budget ?? CompileBudget(options.limits)
        let root = try addSchema(schema, to: &builder, options: options, budget: budget)
        return try SchemaCompiler.build(builder, root: root, budget: budget)
    }

    /// Adds the schema's rules to a builder and returns the rule for one value valid under it,
    /// so that schema-constrained JSON can be composed with literal text (tool-call formats).
    public static func addSchema(_ schema: JSONValue, to builder: inout GrammarBuilder, options: Options = Options()) throws(SchemaError)
        -> GrammarBuilder.Symbol
    {
        try LargeStack.run(needing: LargeStack.bytesNeeded(maxDepth: options.limits.maxDepth)) { () throws(SchemaError) in
            try addSchema(schema, to: &builder, options: options, budget: CompileBudget(options.limits))
        }
    }

    static func addSchema(_ schema: JSONValue, to builder: inout GrammarBuilder, options: Options, budget: CompileBudget)
        throws(SchemaError)
        -> GrammarBuilder.Symbol
    {
        let c = SchemaCompiler(root: schema, options: options, builder: builder, budget: budget)
        try c.indexResources(schema, base: "")
        let sym = try c.compileNode(schema, base: c.rootBase, at: "")
        builder = c.b
        return sym
    }
}
