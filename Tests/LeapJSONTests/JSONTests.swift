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
