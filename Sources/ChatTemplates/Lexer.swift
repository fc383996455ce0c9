// The lexer: template text -> tokens, following jinja2's lexer with Hugging Face's
// settings (trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False).
//
// Whitespace control happens here, as in jinja2:
// - `{%-`, `{{-`, `{#-` strip all whitespace before the tag; `-%}`, `-}}`, `-#}` all after.
// - trim_blocks: a block or comment tag `%}` / `#}` eats one newline right after it
//   (`+%}` opts out).
// - lstrip_blocks: spaces and tabs between the start of a line and a `{%` or `{#` are
//   removed (`{%+` opts out). Variable tags `{{` are never lstripped.

enum TokenKind: Equatable {
    case data, variableBegin, variableEnd, blockBegin, blockEnd
    case name, string, integer, float, op
    case eof
}

struct Token {
    var kind: TokenKind
    /// Data text, a name, an operator, or a decoded string literal.
    var text: String = ""
    var int: Int = 0
    var float: Double = 0
    var line: Int

    var describe: String {
        switch kind {
        case .data: return "template data"
        case .variableBegin: return "begin of print statement"
        case .variableEnd: return "end of print statement"
        case .blockBegin: return "begin of statement block"
        case .blockEnd: return "end of statement block"
        case .name, .op: return text
        case .string: return "string"
        case .integer: return "integer"
        case .float: return "float"
        case .eof: return "end of template"
        }
    }

    func isName(_ n: String) -> Bool { kind == .name && text == n }
    func isOp(_ o: String) -> Bool { kind == .op && text == o }
}

/// Python's `"\n".join(source.splitlines())`: jinja2 normalizes every line ending to
/// `\n` and, with keep_trailing_newline=False, drops one trailing newline.
func normalizeNewlines(_ source: String) -> String {
    var needsWork = false
    for u in source.unicodeScalars where u != "\n" && isPyLineBreak(u) {
        needsWork = true
        break
    }
    if !needsWork {
        return source.hasSuffix("\n") ? String(source.dropLast()) : source
    }
    return PyText.splitlines(source).joined(separator: "\n")
}

struct Lexer {
    let src: Scalars
    var pos = 0
    var tokens: [Token] = []
    /// Whether the last token ended a line (jinja2's `line_starting`, for lstrip_blocks).
    var lineStarting = true
    private var lineCursor = (pos: 0, line: 1)

    init(_ source: String) { src = source.scalars }

    mutating func lineAt(_ p: Int) -> Int {
        if p < lineCursor.pos { lineCursor = (0, 1) }
        var (cp, line) = lineCursor
        while cp < p && cp < src.count {
            if src[cp] == "\n" { line += 1 }
            cp += 1
        }
        lineCursor = (cp, line)
        return line
    }

    func syntaxError(_ message: String, _ line: Int) -> ChatTemplateError {
        ChatTemplateError(.syntax, message, line: line)
    }

    func at(_ p: Int, _ s: String) -> Bool {
        var i = p
        for u in s.unicodeScalars {
            guard i < src.count, src[i] == u else { return false }
            i += 1
        }
        return true
    }

    func skipSpaces(_ p: Int) -> Int {
        var i = p
        while i < src.count, isPySpace(src[i]) { i += 1 }
        return i
    }

    /// The next `{{`, `{%` or `{#` at or after `p`.
    func nextTag(from p: Int) -> Int? {
        var i = p
        while i + 1 < src.count {
            if src[i] == "{" {
                let c = src[i + 1]
                if c == "{" || c == "%" || c == "#" { return i }
            }
            i += 1
        }
        return nil
    }

    /// Applies `-` stripping or lstrip_blocks to the text before a tag.
    func controlledText(_ lo: Int, _ hi: Int, sign: Unicode.Scalar?, lstrip: Bool) -> ArraySlice<Unicode.Scalar> {
        var text = src[lo..<hi]
        if sign == "-" {
            while let last = text.last, isPySpace(last) { text.removeLast() }
        } else if sign != "+" && lstrip {
            var lpos = text.endIndex
            while lpos > text.startIndex, text[lpos - 1] != "\n" { lpos -= 1 }
            if lpos > text.startIndex || lineStarting {
                let tail = text[lpos...]
                if !tail.isEmpty && tail.allSatisfy(isPySpace) { text = text[..<lpos] }
            }
        }
        return text
    }

