import LeapJSON

// Python's text behaviour: str() and repr() of values, and the str methods templates
// call. Python strings are sequences of code points, so everything here works on
// Unicode scalars, never on Swift's grapheme clusters or canonical equivalence.

/// Python's `str(x)` for a template value; how `{{ x }}` and `~` print it.
func pyStr(_ v: Value) throws -> String {
    switch v {
    case .undefined: return ""
    case .string(let s), .markup(let s): return s
    case .none: return "None"
    case .bool(let b): return b ? "True" : "False"
    case .int(let i): return String(i)
    case .float(let d): return pyFloatStr(d)
    case .list, .tuple, .dict: return try pyRepr(v)
    case .object(let o): return try o.repr()
    }
}

/// How deeply `repr` and `json.dumps` descend into nested lists and dicts.
let maxValueNesting = 200

/// Python's `repr(x)`.
func pyRepr(_ v: Value, depth: Int = 0) throws -> String {
    if depth > maxValueNesting {
        throw ChatTemplateError(.limit, "value nested deeper than \(maxValueNesting) levels")
    }
    func inner(_ x: Value) throws -> String { try pyRepr(x, depth: depth + 1) }
    switch v {
    case .undefined: return "Undefined"
    case .string(let s): return pyReprString(s)
    case .markup(let s): return "Markup(" + pyReprString(s) + ")"
    case .none, .bool, .int, .float: return try pyStr(v)
    case .list(let items): return "[" + (try items.map(inner).joined(separator: ", ")) + "]"
    case .tuple(let items):
        if items.count == 1 { return "(" + (try inner(items[0])) + ",)" }
        return "(" + (try items.map(inner).joined(separator: ", ")) + ")"
    case .dict(let d):
        var parts: [String] = []
        parts.reserveCapacity(d.count)
        for (k, val) in zip(d.keys, d.values) { parts.append((try inner(k)) + ": " + (try inner(val))) }
        return "{" + parts.joined(separator: ", ") + "}"
    case .object(let o): return try o.repr()
    }
}

/// Python's `str(float)`: the shortest round-trip repr (`1.0`, `1e-05`, `inf`, `nan`).
func pyFloatStr(_ d: Double) -> String {
    if d.isNaN { return "nan" }
    if d.isInfinite { return d < 0 ? "-inf" : "inf" }
    return JSONValue.pythonFloatRepr(d)
}

/// Python's `repr(str)`: single quotes unless the text holds `'` and no `"`; escapes
/// for backslash, the quote, `\t \n \r`, other control characters and non-printable
/// code points.
func pyReprString(_ s: String) -> String {
    var hasSingle = false, hasDouble = false
    for u in s.unicodeScalars {
        if u == "'" { hasSingle = true } else if u == "\"" { hasDouble = true }
    }
    let quote: Unicode.Scalar = hasSingle && !hasDouble ? "\"" : "'"
    var out = String.UnicodeScalarView()
    out.append(quote)
    for u in s.unicodeScalars {
        switch u {
        case quote, "\\":
            out.append("\\")
            out.append(u)
        case "\t": out.append(contentsOf: "\\t".unicodeScalars)
        case "\n": out.append(contentsOf: "\\n".unicodeScalars)
        case "\r": out.append(contentsOf: "\\r".unicodeScalars)
        default:
            let v = u.value
            if v < 0x20 || v == 0x7F {
                out.append(contentsOf: ("\\x" + hex(v, 2)).unicodeScalars)
            } else if v < 0x7F || isPrintable(u) {
                out.append(u)
            } else if v <= 0xFF {
                out.append(contentsOf: ("\\x" + hex(v, 2)).unicodeScalars)
            } else if v <= 0xFFFF {
                out.append(contentsOf: ("\\u" + hex(v, 4)).unicodeScalars)
            } else {
                out.append(contentsOf: ("\\U" + hex(v, 8)).unicodeScalars)
            }
        }
    }
    out.append(quote)
    return String(out)
}

func hex(_ v: UInt32, _ width: Int) -> String {
    let h = String(v, radix: 16)
    return String(repeating: "0", count: max(0, width - h.count)) + h
}

/// Python's `str.isprintable` for one code point: not a control, format, surrogate,
/// private-use, unassigned or separator character (the ASCII space excepted).
func isPrintable(_ u: Unicode.Scalar) -> Bool {
    if u == " " { return true }
    switch u.properties.generalCategory {
    case .control, .format, .surrogate, .privateUse, .unassigned, .lineSeparator, .paragraphSeparator,
        .spaceSeparator:
        return false
    default:
        return true
    }
}

