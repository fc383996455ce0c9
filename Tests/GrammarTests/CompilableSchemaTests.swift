import Foundation
import LeapJSON
import Sampling
import Testing

@testable import Grammar

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Issue 45, item 2: overlapping `oneOf` compiled as `anyOf` when asked (and counted), and the
/// formats `duration`, `ipv6` and `hostname` enforced as their RFCs define them.

/// Random walks through a grammar over `alphabet`: at each step one allowed byte is chosen at
/// random (the document ends, when it can, with probability 1/`endOdds`). Every finished text
/// goes to `check`; every `maskEvery`-th state's token mask is compared with the brute-force
/// mask over SmolLM2's vocabulary. Returns the finished texts.
@discardableResult
func randomWalks(
    _ g: Grammar, alphabet: [UInt8], walks: Int, seed: UInt64, maxBytes: Int = 80, endOdds: UInt64 = 12, maskEvery: Int = 0,
    check: (String) -> Void
) -> [String] {
    var rng = SplitMix64(seed: seed)
    let computer = maskEvery > 0 ? TokenMaskComputer(vocabulary: smolVocabulary) : nil
    var done: [String] = []
    var steps = 0
    for _ in 0..<walks {
        let m = GrammarMatcher(grammar: g)
        var bytes: [UInt8] = []
        while bytes.count < maxBytes {
            steps += 1
            if let computer, steps % maskEvery == 0 {
                #expect(computer.mask(for: m).allowed == bruteForceMask(m, smolVocabulary), "mask after \(bytes)")
            }
            if m.canAcceptEnd && (rng.next() % endOdds == 0 || !m.canContinue) { break }
            let next = alphabet.filter { m.wouldAccept([$0]) }
            guard let b = next.randomElement(using: &rng) else { break }
            #expect(m.accept(byte: b))
            bytes.append(b)
        }
        if m.canAcceptEnd {
            let text = String(decoding: bytes, as: UTF8.self)
            done.append(text)
            check(text)
        }
    }
    return done
}

/// The JSON string's content (the text between the quotes, without escapes).
func unquoted(_ json: String) -> String { (try? JSONValue.parse(json))?.stringValue ?? "<not a string: \(json)>" }

