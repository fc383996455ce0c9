import LeapJSON
import Testing

@testable import Grammar

/// Issue 45, item 2 (continued): `format: regex` as a regular language (see `RegexFormat`).
@Suite struct RegexFormatTests {
    static let schema = #"{"type": "string", "format": "regex"}"#
    func q(_ s: String) -> String { JSONValue.string(s).serialized(.compact) }

    @Test func acceptsCommonPatterns() throws {
        let g = try compile(Self.schema)
        for p in [
            "", "^[a-zA-Z0-9_]{3,16}$", "^[a-zA-Z0-9]+$", "^/.+/$", "(a|b)*c", #"\d+(\.\d{1,2})?"#, "(?:x)?y", "[^-]", "[-a]",
            "[a-]", "[\\]\\\\]", #"^\s*$"#, "a||b", "|", "()", "x{2}", "x{0,}", "x{1,9}", "x{3,100}", "x*?", "(?=a)b", "(?!a).",
            #"\bword\B"#, "[\\w.-]+@[\\w-]+", #"\u00e9\x41"#, "é+", "/path/", "((((a))))", "[0-9a-fA-F]", "a,b:c=d!e",
            #"\/\{\}\[\]"#, "[b-z]"
        ] {
            #expect(valid(g, q(p)), "\(p)")
        }
    }

    @Test func refusesInvalidPatterns() throws {
        let g = try compile(Self.schema)
        for p in [
            "*", "\\", "+a", "a**", "a{2}{3}", "^*", "$+", #"\b?"#, "(", ")", "(a", "a)", "[]", "[^]", "[a", "[z-a]", "[9-0]",
            "x{2,1}", "x{9,3}", "x{", "x}", "]", "{1}", "(?<=a)b", "(?<n>a)", "(?P<n>a)", #"\1"#, #"\0"#, #"\e"#, #"\x4"#,
            #"\u12"#, "(?i)a", "(?=a)*", "[\\d-z]", "[a-\\d]", "a{,3}", "a{01}", "\u{1}"
        ] {
            #expect(!valid(g, q(p)), "\(p)")
        }
    }