/// Python's `str.isspace` for one code point (bidirectional class WS, B or S, or Zs).
func isPySpace(_ u: Unicode.Scalar) -> Bool {
    switch u.value {
    case 0x09...0x0D, 0x1C...0x20, 0x85, 0xA0, 0x1680, 0x2000...0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000:
        return true
    default:
        return false
    }
}

/// Python's `splitlines` boundaries.
func isPyLineBreak(_ u: Unicode.Scalar) -> Bool {
    switch u.value {
    case 0x0A, 0x0B, 0x0C, 0x0D, 0x1C, 0x1D, 0x1E, 0x85, 0x2028, 0x2029: return true
    default: return false
    }
}

typealias Scalars = [Unicode.Scalar]

extension String {
    var scalars: Scalars { Array(unicodeScalars) }
    init(scalars: some Sequence<Unicode.Scalar>) {
        var view = String.UnicodeScalarView()
        view.append(contentsOf: scalars)
        self = String(view)
    }
    /// Python's `len(str)`: code points.
    var pyLength: Int { unicodeScalars.count }
}

/// Python string operations on code points.
enum PyText {
    static func strip(_ s: String, _ chars: String?, left: Bool, right: Bool) -> String {
        let a = s.scalars
        let set: Set<UInt32>? = chars.map { Set($0.unicodeScalars.map(\.value)) }
        func strippable(_ u: Unicode.Scalar) -> Bool { set.map { $0.contains(u.value) } ?? isPySpace(u) }
        var lo = 0, hi = a.count
        if left { while lo < hi, strippable(a[lo]) { lo += 1 } }
        if right { while hi > lo, strippable(a[hi - 1]) { hi -= 1 } }
        if lo == 0 && hi == a.count { return s }
        return String(scalars: a[lo..<hi])
    }

    /// First index of `needle` in `hay[from..<to]`.
    static func find(_ hay: Scalars, _ needle: Scalars, from: Int = 0, to: Int? = nil) -> Int? {
        let end = to ?? hay.count
        if needle.isEmpty { return from <= end ? from : nil }
        guard end - from >= needle.count else { return nil }
        var i = from
        let first = needle[0]
        while i + needle.count <= end {
            if hay[i] == first {
                var j = 1
                while j < needle.count, hay[i + j] == needle[j] { j += 1 }
                if j == needle.count { return i }
            }
            i += 1
        }
        return nil
    }

    static func rfind(_ hay: Scalars, _ needle: Scalars, from: Int = 0, to: Int? = nil) -> Int? {
        let end = to ?? hay.count
        if needle.isEmpty { return from <= end ? end : nil }
        guard end - from >= needle.count else { return nil }
        var i = end - needle.count
        while i >= from {
            if hay[i..<(i + needle.count)].elementsEqual(needle) { return i }
            i -= 1
        }
        return nil
    }

    static func count(_ hay: Scalars, _ needle: Scalars, from: Int = 0, to: Int? = nil) -> Int {
        let end = to ?? hay.count
        if needle.isEmpty { return max(0, end - from) + 1 }
        var n = 0
        var i = from
        while let j = find(hay, needle, from: i, to: end) {
            n += 1
            i = j + needle.count
        }
        return n
    }

    static func replace(_ s: String, _ old: String, _ new: String, count limit: Int = -1) -> String {
        let hay = s.scalars, needle = old.scalars, repl = new.scalars
        var out = Scalars()
        var done = 0
        if needle.isEmpty {
            for u in hay {
                if limit < 0 || done < limit {
                    out += repl
                    done += 1
                }
                out.append(u)
            }
            if limit < 0 || done < limit { out += repl }
            return String(scalars: out)
        }
        var i = 0
        while limit < 0 || done < limit, let j = find(hay, needle, from: i) {
            out += hay[i..<j]
            out += repl
            i = j + needle.count
            done += 1
        }
        out += hay[i...]
        return String(scalars: out)
    }

    /// Python's `str.split(sep=None, maxsplit=-1)`.
    static func split(_ s: String, _ sep: String?, maxsplit: Int = -1) throws -> [String] {
        let a = s.scalars
        guard let sep else {
            var parts: [String] = []
            var i = 0
            while true {
                while i < a.count, isPySpace(a[i]) { i += 1 }
                if i == a.count { break }
                if maxsplit >= 0, parts.count == maxsplit {
                    var end = a.count
                    while end > i, isPySpace(a[end - 1]) { end -= 1 }
                    parts.append(String(scalars: a[i..<end]))
                    break
                }
                let start = i
                while i < a.count, !isPySpace(a[i]) { i += 1 }
                parts.append(String(scalars: a[start..<i]))
            }
            return parts
        }
        let needle = sep.scalars
        guard !needle.isEmpty else { throw ChatTemplateError(.value, "empty separator") }
        var parts: [String] = []
        var i = 0
        while maxsplit < 0 || parts.count < maxsplit, let j = find(a, needle, from: i) {
            parts.append(String(scalars: a[i..<j]))
            i = j + needle.count
        }
        parts.append(String(scalars: a[i...]))
        return parts
    }

