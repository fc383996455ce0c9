/// String formats enforced exactly (as regular languages over the decoded string).
enum Formats {
    static let date: String = {
        // Days per month, with 29 February only in leap years (Gregorian, years 0000-9999).
        let d28 = "(0[1-9]|1[0-9]|2[0-8])"
        let m31 = "(0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])"
        let m30 = "(0[469]|11)-(0[1-9]|[12][0-9]|30)"
        let feb = "02-\(d28)"
        let leapYear = "([0-9]{2}(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)"
        return "(([0-9]{4}-(\(m31)|\(m30)|\(feb)))|(\(leapYear)-02-29))"
    }()
    /// RFC 3339 full-time; leap seconds (second 60) are refused (a documented restriction).
    static let time = "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
    static let dateTime = "\(date)[Tt]\(time)"
    static let uuid = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    static let atext = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
    static let label = "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    static let email = "\(atext)+(\\.\(atext)+)*@\(label)(\\.\(label))*"
    static let octet = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
    static let ipv4 = "\(octet)(\\.\(octet)){3}"

    // RFC 3986 (ASCII only; IP-literal hosts are not accepted: a documented restriction).
    static let unreserved = "[A-Za-z0-9._~-]"
    static let pct = "%[0-9A-Fa-f]{2}"
    static let subDelims = "[!$&'()*+,;=]"
    static let pchar = "(\(unreserved)|\(pct)|\(subDelims)|[:@])"
    static let segment = "\(pchar)*"
    static let segmentNZ = "\(pchar)+"
    static let authority = "((\(unreserved)|\(pct)|\(subDelims)|:)*@)?(\(unreserved)|\(pct)|\(subDelims))*(:[0-9]*)?"
    static let pathAbempty = "(/\(segment))*"
    static let pathAbsolute = "/(\(segmentNZ)(/\(segment))*)?"
    static let pathRootless = "\(segmentNZ)(/\(segment))*"
    static let queryFragment = "(\\?(\(pchar)|[/?])*)?(#(\(pchar)|[/?])*)?"
    static let uri = "[A-Za-z][A-Za-z0-9+.-]*:(//\(authority)\(pathAbempty)|\(pathAbsolute)|\(pathRootless))?\(queryFragment)"
    static let pathNoScheme = "(\(unreserved)|\(pct)|\(subDelims)|@)+(/\(segment))*"
    static let relativeRef = "(//\(authority)\(pathAbempty)|\(pathAbsolute)|\(pathNoScheme))?\(queryFragment)"
    static let uriReference = "(\(uri)|\(relativeRef))"

    // RFC 3339 appendix A (ISO 8601 durations): P1Y2M3DT4H5M6S, P3W; the parts in order, no
    // fractions, and a time part is hours [minutes [seconds]], minutes [seconds] or seconds.
    static let duration: String = {
        let n = "[0-9]+"
        let time = "T(\(n)H(\(n)M(\(n)S)?)?|\(n)M(\(n)S)?|\(n)S)"
        let date = "(\(n)D|\(n)M(\(n)D)?|\(n)Y(\(n)M(\(n)D)?)?)"
        return "P(\(date)(\(time))?|\(time)|\(n)W)"
    }()
    // RFC 4291 section 2.2 text forms, as written in RFC 3986's IPv6address (no zone index).
    static let ipv6: String = {
        let h16 = "[0-9A-Fa-f]{1,4}"
        let ls32 = "(\(h16):\(h16)|\(ipv4))"
        func rep(_ k: Int) -> String { k == 0 ? "" : "(\(h16):){\(k)}" }
        func head(_ k: Int) -> String { k == 0 ? "(\(h16))?" : "((\(h16):){0,\(k)}\(h16))?" }
        let forms = [
            "\(rep(6))\(ls32)", "::\(rep(5))\(ls32)", "\(head(0))::\(rep(4))\(ls32)", "\(head(1))::\(rep(3))\(ls32)",
            "\(head(2))::\(rep(2))\(ls32)", "\(head(3))::\(h16):\(ls32)", "\(head(4))::\(ls32)", "\(head(5))::\(h16)",
            "\(head(6))::"
        ]
        return "(" + forms.joined(separator: "|") + ")"
    }()
    // RFC 1123 section 2.1 host names: dot-separated labels of 1-63 letters, digits and hyphens,
    // neither starting nor ending with a hyphen; at most 253 characters in all (no final dot).
    static let hostname = "\(label)(\\.\(label))*"

    /// Length bounds (in characters, all ASCII) that a format adds to its pattern: applied as the
    /// string terminal's `maxLength` rather than multiplied into the format's automaton.
    static let maxLength: [String: Int] = ["hostname": 253]

    /// Formats enforced by the compiler.
    static let enforced: [String: String] = [
        "date": date, "time": time, "date-time": dateTime, "uuid": uuid, "email": email, "ipv4": ipv4,
        "uri": uri, "uri-reference": uriReference, "duration": duration, "ipv6": ipv6, "hostname": hostname
    ]

    /// `regex` (see `RegexFormat`): built as a node rather than written as a pattern, and
    /// compiled on first use only (its automaton is larger than the others together).
    static let regexDFA: CodePointDFA? = try? RegexCompiler.compile(RegexFormat.node, limits: .unlimited)

    /// Whether the compiler enforces `name` (a pattern in `enforced`, or `regex`).
    static func isEnforced(_ name: String) -> Bool { enforced[name] != nil || name == "regex" }

    /// The automaton of an enforced format (nil: not enforced).
    static func dfa(_ name: String) -> CodePointDFA? { name == "regex" ? regexDFA : compiled[name] }

    /// Formats that validators commonly assert but that this compiler cannot enforce: using one
    /// is a compile error. Any other format is an annotation (JSON Schema 2020-12 default).
    static let unenforceable: Set<String> = [
        "idn-email", "idn-hostname", "json-pointer", "relative-json-pointer", "iri", "iri-reference",
        "uri-template"
    ]

    /// The DFAs of the enforced formats, built once per process.
    static let compiled: [String: CodePointDFA] = {
        var out: [String: CodePointDFA] = [:]
        for (name, re) in enforced {
            if let node = try? RegexParser.parse(re), let dfa = try? RegexCompiler.compile(node, limits: .unlimited) { out[name] = dfa }
        }
        return out
    }()
}
