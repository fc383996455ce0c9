extension JSONSchemaCompiler {
    /// Bounds on the work one schema may cause, so that no schema (a hostile one sent to a
    /// server, or a huge generated one) can crash, stall or exhaust the process: each bound
    /// exceeded is a `SchemaError` of kind `.limitExceeded(limit:)` naming the property below
    /// and the place in the schema. The defaults admit every real-world schema of the
    /// MaskBench sample while keeping a compilation under a second and a grammar under a few
    /// tens of megabytes; a server exposes them as settings. See docs/structured-output.md.
    public struct Limits: Sendable, Equatable {
        /// The deepest nesting of subschemas compiled inside one another: through
        /// `properties`, `items`, `anyOf`/`oneOf`/`allOf`/`not`, `if`, `$ref` chains and the
        /// compiler's own rewritings of them. Also bounds the compiler's stack.
        public var maxDepth = 128
        /// The size of the grammar: rules, plus the symbols of their alternatives, plus the
        /// entries of the precomputed closures (what the matcher's work per byte depends on).
        public var maxGrammarSize = 2_000_000
        /// The values of one `enum` (after merging `const`/`enum` of `allOf` branches).
        public var maxEnumValues = 10_000
        /// Counts that the grammar unrolls: `minItems`/`maxItems` (and `prefixItems`),
        /// `minContains`/`maxContains`, `minProperties`/`maxProperties`, and the `{n,m}`
        /// quantifiers of patterns. (`minLength`/`maxLength` are counted while matching,
        /// never unrolled, so any value costs the same and has no limit.)
        public var maxRepetition = 10_000
        /// The states of one automaton over string contents: a pattern, a format, an enum of
        /// strings, or an intersection or complement of them.
        public var maxAutomatonStates = 10_000
        /// The alternatives made by distributing `anyOf`/`oneOf`/`if`/`dependent*` over their
        /// siblings (two `anyOf` of 10 branches in one schema make 100).
        public var maxCombinations = 2_048
        /// The parses a matcher may follow at once. An ambiguous grammar (overlapping
        /// `anyOf` branches nested in a recursive schema) can double them at every level;
        /// a byte that would exceed the bound is refused, so matching costs at most this many
        /// thread steps per byte. Never admits an invalid document.
        public var maxParseThreads = 4_096
        /// Wall-clock time for one compilation (checked between steps; a step is bounded by
        /// the other limits).
        public var compileTimeBudget: Duration = .seconds(2)

        public init() {}
    }
}

/// The running account of one compilation against its `Limits`: nesting depth, elapsed time,
/// grammar size. Shared by the compilers that cooperate on one schema (the enum checker, the
/// functions of a tool-call grammar).
final class CompileBudget {
    let limits: JSONSchemaCompiler.Limits
    let deadline: ContinuousClock.Instant
    private(set) var depth = 0
    /// Compile an overlapping `oneOf` whose exclusivity cannot be expressed as `anyOf`
    /// (`JSONSchemaCompiler.compileReporting(_:options:overlappingOneOf:)`), recording where.
    var overlappingOneOfAsAnyOf = false
    /// Where an overlapping `oneOf` was compiled as `anyOf`.
    var oneOfsAsAnyOf: Set<String> = []

    init(_ limits: JSONSchemaCompiler.Limits) {
        self.limits = limits
        deadline = ContinuousClock.now.advanced(by: limits.compileTimeBudget)
    }

    /// Enters one level of recursion: checks the depth and the clock. Pair with `leave()`.
    func enter() throws(SchemaError) {
        depth += 1
        if depth > limits.maxDepth {
            depth -= 1
            throw .limit(
                "maxDepth",
                "subschemas are nested more than \(limits.maxDepth) deep (counting properties, items, combinators and $ref chains)")
        }
        do { try checkTime() } catch {
            depth -= 1
            throw error
        }
    }

    func leave() { depth -= 1 }

    /// Throws once the compile-time budget is spent.
    func checkTime() throws(SchemaError) {
        if ContinuousClock.now > deadline {
            throw .limit("compileTimeBudget", "compiling the schema takes longer than \(limits.compileTimeBudget)")
        }
    }

    /// Throws when a grammar would be larger than `maxGrammarSize`.
    func checkGrammarSize(_ size: Int) throws(SchemaError) {
        if size > limits.maxGrammarSize {
            throw .limit("maxGrammarSize", "the grammar would need more than \(limits.maxGrammarSize) rules and symbols")
        }
    }

    /// Throws when `count` (the value of `keyword`) is above `maxRepetition`.
    func checkRepetition(_ count: Int, keyword: String) throws(SchemaError) {
        if count > limits.maxRepetition {
            throw .limit("maxRepetition", "\(keyword) \(count) is above the largest count the grammar unrolls, \(limits.maxRepetition)")
        }
    }

    /// Bounds for automaton constructions (pattern, format and key-set DFAs).
    var automaton: AutomatonLimits {
        AutomatonLimits(maxStates: limits.maxAutomatonStates, maxRepetition: limits.maxRepetition, deadline: deadline)
    }
}

extension SchemaError {
    /// The schema error for an automaton that outgrew its limits.
    init(_ e: AutomatonLimitError) {
        switch e.limit {
        case .states(let n):
            self = .limit("maxAutomatonStates", "a string automaton (pattern, format or enum) needs more than \(n) states")
        case .repetition(let n):
            self = .limit("maxRepetition", "a pattern's repetition count is above \(n)")
        case .time:
            self = .limit("compileTimeBudget", "compiling the schema's string automata takes too long")
        }
    }
}
