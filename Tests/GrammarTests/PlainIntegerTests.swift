import Grammar
import LeapJSON
import Testing

@Suite struct PlainIntegerTests {
    func accepts(_ text: String, _ schema: String, plain: Bool) throws -> Bool {
        var o = JSONSchemaCompiler.Options()
        o.plainIntegers = plain
        let m = GrammarMatcher(grammar: try JSONSchemaCompiler.compile(schema, options: o))
        return m.accept(text) && m.canAcceptEnd
    }

    @Test func plainIntegersRejectFractionsAndHugeValues() throws {
        let schema = #"{"type": "integer"}"#
        for (text, ok) in [
            ("12", true), ("-9223372036854775807", true), ("9223372036854775807", true),
            ("9223372036854775808", false), ("123456789012345678901234", false),
            ("12.0", false), ("1e3", false), ("0", true), ("-0", true)
        ] {
            #expect(try accepts(text, schema, plain: true) == ok, "\(text)")
        }
        // Without the option, 12.0 and huge integers are integers, as JSON Schema says.
        #expect(try accepts("12.0", schema, plain: false))
        #expect(try accepts("123456789012345678901234", schema, plain: false))
        // Numbers are unaffected.
        #expect(try accepts("12.5", #"{"type": "number"}"#, plain: true))
        #expect(try accepts("1e300", #"{"type": "number"}"#, plain: true))
    }
}
