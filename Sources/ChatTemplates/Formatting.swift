import Foundation

// Python's string formatting: `"%s" % x` (and jinja2's `|format`), `str.format`,
// and the C `strftime` behind Hugging Face's `strftime_now`.

/// Pads `body` to `width` with `fill`: `<` left-justified, `>` right, `^` centred, `=`
/// after the sign.
private func pad(_ body: String, width: Int, fill: String, align: Character, signLength: Int = 0) -> String {
    let n = body.pyLength
    guard width > n else { return body }
    let padding = width - n
    switch align {
    case "<": return body + String(repeating: fill, count: padding)
    case "^":
        let left = padding / 2
        return String(repeating: fill, count: left) + body + String(repeating: fill, count: padding - left)
    case "=":
        let scalars = body.scalars
        return String(scalars: scalars[..<signLength]) + String(repeating: fill, count: padding) + String(scalars: scalars[signLength...])
    default: return String(repeating: fill, count: padding) + body
    }
}

private func cFormat(_ spec: String, _ d: Double) -> String {
    if d.isNaN { return spec.last!.isUppercase ? "NAN" : "nan" }
    if d.isInfinite {
        let s = spec.last!.isUppercase ? "INF" : "inf"
        return d < 0 ? "-" + s : s
    }
    return String(format: spec, d)
}

private func groupDigits(_ digits: String, _ sep: String) -> String {
    var out: [Character] = []
    for (i, c) in digits.reversed().enumerated() {
        if i > 0 && i % 3 == 0 { out.append(contentsOf: sep) }
        out.append(c)
    }
    return String(out.reversed())
}