    /// Python's `str.rsplit(sep=None, maxsplit=-1)`.
    static func rsplit(_ s: String, _ sep: String?, maxsplit: Int = -1) throws -> [String] {
        if maxsplit < 0 { return try split(s, sep) }
        let a = s.scalars
        guard let sep else {
            var parts: [String] = []
            var i = a.count
            while true {
                while i > 0, isPySpace(a[i - 1]) { i -= 1 }
                if i == 0 { break }
                if parts.count == maxsplit {
                    var start = 0
                    while start < i, isPySpace(a[start]) { start += 1 }
                    parts.append(String(scalars: a[start..<i]))
                    break
                }
                let end = i
                while i > 0, !isPySpace(a[i - 1]) { i -= 1 }
                parts.append(String(scalars: a[i..<end]))
            }
            return parts.reversed()
        }
        let needle = sep.scalars
        guard !needle.isEmpty else { throw ChatTemplateError(.value, "empty separator") }
        var parts: [String] = []
        var end = a.count
        while parts.count < maxsplit, let j = rfind(a, needle, from: 0, to: end) {
            parts.append(String(scalars: a[(j + needle.count)..<end]))
            end = j
        }
        parts.append(String(scalars: a[..<end]))
        return parts.reversed()
    }

    /// Python's `str.splitlines(keepends=False)`.
    static func splitlines(_ s: String, keepends: Bool = false) -> [String] {
        let a = s.scalars
        var lines: [String] = []
        var start = 0
        var i = 0
        while i < a.count {
            if isPyLineBreak(a[i]) {
                var end = i + 1
                if a[i] == "\r", i + 1 < a.count, a[i + 1] == "\n" { end = i + 2 }
                lines.append(String(scalars: a[start..<(keepends ? end : i)]))
                start = end
                i = end
            } else {
                i += 1
            }
        }
        if start < a.count { lines.append(String(scalars: a[start...])) }
        return lines
    }

    /// Python's `str.lower`: full case mappings, and capital sigma becomes final sigma
    /// at the end of a word.
    static func lower(_ s: String) -> String {
        let a = s.scalars
        var out = ""
        out.reserveCapacity(a.count)
        for (i, u) in a.enumerated() {
            if u.isASCII {
                out.unicodeScalars.append(u.value >= 0x41 && u.value <= 0x5A ? Unicode.Scalar(u.value + 32)! : u)
            } else if u == "\u{03A3}" {
                out += isFinalSigma(a, i) ? "\u{03C2}" : "\u{03C3}"
            } else {
                out += u.properties.lowercaseMapping
            }
        }
        return out
    }

    /// Unicode's Final_Sigma condition: a cased letter before (skipping case-ignorable
    /// characters) and none after.
    private static func isFinalSigma(_ a: Scalars, _ i: Int) -> Bool {
        var j = i - 1
        while j >= 0, a[j].properties.isCaseIgnorable { j -= 1 }
        guard j >= 0, a[j].properties.isCased else { return false }
        var k = i + 1
        while k < a.count, a[k].properties.isCaseIgnorable { k += 1 }
        return !(k < a.count && a[k].properties.isCased)
    }

    /// Python's `str.upper`: full case mappings.
    static func upper(_ s: String) -> String {
        var out = ""
        out.reserveCapacity(s.utf8.count)
        for u in s.unicodeScalars {
            if u.isASCII {
                out.unicodeScalars.append(u.value >= 0x61 && u.value <= 0x7A ? Unicode.Scalar(u.value - 32)! : u)
            } else {
                out += u.properties.uppercaseMapping
            }
        }
        return out
    }

    static func titleCase(_ u: Unicode.Scalar) -> String { u.properties.titlecaseMapping }

    /// Python's `str.capitalize`: the first character in title case, the rest lowercased.
    static func capitalize(_ s: String) -> String {
        var it = s.unicodeScalars.makeIterator()
        guard let first = it.next() else { return s }
        var rest = String.UnicodeScalarView()
        while let u = it.next() { rest.append(u) }
        return titleCase(first) + lower(String(rest))
    }

