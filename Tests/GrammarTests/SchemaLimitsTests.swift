import Foundation
import LeapJSON
import Testing

@testable import Grammar

/// The compile error of a schema (nil when it compiles).
func compileError(_ schema: String, _ configure: (inout JSONSchemaCompiler.Options) -> Void = { _ in }) -> SchemaError? {
    do {
        _ = try compile(schema, configure)
        return nil
    } catch let error as SchemaError {
        return error
    } catch {
        Issue.record("not a SchemaError: \(error)")
        return nil
    }
}

/// The limit an error names, if it is a limit error.
func limitName(_ e: SchemaError?) -> String? {
    if case .limitExceeded(let limit)? = e?.kind { return limit }
    return nil
}

/// A schema nesting `depth` levels of `wrap` around `inner` ("X" in `wrap` marks the hole).
func nested(_ depth: Int, _ wrap: String, _ inner: String = "{}") -> String {
    var s = inner
    for _ in 0..<depth { s = wrap.replacingOccurrences(of: "X", with: s) }
    return s
}

/// Files that leap-ref once got wrong (copied into `Tests/GrammarTests/Fixtures/maskbench-regressions`): a schema
/// whose definition refers to itself through `oneOf` crashed the compiler; two draft-04
/// schemas accepted `12345.0` as an `integer`.
@Suite struct RegressionFileTests {
    @Test func regressionFilesPassTheProtocol() throws {
        let results = try maskBench("maskbench-regressions")
        #expect(results.map(\.0) == ["Github_easy---o24544.json", "Github_trivial---o14485.json", "JsonSchemaStore---pulumi.json"])
        for (name, outcome) in results {
            let o = try #require(outcome, "\(name) did not compile")
            #expect(!o.invalidationError && !o.validationError && o.maskInconsistencies == 0, "\(name): tests \(o.wrongTests)")
        }
    }