extension Interpreter {
    /// Python's printf-style `format % args`.
    /// `escapeArguments`: the format is a `Markup`, which escapes what `%s`/`%r` insert.
    func percentFormat(_ format: String, _ args: Value, escapeArguments: Bool = false) throws -> String {
        var positional: [Value]
        var mapping: PyDict?
        // Python treats any argument with __getitem__ other than a tuple or str as a
        // mapping: no "not all arguments converted" check for it.
        var mappingLike = false
        switch args {
        case .tuple(let items): positional = items
        case .dict(let d):
            mapping = d
            mappingLike = true
            positional = [args]
        case .list, .undefined:
            mappingLike = true
            positional = [args]
        default: positional = [args]
        }
        var next = 0
        func nextArg() throws -> Value {
            guard next < positional.count else { throw ChatTemplateError(.type, "not enough arguments for format string") }
            defer { next += 1 }
            return positional[next]
        }
        let f = format.scalars
        var out = ""
        var i = 0
        while i < f.count {
            let c = f[i]
            if c != "%" {
                out.unicodeScalars.append(c)
                i += 1
                continue
            }
            i += 1
            guard i < f.count else { throw ChatTemplateError(.value, "incomplete format") }
            var value: Value?
            if f[i] == "(" {
                guard let mapping else { throw ChatTemplateError(.type, "format requires a mapping") }
                var depth = 1
                var j = i + 1
                while j < f.count {
                    if f[j] == "(" {
                        depth += 1
                    } else if f[j] == ")" {
                        depth -= 1
                        if depth == 0 { break }
                    }
                    j += 1
                }
                guard j < f.count else { throw ChatTemplateError(.value, "incomplete format key") }
                let key = String(scalars: f[(i + 1)..<j])
                guard let v = mapping.get(string: key) else {
                    throw ChatTemplateError(.unsupported, "KeyError \(pyReprString(key)) in % formatting")
                }
                value = v
                i = j + 1
            }
            var flags = Set<Unicode.Scalar>()
            while i < f.count, "-+ #0".unicodeScalars.contains(f[i]) {
                flags.insert(f[i])
                i += 1
            }
            var width = 0
            if i < f.count, f[i] == "*" {
                guard case .int(let w) = try nextArg() else { throw ChatTemplateError(.type, "* wants int") }
                width = w
                i += 1
            } else {
                while i < f.count, let d = Int(String(f[i])), f[i].isASCII {
                    width = width * 10 + d
                    i += 1
                }
            }
            var precision: Int?
            if i < f.count, f[i] == "." {
                i += 1
                if i < f.count, f[i] == "*" {
                    guard case .int(let p) = try nextArg() else { throw ChatTemplateError(.type, "* wants int") }
                    precision = p
                    i += 1
                } else {
                    var p = 0
                    while i < f.count, let d = Int(String(f[i])), f[i].isASCII {
                        p = p * 10 + d
                        i += 1
                    }
                    precision = p
                }
            }
            try checkSize(width + (precision ?? 0))
            while i < f.count, "hlL".unicodeScalars.contains(f[i]) { i += 1 }
            guard i < f.count else { throw ChatTemplateError(.value, "incomplete format") }
            let conv = f[i]
            i += 1
            if conv == "%" {
                out += "%"
                continue
            }
            let original = try value ?? nextArg()
            let v = original.plain
            var body: String
            var numeric = false
            switch conv {
            case "s":
                body = try pyStr(v)
                if let p = precision { body = String(scalars: body.scalars.prefix(p)) }
                if escapeArguments && !original.isMarkup { body = htmlEscape(body) }
            case "r", "a":
                body = try pyRepr(original)
                if let p = precision { body = String(scalars: body.scalars.prefix(p)) }
                if escapeArguments { body = htmlEscape(body) }
            case "d", "i", "u", "x", "X", "o":
                numeric = true
                guard let n = Number(v) else {
                    throw ChatTemplateError(
                        .type,
                        "%\(conv) format: a \(conv == "d" || conv == "i" || conv == "u" ? "real number" : "number") is required, not \(v.typeName)"
                    )
                }
                let iv: Int
                switch n {
                case .int(let x): iv = x
                case .float(let d):
                    guard d.isFinite, abs(d) < 9.2e18 else {
                        throw ChatTemplateError(.unsupported, "formatting a huge float as an integer")
                    }
                    iv = Int(d.rounded(.towardZero))
                }
                let radix = conv == "x" || conv == "X" ? 16 : conv == "o" ? 8 : 10
                var digits = String(iv.magnitude, radix: radix, uppercase: conv == "X")
                if let p = precision, digits.count < p { digits = String(repeating: "0", count: p - digits.count) + digits }
                if flags.contains("#") && radix != 10 { digits = (radix == 16 ? (conv == "X" ? "0X" : "0x") : "0o") + digits }
                body = (iv < 0 ? "-" : flags.contains("+") ? "+" : flags.contains(" ") ? " " : "") + digits
            case "f", "F", "e", "E", "g", "G":
                numeric = true
                guard let n = Number(v) else { throw ChatTemplateError(.type, "must be real number, not \(v.typeName)") }
                var spec = "%"
                if flags.contains("+") { spec += "+" } else if flags.contains(" ") { spec += " " }
                if flags.contains("#") { spec += "#" }
                spec += ".\(precision ?? 6)\(Character(conv))"
                body = cFormat(spec, n.double)
            case "c":
                switch v {
                case .int(let x):
                    guard let u = Unicode.Scalar(UInt32(clamping: x)) else {
                        throw ChatTemplateError(.overflow, "%c arg not in range(0x110000)")
                    }
                    body = String(u)
                case .string(let s) where s.pyLength == 1: body = s
                default: throw ChatTemplateError(.type, "%c requires int or char")
                }
            default:
                throw ChatTemplateError(.value, "unsupported format character '\(conv)' (0x\(String(conv.value, radix: 16)))")
            }
            if flags.contains("-") {
                body = pad(body, width: width, fill: " ", align: "<")
            } else if flags.contains("0") && numeric {
                let signLength = body.hasPrefix("-") || body.hasPrefix("+") || body.hasPrefix(" ") ? 1 : 0
                body = pad(body, width: width, fill: "0", align: "=", signLength: signLength)
            } else {
                body = pad(body, width: width, fill: " ", align: ">")
            }
            out += body
        }
        if !mappingLike && next < positional.count {
            throw ChatTemplateError(.type, "not all arguments converted during string formatting")
        }
        return out
    }

