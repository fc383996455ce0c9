import Testing

@testable import LeapJSON

@Suite struct JSONParsingTests {
    @Test func keepsKeyOrderAndLastValueOfRepeatedKey() throws {
        let v = try JSONValue.parse(#"{"b": 1, "a": [true, null, 2.5], "b": "x"}"#)
        #expect(v.objectValue?.keys == ["b", "a"])
        #expect(v["b"] == .string("x"))
        #expect(v["a"] == .array([.bool(true), .null, .double(2.5)]))
    }

    @Test func integersStayIntegers() throws {
        #expect(try JSONValue.parse("12") == .integer(12))
        #expect(try JSONValue.parse("-0") == .integer(0))
        #expect(try JSONValue.parse("1.0") == .double(1.0))
        #expect(try JSONValue.parse("1e2") == .double(100))
        #expect(try JSONValue.parse("123456789012345678901234567890") == .double(1.2345678901234568e29))
    }

    @Test func escapesAndSurrogatePairs() throws {
        #expect(try JSONValue.parse(#""a\n\u00e9\ud83d\ude00\/""#) == .string("a\né😀/"))
    }

    @Test(arguments: ["", "{", "[1,]", "{\"a\" 1}", "01", "1.", "\"\u{01}\"", "tru", "[1] 2", "\"\\x\"", "-", "1e"])
    func rejectsMalformed(_ text: String) {
        #expect(throws: JSONParseError.self) { try JSONValue.parse(text) }
    }

    @Test func rejectsExcessiveNesting() {
        let deep = String(repeating: "[", count: 600) + String(repeating: "]", count: 600)
        #expect(throws: JSONParseError.self) { try JSONValue.parse(deep) }
    }
}

/// `StringLiteral`, the one string-escape decoder: its JSON dialect (the parser's) and its
/// Python-literal dialect (the function-call readers').
@Suite struct StringLiteralTests {
    func read(_ literal: String, _ dialect: StringLiteral.Dialect) throws -> String {
        let bytes = Array(literal.utf8)
        var position = 0
        let value = try StringLiteral.read(bytes, at: &position, dialect: dialect)
        #expect(position == bytes.count, "the literal ends at its closing quote")
        return value
    }

    @Test func bothDialectsReadJSON() throws {
        for dialect in [StringLiteral.Dialect.json, .pythonLiteral] {
            #expect(try read(#""a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00""#, dialect) == "a\"b\\c/d\u{08}\u{0C}\n\r\té😀")
            // A lone surrogate, which a Swift String cannot hold, becomes U+FFFD.
            #expect(try read(#""\ud800x""#, dialect) == "\u{FFFD}x")
        }
    }

    @Test func pythonDialectAddsPythonsLiterals() throws {
        #expect(try read(#"'it\'s'"#, .pythonLiteral) == "it's")
        #expect(try read(#""\x41\U0001F600\v\a\0""#, .pythonLiteral) == "A😀\u{0B}\u{07}\u{00}")
        #expect(try read(#""C:\dir""#, .pythonLiteral) == #"C:\dir"#, "an unknown escape stays as written")
        #expect(try read("\"a\\\nb\"", .pythonLiteral) == "ab", "backslash-newline continues the line")
        #expect(try read("\"tab\there\"", .pythonLiteral) == "tab\there")
    }

    @Test func jsonDialectRejectsWhatJSONDoesNot() {
        #expect(throws: StringLiteral.Failure(message: #"invalid escape '\x'"#, offset: 1)) { try read(#""\x41""#, .json) }
        #expect(throws: StringLiteral.Failure(message: "control character in string", offset: 2)) { try read("\"a\tb\"", .json) }
        #expect(throws: StringLiteral.Failure(message: #"invalid escape '\''"#, offset: 1)) { try read(#""\'""#, .json) }
    }

    @Test func errorsNameTheProblemAndItsOffset() {
        #expect(throws: StringLiteral.Failure(message: "unterminated string starting at byte 0", offset: 0)) {
            try read(#""open"#, .json)
        }
        #expect(throws: StringLiteral.Failure(message: "invalid hex digit in escape (4 hex digits expected)", offset: 2)) {
            try read(#""a\u12g4""#, .pythonLiteral)
        }
        #expect(throws: StringLiteral.Failure(message: "truncated escape (2 hex digits expected)", offset: 1)) {
            try read(#""\x4"#, .pythonLiteral)
        }
        #expect(throws: StringLiteral.Failure(message: "escape does not name a Unicode scalar value", offset: 1)) {
            try read(#""\U00110000""#, .pythonLiteral)
        }
    }
}

@Suite struct JSONSerializationTests {
    @Test func pythonStyle() throws {
        let v = try JSONValue.parse(#"{"name": "Zoë", "n": [1, 2.0, 1e-5, 1e16, 123.456], "ok": false, "z": null}"#)
        #expect(v.serialized(.python) == #"{"name": "Zoë", "n": [1, 2.0, 1e-05, 1e+16, 123.456], "ok": false, "z": null}"#)
        #expect(v.serialized() == #"{"name":"Zoë","n":[1,2.0,1e-05,1e+16,123.456],"ok":false,"z":null}"#)
    }

    @Test(arguments: [
        (1.0, "1.0"), (0.1, "0.1"), (1e15, "1000000000000000.0"), (1e16, "1e+16"), (0.0001, "0.0001"),
        (0.00001, "1e-05"), (-2.5, "-2.5"), (123456789.125, "123456789.125"), (1.5e300, "1.5e+300"),
        (Double.leastNonzeroMagnitude, "5e-324")
    ])
    func floatRepr(_ value: Double, _ expected: String) {
        #expect(JSONValue.pythonFloatRepr(value) == expected)
    }

    @Test func indentAndEscapes() {
        let v: JSONValue = ["a": ["x", "<&>'\"\u{1}"]]
        #expect(
            v.serialized(JSONFormat(itemSeparator: ", ", keySeparator: ": ", indent: 2))
                == "{\n  \"a\": [\n    \"x\",\n    \"<&>'\\\"\\u0001\"\n  ]\n}")
        #expect(v.serialized(JSONFormat(htmlSafe: true)) == #"{"a":["x","\u003c\u0026\u003e\u0027\"\u0001"]}"#)
        #expect(JSONValue.string("é😀").serialized(JSONFormat(asciiOnly: true)) == #""\u00e9\ud83d\ude00""#)
    }
}