    mutating func emitData(_ text: ArraySlice<Unicode.Scalar>, at p: Int) {
        guard !text.isEmpty else { return }
        tokens.append(Token(kind: .data, text: String(scalars: text), line: lineAt(p)))
    }

    /// Matches `{%[-+]?\s*raw\s*(-%}\s*|%})` at `p`; returns (sign, end of match).
    func matchRawBegin(_ p: Int) -> (Unicode.Scalar?, Int)? {
        guard at(p, "{%") else { return nil }
        var i = p + 2
        var sign: Unicode.Scalar?
        if i < src.count, src[i] == "-" || src[i] == "+" {
            sign = src[i]
            i += 1
        }
        i = skipSpaces(i)
        guard at(i, "raw") else { return nil }
        i = skipSpaces(i + 3)
        if at(i, "-%}") { return (sign, skipSpaces(i + 3)) }
        if at(i, "%}") { return (sign, i + 2) }
        return nil
    }

    /// Matches `{%[-+]?\s*endraw\s*(+%}|-%}\s*|%}\n?)` at `p`; returns (sign, end).
    func matchRawEnd(_ p: Int) -> (Unicode.Scalar?, Int)? {
        guard at(p, "{%") else { return nil }
        var i = p + 2
        var sign: Unicode.Scalar?
        if i < src.count, src[i] == "-" || src[i] == "+" {
            sign = src[i]
            i += 1
        }
        i = skipSpaces(i)
        guard at(i, "endraw") else { return nil }
        i = skipSpaces(i + 6)
        return matchBlockEnd(i).map { (sign, $0) }
    }

    /// Matches a block end `+%}`, `-%}\s*` or `%}\n?` at `p`.
    func matchBlockEnd(_ p: Int) -> Int? {
        if at(p, "+%}") { return p + 3 }
        if at(p, "-%}") { return skipSpaces(p + 3) }
        if at(p, "%}") { return p + 2 < src.count && src[p + 2] == "\n" ? p + 3 : p + 2 }
        return nil
    }

    mutating func tokenize() throws -> [Token] {
        while pos < src.count {
            guard let tag = nextTag(from: pos) else {
                emitData(src[pos...], at: pos)
                pos = src.count
                break
            }
            let kind = src[tag + 1]
            if kind == "%", let (sign, end) = matchRawBegin(tag) {
                emitData(controlledText(pos, tag, sign: sign, lstrip: true), at: pos)
                try lexRaw(from: end, openLine: lineAt(tag))
                continue
            }
            var p = tag + 2
            var sign: Unicode.Scalar?
            if p < src.count, src[p] == "-" || src[p] == "+" {
                sign = src[p]
                p += 1
            }
            emitData(controlledText(pos, tag, sign: sign, lstrip: kind != "{"), at: pos)
            switch kind {
            case "#":
                try lexComment(from: p, openLine: lineAt(tag))
            case "%":
                tokens.append(Token(kind: .blockBegin, line: lineAt(tag)))
                pos = p
                try lexTag(block: true)
            default:
                tokens.append(Token(kind: .variableBegin, line: lineAt(tag)))
                pos = p
                try lexTag(block: false)
            }
        }
        tokens.append(Token(kind: .eof, line: lineAt(src.count)))
        return tokens
    }

    mutating func lexComment(from p: Int, openLine: Int) throws {
        var i = p
        while true {
            guard i + 1 < src.count else { throw syntaxError("Missing end of comment tag", openLine) }
            if src[i] == "#" && src[i + 1] == "}" { break }
            i += 1
        }
        var end = i + 2
        if i > p && src[i - 1] == "-" {
            end = skipSpaces(end)
        } else if i > p && src[i - 1] == "+" {
            // no trim
        } else if end < src.count && src[end] == "\n" {
            end += 1
        }
        lineStarting = src[end - 1] == "\n"
        pos = end
    }