    /// Python's `str.format(*args, **kwargs)`.
    /// `escapeFields`: the format is a `Markup`, whose formatter escapes every field.
    func strFormat(_ format: String, _ args: Arguments, escapeFields: Bool = false) throws -> String {
        let f = format.scalars
        var out = ""
        var i = 0
        var auto = 0
        while i < f.count {
            let c = f[i]
            if c == "}" {
                guard i + 1 < f.count, f[i + 1] == "}" else { throw ChatTemplateError(.value, "Single '}' encountered in format string") }
                out += "}"
                i += 2
                continue
            }
            if c != "{" {
                out.unicodeScalars.append(c)
                i += 1
                continue
            }
            if i + 1 < f.count, f[i + 1] == "{" {
                out += "{"
                i += 2
                continue
            }
            var j = i + 1
            var depth = 1
            while j < f.count {
                if f[j] == "{" {
                    depth += 1
                } else if f[j] == "}" {
                    depth -= 1
                    if depth == 0 { break }
                }
                j += 1
            }
            guard j < f.count else { throw ChatTemplateError(.value, "expected '}' before end of string") }
            let field = f[(i + 1)..<j]
            i = j + 1
            var spec = ""
            var conversion: Unicode.Scalar?
            var nameEnd = field.endIndex
            if let colon = field.firstIndex(of: ":") {
                spec = String(scalars: field[(colon + 1)...])
                nameEnd = colon
            }
            var name = field[field.startIndex..<nameEnd]
            if let bang = name.firstIndex(of: "!") {
                guard bang + 1 < name.endIndex else {
                    throw ChatTemplateError(.value, "end of string while looking for conversion specifier")
                }
                conversion = name[bang + 1]
                name = name[name.startIndex..<bang]
            }
            if spec.contains("{") { throw ChatTemplateError(.unsupported, "nested replacement fields in str.format specs") }
            // The first part: empty (automatic numbering), an index, or a keyword.
            var k = name.startIndex
            while k < name.endIndex, name[k] != ".", name[k] != "[" { k += 1 }
            let head = String(scalars: name[name.startIndex..<k])
            var value: Value
            if head.isEmpty {
                guard auto < args.positional.count else {
                    throw ChatTemplateError(.unsupported, "IndexError: Replacement index \(auto) out of range for positional args tuple")
                }
                value = args.positional[auto]
                auto += 1
            } else if let n = Int(head) {
                guard n < args.positional.count else {
                    throw ChatTemplateError(.unsupported, "IndexError: Replacement index \(n) out of range for positional args tuple")
                }
                value = args.positional[n]
            } else {
                guard let v = args.keyword(head) else {
                    throw ChatTemplateError(.unsupported, "KeyError: \(pyReprString(head)) in str.format")
                }
                value = v
            }
            while k < name.endIndex {
                if name[k] == "." {
                    var e = k + 1
                    while e < name.endIndex, name[e] != ".", name[e] != "[" { e += 1 }
                    value = try getAttribute(value, String(scalars: name[(k + 1)..<e]))
                    k = e
                } else {
                    guard let close = name[k...].firstIndex(of: "]") else {
                        throw ChatTemplateError(.value, "Missing ']' in format string")
                    }
                    let key = String(scalars: name[(k + 1)..<close])
                    value = try getItem(value, Int(key).map(Value.int) ?? .string(key))
                    k = close + 1
                }
            }
            if let conversion {
                switch conversion {
                case "r", "a": value = .string(try pyRepr(value))
                case "s": value = .string(try pyStr(value))
                default: throw ChatTemplateError(.value, "Unknown conversion specifier \(conversion)")
                }
            }
            let formatted = try formatWithSpec(value.plain, spec)
            out += escapeFields && !value.isMarkup ? htmlEscape(formatted) : formatted
        }
        return out
    }

