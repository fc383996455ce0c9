import Grammar
import Testing

@testable import leap_ref

/// `leap-ref serve`'s `--schema-*` flags: the JSON Schema compiler's limits.
@Suite struct ServeSchemaLimitTests {
    @Test func defaultsAreTheCompilersAndEachFlagSetsItsLimit() throws {
        #expect(try Serve.parse([]).schemaLimits() == JSONSchemaCompiler.Limits())
        #expect(Serve.milliseconds(JSONSchemaCompiler.Limits().compileTimeBudget) == 2000)
        let limits = try Serve.parse([
            "--schema-max-depth", "7", "--schema-max-grammar-size", "5000", "--schema-max-enum-values", "11",
            "--schema-max-repetition", "12", "--schema-max-automaton-states", "13", "--schema-max-combinations", "14",
            "--schema-max-parse-threads", "15", "--schema-compile-budget-ms", "250"
        ]).schemaLimits()
        #expect(limits.maxDepth == 7)
        #expect(limits.maxGrammarSize == 5000)
        #expect(limits.maxEnumValues == 11)
        #expect(limits.maxRepetition == 12)
        #expect(limits.maxAutomatonStates == 13)
        #expect(limits.maxCombinations == 14)
        #expect(limits.maxParseThreads == 15)
        #expect(limits.compileTimeBudget == .milliseconds(250))
    }

    @Test func valuesBelowOneAndDepthsAbove4096AreRefused() throws {
        #expect(throws: CLIError.self) { try Serve.parse(["--schema-max-depth", "0"]).schemaLimits() }
        #expect(throws: CLIError.self) { try Serve.parse(["--schema-compile-budget-ms", "0"]).schemaLimits() }
        #expect(throws: CLIError.self) { try Serve.parse(["--schema-max-parse-threads", "0"]).schemaLimits() }
        #expect(throws: CLIError.self) { try Serve.parse(["--schema-max-depth", "4097"]).schemaLimits() }
        #expect(try Serve.parse(["--schema-max-depth", "4096"]).schemaLimits().maxDepth == 4096)
    }
}