    /// The documented restrictions: valid patterns that the language leaves out.
    @Test func documentedRestrictions() throws {
        let g = try compile(Self.schema)
        let nested = String(repeating: "(", count: RegexFormat.maxGroupDepth)
        #expect(valid(g, q(nested + "a" + String(repeating: ")", count: RegexFormat.maxGroupDepth))))
        #expect(!valid(g, q("(" + nested + "a" + String(repeating: ")", count: RegexFormat.maxGroupDepth + 1))))
        for p in ["x{10,20}", "[c-d]", "(a)\\1", "[&]", "(?=(a))", "a{1000}"] { #expect(!valid(g, q(p)), "\(p)") }
    }

    /// Every string a walk produces parses as a pattern (this module's ECMA-262 parser, which
    /// rejects what ECMA-262 and Python's `re` both reject), lookarounds and `\b` aside.
    @Test func walksAreValidPatterns() throws {
        let g = try compile(Self.schema)
        let alphabet = Array(#""()[]{}|*+?^$\.-,:09azAZ_/dwbxu"#.utf8)
        let texts = randomWalks(g, alphabet: alphabet, walks: 120, seed: 11, maxBytes: 60, endOdds: 8, maskEvery: 37) { text in
            let p = unquoted(text)
            guard !p.contains("(?="), !p.contains("(?!"), !p.contains(#"\b"#), !p.contains(#"\B"#) else { return }
            #expect((try? RegexParser.parse(p)) != nil, "\(p)")
        }
        #expect(texts.count > 30)
    }

    /// A property holding a pattern, with other formats beside: only `regex` is checked there.
    @Test func inAnObject() throws {
        let g = try compile(#"{"type": "object", "properties": {"r": {"type": "string", "format": "regex"}}, "required": ["r"]}"#)
        #expect(valid(g, #"{"r": "^a+$"}"#) && !valid(g, #"{"r": "a**"}"#))
    }
}

/// Many `patternProperties` on one object: only the classes of keys that some key can fall in.
@Suite struct ManyPatternPropertiesTests {
    @Test func disjointLiteralPatterns() throws {
        let names = (0..<12).map { "k\($0)x" }
        let pp = names.enumerated().map { i, n in "\"^\(n)$\": {\"type\": \"\(i % 2 == 0 ? "integer" : "string")\"}" }
        let schema = #"{"type": "object", "additionalProperties": false, "patternProperties": {"# + pp.joined(separator: ", ") + "}}"
        let g = try compile(schema)
        #expect(valid(g, #"{"k0x": 1, "k1x": "a", "k10x": 3}"#) && valid(g, "{}"))
        #expect(!valid(g, #"{"k0x": "a"}"#) && !valid(g, #"{"k1x": 1}"#) && !valid(g, #"{"k12x": 1}"#))
    }

    /// Overlapping patterns: a key matching several gets all their schemas.
    @Test func overlappingPatterns() throws {
        let pp = (0..<8).map { "\"^a\($0)\": {\"minimum\": \($0)}" } + [#""b$": {"type": "integer"}"#]
        let schema =
            #"{"type": "object", "additionalProperties": {"type": "string"}, "patternProperties": {"# + pp.joined(separator: ", ") + "}}"
        let g = try compile(schema)
        #expect(valid(g, #"{"a7": 7, "a3b": 5, "zz": "s", "xb": 2}"#))
        #expect(!valid(g, #"{"a7": 6}"#) && !valid(g, #"{"a3b": 5.5}"#) && !valid(g, #"{"zz": 1}"#) && !valid(g, #"{"xb": "s"}"#))
    }

    @Test func tooManyClassesIsATypedRefusal() {
        // Independent patterns: every one of the 2^7 combinations holds keys.
        let pp = (0..<7).map { "\"\($0)\": {\"type\": \"integer\"}" }
        let e = compileError(#"{"type": "object", "patternProperties": {"# + pp.joined(separator: ", ") + "}}")
        #expect(e?.kind == .unsupported(keyword: "patternProperties"), "\(String(describing: e))")
        let many = (0..<17).map { "\"^p\($0)$\": true" }
        let e2 = compileError(#"{"type": "object", "patternProperties": {"# + many.joined(separator: ", ") + "}}")
        #expect(e2?.kind == .unsupported(keyword: "patternProperties"), "\(String(describing: e2))")
    }
}

/// `multipleOf` 10^-k (k <= 4) on unbounded numbers: at most k fraction digits, exponents read.
@Suite struct DecimalMultipleOfTests {
    @Test func hundredths() throws {
        let g = try compile(#"{"type": "number", "multipleOf": 0.01}"#)
        for ok in ["0", "5", "5.0", "99.99", "-8.25", "100.10", "0.070", "1e+16", "1.2345e16", "1.234e1", "1.5E1", "12e0", "1.23e0"] {
            #expect(valid(g, ok), "\(ok)")
        }
        for bad in ["100.001", "0.005", "1.234", "1.2345e1", "1e-2", "5.5e-1", "1.234e0", "-0.001"] { #expect(!valid(g, bad), "\(bad)") }
    }

    @Test func withOtherTypesAndInObjects() throws {
        let g = try compile(#"{"type": "object", "properties": {"t": {"multipleOf": 0.1, "type": ["number", "null"]}}}"#)
        #expect(valid(g, #"{"t": 8.2}"#) && valid(g, #"{"t": null}"#) && !valid(g, #"{"t": 8.25}"#))
    }

    /// Still refused: bounds beside a decimal divisor, other divisors, 10^-5 and beyond.
    @Test func stillRefused() {
        for schema in [
            #"{"type": "number", "multipleOf": 0.01, "minimum": 0}"#, #"{"type": "number", "multipleOf": 0.25}"#,
            #"{"type": "number", "multipleOf": 0.00001}"#
        ] {
            #expect(compileError(schema)?.kind == .unsupported(keyword: "multipleOf"), "\(schema)")
        }
    }

    /// Walks: every number produced has at most 2 fraction digits once its exponent is applied.
    @Test func walksStayMultiples() throws {
        let g = try compile(#"{"type": "number", "multipleOf": 0.01}"#)
        randomWalks(g, alphabet: Array("-0123456789.eE+".utf8), walks: 300, seed: 21, maxBytes: 24, maskEvery: 7) { text in
            #expect(Self.hasAtMostTwoPlaces(text), "\(text)")
        }
    }

    /// Exact decimal check: the mantissa's digits after the point beyond its exponent.
    static func hasAtMostTwoPlaces(_ text: String) -> Bool {
        let parts = text.lowercased().split(separator: "e", omittingEmptySubsequences: false)
        let exp = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
        let mantissa = parts[0].split(separator: ".", omittingEmptySubsequences: false)
        var frac = mantissa.count > 1 ? String(mantissa[1]) : ""
        while frac.hasSuffix("0") { frac.removeLast() }
        return frac.count - exp <= 2
    }
}

/// `allOf` of objects where some side has `patternProperties`: merged by keys.
@Suite struct AllOfPatternPropertiesTests {
    @Test func propertiesBesidePatternsAndAdditional() throws {
        let g = try compile(
            #"""
            {"allOf": [{"properties": {"a": {"type": "integer"}}},
                       {"patternProperties": {"^[a-z]+$": {"minimum": 0}}, "additionalProperties": false}]}
            """#)
        #expect(valid(g, #"{"a": 1}"#) && valid(g, #"{"b": 2, "a": 3}"#) && valid(g, #"{"b": "s"}"#))
        #expect(!valid(g, #"{"a": -1}"#) && !valid(g, #"{"a": "x"}"#) && !valid(g, #"{"B": 1}"#) && !valid(g, #"{"b": -2}"#))
    }

    @Test func patternsAndAdditionalOnBothSides() throws {
        for order in [false, true] {
            let g = try compile(
                #"""
                {"allOf": [{"patternProperties": {"^x": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
                           {"patternProperties": {"y$": {"minimum": 5}}, "additionalProperties": false}]}
                """#
            ) { if order { $0.propertyOrder = .any } }
            #expect(valid(g, #"{"xy": 6}"#) && valid(g, #"{"ay": "s"}"#) && valid(g, #"{"ay": "s", "xy": 5}"#), "\(order)")
            #expect(!valid(g, #"{"xy": 4}"#) && !valid(g, #"{"xy": 5.5}"#) && !valid(g, #"{"xa": 1}"#), "\(order)")
            #expect(!valid(g, #"{"ay": 7}"#) && !valid(g, #"{"zz": "s"}"#) && !valid(g, #"{"xa": "s"}"#), "\(order)")
        }
    }

    /// A declared name matching only the other side's patterns keeps its own schema.
    @Test func aNameMatchingTheOtherSidesPatternsOnly() throws {
        let g = try compile(
            #"""
            {"allOf": [{"properties": {"x-a": {"type": "integer"}}, "patternProperties": {"^y": true}, "additionalProperties": false},
                       {"patternProperties": {"^x": {"minimum": 1}}, "additionalProperties": false}]}
            """#)
        #expect(valid(g, #"{"x-a": 2}"#) && !valid(g, #"{"x-a": 0}"#) && !valid(g, #"{"x-a": "s"}"#))
        #expect(!valid(g, #"{"xb": 2}"#) && !valid(g, #"{"yb": 2}"#) && valid(g, "{}"))
        #expect(!valid(g, "{\"x-a\\n\": 2}"))
    }
}