    /// Python's `str.title`: a cased character after a cased one is lowercased, any
    /// other is title-cased.
    static func title(_ s: String) -> String {
        var out = ""
        var previousCased = false
        for u in s.unicodeScalars {
            if previousCased {
                out += u.properties.lowercaseMapping
            } else {
                out += u.properties.titlecaseMapping
            }
            previousCased = u.properties.isCased
        }
        return out
    }

    /// jinja2's `title` filter: words start after `-`, whitespace, `(`, `{`, `[` or `<`;
    /// each word's first character is uppercased and the rest lowercased.
    static func jinjaTitle(_ s: String) -> String {
        func isDelimiter(_ u: Unicode.Scalar) -> Bool { u == "-" || u == "(" || u == "{" || u == "[" || u == "<" || isPySpace(u) }
        var out = ""
        var word = String.UnicodeScalarView()
        func flushWord() {
            guard let first = word.first else { return }
            out += upper(String(first)) + lower(String(String.UnicodeScalarView(word.dropFirst())))
            word = String.UnicodeScalarView()
        }
        for u in s.unicodeScalars {
            if isDelimiter(u) {
                flushWord()
                out.unicodeScalars.append(u)
            } else {
                word.append(u)
            }
        }
        flushWord()
        return out
    }

    static func swapcase(_ s: String) -> String {
        var out = ""
        for u in s.unicodeScalars {
            if u.properties.isUppercase {
                out += u.properties.lowercaseMapping
            } else if u.properties.isLowercase {
                out += u.properties.uppercaseMapping
            } else {
                out.unicodeScalars.append(u)
            }
        }
        return out
    }

    static func center(_ s: String, _ width: Int, fill: Unicode.Scalar = " ") -> String {
        let n = s.pyLength
        guard width > n else { return s }
        let marg = width - n
        let left = marg / 2 + (marg & width & 1)
        return String(repeating: String(fill), count: left) + s + String(repeating: String(fill), count: marg - left)
    }

    static func isLower(_ s: String) -> Bool {
        var cased = false
        for u in s.unicodeScalars {
            if u.properties.isUppercase || u.properties.generalCategory == .titlecaseLetter { return false }
            if u.properties.isLowercase { cased = true }
        }
        return cased
    }

    static func isUpper(_ s: String) -> Bool {
        var cased = false
        for u in s.unicodeScalars {
            if u.properties.isLowercase || u.properties.generalCategory == .titlecaseLetter { return false }
            if u.properties.isUppercase { cased = true }
        }
        return cased
    }

    static func isAlpha(_ u: Unicode.Scalar) -> Bool {
        if u.isASCII { return (u.value | 0x20) >= 0x61 && (u.value | 0x20) <= 0x7A }
        switch u.properties.generalCategory {
        case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter: return true
        default: return false
        }
    }

    static func isDecimal(_ u: Unicode.Scalar) -> Bool { u.properties.generalCategory == .decimalNumber }
    static func isDigit(_ u: Unicode.Scalar) -> Bool { u.properties.numericType == .decimal || u.properties.numericType == .digit }
    static func isNumeric(_ u: Unicode.Scalar) -> Bool { u.properties.numericType != nil }

    /// Python's `\w` in a str regex: alphanumerics and the underscore.
    static func isWord(_ u: Unicode.Scalar) -> Bool {
        if u.isASCII { return u == "_" || (u.value >= 0x30 && u.value <= 0x39) || isAlpha(u) }
        return isAlpha(u) || isNumeric(u)
    }
}

/// Python's `slice.indices(length)`.
func pySliceIndices(length: Int, start: Int?, stop: Int?, step: Int?) throws -> (Int, Int, Int) {
    let step = step ?? 1
    guard step != 0 else { throw ChatTemplateError(.value, "slice step cannot be zero") }
    func clamp(_ v: Int?, _ defaultValue: Int, low: Int, high: Int) -> Int {
        guard var v else { return defaultValue }
        if v < 0 {
            v += length
            if v < low { v = low }
        } else if v > high {
            v = high
        }
        return v
    }
    if step > 0 {
        return (clamp(start, 0, low: 0, high: length), clamp(stop, length, low: 0, high: length), step)
    }
    return (clamp(start, length - 1, low: -1, high: length - 1), clamp(stop, -1, low: -1, high: length - 1), step)
}

func pySlice<T>(_ items: [T], _ start: Int?, _ stop: Int?, _ step: Int?) throws -> [T] {
    let (lo, hi, st) = try pySliceIndices(length: items.count, start: start, stop: stop, step: step)
    var out: [T] = []
    if st > 0 {
        var i = lo
        while i < hi {
            out.append(items[i])
            i += st
        }
    } else {
        var i = lo
        while i > hi {
            out.append(items[i])
            i += st
        }
    }
    return out
}
