import Foundation
import LeapJSON
import Sampling
import Testing

@testable import Grammar

func compile(_ schema: String, _ configure: (inout JSONSchemaCompiler.Options) -> Void = { _ in }) throws -> Grammar {
    var options = JSONSchemaCompiler.Options()
    configure(&options)
    return try JSONSchemaCompiler.compile(schema, options: options)
}

/// Whether the grammar accepts `text` completely.
func valid(_ g: Grammar, _ text: String) -> Bool { accepts(g, text) }

/// Whether `text` is a prefix the grammar can continue.
func prefix(_ g: Grammar, _ text: String) -> Bool { GrammarMatcher(grammar: g).accept(text) }

@Suite struct MatcherTests {
    @Test func acceptRollbackAndEnd() throws {
        let g = try compile(#"{"type": "integer"}"#)
        let m = GrammarMatcher(grammar: g)
        #expect(!m.canAcceptEnd)
        #expect(m.accept("12"))
        #expect(m.canAcceptEnd && !m.isComplete)
        #expect(!m.accept("x"))
        #expect(m.position == 2)
        let mark = m.checkpoint()
        #expect(m.accept("3"))
        m.rollback(to: mark)
        #expect(m.position == 2)
        m.rollback(bytes: 2)
        #expect(m.position == 0)
        #expect(!m.accept("012"))  // all or nothing
        #expect(m.position == 0)
    }

    @Test func forcedBytes() throws {
        let g = try compile(
            #"{"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], "additionalProperties": false}"#)
        let m = GrammarMatcher(grammar: g)
        #expect(m.forcedBytes() == Array("{".utf8))
        #expect(m.accept("{"))
        // Whitespace or the key may follow: no single forced byte.
        #expect(m.forcedBytes().isEmpty)
        #expect(m.accept("\""))
        #expect(m.forcedBytes() == Array("name\"".utf8))
        // A string constant may be spelled with escapes ("\u0068ello"), so only the quote is forced.
        let c = try compile(#"{"const": "hello"}"#)
        #expect(GrammarMatcher(grammar: c).forcedBytes() == [0x22])
        let lit = try compile(#"{"const": [true, null]}"#)
        #expect(GrammarMatcher(grammar: lit).forcedBytes() == [0x5B])
    }

    @Test func documentHasNoSurroundingWhitespace() throws {
        let g = try compile("true")
        #expect(valid(g, #"{"a": [1, 2.5, "x", null, true, {}]}"#))
        #expect(valid(g, "{ \"a\" :\n[ 1 ,2 ] }"))
        #expect(!valid(g, " 1"))
        #expect(!valid(g, "1 "))
        #expect(!valid(g, "[1,]"))
        let compact = try compile("true") { $0.maxWhitespaceRun = 0 }
        #expect(valid(compact, #"{"a":[1,2]}"#) && !valid(compact, #"{"a": [1,2]}"#))
        let short = try compile("true") { $0.maxWhitespaceRun = 2 }
        #expect(valid(short, "[1,\n 2]") && !valid(short, "[1,   2]"))
        #expect(!valid(g, "{\"a\":1,}"))
    }
}

@Suite struct StringTests {
    let any = try! compile(#"{"type": "string"}"#)

    @Test func escapesAndControlCharacters() {
        #expect(valid(any, #""a\"b\\c\/d\b\f\n\r\t""#))
        #expect(valid(any, #""\u00e9\uD83D\uDE00""#))
        #expect(!valid(any, #""\x""#))
        #expect(!valid(any, #""\u12G4""#))
        #expect(!valid(any, "\"a\nb\""))  // raw control character
        #expect(!valid(any, "\"\u{1}\""))
        #expect(!prefix(any, #""\uDC00"#))  // lone low surrogate
        #expect(!valid(any, #""\uD83D""#))  // high surrogate without its pair
        #expect(!prefix(any, #""\uD83D\u0041"#))
    }

    @Test func utf8Validity() {
        func bytes(_ b: [UInt8]) -> Bool {
            let m = GrammarMatcher(grammar: any)
            return m.accept(bytes: [0x22] + b + [0x22]) && m.canAcceptEnd
        }
        #expect(bytes([0xC3, 0xA9]))  // é
        #expect(bytes([0xF0, 0x9F, 0x98, 0x80]))  // 😀
        #expect(!bytes([0xC0, 0x80]))  // overlong
        #expect(!bytes([0xE0, 0x80, 0x80]))  // overlong
        #expect(!bytes([0xED, 0xA0, 0x80]))  // UTF-8 encoded surrogate
        #expect(!bytes([0xF4, 0x90, 0x80, 0x80]))  // above U+10FFFF
        #expect(!bytes([0x80]))
        #expect(!bytes([0xC3]))
    }

    @Test func lengthsCountScalars() throws {
        let g = try compile(#"{"type": "string", "minLength": 2, "maxLength": 3}"#)
        #expect(!valid(g, #""a""#))
        #expect(valid(g, #""ab""#))
        #expect(valid(g, #""éé""#))
        #expect(valid(g, #""\u00e9\n😀""#))
        #expect(!valid(g, #""abcd""#))
        #expect(!prefix(g, #""abcd"#))
        #expect(valid(g, #""a\uD83D\uDE00""#))
        #expect(!prefix(g, #""abc\"#))  // no room for a fourth scalar
        // Prefixes that cannot reach minLength within the pattern are refused at once.
        let p = try compile(#"{"type": "string", "pattern": "^(ab|c)$", "minLength": 2}"#)
        #expect(valid(p, #""ab""#) && !prefix(p, #""c"#))
        #expect(throws: SchemaError.self) { try compile(#"{"type": "string", "pattern": "^a$", "minLength": 2}"#) }
    }

    @Test func patterns() throws {
        let anchored = try compile(#"{"type": "string", "pattern": "^[a-z]{2,3}-\\d+$"}"#)
        #expect(valid(anchored, #""ab-12""#))
        #expect(!valid(anchored, #""abcd-1""#))
        #expect(!valid(anchored, #""ab-""#))
        let search = try compile(#"{"type": "string", "pattern": "b+c"}"#)
        #expect(valid(search, #""aaabbbcz""#))
        #expect(!valid(search, #""aaac""#))
        let alt = try compile(#"{"type": "string", "pattern": "^(cat|dog)s?$|^x"}"#)
        #expect(valid(alt, #""dogs""#) && valid(alt, #""xyz""#) && !valid(alt, #""cats!""#))
        let escaped = try compile(#"{"type": "string", "pattern": "^a\\.b$"}"#)
        #expect(valid(escaped, #""a.b""#) && !valid(escaped, #""axb""#))
        #expect(throws: SchemaError.self) { try compile(#"{"type": "string", "pattern": "a(?=a)"}"#) }
        // Lookaheads at the start of an anchored pattern become DFA intersections/complements.
        let look = try compile(#"{"type": "string", "pattern": "^(?!abc|x)(?=.{2,4}$)[a-z]+"}"#)
        #expect(
            valid(look, #""abd""#) && !valid(look, #""abcd""#) && !valid(look, #""xy""#) && !valid(look, #""a""#)
                && !valid(look, #""abdef""#))
        #expect(throws: SchemaError.self) { try compile(#"{"type": "string", "pattern": "(a)\\1"}"#) }
    }

    @Test func formats() throws {
        let date = try compile(#"{"type": "string", "format": "date"}"#)
        #expect(valid(date, #""2024-02-29""#))
        #expect(!valid(date, #""2023-02-29""#))
        #expect(valid(date, #""2000-02-29""#))
        #expect(!valid(date, #""1900-02-29""#))
        #expect(!valid(date, #""2024-04-31""#))
        let dt = try compile(#"{"type": "string", "format": "date-time"}"#)
        #expect(valid(dt, #""2024-01-15T09:30:00.5+01:00""#))
        #expect(!valid(dt, #""2024-01-15 09:30:00Z""#))
        let ip = try compile(#"{"format": "ipv4"}"#)
        #expect(valid(ip, #""192.168.0.1""#) && !valid(ip, #""256.1.1.1""#) && !valid(ip, #""01.1.1.1""#))
        #expect(valid(ip, "12"))  // format applies to strings only
        let uuid = try compile(#"{"type": "string", "format": "uuid"}"#)
        #expect(valid(uuid, #""123e4567-e89b-12d3-a456-426614174000""#))
        let email = try compile(#"{"type": "string", "format": "email"}"#)
        #expect(valid(email, #""joe.bloggs@example.com""#) && !valid(email, #""joe""#))
        let uri = try compile(#"{"type": "string", "format": "uri"}"#)
        #expect(valid(uri, #""https://example.com/a?b=c#d""#) && !valid(uri, #""not a uri""#))
        // Unknown formats are annotations; known-but-unenforceable ones are errors.
        #expect(valid(try compile(#"{"type": "string", "format": "x-custom"}"#), #""anything""#))
        #expect(throws: SchemaError.self) { try compile(#"{"type": "string", "format": "idn-email"}"#) }
    }

    @Test func enumsCompareDecodedText() throws {
        let g = try compile(#"{"enum": ["a\"b", "é", 3, null, [1, {"k": true}]]}"#)
        #expect(valid(g, #""a\"b""#))
        #expect(valid(g, #""\u00e9""#))
        #expect(valid(g, "3") && valid(g, "3.0"))
        #expect(valid(g, "null"))
        #expect(valid(g, #"[1, {"k": true}]"#))
        #expect(!valid(g, #""a""#) && !valid(g, "4") && !valid(g, "[1]"))
    }
}

@Suite struct NumberTests {
    @Test func jsonNumberSyntax() throws {
        let n = try compile(#"{"type": "number"}"#)
        for ok in ["0", "-0", "12", "1.5", "-0.25", "1e10", "1E-2", "2.5e+3"] { #expect(valid(n, ok), "\(ok)") }
        for bad in ["01", "-", "1.", ".5", "+1", "1e", "0x10", "--1", "1.2.3"] { #expect(!valid(n, bad), "\(bad)") }
        #expect(!prefix(n, "01"))
    }

    @Test func integers() throws {
        let i = try compile(#"{"type": "integer"}"#)
        #expect(valid(i, "42") && valid(i, "-7") && valid(i, "1.0") && valid(i, "1.000"))
        #expect(!valid(i, "1.5") && !valid(i, "1e2"))
    }

    @Test func bounds() throws {
        let g = try compile(#"{"type": "integer", "minimum": -5, "exclusiveMaximum": 100}"#)
        #expect(valid(g, "-5") && valid(g, "99") && valid(g, "0") && valid(g, "-0"))
        #expect(!valid(g, "-6") && !valid(g, "100") && !valid(g, "1000"))
        #expect(!prefix(g, "-6"))
        #expect(!prefix(g, "100"))
        #expect(prefix(g, "10"))
        let n = try compile(#"{"type": "number", "exclusiveMinimum": 0, "maximum": 1}"#)
        #expect(valid(n, "0.5") && valid(n, "1") && valid(n, "1.0") && valid(n, "0.0001"))
        #expect(!valid(n, "0") && !valid(n, "0.0") && !valid(n, "1.01") && !valid(n, "-0.5"))
        let big = try compile(#"{"type": "integer", "maximum": 9223372036854775807}"#)
        #expect(valid(big, "9223372036854775807") && !valid(big, "9223372036854775808") && !valid(big, "99999999999999999999"))
        let mult = try compile(#"{"type": "integer", "multipleOf": 3, "minimum": 0}"#)
        #expect(valid(mult, "9") && !valid(mult, "10") && valid(mult, "0"))
        let bounded = try compile(#"{"type": "integer", "multipleOf": 10, "minimum": 5, "maximum": 35}"#)
        #expect(valid(bounded, "20") && !prefix(bounded, "4") && prefix(bounded, "3") && !prefix(bounded, "35") && !valid(bounded, "0"))
        #expect(throws: SchemaError.self) { try compile(#"{"type": "integer", "multipleOf": 10, "minimum": 1, "maximum": 9}"#) }
        #expect(valid(try compile(#"{"type": "number", "minimum": 0.5}"#), "0.5"))
        #expect(throws: SchemaError.self) { try compile(#"{"type": "number", "minimum": 1e30}"#) }
        #expect(valid(try compile(#"{"type": "integer", "minimum": 0.5}"#), "1"))
        #expect(throws: SchemaError.self) { try compile(#"{"type": "number", "multipleOf": 0.25}"#) }
    }
}

@Suite struct StructureTests {
    @Test func objectsFollowSchemaOrder() throws {
        let g = try compile(
            #"""
            {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
             "required": ["b"], "additionalProperties": false}
            """#)
        #expect(valid(g, #"{"b": "x"}"#))
        #expect(valid(g, #"{"a": 1, "b": "x", "c": true}"#))
        #expect(!valid(g, #"{"a": 1}"#))
        #expect(!valid(g, #"{"b": "x", "a": 1}"#))  // order follows the schema
        #expect(!valid(g, #"{"b": "x", "d": 1}"#))
        #expect(!valid(g, #"{"a": "1", "b": "x"}"#))
        #expect(!valid(g, "{}"))
    }

    @Test func additionalProperties() throws {
        let open = try compile(#"{"type": "object", "properties": {"a": {"type": "integer"}}}"#)
        #expect(valid(open, #"{"z": [1], "a": 1, "y": null}"#))
        #expect(!valid(open, #"{"a": "not an integer"}"#))  // a declared name is never an extra key
        let closedByOption = try compile(#"{"type": "object", "properties": {"a": {"type": "integer"}}}"#) {
            $0.additionalPropertiesDefault = false
        }
        #expect(!valid(closedByOption, #"{"z": 1}"#))
        let typed = try compile(#"{"type": "object", "additionalProperties": {"type": "string"}}"#)
        #expect(valid(typed, #"{"x": "1", "y": "2"}"#) && !valid(typed, #"{"x": 1}"#))
        let pattern = try compile(#"{"type": "object", "patternProperties": {"^n_": {"type": "number"}}, "additionalProperties": false}"#)
        #expect(valid(pattern, #"{"n_a": 1}"#) && !valid(pattern, #"{"n_a": "x"}"#) && !valid(pattern, #"{"m": 1}"#))
    }

    @Test func arrays() throws {
        let g = try compile(
            #"{"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "integer"}, "minItems": 2, "maxItems": 3}"#)
        #expect(valid(g, #"["a", 1]"#) && valid(g, #"["a", 1, 2]"#))
        #expect(!valid(g, #"["a"]"#) && !valid(g, #"["a", 1, 2, 3]"#) && !valid(g, #"[1, 1]"#) && !valid(g, #"["a", "b"]"#))
        let contains = try compile(#"{"type": "array", "contains": {"type": "integer"}, "minContains": 2, "maxContains": 3}"#)
        #expect(
            valid(contains, #"[1, "a", 2]"#) && valid(contains, "[1, 2, 3]") && !valid(contains, "[1]") && !valid(contains, "[1, 2, 3, 4]")
                && !valid(contains, "[]"))
        let notItems = try compile(#"{"type": "array", "not": {"items": {"type": "integer"}}}"#)
        #expect(valid(notItems, #"[1, "x"]"#) && !valid(notItems, "[1, 2]") && !valid(notItems, "[]"))
        let closed = try compile(#"{"prefixItems": [true, true], "items": false}"#)
        #expect(valid(closed, "[1, 2]") && !valid(closed, "[1, 2, 3]"))
    }

    @Test func combinators() throws {
        let any = try compile(#"{"anyOf": [{"type": "string", "maxLength": 2}, {"type": "integer", "minimum": 10}]}"#)
        #expect(valid(any, #""ab""#) && valid(any, "10") && !valid(any, "9") && !valid(any, #""abc""#))
        let one = try compile(#"{"oneOf": [{"type": "string"}, {"type": "null"}]}"#)
        #expect(valid(one, "null") && valid(one, #""x""#))
        // Overlapping branches: exactly one must hold (Bi and not Bj).
        let exact = try compile(#"{"oneOf": [{"type": "integer"}, {"minimum": 2}]}"#)
        #expect(valid(exact, "1") && !valid(exact, "3") && valid(exact, "2.5") && valid(exact, #""x""#) && !valid(exact, "1.5"))
        #expect(valid(try compile(#"{"oneOf": [{"type": "integer"}, {"minimum": 2}]}"#) { $0.oneOfAsAnyOf = true }, "3"))
        let exactlyOne = try compile(#"{"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}"#)
        #expect(
            valid(exactlyOne, #"{"a": 1}"#) && valid(exactlyOne, #"{"b": 1}"#) && !valid(exactlyOne, #"{"a": 1, "b": 2}"#)
                && !valid(exactlyOne, "{}"))
        #expect(throws: SchemaError.self) { try compile(#"{"oneOf": [{"uniqueItems": true}, {"minItems": 2}]}"#) }
        let all = try compile(#"{"allOf": [{"type": "integer", "minimum": 0}, {"maximum": 9}]}"#)
        #expect(valid(all, "5") && !valid(all, "10") && !valid(all, "-1"))
        let not = try compile(#"{"type": "object", "not": {"required": ["secret"]}}"#)
        #expect(valid(not, #"{"a": 1}"#) && !valid(not, #"{"secret": 1}"#))
        let counted = try compile(#"{"type": "object", "properties": {"a": true, "b": true}, "minProperties": 2, "maxProperties": 3}"#)
        #expect(valid(counted, #"{"a": 1, "b": 2}"#) && valid(counted, #"{"a": 1, "x": 0, "y": 0}"#))
        #expect(!valid(counted, #"{"a": 1}"#) && !valid(counted, #"{"a": 1, "b": 2, "c": 3, "d": 4}"#) && !valid(counted, "{}"))
        let names = try compile(
            #"{"type": "object", "properties": {"ab": true, "abcdef": true}, "propertyNames": {"maxLength": 3, "pattern": "^a"}}"#)
        #expect(
            valid(names, #"{"ab": 1, "ax": 2}"#) && !valid(names, #"{"abcdef": 1}"#) && !valid(names, #"{"b": 1}"#)
                && !valid(names, #"{"abcd": 1}"#))
        let dep = try compile(#"{"type": "object", "dependentRequired": {"a": ["b"]}}"#)
        #expect(valid(dep, #"{"b": 1, "a": 2}"#) && valid(dep, #"{"b": 1}"#) && !valid(dep, #"{"a": 2}"#))
        let ite = try compile(#"{"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"type": "integer"}}"#)
        #expect(valid(ite, #""ab""#) && !valid(ite, #""a""#) && valid(ite, "3") && !valid(ite, "null"))
        let notLen = try compile(#"{"not": {"maxLength": 2}}"#)
        // maxLength holds for every non-string, so its negation holds only for long strings.
        #expect(valid(notLen, #""abc""#) && !valid(notLen, #""ab""#) && !valid(notLen, "1") && !valid(notLen, "{}"))
        let frac = try compile(#"{"type": "number", "not": {"type": "integer"}, "maximum": 2}"#)
        #expect(
            valid(frac, "1.5") && valid(frac, "-0.25") && !valid(frac, "1") && !valid(frac, "1.0") && !valid(frac, "2.5")
                && !valid(frac, "1e2"))
        let notClosed = try compile(#"{"type": "object", "not": {"properties": {"a": true}, "additionalProperties": false}}"#)
        #expect(
            valid(notClosed, #"{"a": 1, "b": 2}"#) && valid(notClosed, #"{"b": 2}"#) && !valid(notClosed, #"{"a": 1}"#)
                && !valid(notClosed, "{}"))
        let closedOneOf = try compile(
            #"{"oneOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": false}, {"type": "object", "properties": {"b": {"type": "integer"}}, "additionalProperties": false}]}"#
        )
        #expect(
            valid(closedOneOf, #"{"a": 1}"#) && valid(closedOneOf, #"{"b": 1}"#) && !valid(closedOneOf, "{}")
                && !valid(closedOneOf, #"{"a": 1, "b": 2}"#) && !valid(closedOneOf, #"{"c": 1}"#))
        let notProp = try compile(#"{"type": "object", "not": {"properties": {"kind": {"const": "a"}}}}"#)
        #expect(valid(notProp, #"{"kind": "b"}"#) && !valid(notProp, #"{"kind": "a"}"#) && !valid(notProp, "{}"))
    }

    @Test func recursiveReferences() throws {
        let g = try compile(
            ##"""
            {"$defs": {"node": {"type": "object", "properties": {"value": {"type": "integer"},
              "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["value"], "additionalProperties": false}},
             "$ref": "#/$defs/node"}
            """##)
        #expect(valid(g, #"{"value": 1, "children": [{"value": 2}, {"value": 3, "children": []}]}"#))
        #expect(!valid(g, #"{"value": 1, "children": [{"v": 2}]}"#))
    }

    @Test func booleanSchemasAndErrors() throws {
        #expect(valid(try compile("true"), "[]"))
        #expect(throws: SchemaError.self) { try compile("false") }
        func keyword(_ s: String) -> String? {
            do {
                _ = try compile(s)
                return nil
            } catch let error as SchemaError {
                if case .unsupported(let k) = error.kind { return k }
                if case .limitExceeded(let limit) = error.kind { return "limit " + limit }
                return "invalid"
            } catch { return "other" }
        }
        #expect(keyword(#"{"type": "array", "uniqueItems": true}"#) == "uniqueItems")
        #expect(keyword(#"{"allOf": [{"contains": {"type": "integer"}}, {"contains": {"type": "string"}}]}"#) == "contains")
        #expect(keyword(#"{"if": {"uniqueItems": true}, "then": {"minItems": 1}}"#) == "if")
        #expect(keyword(#"{"type": "object", "minProperties": 5000, "maxProperties": 9000}"#) == nil)
        #expect(keyword(#"{"type": "object", "maxProperties": 90000}"#) == "limit maxRepetition")
        #expect(keyword(#"{"$ref": "http://example.com/schema.json"}"#) == "$ref")
        #expect(keyword(#"{"type": "strnig"}"#) == "invalid")
        #expect(keyword(##"{"$ref": "#/$defs/missing"}"##) == "invalid")
        #expect(keyword(#"{"minLength": -1}"#) == "invalid")
    }
}

@Suite struct GrammarBuilderTests {
    /// A tool-call grammar composed from literal text and a JSON Schema piece.
    @Test func composesLiteralTextWithSchemas() throws {
        var b = GrammarBuilder()
        let args = try JSONSchemaCompiler.addSchema(
            try JSONValue.parse(
                #"{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}"#),
            to: &b)
        let call = b.rule("call", [[b.literal("<tool_call>{\"name\": \"get_weather\", \"arguments\": "), args, b.literal("}</tool_call>")]])
        let g = try b.build(root: call)
        #expect(valid(g, #"<tool_call>{"name": "get_weather", "arguments": {"city": "NYC"}}</tool_call>"#))
        #expect(!valid(g, #"<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>"#))
    }
}

@Suite struct DecimalBoundTests {
    /// Exact comparison on a grid: numbers with up to 3 fraction digits, scaled by 1000.
    @Test func decimalBoundsAreExact() throws {
        var numbers: [(String, Int)] = []
        for milli in stride(from: -3500, through: 3500, by: 125) {
            let neg = milli < 0
            let m = abs(milli)
            let intPart = m / 1000, frac = m % 1000
            var fracText = frac == 0 ? "" : String(String(frac + 1000).dropFirst())
            while fracText.hasSuffix("0") { fracText.removeLast() }
            let base = (neg ? "-" : "") + String(intPart) + (fracText.isEmpty ? "" : "." + fracText)
            numbers.append((base, milli))
            numbers.append((base + (fracText.isEmpty ? ".0" : "0"), milli))
        }
        numbers.append(("-0", 0))
        numbers.append(("-0.0", 0))
        numbers.append(("12", 12000))
        numbers.append(("-12.5", -12500))
        let bounds: [(String, Int)] = [
            ("-2.5", -2500), ("-1", -1000), ("-0.25", -250), ("0", 0), ("0.5", 500), ("1.125", 1125), ("2.75", 2750)
        ]
        var checked = 0
        for (lo, loV) in bounds {
            for (hi, hiV) in bounds where hiV >= loV {
                for (loKey, hiKey) in [("minimum", "maximum"), ("exclusiveMinimum", "exclusiveMaximum"), ("minimum", "exclusiveMaximum")] {
                    let schema = #"{"type": "number", "\#(loKey)": \#(lo), "\#(hiKey)": \#(hi)}"#
                    guard let g = try? compile(schema) else {
                        // Only an empty range may fail to compile.
                        #expect(loV == hiV && (loKey.hasPrefix("exclusive") || hiKey.hasPrefix("exclusive")), "\(schema)")
                        continue
                    }
                    for (text, v) in numbers {
                        let okLo = loKey == "minimum" ? v >= loV : v > loV
                        let okHi = hiKey == "maximum" ? v <= hiV : v < hiV
                        #expect(valid(g, text) == (okLo && okHi), "\(schema) \(text)")
                        checked += 1
                    }
                }
            }
        }
        #expect(checked > 5000)
        // Lower bound only, and dead prefixes refused early.
        let g = try compile(#"{"type": "number", "exclusiveMinimum": 0.5}"#)
        #expect(valid(g, "0.51") && valid(g, "7") && valid(g, "100.25") && !valid(g, "0.5") && !valid(g, "0.4999"))
        #expect(!prefix(g, "-") && !prefix(g, "0.4") && prefix(g, "0.5") && prefix(g, "0"))
        let h = try compile(#"{"type": "number", "maximum": -0.5}"#)
        #expect(valid(h, "-0.5") && valid(h, "-7") && !valid(h, "-0.49") && !valid(h, "0") && !prefix(h, "0") && !prefix(h, "-0.4"))
    }
}

@Suite struct RollbackTests {
    /// Random accept/rollback sequences agree with replaying the kept bytes from scratch.
    @Test func rollbackEqualsReplay() throws {
        let g = try compile(
            #"{"type": "object", "properties": {"a": {"type": "array", "items": {"type": "number", "maximum": 50}}, "b": {"type": "string", "maxLength": 5}}}"#
        )
        let doc = Array(#"{"a": [1, 2.5, -300, 49], "b": "héllo"}"#.utf8)
        var rng = SplitMix64(seed: 42)
        for _ in 0..<50 {
            let m = GrammarMatcher(grammar: g)
            var kept = 0
            for _ in 0..<40 {
                if Bool.random(using: &rng), kept < doc.count {
                    let n = Int.random(in: 1...min(6, doc.count - kept), using: &rng)
                    #expect(m.accept(bytes: doc[kept..<(kept + n)]))
                    kept += n
                } else if kept > 0 {
                    let n = Int.random(in: 1...kept, using: &rng)
                    m.rollback(bytes: n)
                    kept -= n
                }
                let replay = GrammarMatcher(grammar: g)
                #expect(replay.accept(bytes: doc[..<kept]))
                // (Stack ids differ between pools, so compare behaviour rather than raw states.)
                #expect(m.position == kept && m.canAcceptEnd == replay.canAcceptEnd && m.state.threads.count == replay.state.threads.count)
                let probe = [UInt8.random(in: 0...255, using: &rng)]
                #expect(m.wouldAccept(Array(doc[kept...])) && m.wouldAccept(probe) == replay.wouldAccept(probe))
            }
        }
    }
}