    /// Python's `format(value, spec)` for strings, ints and floats.
    func formatWithSpec(_ value: Value, _ spec: String) throws -> String {
        if spec.isEmpty { return try pyStr(value) }
        let s = spec.scalars
        var i = 0
        var fill = " "
        var align: Character?
        func isAlign(_ u: Unicode.Scalar) -> Bool { u == "<" || u == ">" || u == "^" || u == "=" }
        if s.count >= 2, isAlign(s[1]) {
            fill = String(s[0])
            align = Character(s[1])
            i = 2
        } else if isAlign(s[0]) {
            align = Character(s[0])
            i = 1
        }
        var sign: Unicode.Scalar = "-"
        if i < s.count, s[i] == "+" || s[i] == "-" || s[i] == " " {
            sign = s[i]
            i += 1
        }
        var alternate = false
        if i < s.count, s[i] == "#" {
            alternate = true
            i += 1
        }
        if i < s.count, s[i] == "0" {
            if align == nil {
                fill = "0"
                align = "="
            }
            i += 1
        }
        var width = 0
        while i < s.count, s[i].isASCII, let d = Int(String(s[i])) {
            width = width * 10 + d
            i += 1
        }
        var grouping: String?
        if i < s.count, s[i] == "," || s[i] == "_" {
            grouping = String(s[i])
            i += 1
        }
        var precision: Int?
        if i < s.count, s[i] == "." {
            i += 1
            var p = 0
            while i < s.count, s[i].isASCII, let d = Int(String(s[i])) {
                p = p * 10 + d
                i += 1
            }
            precision = p
        }
        var type: Unicode.Scalar?
        if i < s.count {
            type = s[i]
            i += 1
        }
        guard i == s.count else { throw ChatTemplateError(.value, "Invalid format specifier '\(spec)'") }
        try checkSize(width + (precision ?? 0))

        func signed(_ negative: Bool, _ body: String) -> String {
            negative ? "-" + body : sign == "+" ? "+" + body : sign == " " ? " " + body : body
        }
        switch value {
        case .string(let str):
            guard type == nil || type == "s" else {
                throw ChatTemplateError(.value, "Unknown format code '\(type!)' for object of type 'str'")
            }
            var body = str
            if let p = precision { body = String(scalars: body.scalars.prefix(p)) }
            return pad(body, width: width, fill: fill, align: align ?? "<")
        case .int, .bool, .float:
            let number = Number(value)!
            var body: String
            let t =
                type
                ?? (number.double.isNaN
                    || {
                        if case .float = number { return true }
                        return false
                    }() ? "g" : "d")
            switch (number, t) {
            case (.int(let n), "d"), (.int(let n), "n"):
                var digits = String(n.magnitude)
                if let grouping { digits = groupDigits(digits, grouping) }
                body = signed(n < 0, digits)
            case (.int(let n), "x"), (.int(let n), "X"), (.int(let n), "o"), (.int(let n), "b"):
                let radix = t == "b" ? 2 : t == "o" ? 8 : 16
                var digits = String(n.magnitude, radix: radix, uppercase: t == "X")
                if alternate { digits = (t == "b" ? "0b" : t == "o" ? "0o" : t == "X" ? "0X" : "0x") + digits }
                body = signed(n < 0, digits)
            case (_, "f"), (_, "F"), (_, "e"), (_, "E"), (_, "%"):
                var d = number.double
                var suffix = ""
                var code = t
                if t == "%" {
                    d *= 100
                    suffix = "%"
                    code = "f"
                }
                var digits = cFormat("%.\(precision ?? 6)\(Character(code))", abs(d))
                if let grouping, code == "f" || code == "F" {
                    let parts = digits.split(separator: ".", maxSplits: 1)
                    digits = groupDigits(String(parts[0]), grouping) + (parts.count > 1 ? "." + parts[1] : "")
                }
                body = signed(d.sign == .minus && !d.isNaN, digits + suffix)
            case (.float(let d), "g") where precision == nil && type == nil:
                body = signed(d.sign == .minus && !d.isNaN, pyFloatStr(abs(d)))
            default:
                throw ChatTemplateError(.unsupported, "format spec '\(spec)' for a \(value.typeName) is not supported")
            }
            let signLength = body.hasPrefix("-") || body.hasPrefix("+") || body.hasPrefix(" ") ? 1 : 0
            return pad(body, width: width, fill: fill, align: align ?? ">", signLength: signLength)
        default:
            guard type == nil, precision == nil else {
                throw ChatTemplateError(.type, "unsupported format string passed to \(value.typeName).__format__")
            }
            return pad(try pyStr(value), width: width, fill: fill, align: align ?? "<")
        }
    }
}

