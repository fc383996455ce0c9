import LeapJSON

/// `integer` and `number`: bounds, `multipleOf`, integer-only and non-integer-only values, as
/// a `NumberSpec` for the number terminal.
extension SchemaCompiler {
    /// The number terminal's spec for one type, or nil when no number satisfies the bounds.
    func numberSpec(_ f: JSONObject, integer: Bool, fractionalOnly: Bool = false) throws(SchemaError) -> NumberSpec? {
        var spec = NumberSpec(integerOnly: integer)
        spec.fractionalOnly = fractionalOnly
        spec.plainIntegers = options.plainIntegers
        spec.integersHaveNoFraction = integer && draft.integersHaveNoFraction
        if let m = f["multipleOf"] {
            guard let d = m.doubleValue, d > 0, d.isFinite else { throw .invalid("multipleOf must be a positive number") }
            if let k = m.intValue, k > 0 {
                if k > 1 { spec.multipleOf = Int64(k) }
                spec.integerOnly = true
            } else if integer, (1 / d).rounded() == 1 / d {
                // every integer is a multiple of 1/n
            } else if let k = SchemaCompiler.decimalPlaces(m), SchemaCompiler.boundKeys.allSatisfy({ f[$0] == nil }), !fractionalOnly {
                spec.maxFractionDigits = k
            } else {
                throw .unsupported("multipleOf", "a non-integer multipleOf (\(d))")
            }
        }
        // Numbers with a non-integer bound: exact decimal comparison.
        if !spec.integerOnly, SchemaCompiler.boundKeys.contains(where: { k in f[k].map { $0.intValue == nil } ?? false }) {
            guard let db = try decimalBounds(f) else { return nil }
            spec.decimal = db
            return spec
        }
        spec.minimum = tighter(
            try integerBound(f, "minimum", lower: true, exclusive: false, integerOnly: spec.integerOnly),
            try integerBound(f, "exclusiveMinimum", lower: true, exclusive: true, integerOnly: spec.integerOnly), lower: true)
        spec.maximum = tighter(
            try integerBound(f, "maximum", lower: false, exclusive: false, integerOnly: spec.integerOnly),
            try integerBound(f, "exclusiveMaximum", lower: false, exclusive: true, integerOnly: spec.integerOnly), lower: false)
        // Empty range?
        if !NumberLexer.feasible(spec, LexState()) { return nil }
        return spec
    }

    static let boundKeys = ["minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"]

    /// k when a `multipleOf` is exactly 10^-k with 1 <= k <= 4 (written `0.01`, `1e-2`, ...).
    /// Beyond 4 places, Python's json writes some multiples with a negative exponent
    /// (`1e-05`), which the number terminal's fraction-digit count does not read.
    static func decimalPlaces(_ m: JSONValue) -> UInt64? {
        guard let d = m.doubleValue else { return nil }
        for k in 1...4 where d == [0.1, 0.01, 0.001, 0.0001][k - 1] { return UInt64(k) }
        return nil
    }

    /// An integer-valued bound (non-integer bounds on integers are rounded inward: x >= 2.5
    /// means x >= 3, x <= 2.5 means x <= 2, exclusive or not).
    func integerBound(_ f: JSONObject, _ key: String, lower: Bool, exclusive: Bool, integerOnly: Bool) throws(SchemaError) -> NumberBound? {
        guard let v = f[key] else { return nil }
        if case .integer(let i) = v { return NumberBound(value: Int64(i), exclusive: exclusive) }
        guard let d = v.doubleValue else { throw .invalid("\(key) must be a number") }
        if abs(d) >= 9.2e18 {
            // Beyond the 64-bit range: a bound on the far side of 0 is clamped to the range (a
            // narrower set: only the numbers between the range's end and the bound are lost);
            // a bound that excludes the whole 64-bit range stays a refusal.
            guard lower == (d < 0) else { throw .unsupported(key, "bound \(d) beyond the 64-bit range") }
            return NumberBound(value: lower ? -Int64.max : Int64.max, exclusive: false)
        }
        if d.rounded() == d { return NumberBound(value: Int64(d), exclusive: exclusive) }
        guard integerOnly else { throw .unsupported(key, "non-integer bound \(d) on a number") }
        return NumberBound(value: Int64(lower ? d.rounded(.up) : d.rounded(.down)), exclusive: false)
    }

    /// The tighter of two bounds on the same side.
    func tighter(_ x: NumberBound?, _ y: NumberBound?, lower: Bool) -> NumberBound? {
        guard let x else { return y }
        guard let y else { return x }
        if x.value != y.value { return (x.value > y.value) == lower ? x : y }
        return x.exclusive ? x : y
    }

    /// Bounds with fraction digits, compared exactly as decimals; nil when the range is empty.
    func decimalBounds(_ f: JSONObject) throws(SchemaError) -> DecimalBounds? {
        func signed(_ key: String) throws(SchemaError) -> (Bool, Dec)? {
            guard let v = f[key] else { return nil }
            let text: String
            switch v {
            case .integer(let i): text = String(i)
            case .double(let d) where d.isFinite: text = "\(d)"
            default: throw .invalid("\(key) must be a number")
            }
            guard let dec = Dec(text: text) else { throw .unsupported(key, "bound \(text) out of the supported range") }
            return (text.hasPrefix("-") && (dec.int != 0 || !dec.frac.isEmpty), dec)
        }
        func less(_ a: (Bool, Dec), _ b: (Bool, Dec)) -> Bool {
            if a.0 != b.0 { return a.0 }
            return a.0 ? b.1 < a.1 : a.1 < b.1
        }
        func pick(_ inc: (Bool, Dec)?, _ exc: (Bool, Dec)?, lower: Bool) -> ((Bool, Dec)?, Bool) {
            guard let inc else { return (exc, exc != nil) }
            guard let exc else { return (inc, false) }
            if inc.0 == exc.0 && inc.1 == exc.1 { return (exc, true) }
            return less(inc, exc) == lower ? (exc, true) : (inc, false)
        }
        let (lo, loStrict) = pick(try signed("minimum"), try signed("exclusiveMinimum"), lower: true)
        let (hi, hiStrict) = pick(try signed("maximum"), try signed("exclusiveMaximum"), lower: false)
        let db = DecimalBounds(lo: lo, loStrict: loStrict, hi: hi, hiStrict: hiStrict)
        if db.positive.impossible && db.negative.impossible { return nil }
        return db
    }
}
