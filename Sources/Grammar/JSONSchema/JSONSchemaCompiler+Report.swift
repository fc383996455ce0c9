import LeapJSON

extension JSONSchemaCompiler {
    /// What to do with a `oneOf` whose branches are not provably exclusive and whose
    /// exclusivity cannot be expressed (some branch's negation is not a union of schemas).
    public enum OverlappingOneOf: String, Sendable, Equatable, CaseIterable {
        /// A compile error naming the `oneOf` (what `compile(_:options:)` does).
        case refuse
        /// Compile it as `anyOf`: the grammar is wider than the schema there (a value matching
        /// two branches is accepted), and the report lists where.
        case anyOf
    }

    /// What a compilation had to relax, for callers that count it (`leap-ref schema-bench`).
    public struct CompileReport: Sendable, Equatable {
        /// JSON Pointers of the `oneOf`s compiled as `anyOf`, sorted. Empty when the grammar is
        /// exact.
        public var oneOfsAsAnyOf: [String] = []
        /// The grammar's language is exactly the schema's.
        public var isExact: Bool { oneOfsAsAnyOf.isEmpty }
        public init() {}
    }

    /// Compiles like `compile(_:options:)`, with a choice for overlapping `oneOf`s, and reports
    /// what was relaxed.
    public static func compileReporting(
        _ schema: JSONValue, options: Options = Options(), overlappingOneOf: OverlappingOneOf = .refuse
    ) throws(SchemaError) -> (grammar: Grammar, report: CompileReport) {
        try LargeStack.run(needing: LargeStack.bytesNeeded(maxDepth: options.limits.maxDepth)) { () throws(SchemaError) in
            let budget = CompileBudget(options.limits)
            budget.overlappingOneOfAsAnyOf = overlappingOneOf == .anyOf
            let grammar = try compileHere(schema, options: options, budget: budget)
            var report = CompileReport()
            report.oneOfsAsAnyOf = budget.oneOfsAsAnyOf.sorted()
            return (grammar, report)
        }
    }
}