/// C's `strftime` (glibc flavour, as Python on Linux calls it) for a naive local time.
func strftime(_ format: String, _ c: DateComponents) throws -> String {
    let months = [
        "January", "February", "March", "April", "May", "June", "July", "August", "September",
        "October", "November", "December"
    ]
    let days = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
    let year = c.year ?? 1970, month = c.month ?? 1, day = c.day ?? 1
    let hour = c.hour ?? 0, minute = c.minute ?? 0, second = c.second ?? 0
    let weekday0 = (c.weekday ?? 1) - 1  // 0 = Sunday
    let dayOfYear = c.dayOfYear ?? 1
    func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
    let f = Array(format)
    var out = ""
    var i = 0
    while i < f.count {
        guard f[i] == "%", i + 1 < f.count else {
            out.append(f[i])
            i += 1
            continue
        }
        i += 1
        var noPad = false
        if f[i] == "-", i + 1 < f.count {
            noPad = true
            i += 1
        }
        func num(_ v: Int, _ width: Int = 2, _ padChar: String = "0") -> String {
            let s = String(v)
            if noPad || s.count >= width { return s }
            return String(repeating: padChar, count: width - s.count) + s
        }
        let hour12 = hour % 12 == 0 ? 12 : hour % 12
        switch f[i] {
        case "Y": out += String(year)
        case "y": out += num(year % 100)
        case "C": out += num(year / 100)
        case "m": out += num(month)
        case "d": out += num(day)
        case "e": out += num(day, 2, " ")
        case "H": out += num(hour)
        case "I": out += num(hour12)
        case "k": out += num(hour, 2, " ")
        case "l": out += num(hour12, 2, " ")
        case "M": out += num(minute)
        case "S": out += num(second)
        case "p": out += hour < 12 ? "AM" : "PM"
        case "P": out += hour < 12 ? "am" : "pm"
        case "B": out += months[month - 1]
        case "b", "h": out += String(months[month - 1].prefix(3))
        case "A": out += days[weekday0]
        case "a": out += String(days[weekday0].prefix(3))
        case "j": out += num(dayOfYear, 3)
        case "w": out += String(weekday0)
        case "u": out += String(weekday0 == 0 ? 7 : weekday0)
        case "D": out += "\(two(month))/\(two(day))/\(two(year % 100))"
        case "F": out += "\(year)-\(two(month))-\(two(day))"
        case "T": out += "\(two(hour)):\(two(minute)):\(two(second))"
        case "R": out += "\(two(hour)):\(two(minute))"
        case "r": out += "\(two(hour12)):\(two(minute)):\(two(second)) \(hour < 12 ? "AM" : "PM")"
        case "c":
            out +=
                "\(days[weekday0].prefix(3)) \(months[month - 1].prefix(3)) \(num(day, 2, " ")) \(two(hour)):\(two(minute)):\(two(second)) \(year)"
        case "x": out += "\(two(month))/\(two(day))/\(two(year % 100))"
        case "X": out += "\(two(hour)):\(two(minute)):\(two(second))"
        case "Z", "z": break  // a naive datetime has no zone
        case "n": out += "\n"
        case "t": out += "\t"
        case "%": out += "%"
        default:
            throw ChatTemplateError(.unsupported, "strftime directive %\(f[i]) is not supported")
        }
        i += 1
    }
    return out
}
