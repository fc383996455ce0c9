import Foundation

/// A safe arithmetic evaluator for the demo calculator tool: a recursive-descent parser
/// over numbers, `+ - * / % ^`, parentheses and unary signs. Nothing is executed but
/// arithmetic; bad input is an `ArithmeticError`, never a crash.
///
/// Grammar (`^` is right-associative and binds tighter than a unary sign, so `-2^2` is -4
/// and `2^-1` is 0.5; `%` is the remainder with the sign of the dividend):
///
///     expression := term (("+" | "-") term)*
///     term       := unary (("*" | "/" | "%") unary)*
///     unary      := ("+" | "-") unary | power
///     power      := primary ("^" unary)?
///     primary    := number | "(" expression ")"
///     number     := digits ["." digits] | "." digits
public enum ArithmeticExpression {
    /// The longest expression accepted, in characters.
    public static let maxLength = 1000
    /// The deepest nesting of parentheses and unary signs accepted.
    public static let maxDepth = 64

    /// The value of `text`.
    /// - Throws: `ArithmeticError` for a syntax error, a division or remainder by zero, a
    ///   result too large to represent, or input beyond `maxLength` / `maxDepth`.
    public static func evaluate(_ text: String) throws(ArithmeticError) -> Double {
        guard text.count <= maxLength else {
            throw ArithmeticError("the expression is \(text.count) characters long; the limit is \(maxLength)", at: 0)
        }
        var parser = Parser(characters: Array(text))
        parser.skipSpaces()
        guard !parser.atEnd else { throw ArithmeticError("the expression is empty", at: 0) }
        let value = try parser.expression()
        parser.skipSpaces()
        if !parser.atEnd { throw ArithmeticError("unexpected '\(parser.characters[parser.index])'", at: parser.index) }
        return value
    }

    private struct Parser {
        let characters: [Character]
        var index = 0
        var depth = 0

        var atEnd: Bool { index >= characters.count }

        mutating func skipSpaces() {
            while index < characters.count, characters[index].isWhitespace { index += 1 }
        }

        /// The next non-space character, consumed if it is one of `options`.
        mutating func take(_ options: Set<Character>) -> Character? {
            skipSpaces()
            guard index < characters.count, options.contains(characters[index]) else { return nil }
            index += 1
            return characters[index - 1]
        }

        mutating func nest() throws(ArithmeticError) {
            depth += 1
            if depth > maxDepth { throw ArithmeticError("the expression is nested more than \(maxDepth) levels deep", at: index) }
        }

        mutating func expression() throws(ArithmeticError) -> Double {
            var value = try term()
            while let op = take(["+", "-"]) {
                let start = index
                let rhs = try term()
                value = try checked(op == "+" ? value + rhs : value - rhs, at: start)
            }
            return value
        }

        mutating func term() throws(ArithmeticError) -> Double {
            var value = try unary()
            while let op = take(["*", "/", "%"]) {
                let start = index
                let rhs = try unary()
                switch op {
                case "*": value = try checked(value * rhs, at: start)
                case "/":
                    guard rhs != 0 else { throw ArithmeticError("division by zero", at: start) }
                    value = try checked(value / rhs, at: start)
                default:
                    guard rhs != 0 else { throw ArithmeticError("remainder by zero", at: start) }
                    value = try checked(value.truncatingRemainder(dividingBy: rhs), at: start)
                }
            }
            return value
        }

        mutating func unary() throws(ArithmeticError) -> Double {
            if let sign = take(["+", "-"]) {
                try nest()
                defer { depth -= 1 }
                let value = try unary()
                return sign == "-" ? -value : value
            }
            return try power()
        }

        mutating func power() throws(ArithmeticError) -> Double {
            let base = try primary()
            guard take(["^"]) != nil else { return base }
            let start = index
            try nest()
            defer { depth -= 1 }
            let exponent = try unary()
            if base == 0, exponent < 0 { throw ArithmeticError("division by zero (0 to a negative power)", at: start) }
            if base < 0, exponent != exponent.rounded() {
                throw ArithmeticError("a negative number to a fractional power is not a real number", at: start)
            }
            return try checked(Self.pow(base, exponent), at: start)
        }

        mutating func primary() throws(ArithmeticError) -> Double {
            skipSpaces()
            guard index < characters.count else { throw ArithmeticError("the expression ends too early", at: index) }
            let start = index
            if characters[index] == "(" {
                index += 1
                try nest()
                defer { depth -= 1 }
                let value = try expression()
                guard take([")"]) != nil else {
                    throw ArithmeticError(atEnd ? "missing ')'" : "expected ')' but found '\(characters[index])'", at: index)
                }
                return value
            }
            var text = ""
            while index < characters.count, characters[index].isASCII, characters[index].isNumber {
                text.append(characters[index])
                index += 1
            }
            if index < characters.count, characters[index] == "." {
                text.append(".")
                index += 1
                var fraction = 0
                while index < characters.count, characters[index].isASCII, characters[index].isNumber {
                    text.append(characters[index])
                    index += 1
                    fraction += 1
                }
                if fraction == 0 { throw ArithmeticError("a decimal point must be followed by digits", at: index) }
            }
            guard !text.isEmpty else { throw ArithmeticError("expected a number or '(' but found '\(characters[start])'", at: start) }
            guard let value = Double(text.hasPrefix(".") ? "0" + text : text), value.isFinite else {
                throw ArithmeticError("the number \(text) is too large", at: start)
            }
            return value
        }

        func checked(_ value: Double, at position: Int) throws(ArithmeticError) -> Double {
            guard value.isFinite else { throw ArithmeticError("the result is too large to represent", at: position) }
            return value
        }

        /// `base` to the power `exponent` by exponentiation by squaring for whole exponents
        /// (exact for small integers), else with the C library's `pow`.
        static func pow(_ base: Double, _ exponent: Double) -> Double {
            if exponent == exponent.rounded(), abs(exponent) <= 2_147_483_648.0 {
                var result = 1.0
                var factor = base
                var n = Int(abs(exponent))
                while n > 0 {
                    if n & 1 == 1 { result *= factor }
                    n >>= 1
                    if n > 0 { factor *= factor }
                    if !result.isFinite || (!factor.isFinite && n > 0) { return exponent < 0 ? 0 : .infinity }
                }
                return exponent < 0 ? 1 / result : result
            }
            if abs(exponent) > 2_147_483_648.0 {
                // |base| > 1 overflows, |base| < 1 vanishes, |base| == 1 stays.
                let magnitude = abs(base)
                if magnitude == 1 { return base < 0 ? (exponent.truncatingRemainder(dividingBy: 2) == 0 ? 1 : -1) : 1 }
                return (magnitude > 1) == (exponent > 0) ? .infinity : 0
            }
            return Foundation.pow(base, exponent)
        }
    }
}

/// Why an arithmetic expression could not be evaluated, and where (a character offset).
public struct ArithmeticError: Error, Sendable, Equatable, CustomStringConvertible {
    public let message: String
    public let position: Int

    public init(_ message: String, at position: Int) {
        self.message = message
        self.position = position
    }

    public var description: String { "\(message) (at character \(position + 1))" }
}