    /// pulumi.json's shape: a definition whose property's oneOf refers back to the definition,
    /// next to an `if` that constrains the same property with a `const`.
    @Test func definitionReferringToItselfThroughOneOf() throws {
        let g = try compile(
            ##"""
            {"$defs": {"kind": {"enum": ["string", "array"]},
              "item": {"type": "object", "required": ["type"],
                "properties": {"type": {"oneOf": [{"$ref": "#/$defs/kind"}, {"$ref": "#/$defs/item"}]}, "items": {"$ref": "#/$defs/item"}},
                "if": {"properties": {"type": {"const": "array"}}}, "then": {}}},
             "$ref": "#/$defs/item"}
            """##)
        #expect(valid(g, #"{"type": "array"}"#))
        #expect(valid(g, #"{"type": {"type": "string"}, "items": {"type": "array"}}"#))
        #expect(!valid(g, #"{"type": "object"}"#))
        #expect(!valid(g, #"{"type": {"type": 1}}"#))
    }
}

@Suite struct DraftIntegerTests {
    @Test func draft4IntegersHaveNoFraction() throws {
        let draft4 = try compile(#"{"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"}"#)
        #expect(valid(draft4, "12345") && valid(draft4, "-7") && valid(draft4, "123456789012345678901234"))
        #expect(!valid(draft4, "12345.0") && !valid(draft4, "1e3") && !valid(draft4, "1.5"))
        // From draft 6 on, 12345.0 is an integer.
        for dialect in ["http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2020-12/schema"] {
            let g = try compile(#"{"$schema": "\#(dialect)", "type": "integer"}"#)
            #expect(valid(g, "12345.0") && !valid(g, "12345.5"), "\(dialect)")
        }
        let undeclared = try compile(#"{"type": "integer"}"#)
        #expect(valid(undeclared, "12345.0"))
        let byOption = try compile(#"{"type": "integer"}"#) { $0.defaultDraft = .draft4 }
        #expect(!valid(byOption, "12345.0") && valid(byOption, "12345"))
        // A number is still a number.
        let number = try compile(#"{"$schema": "http://json-schema.org/draft-04/schema#", "type": "number"}"#)
        #expect(valid(number, "12345.0") && valid(number, "1e3"))
    }

    @Test func draft4EnumsAndConsts() throws {
        let schema = #"{"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer", "enum": [1, 2.0, 2.5]}"#
        let g = try compile(schema)
        #expect(valid(g, "1") && !valid(g, "1.0"))
        #expect(!valid(g, "2") && !valid(g, "2.0") && !valid(g, "2.5"))  // 2.0 is not a draft-4 integer
        let modern = try compile(#"{"type": "integer", "enum": [1, 2.0, 2.5]}"#)
        #expect(valid(modern, "1") && valid(modern, "1.0") && valid(modern, "2") && valid(modern, "2.0") && !valid(modern, "2.5"))
        // Without a type, 1.0 equals 1 in every draft.
        let untyped = try compile(#"{"$schema": "http://json-schema.org/draft-04/schema#", "const": 1}"#)
        #expect(valid(untyped, "1") && valid(untyped, "1.0"))
    }

    /// Generated integers are plain digits whatever the draft.
    @Test func plainIntegersInEveryDraft() throws {
        for dialect in ["http://json-schema.org/draft-04/schema#", "https://json-schema.org/draft/2020-12/schema"] {
            let g = try compile(#"{"$schema": "\#(dialect)", "properties": {"n": {"type": "integer"}, "e": {"enum": [3]}}}"#) {
                $0.plainIntegers = true
            }
            #expect(valid(g, #"{"n": 12, "e": 3}"#))
            #expect(!valid(g, #"{"n": 12.0}"#) && !valid(g, #"{"e": 3.0}"#) && !valid(g, #"{"n": 99999999999999999999}"#))
        }
    }
}

/// Recursion through `$ref` in every position: each schema compiles (and means what it says)
/// or is a typed error; nothing crashes.
@Suite struct RecursiveReferenceTests {
    @Test func recursionInEveryPosition() throws {
        let recursive = [
            ##"{"anyOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#"}}]}"##,
            ##"{"oneOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#"}}]}"##,
            ##"{"type": "object", "additionalProperties": {"$ref": "#"}}"##,
            ##"{"type": "array", "prefixItems": [{"$ref": "#"}], "items": false}"##,
            ##"{"type": "object", "patternProperties": {"^a": {"$ref": "#"}}, "additionalProperties": false}"##,
            ##"{"type": "object", "properties": {"x": {"not": {"$ref": "#/$defs/s"}}}, "$defs": {"s": {"type": "string"}}}"##,
            ##"{"$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/b"}}, "b": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"}"##,
            ##"{"type": "object", "properties": {"c": {"$ref": "#"}}, "allOf": [{"properties": {"c": {"type": "object"}}}]}"##
        ]
        for s in recursive {
            let g = try compile(s)
            #expect(!valid(g, "\"x\"") || s.contains("not"), "\(s)")
        }
        let nestedArrays = try compile(recursive[0])
        #expect(valid(nestedArrays, "[1, [2, [3, []]]]") && !valid(nestedArrays, "[1, [\"2\"]]"))
        // References that never reach a value: typed errors.
        for s in [
            ##"{"$ref": "#"}"##, ##"{"allOf": [{"$ref": "#"}]}"##, ##"{"not": {"$ref": "#"}}"##,
            ##"{"anyOf": [{"$ref": "#"}, {"type": "string"}]}"##, ##"{"oneOf": [{"$ref": "#"}, {"type": "string"}]}"##,
            ##"{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"}"##,
            ##"{"if": {"$ref": "#"}, "then": {"type": "string"}}"##
        ] {
            #expect(compileError(s) != nil, "\(s)")
        }
    }
}

@Suite struct SchemaLimitTests {
    @Test func nestingDepth() {
        let deep = nested(200, #"{"type": "object", "properties": {"a": X}}"#)
        let e = compileError(deep)
        #expect(limitName(e) == "maxDepth")
        #expect(e?.location?.hasPrefix("/properties/a/properties/a") == true)
        #expect(e?.description.contains("limit maxDepth") == true)
        // Within the limit it compiles, and the limit is an option.
        #expect(compileError(nested(40, #"{"type": "object", "properties": {"a": X}}"#)) == nil)
        #expect(limitName(compileError(nested(40, #"{"type": "array", "items": X}"#)) { $0.limits.maxDepth = 20 }) == "maxDepth")
        for (wrap, levels) in [(#"{"anyOf": [X, {"type": "null"}]}"#, 200), (#"{"allOf": [X]}"#, 200), (#"{"not": X}"#, 400)] {
            let e = compileError(nested(levels, wrap))
            #expect(limitName(e) == "maxDepth", "\(wrap): \(String(describing: e))")
        }
        // (Nested overlapping oneOf branches need the negation of a oneOf: not expressible.)
        #expect(compileError(nested(200, #"{"oneOf": [X, {"type": "null"}]}"#))?.kind == .unsupported(keyword: "oneOf"))
    }

    /// On a thread with a small stack (512 KB is macOS's default for secondary threads) the
    /// compilation moves to a thread of its own: the depth limit still holds, no crash.
    @Test func deepSchemaOnASmallStack() {
        final class Outcome: @unchecked Sendable {
            var error: SchemaError?
            var compiled = false
        }
        let outcome = Outcome()
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            outcome.compiled = compileError(nested(60, #"{"type": "object", "properties": {"a": X}}"#)) == nil
            outcome.error = compileError(nested(250, #"{"type": "object", "properties": {"a": X}}"#))
            done.signal()
        }
        thread.stackSize = 256 << 10
        thread.start()
        #expect(done.wait(timeout: .now() + 120) == .success)
        #expect(outcome.compiled)
        #expect(limitName(outcome.error) == "maxDepth")
    }

    @Test func enumSize() {
        let values = (0..<10_001).map { "\"v\($0)\"" }.joined(separator: ", ")
        let e = compileError(#"{"properties": {"x": {"enum": [\#(values)]}}}"#)
        #expect(limitName(e) == "maxEnumValues")
        #expect(e?.location == "/properties/x")
        #expect(compileError(#"{"enum": [\#(values)]}"#) { $0.limits.maxEnumValues = 20_000 } == nil)
    }

    @Test func repetitionCounts() {
        for (schema, keyword) in [
            (#"{"type": "array", "minItems": 100000}"#, "minItems"),
            (#"{"type": "array", "maxItems": 100000}"#, "maxItems"),
            (#"{"type": "array", "contains": {"type": "integer"}, "minContains": 20000}"#, "minContains"),
            (#"{"type": "object", "minProperties": 100000}"#, "minProperties"),
            (#"{"type": "string", "pattern": "^a{20000}$"}"#, "pattern")
        ] {
            let e = compileError(schema)
            #expect(limitName(e) == "maxRepetition", "\(schema): \(String(describing: e))")
            #expect(e?.message.contains(keyword) == true || keyword == "pattern", "\(schema)")
        }
        // Counted, not unrolled: any string length is fine.
        #expect(compileError(#"{"type": "string", "minLength": 5, "maxLength": 9223372036854775807}"#) == nil)
        #expect(compileError(#"{"type": "array", "maxItems": 1000, "items": {"type": "integer"}}"#) == nil)
        // Exact up to the limit: 3 items are not 2.
        #expect(limitName(compileError(#"{"type": "array", "minItems": 3}"#) { $0.limits.maxRepetition = 2 }) == "maxRepetition")
    }

    @Test func automatonStates() {
        // A DFA for "an a 20 characters before the end" needs 2^20 states.
        let e = compileError(#"{"type": "string", "pattern": "a[ab]{20}$"}"#)
        #expect(limitName(e) == "maxAutomatonStates" || limitName(e) == "compileTimeBudget", "\(String(describing: e))")
        #expect(compileError(#"{"type": "string", "pattern": "a[ab]{4}$"}"#) == nil)
    }

    @Test func combinations() {
        // Twelve anyOf groups of two exclusive branches: 4096 combinations.
        let groups = (0..<12).map { i in #"{"anyOf": [{"required": ["a\#(i)"]}, {"required": ["b\#(i)"]}]}"# }.joined(separator: ", ")
        let e = compileError(#"{"type": "object", "allOf": [\#(groups)]}"#)
        #expect(limitName(e) == "maxCombinations")
    }

    @Test func grammarSizeAndBudget() {
        let props = (0..<300).map { #""p\#($0)": {"type": "string"}"# }.joined(separator: ", ")
        let schema = #"{"type": "object", "properties": {\#(props)}}"#
        #expect(compileError(schema) == nil)
        #expect(limitName(compileError(schema) { $0.limits.maxGrammarSize = 500 }) == "maxGrammarSize")
        // A budget already spent: the first check fails (no timing involved).
        #expect(limitName(compileError(schema) { $0.limits.compileTimeBudget = .zero }) == "compileTimeBudget")
    }

    /// The closure templates are computed after the schema's last check; the build checks the
    /// deadline itself (found by the fuzzer: an object of 20,000 properties spent 6.5 s there).
    @Test func grammarBuildChecksTheDeadline() throws {
        var b = GrammarBuilder()
        var items: [[GrammarBuilder.Symbol]] = []
        for i in 0..<3000 { items.append([b.rule("item", [[b.literal("x\(i)")]])]) }
        let root = b.rule("root", items)
        _ = try b.build(root: root, limits: .init(), deadline: nil)
        do {
            _ = try b.build(root: root, limits: .init(), deadline: ContinuousClock.now - .seconds(1))
            Issue.record("a spent deadline was not noticed")
        } catch let error as GrammarError {
            #expect(error.limit == "compileTimeBudget")
        }
    }

    @Test func tricksWithNumbers() {
        // Every string satisfies maxLength: Int.max, so its negation is unsatisfiable (and nothing overflows).
        #expect(compileError(#"{"not": {"maxLength": 9223372036854775807}}"#)?.kind == .unsatisfiable)
        #expect(compileError(#"{"not": {"maxItems": 9223372036854775807, "maxProperties": 9223372036854775807}}"#)?.kind == .unsatisfiable)
        #expect(
            compileError(#"{"allOf": [{"multipleOf": 9223372036854775807}, {"multipleOf": 9223372036854775806}]}"#)?.kind
                == .unsupported(keyword: "multipleOf"))
        #expect(compileError(#"{"enum": [1e400, 1]}"#) == nil)
        #expect(compileError(#"{"minimum": 1e400}"#) != nil)
        #expect(compileError(#"{"type": "number", "maximum": -1e308}"#) != nil)
        #expect(compileError(#"{"minItems": "3"}"#)?.kind == .invalid)
        #expect(compileError(#"{"maxLength": 2.5}"#)?.kind == .invalid)
    }

    @Test func malformedPatterns() {
        for p in ["a**", "((((((((((", String(repeating: "(", count: 1000) + "a" + String(repeating: ")", count: 1000), "a{2}{3}", "[z-a]"]
        {
            let e = compileError(#"{"type": "string", "pattern": \#(JSONValue.string(p).serialized(.compact))}"#)
            #expect(e != nil, "\(p)")
        }
    }

    /// An ambiguous recursive schema doubles the parses at every level: past the thread
    /// bound the byte is refused (never accepting an invalid document), and the masks agree.
    @Test func parseThreadBound() throws {
        let schema = ##"{"anyOf": [{"type": "array", "items": {"$ref": "#"}}, {"type": "array", "items": {"$ref": "#"}, "maxItems": 9}]}"##
        let g = try compile(schema) { $0.limits.maxParseThreads = 1_000 }
        let words = ["[", "]", ",", " ", "[[", "]]", "[]"]
        let vocab = TokenVocabulary(tokens: words.map { Array($0.utf8) })
        let computer = TokenMaskComputer(vocabulary: vocab)
        let m = GrammarMatcher(grammar: g)
        var depth = 0
        while depth < 40 && !m.hasOverflowed {
            // Masks never allow more than the matcher accepts, and steer around the overflow
            // where they can (a nested "[" ends the literal "[" that the mask allows lexically).
            let mask = computer.mask(for: m)
            #expect(Set(mask.allowed).isSubset(of: Set(bruteForceMask(m, vocab))), "depth \(depth)")
            #expect(m.accept("["))
            depth += 1
        }
        #expect(depth > 4 && depth < 40)
        // Past the bound: any byte is taken, nothing is ever complete, no token is allowed.
        #expect(m.accept("]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]") && !m.canAcceptEnd && m.canContinue)
        #expect(computer.mask(for: m).allowedCount == 0)
        #expect(m.forcedBytes().isEmpty)
        // A valid document within the bound is still accepted.
        #expect(valid(g, "[[[]], []]"))
    }

    /// Past `maxWorkPerMask`, the mask is a subset of the exact one that still has the valid
    /// single-byte tokens.
    @Test func maskWorkBound() throws {
        let g = try compile(#"{"type": "object", "properties": {"name": {"type": "string"}, "tags": {"type": "array"}}}"#)
        let m = GrammarMatcher(grammar: g)
        #expect(m.accept(#"{"name": "x""#))
        let full = TokenMaskComputer(vocabulary: smolVocabulary)
        let exact = full.mask(for: m)
        #expect(!exact.isTruncated)
        let limited = TokenMaskComputer(vocabulary: smolVocabulary)
        limited.maxWorkPerMask = 10
        let partial = limited.mask(for: m)
        #expect(partial.isTruncated)
        #expect(Set(partial.allowed).isSubset(of: Set(exact.allowed)))
        #expect(partial.allowedCount < exact.allowedCount)
        for byte in [UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: " ")] {
            let id = Int(smolVocabulary.singleByteTokens[Int(byte)])
            #expect(id >= 0 && partial[id], "byte \(byte)")
        }
    }

    @Test func errorMessagesNameTheLimitAndThePlace() throws {
        let e = try #require(compileError(#"{"properties": {"list": {"type": "array", "minItems": 100000}}}"#))
        #expect(e.location == "/properties/list")
        #expect(
            e.description
                == "schema too complex (at /properties/list): minItems 100000 is above the largest count the grammar unrolls, 10000 (limit maxRepetition)"
        )
        let viaRef = try #require(
            compileError(##"{"$defs": {"big": {"type": "array", "maxItems": 100000}}, "properties": {"a": {"$ref": "#/$defs/big"}}}"##))
        #expect(viaRef.location == "/$defs/big")
        let invalid = try #require(compileError(#"{"properties": {"a": {"type": "strnig"}}}"#))
        #expect(invalid.description == "invalid schema (at /properties/a): unknown type 'strnig'")
    }
}

/// Python's json (which labels MaskBench, and which many consumers use) reads a number with a
/// fraction as a binary double: where that changes a comparison, such numbers are limited to
/// 15 significant digits (found by the fuzzer: `779676739218497802352338447.15` is an integer
/// to Python).
@Suite struct DoubleReadingTests {
    @Test func fractionsNearBoundsAndNonIntegers() throws {
        let below1 = try compile(#"{"type": "number", "exclusiveMaximum": 1}"#)
        #expect(valid(below1, "0.999999999999999") && valid(below1, "-12.5") && valid(below1, "0.5000000000000000000"))
        #expect(!valid(below1, "0.9999999999999999999"))
        let nonInteger = try compile(#"{"type": "number", "not": {"type": "integer"}}"#)
        #expect(valid(nonInteger, "0.5") && valid(nonInteger, "12345678901234.5"))
        #expect(!valid(nonInteger, "779676739218497802352338447.15") && !valid(nonInteger, "1.0000000000000000001"))
        // Unconstrained numbers keep every digit.
        let any = try compile(#"{"type": "number"}"#)
        #expect(valid(any, "0.9999999999999999999") && valid(any, "779676739218497802352338447.15"))
    }
}