    mutating func lexRaw(from start: Int, openLine: Int) throws {
        lineStarting = src[start - 1] == "\n"
        var i = start
        while true {
            guard i < src.count else { throw syntaxError("Missing end of raw directive", openLine) }
            if src[i] == "{", let (sign, end) = matchRawEnd(i) {
                emitData(controlledText(start, i, sign: sign, lstrip: true), at: start)
                lineStarting = src[end - 1] == "\n"
                pos = end
                return
            }
            i += 1
        }
    }

    /// Lexes the inside of `{% ... %}` or `{{ ... }}` up to and including its end.
    mutating func lexTag(block: Bool) throws {
        var brackets: [Unicode.Scalar] = []
        while true {
            guard pos < src.count else {
                throw syntaxError("unexpected end of template, expected '\(block ? "%}" : "}}")'", lineAt(pos))
            }
            if brackets.isEmpty {
                if block, let end = matchBlockEnd(pos) {
                    tokens.append(Token(kind: .blockEnd, line: lineAt(pos)))
                    lineStarting = src[end - 1] == "\n"
                    pos = end
                    return
                }
                if !block {
                    var end: Int?
                    if at(pos, "-}}") { end = skipSpaces(pos + 3) } else if at(pos, "}}") { end = pos + 2 }
                    if let end {
                        tokens.append(Token(kind: .variableEnd, line: lineAt(pos)))
                        lineStarting = src[end - 1] == "\n"
                        pos = end
                        return
                    }
                }
            }
            let c = src[pos]
            if isPySpace(c) {
                pos += 1
                continue
            }
            let line = lineAt(pos)
            if c.value >= 0x30 && c.value <= 0x39 {
                tokens.append(try lexNumber(line: line))
                continue
            }
            if c == "_" || PyText.isAlpha(c) {
                let start = pos
                while pos < src.count, PyText.isWord(src[pos]) { pos += 1 }
                tokens.append(Token(kind: .name, text: String(scalars: src[start..<pos]), line: line))
                continue
            }
            if c == "'" || c == "\"" {
                tokens.append(Token(kind: .string, text: try lexString(quote: c, line: line), line: line))
                continue
            }
            if pos + 1 < src.count {
                let d = src[pos + 1]
                let two: String? =
                    switch (c, d) {
                    case ("/", "/"): "//"
                    case ("*", "*"): "**"
                    case ("=", "="): "=="
                    case ("!", "="): "!="
                    case (">", "="): ">="
                    case ("<", "="): "<="
                    default: nil
                    }
                if let two {
                    tokens.append(Token(kind: .op, text: two, line: line))
                    pos += 2
                    continue
                }
            }
            if Lexer.isOperator(c) {
                switch c {
                case "(", "[", "{": brackets.append(c)
                case ")", "]", "}":
                    let expected: Unicode.Scalar = c == ")" ? "(" : c == "]" ? "[" : "{"
                    guard let open = brackets.popLast() else { throw syntaxError("unexpected '\(c)'", line) }
                    guard open == expected else {
                        let want = open == "(" ? ")" : open == "[" ? "]" : "}"
                        throw syntaxError("unexpected '\(c)', expected '\(want)'", line)
                    }
                default: break
                }
                tokens.append(Token(kind: .op, text: String(c), line: line))
                pos += 1
                continue
            }
            throw syntaxError("unexpected char '\(c)' at \(pos)", line)
        }
    }

    static func isOperator(_ c: Unicode.Scalar) -> Bool {
        switch c {
        case "+", "-", "/", "*", "%", "~", "[", "]", "(", ")", "{", "}", ">", "<", "=", ".", ":", "|", ",", ";": return true
        default: return false
        }
    }

    func isDigit(_ i: Int) -> Bool { i < src.count && src[i].value >= 0x30 && src[i].value <= 0x39 }

    /// `(\d+_)*\d+` at `i`: the end index, or nil.
    func digitRun(_ i: Int) -> Int? {
        guard isDigit(i) else { return nil }
        var j = i
        while true {
            while isDigit(j) { j += 1 }
            if j < src.count, src[j] == "_", isDigit(j + 1) {
                j += 1
                continue
            }
            return j
        }
    }

    mutating func lexNumber(line: Int) throws -> Token {
        let start = pos
        // Floats first, as jinja2 does; not right after a dot (`x.0.1` is two lookups).
        if start == 0 || src[start - 1] != ".", let intEnd = digitRun(start) {
            var end: Int?
            var j = intEnd
            if j < src.count, src[j] == ".", let fracEnd = digitRun(j + 1) {
                j = fracEnd
                end = j
            }
            if j < src.count, src[j] == "e" || src[j] == "E" {
                var k = j + 1
                if k < src.count, src[k] == "+" || src[k] == "-" { k += 1 }
                if let expEnd = digitRun(k) { end = expEnd }
            }
            if let end {
                let text = String(scalars: src[start..<end].filter { $0 != "_" })
                guard let d = Double(text) else { throw syntaxError("invalid float literal \(text)", line) }
                pos = end
                return Token(kind: .float, text: text, float: d, line: line)
            }
        }
        var radix = 10
        var i = start
        if src[i] == "0", i + 1 < src.count {
            switch src[i + 1] {
            case "b", "B": radix = 2
            case "o", "O": radix = 8
            case "x", "X": radix = 16
            default: break
            }
        }
        var digits = ""
        if radix != 10 {
            i += 2
            while i < src.count {
                let u = src[i]
                if u == "_" {
                    i += 1
                    continue
                }
                guard Int(String(u), radix: radix) != nil else { break }
                digits.unicodeScalars.append(u)
                i += 1
            }
            guard !digits.isEmpty else { throw syntaxError("invalid integer literal", line) }
        } else if src[i] == "0" {
            // `0(_?0)*`
            digits = "0"
            i += 1
            while i < src.count {
                if src[i] == "0" { i += 1 } else if src[i] == "_", i + 1 < src.count, src[i + 1] == "0" { i += 2 } else { break }
            }
        } else {
            let end = digitRun(i)!
            digits = String(scalars: src[i..<end].filter { $0 != "_" })
            i = end
        }
        pos = i
        guard let value = Int(digits, radix: radix) else {
            throw ChatTemplateError(.unsupported, "integer literal \(digits) does not fit in 64 bits", line: line)
        }
        return Token(kind: .integer, text: digits, int: value, line: line)
    }

    /// A string literal, decoded as jinja2 does (Python's `unicode-escape`).
    mutating func lexString(quote: Unicode.Scalar, line: Int) throws -> String {
        var i = pos + 1
        var out = String.UnicodeScalarView()
        while true {
            guard i < src.count else { throw syntaxError("unexpected char '\(quote)' at \(pos)", line) }
            let u = src[i]
            if u == quote {
                i += 1
                break
            }
            if u != "\\" {
                out.append(u)
                i += 1
                continue
            }
            guard i + 1 < src.count else { throw syntaxError("unexpected char '\(quote)' at \(pos)", line) }
            let e = src[i + 1]
            i += 2
            switch e {
            case "\n": break
            case "\\": out.append("\\")
            case "'": out.append("'")
            case "\"": out.append("\"")
            case "a": out.append("\u{07}")
            case "b": out.append("\u{08}")
            case "f": out.append("\u{0C}")
            case "n": out.append("\n")
            case "r": out.append("\r")
            case "t": out.append("\t")
            case "v": out.append("\u{0B}")
            case "0"..."7":
                var v = e.value - 0x30
                var n = 1
                while n < 3, i < src.count, src[i].value >= 0x30, src[i].value <= 0x37 {
                    v = v * 8 + src[i].value - 0x30
                    i += 1
                    n += 1
                }
                out.append(Unicode.Scalar(v) ?? "\u{FFFD}")
            case "x", "u", "U":
                let count = e == "x" ? 2 : e == "u" ? 4 : 8
                guard i + count <= src.count,
                    let v = UInt32(String(scalars: src[i..<(i + count)]), radix: 16),
                    src[i..<(i + count)].allSatisfy({ $0.properties.isASCIIHexDigit })
                else { throw syntaxError("truncated \\\(e) escape in string literal", line) }
                i += count
                // Lone surrogates cannot live in a Swift string; Python would keep them.
                out.append(Unicode.Scalar(v) ?? "\u{FFFD}")
            case "N":
                throw ChatTemplateError(.unsupported, "\\N{...} escapes in string literals are not supported", line: line)
            default:
                out.append("\\")
                out.append(e)
            }
        }
        pos = i
        return String(out)
    }
}
