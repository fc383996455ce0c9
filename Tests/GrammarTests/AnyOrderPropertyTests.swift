import Foundation
import LeapJSON
import Sampling
import Testing

@testable import Grammar

/// `JSONSchemaCompiler.Options.propertyOrder = .any`: properties in any order, each at most
/// once, the required ones before `}`, tracked as a set of seen keys in the matcher's stack.
@Suite struct AnyOrderPropertyTests {
    func anyOrder(_ schema: String, _ configure: (inout JSONSchemaCompiler.Options) -> Void = { _ in }) throws -> Grammar {
        try compile(schema) {
            $0.propertyOrder = .any
            configure(&$0)
        }
    }

    static let threeProperties =
        #"{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}}, "#
        + #""required": ["a", "c"], "additionalProperties": false}"#

    /// All orders of the valid documents.
    static func permutations<T>(_ items: [T]) -> [[T]] {
        guard items.count > 1 else { return [items] }
        var out: [[T]] = []
        for (i, x) in items.enumerated() {
            var rest = items
            rest.remove(at: i)
            for p in permutations(rest) { out.append([x] + p) }
        }
        return out
    }

    @Test func everyOrderOfAValidDocumentIsAccepted() throws {
        let g = try anyOrder(Self.threeProperties)
        let ordered = try compile(Self.threeProperties)
        let members = [#""a": 1"#, #""b": "x""#, #""c": true"#]
        for subset in [members, [members[0], members[2]]] {
            for p in Self.permutations(subset) {
                let doc = "{" + p.joined(separator: ", ") + "}"
                #expect(valid(g, doc), "\(doc)")
                #expect(valid(g, doc.replacingOccurrences(of: " ", with: "")), "\(doc)")
                // The default keeps the schema's order.
                #expect(valid(ordered, doc) == (p.map { $0.prefix(3) } == subset.map { $0.prefix(3) }), "\(doc)")
            }
        }
    }

    @Test func duplicatesMissingRequiredAndUnknownKeysAreRefused() throws {
        let g = try anyOrder(Self.threeProperties)
        for doc in [
            #"{"c": true, "a": 1, "c": false}"#, #"{"a": 1, "a": 2, "c": true}"#, #"{"b": "x", "c": true, "b": "y", "a": 1}"#,
            #"{"c": true}"#, #"{"b": "x", "a": 1}"#, #"{}"#, #"{"a": 1, "c": true, "d": 0}"#, #"{"d": 0, "a": 1, "c": true}"#,
            #"{"a": "1", "c": true}"#
        ] {
            #expect(!valid(g, doc), "\(doc)")
        }
        // Refused at the earliest byte: the second `"c"` cannot even start to be written, nor can `}` before `a`.
        #expect(!prefix(g, #"{"c": true, "a": 1, "c""#))
        #expect(prefix(g, #"{"c": true, "a": 1, "b""#))
        #expect(!prefix(g, #"{"c": true}"#))
        #expect(prefix(g, #"{"c": true"#))
        // Once every property was written, no comma: nothing could follow it.
        #expect(!prefix(g, #"{"c": true, "a": 1, "b": "x","#))
        #expect(prefix(g, #"{"c": true, "a": 1,"#))
    }

    @Test func extrasPatternsAndEmptyObjects() throws {
        let g = try anyOrder(
            #"{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "#
                + #""patternProperties": {"^x": {"type": "string"}}, "additionalProperties": {"type": "boolean"}}"#)
        for (doc, ok) in [
            (#"{}"#, true), (#"{"b": 2, "xy": "s", "a": 1, "z": true}"#, true), (#"{"z": false, "b": 2}"#, true),
            (#"{"xy": 1}"#, false), (#"{"z": 1}"#, false), (#"{"b": 2, "z": true, "b": 3}"#, false)
        ] {
            #expect(valid(g, doc) == ok, "\(doc)")
        }
        // minProperties 1 without required keys: no empty object.
        let nonEmpty = try anyOrder(#"{"type": "object", "properties": {"a": {"type": "integer"}}, "minProperties": 1}"#)
        #expect(!valid(nonEmpty, "{}"))
        #expect(valid(nonEmpty, #"{"a": 1}"#))
    }

    /// A member whose schema no value satisfies (not a literal `false`): never offered, a comma
    /// that only it could follow is refused, and required it makes the object unsatisfiable.
    @Test func membersThatCannotBeWrittenAreNeverOffered() throws {
        let never = #"{"type": "object", "properties": {"x": false}, "required": ["x"]}"#
        let g = try anyOrder(
            #"{"type": "object", "properties": {"a": {"type": "integer"}, "p": \#(never)}, "additionalProperties": false}"#)
        #expect(valid(g, #"{"a": 1}"#))
        #expect(valid(g, "{}"))
        #expect(!prefix(g, #"{"a": 1,"#))
        #expect(!prefix(g, #"{"p""#))
        #expect(throws: SchemaError.self) {
            try anyOrder(#"{"type": "object", "properties": {"a": {"type": "integer"}, "p": \#(never)}, "required": ["p"]}"#)
        }
    }

    @Test func nestedObjectsKeepTheirOwnSets() throws {
        let g = try anyOrder(
            ##"{"type": "object", "properties": {"a": {"type": "integer"}, "o": {"$ref": "#"}}, "required": ["a"], "##
                + #""additionalProperties": false}"#)
        #expect(valid(g, #"{"o": {"a": 2, "o": {"a": 3}}, "a": 1}"#))
        #expect(valid(g, #"{"o": {"o": {"a": 3}, "a": 2}, "a": 1}"#))
        #expect(!valid(g, #"{"o": {"a": 2, "a": 3}, "a": 1}"#))
        #expect(!valid(g, #"{"o": {"o": {"a": 3}}, "a": 1}"#))
        #expect(!valid(g, #"{"a": 1, "o": {"a": 2}, "a": 1}"#))
    }

    @Test func dependentRequiredStillHolds() throws {
        let g = try anyOrder(
            #"{"type": "object", "properties": {"card": {"type": "string"}, "billing": {"type": "string"}, "n": {"type": "integer"}}, "#
                + #""dependentRequired": {"card": ["billing"]}, "additionalProperties": false}"#)
        for (doc, ok) in [
            (#"{}"#, true), (#"{"n": 1}"#, true), (#"{"billing": "b"}"#, true), (#"{"billing": "b", "card": "c"}"#, true),
            (#"{"card": "c", "n": 1, "billing": "b"}"#, true), (#"{"card": "c"}"#, false), (#"{"n": 1, "card": "c"}"#, false),
            (#"{"card": "c", "billing": "b", "card": "d"}"#, false)
        ] {
            #expect(valid(g, doc) == ok, "\(doc)")
        }
    }

    @Test func propertyCountsAndWitnessesKeepTheSchemaOrder() throws {
        // Documented fallback: these objects compile as in schema order.
        let g = try anyOrder(#"{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "maxProperties": 1}"#)
        #expect(valid(g, #"{"b": 1}"#))
        #expect(!valid(g, #"{"a": 1, "b": 1}"#))
    }

    /// The official suite in any order: still no invalid instance accepted, and the valid
    /// instances refused for their property order are accepted.
    @Test func jsonSchemaTestSuiteInAnyOrder() throws {
        let ordered = try runSuite(directory: "json-schema-test-suite", assertFormat: true)
        let any = try runSuite(directory: "json-schema-test-suite", assertFormat: true, propertyOrder: .any)
        #expect(any.invalidAccepted.isEmpty, "\(any.invalidAccepted)")
        #expect(any.unexpectedErrors.isEmpty, "\(any.unexpectedErrors)")
        #expect(any.compiled == ordered.compiled)
        #expect(any.validRejected.count < ordered.validRejected.count, "\(any.validRejected)")
        #expect(Set(any.validRejected).isSubset(of: Set(ordered.validRejected)))
    }

    static func fortyProperties() -> String {
        let props = (0..<40).map { #""p\#($0)": {"type": "boolean"}"# }.joined(separator: ", ")
        let required = stride(from: 0, to: 40, by: 4).map { #""p\#($0)""# }.joined(separator: ", ")
        return #"{"type": "object", "properties": {\#(props)}, "required": [\#(required)], "additionalProperties": false}"#
    }

    /// Whether `text` is valid under `fortyProperties()` written compactly: a validator
    /// independent of the grammar.
    static func validFortyProperties(_ text: String) -> Bool {
        guard text.hasPrefix("{"), text.hasSuffix("}") else { return false }
        let body = text.dropFirst().dropLast()
        var seen = Set<Int>()
        if !body.isEmpty {
            for member in body.split(separator: ",", omittingEmptySubsequences: false) {
                let parts = member.split(separator: ":", omittingEmptySubsequences: false)
                guard parts.count == 2, parts[0].hasPrefix("\"p"), parts[0].hasSuffix("\""), ["true", "false"].contains(parts[1]),
                    let i = Int(parts[0].dropFirst(2).dropLast()), (0..<40).contains(i), String(i) == parts[0].dropFirst(2).dropLast(),
                    seen.insert(i).inserted
                else { return false }
            }
        }
        return stride(from: 0, to: 40, by: 4).allSatisfy { seen.contains($0) }
    }

    @Test func fortyPropertiesCompileSmallAndMaskExactly() throws {
        let schema = Self.fortyProperties()
        let g = try anyOrder(schema) { $0.maxWhitespaceRun = 0 }
        let ordered = try compile(schema) { $0.maxWhitespaceRun = 0 }
        // Linear in the properties: a few positions per member, not one per order or subset.
        #expect(g.positionCount < 40 * 20)
        #expect(g.positionCount < ordered.positionCount)
        // A vocabulary subset keeps the brute-force check quick.
        var tokens: [[UInt8]] = []
        var special = Set<Int>()
        for (id, t) in smolVocabulary.tokens.enumerated()
        where id % 23 == 0 || t.count == 1 || t.allSatisfy({ "\"{}[],:ptruefals0123456789".utf8.contains($0) }) {
            if smolVocabulary.specialTokens.contains(id) { special.insert(tokens.count) }
            tokens.append(t)
        }
        let vocab = TokenVocabulary(tokens: tokens, specialTokens: special)
        let computer = TokenMaskComputer(vocabulary: vocab)
        var rng = SplitMix64(seed: 45)
        var documents = 0
        for _ in 0..<4 {
            let m = GrammarMatcher(grammar: g)
            // A matcher takes over the pool of the one before (StackPoolShelf): count its own.
            let setsBefore = m.pool.seenSets.count
            var text: [UInt8] = []
            var steps = 0
            while true {
                let mask = computer.mask(for: m)
                let allowed = mask.allowed
                if steps % 4 == 0 { #expect(allowed == bruteForceMask(m, vocab), "\(String(decoding: text, as: UTF8.self))") }
                #expect(!allowed.isEmpty || m.isComplete, "dead end after \(String(decoding: text, as: UTF8.self))")
                let choices = allowed.filter { !vocab.specialTokens.contains($0) }
                if choices.isEmpty || (m.canAcceptEnd && rng.next() % 2 == 0) { break }
                let id = choices[Int(rng.next() % UInt64(choices.count))]
                #expect(m.accept(bytes: vocab.tokens[id]))
                text += vocab.tokens[id]
                steps += 1
                if steps > 2_000 { break }
            }
            #expect(m.canAcceptEnd)
            let doc = String(decoding: text, as: UTF8.self)
            #expect(Self.validFortyProperties(doc), "\(doc)")
            documents += 1
            // The sets created are the ones the input reached or tried: after each member
            // written, the next members' claims (at most 40).
            #expect(m.pool.seenSets.count - setsBefore <= 41 * 41)
        }
        #expect(documents == 4)
        // The validator and the grammar agree on hand-written documents.
        let members: [String] = (0..<40).map { #""p\#($0)":true"# }
        let requiredOnly: [String] = stride(from: 36, through: 0, by: -4).map { members[$0] }
        let docs: [[String]] = [members.reversed(), requiredOnly, Array(members.dropFirst()), members + [members[7]]]
        for doc in docs.map({ "{" + $0.joined(separator: ",") + "}" }) {
            #expect(valid(g, doc) == Self.validFortyProperties(doc), "\(doc)")
        }
    }
}