@Suite struct OverlappingOneOfTests {
    /// Two object branches that overlap, whose negations are not expressible (patternProperties).
    static let schema = #"""
        {"oneOf": [{"type": "object", "patternProperties": {"^a": {"type": "integer"}}},
                   {"type": "object", "required": ["b"]}]}
        """#

    func relaxed(_ schema: String) throws -> (Grammar, JSONSchemaCompiler.CompileReport) {
        let r = try JSONSchemaCompiler.compileReporting(try JSONValue.parse(schema), overlappingOneOf: .anyOf)
        return (r.grammar, r.report)
    }

    @Test func refusedByDefaultWithATypedError() throws {
        let e = compileError(Self.schema)
        #expect(e?.kind == .unsupported(keyword: "oneOf"), "\(String(describing: e))")
        #expect(throws: SchemaError.self) { try JSONSchemaCompiler.compileReporting(try JSONValue.parse(Self.schema)) }
    }

    @Test func compiledAsAnyOfAndReported() throws {
        let (g, report) = try relaxed(Self.schema)
        #expect(report.oneOfsAsAnyOf == [""] && !report.isExact)
        #expect(valid(g, #"{"a": 1}"#) && valid(g, #"{"b": "x"}"#))
        #expect(valid(g, #"{"a": 1, "b": 2}"#))  // both branches: the documented widening
        #expect(!valid(g, #"{"a": "x"}"#) && !valid(g, "[]") && !valid(g, #"{"a": 1.5, "c": 1}"#))
        // Nested: the pointer names the oneOf.
        let nested = #"{"properties": {"p": "# + Self.schema + "}}"
        #expect(try relaxed(nested).1.oneOfsAsAnyOf == ["/properties/p"])
    }

    @Test func exactOneOfsStayExactAndUnreported() throws {
        // Provably exclusive, and exact through negation: nothing is relaxed.
        for schema in [
            #"{"oneOf": [{"type": "string"}, {"type": "integer"}]}"#,
            #"{"oneOf": [{"required": ["a"]}, {"required": ["b"]}]}"#
        ] {
            let (g, report) = try relaxed(schema)
            #expect(report.isExact)
            if schema.contains("required") {
                #expect(valid(g, #"{"a": 1}"#) && !valid(g, #"{"a": 1, "b": 2}"#))
            }
        }
    }

    /// Walks over the relaxed grammar: every document is valid under the anyOf reading, and
    /// the masks equal the brute-force masks.
    @Test func walksMatchTheAnyOfReading() throws {
        let (g, _) = try relaxed(Self.schema)
        let alphabet = Array(#"{}[]":,ab0123 -.x"#.utf8)
        randomWalks(g, alphabet: alphabet, walks: 40, seed: 45, maskEvery: 19) { text in
            guard case .object(let o)? = try? JSONValue.parse(text) else {
                Issue.record("not an object: \(text)")
                return
            }
            let first = o.keys.allSatisfy { !$0.hasPrefix("a") || o[$0]?.intValue != nil }
            #expect(first || o["b"] != nil, "\(text)")
        }
    }
}

/// Independent validators for the new formats.
enum FormatOracle {
    /// glibc's parser, which implements RFC 4291's text forms (no zone index).
    static func ipv6(_ s: String) -> Bool {
        var buf = in6_addr()
        return s.utf8.allSatisfy { $0 < 0x80 } && inet_pton(AF_INET6, s, &buf) == 1
    }

    static func hostname(_ s: String) -> Bool {
        guard !s.isEmpty, s.utf8.count <= 253 else { return false }
        return s.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
            let u = Array(label.utf8)
            func alnum(_ c: UInt8) -> Bool { (c >= 0x30 && c <= 0x39) || (c | 0x20 >= 0x61 && c | 0x20 <= 0x7A) }
            return (1...63).contains(u.count) && u.allSatisfy { alnum($0) || $0 == 0x2D } && alnum(u.first!) && alnum(u.last!)
        }
    }

    /// RFC 3339 appendix A, read part by part.
    static func duration(_ s: String) -> Bool {
        var rest = Substring(s)
        guard rest.first == "P" else { return false }
        rest = rest.dropFirst()
        /// The units present, in order, each after at least one digit.
        func units(_ part: Substring) -> String? {
            var out = "", digits = 0
            for c in part {
                if c.isASCII && c.isNumber {
                    digits += 1
                } else {
                    guard digits > 0 else { return nil }
                    out.append(c)
                    digits = 0
                }
            }
            return digits == 0 ? out : nil
        }
        let halves = rest.split(separator: "T", maxSplits: 1, omittingEmptySubsequences: false)
        guard let date = units(halves[0]) else { return false }
        if date == "W" { return halves.count == 1 }
        guard ["", "D", "M", "MD", "Y", "YM", "YMD"].contains(date) else { return false }
        if halves.count == 1 { return !date.isEmpty }
        guard let time = units(halves[1]) else { return false }
        return ["H", "HM", "HMS", "M", "MS", "S"].contains(time)
    }
}

@Suite struct NewFormatTests {
    func format(_ name: String) throws -> Grammar { try compile(#"{"type": "string", "format": "\#(name)"}"#) }
    func q(_ s: String) -> String { JSONValue.string(s).serialized(.compact) }

    @Test func duration() throws {
        let g = try format("duration")
        for s in ["P1Y", "P2M3D", "P1Y2M3DT4H5M6S", "PT10H", "PT1H2M", "PT5M6S", "PT0S", "P0D", "P12W", "P1DT1H"] {
            #expect(valid(g, q(s)) && FormatOracle.duration(s), "\(s)")
        }
        for s in ["", "P", "PT", "P1YT", "P1H", "PT1D", "P1D2Y", "P1Y2W", "P1", "1D", "P1DT", "PT1H1S", "P1Y1D", " P1D", "P1.5D", "p1d"] {
            #expect(!valid(g, q(s)) && !FormatOracle.duration(s), "\(s)")
        }
        randomWalks(g, alphabet: Array("\"P0123456789YMWDTHS".utf8), walks: 200, seed: 3, maskEvery: 11) { text in
            #expect(FormatOracle.duration(unquoted(text)), "\(text)")
        }
    }

    @Test func ipv6() throws {
        let g = try format("ipv6")
        for s in ["::", "::1", "1::", "1:2:3:4:5:6:7:8", "2001:DB8::ff00:42:8329", "::ffff:192.0.2.128", "1:2:3:4:5:6:1.2.3.4", "fe80::1:2"]
        {
            #expect(valid(g, q(s)) && FormatOracle.ipv6(s), "\(s)")
        }
        for s in [
            "", ":", ":::", "1:2:3:4:5:6:7", "1:2:3:4:5:6:7:8:9", "1::2::3", "12345::", "::g", "1.2.3.4", "::1.2.3", "::256.1.1.1",
            "::01.1.1.1", "fe80::1%eth0", "[::1]", " ::1", "1:2:3:4:5:6:7:8::", ":1::"
        ] {
            #expect(!valid(g, q(s)) && !FormatOracle.ipv6(s), "\(s)")
        }
        randomWalks(g, alphabet: Array("\"0123456789abcdefABCDEF:.".utf8), walks: 300, seed: 6, maxBytes: 50, maskEvery: 13) { text in
            #expect(FormatOracle.ipv6(unquoted(text)), "\(text)")
        }
    }

    @Test func hostname() throws {
        let g = try format("hostname")
        let label63 = String(repeating: "a", count: 63)
        let long = Array(repeating: label63, count: 4).joined(separator: ".")  // 255 characters
        for s in [
            "localhost", "www.example.com", "1host", "host-name", "xn--4gbwdl.xn--wgbh1c", label63 + ".com", String(long.dropFirst(2))
        ] {
            #expect(valid(g, q(s)) && FormatOracle.hostname(s), "\(s)")
        }
        for s in ["", ".", "a..b", "-a", "a-", "a_b", "a.", label63 + "a.com", long, String(long.dropFirst(1)), "é.com", "a b"] {
            #expect(!valid(g, q(s)) && !FormatOracle.hostname(s), "\(s)")
        }
        randomWalks(g, alphabet: Array("\"ab9-.".utf8), walks: 200, seed: 9, maxBytes: 300, endOdds: 40, maskEvery: 17) { text in
            #expect(FormatOracle.hostname(unquoted(text)), "\(text)")
        }
    }

    /// Formats still refused name the format, with a typed error.
    @Test func stillRefused() {
        for name in ["idn-email", "idn-hostname", "json-pointer", "uri-template", "iri"] {
            let e = compileError(#"{"type": "string", "format": "\#(name)"}"#)
            #expect(e?.kind == .unsupported(keyword: "format") && e?.message.contains(name) == true, "\(name): \(String(describing: e))")
        }
    }
}

/// `not` beside `enum`/`const` when the negation is not expressible: the listed values are
/// checked against the negated schema's grammar, in every key order.
@Suite struct NegatedEnumTests {
    static let notOneOf = #"""
        {"allOf": [{"enum": [{"bar": 2, "foo": "baz"}, {"bar": 2}, {"foo": "x"}, {"bar": "s"}, 3]},
                   {"not": {"oneOf": [{"properties": {"bar": {"type": "integer"}}, "required": ["bar"]},
                                      {"properties": {"foo": {"type": "string"}}, "required": ["foo"]}]}}]}
        """#

    @Test func valuesSatisfyingTheNegatedSchemaAreDropped() throws {
        let g = try compile(Self.notOneOf)
        // Both branches hold, or neither: oneOf fails, so `not` holds.
        #expect(valid(g, #"{"bar": 2, "foo": "baz"}"#) && valid(g, #"{"bar": "s"}"#) && valid(g, "3"))
        // Exactly one branch holds: refused.
        #expect(!valid(g, #"{"bar": 2}"#) && !valid(g, #"{"foo": "x"}"#))
        // Not listed: refused as before.
        #expect(!valid(g, #"{"bar": 3, "foo": "baz"}"#) && !valid(g, "4") && !valid(g, "{}"))
    }

    /// A listed object whose keys are not in the negated schema's order is still recognized.
    @Test func everyKeyOrderIsTried() throws {
        let g = try compile(
            #"""
            {"enum": [{"b": 1, "a": 2}, {"b": "x", "a": 2}, {"z": {"q": 1, "p": 2}, "a": 1}],
             "not": {"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "z": {"properties": {"p": {}, "q": {}},
                                    "additionalProperties": false}},
                     "patternProperties": {"^y": {"type": "integer"}}, "additionalProperties": false}}
            """#)
        #expect(!valid(g, #"{"b": 1, "a": 2}"#) && !valid(g, #"{"z": {"q": 1, "p": 2}, "a": 1}"#))
        #expect(valid(g, #"{"b": "x", "a": 2}"#))
    }

    @Test func patternPropertiesNegation() throws {
        let g = try compile(
            #"{"allOf": [{"enum": [{"a31b": null}, {"X_": "s"}]}, {"not": {"patternProperties": {"X_": {"type": "string"}, "[0-9]{2,}": {"type": "boolean"}}}}]}"#
        )
        #expect(valid(g, #"{"a31b": null}"#) && !valid(g, #"{"X_": "s"}"#) && !valid(g, #"{"a31b": null, "X_": "s"}"#))
    }

    @Test func withoutAnEnumItIsATypedRefusal() {
        let e = compileError(#"{"not": {"oneOf": [{"required": ["a"]}, {"minProperties": 2}]}, "type": "object"}"#)
        #expect(e?.kind == .unsupported(keyword: "not"), "\(String(describing: e))")
        let p = compileError(#"{"not": {"patternProperties": {"^a": {"type": "string"}}}}"#)
        #expect(p?.kind == .unsupported(keyword: "not"), "\(String(describing: p))")
    }

    @Test func walksStayInTheKeptValues() throws {
        let g = try compile(Self.notOneOf)
        let kept: [JSONValue] = try [#"{"bar": 2, "foo": "baz"}"#, #"{"bar": "s"}"#, "3"].map { try JSONValue.parse($0) }
        let texts = randomWalks(g, alphabet: Array(#"{}":, bafoszr23"#.utf8), walks: 40, seed: 2, maskEvery: 9) { text in
            #expect((try? JSONValue.parse(text)).map(kept.contains) == true, "\(text)")
        }
        #expect(!texts.isEmpty)
    }

    @Test func spellingsCoverEveryKeyOrder() throws {
        let v = try JSONValue.parse(#"{"a": [{"x": 1, "y": 2}], "b": 1}"#)
        let s = try #require(SchemaCompiler.spellings(v, cap: 120))
        #expect(Set(s).count == 4 && s.contains(#"{"b":1,"a":[{"y":2,"x":1}]}"#))
        let wide = try JSONValue.parse(#"{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6}"#)  // 720 orders
        #expect(SchemaCompiler.spellings(wide, cap: 120) == nil)
    }
}

/// Integer bounds beyond the 64-bit range: clamped to it when that only narrows the set.
@Suite struct HugeBoundTests {
    @Test func farBoundsAreClamped() throws {
        let g = try compile(#"{"type": "integer", "minimum": 0, "maximum": 9223372036854776000}"#)
        #expect(valid(g, "0") && valid(g, "1643723400") && valid(g, "9223372036854775807"))
        #expect(!valid(g, "-1") && !valid(g, "99999999999999999999") && !valid(g, "1e30"))
        let low = try compile(#"{"type": "integer", "minimum": -1e19, "maximum": 5}"#)
        #expect(valid(low, "-9223372036854775807") && valid(low, "5") && !valid(low, "6") && !valid(low, "-99999999999999999999"))
    }

    @Test func boundsExcludingTheRangeAreRefused() {
        for schema in [#"{"type": "integer", "minimum": 1e19}"#, #"{"type": "integer", "maximum": -1e19}"#] {
            let e = compileError(schema)
            #expect(e.map { if case .unsupported = $0.kind { true } else { false } } == true, "\(schema): \(String(describing: e))")
        }
    }
}

/// `uniqueItems`: a typed refusal that says why, except where at most one item fits.
@Suite struct UniqueItemsRefusalTests {
    @Test func refusedWithTheReason() {
        for schema in [
            #"{"type": "array", "uniqueItems": true, "items": {"type": "string"}}"#,
            #"{"type": "array", "uniqueItems": true, "items": {"enum": ["a", "b"]}}"#
        ] {
            let e = compileError(schema)
            #expect(e?.kind == .unsupported(keyword: "uniqueItems"), "\(String(describing: e))")
            #expect(e?.message.contains("must all differ") == true)
        }
    }

    @Test func atMostOneItemIsExact() throws {
        let g = try compile(#"{"type": "array", "uniqueItems": true, "maxItems": 1, "items": {"type": "integer"}}"#)
        #expect(valid(g, "[]") && valid(g, "[1]") && !valid(g, "[1, 1]") && !valid(g, "[1, 2]"))
    }
}
