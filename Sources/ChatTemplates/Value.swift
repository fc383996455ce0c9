import LeapJSON

/// A value while a template renders: the Python objects jinja2 templates see.
///
/// Lists and dicts are Swift values. That is faithful because Hugging Face renders in
/// jinja2's `ImmutableSandboxedEnvironment`, where no template can mutate a list or a
/// dict (`append`, `update`, `pop`... raise `SecurityError`), so sharing can never be
/// observed. The only mutable objects, `namespace()`s, are classes (`PyObject`).
enum Value {
    case undefined(Undefined)
    case none
    case bool(Bool)
    case int(Int)
    case float(Double)
    case string(String)
    /// markupsafe's `Markup`: a `str` marked safe (`|safe`, `|e`). It prints as its text
    /// but escapes plain strings combined with it (`Markup + str`, `%`, its methods).
    case markup(String)
    case list([Value])
    case tuple([Value])
    case dict(PyDict)
    case object(PyObject)
}

/// jinja2's default `Undefined`: renders as "", is falsy, iterates as empty, and raises
/// (`UndefinedError`, or `SecurityError` for an unsafe attribute) when it is called,
/// indexed, asked for an attribute, or used in arithmetic.
struct Undefined {
    enum Reason {
        /// A variable that does not exist: `'name' is undefined`.
        case name(String)
        /// A missing attribute or string key: `'dict object' has no attribute 'x'`.
        case attribute(owner: String, name: String)
        /// A missing non-string key or index: `list object has no element 3`.
        case element(owner: String, keyRepr: String)
        /// A message given by whoever made the undefined (jinja2's `hint`).
        case hint(String)
        /// An attribute the immutable sandbox refuses (`append`, `update`, ...).
        case unsafe(attribute: String, typeName: String)
    }

    var reason: Reason

    var message: String {
        switch reason {
        case .name(let n): return "\(pyReprString(n)) is undefined"
        case .attribute(let owner, let name): return "\(pyReprString(owner)) has no attribute \(pyReprString(name))"
        case .element(let owner, let key): return "\(owner) has no element \(key)"
        case .hint(let h): return h
        case .unsafe(let attr, let type): return "access to attribute '\(attr)' of '\(type)' object is unsafe."
        }
    }

    var error: ChatTemplateError {
        if case .unsafe = reason { return ChatTemplateError(.security, message) }
        return ChatTemplateError(.undefined, message)
    }
}

extension Value {
    static func undefinedName(_ name: String) -> Value { .undefined(Undefined(reason: .name(name))) }
    static func undefinedHint(_ hint: String) -> Value { .undefined(Undefined(reason: .hint(hint))) }

    /// Converts a JSON document into template values (objects become ordered dicts).
    init(json: JSONValue) {
        switch json {
        case .null: self = .none
        case .bool(let b): self = .bool(b)
        case .integer(let i): self = .int(i)
        case .double(let d): self = .float(d)
        case .string(let s): self = .string(s)
        case .array(let a): self = .list(a.map(Value.init(json:)))
        case .object(let o):
            var d = PyDict()
            for (k, v) in o { d.setString(k, Value(json: v)) }
            self = .dict(d)
        }
    }

    /// A `Markup` as the plain string Python treats it as, everywhere its markup-ness
    /// does not matter; other values unchanged.
    var plain: Value {
        if case .markup(let s) = self { return .string(s) }
        return self
    }

    var isMarkup: Bool {
        if case .markup = self { return true }
        return false
    }

    var isUndefined: Bool {
        if case .undefined = self { return true }
        return false
    }
    var isNone: Bool {
        if case .none = self { return true }
        return false
    }

    /// Python's `type(x).__name__`, as used in error messages.
    var typeName: String {
        switch self {
        case .undefined: return "Undefined"
        case .none: return "NoneType"
        case .bool: return "bool"
        case .int: return "int"
        case .float: return "float"
        case .string: return "str"
        case .markup: return "Markup"
        case .list: return "list"
        case .tuple: return "tuple"
        case .dict: return "dict"
        case .object(let o): return o.typeName
        }
    }

    /// jinja2's `object_type_repr`: how an owner is named in "has no attribute" messages.
    var objectTypeRepr: String {
        switch self {
        case .none: return "None"
        case .markup: return "markupsafe.Markup object"
        case .object(let o): return o.objectTypeRepr
        default: return "\(typeName) object"
        }
    }

    /// Python truthiness.
    var truthy: Bool {
        switch self {
        case .undefined, .none: return false
        case .bool(let b): return b
        case .int(let i): return i != 0
        case .float(let d): return d != 0
        case .string(let s), .markup(let s): return !s.isEmpty
        case .list(let a), .tuple(let a): return !a.isEmpty
        case .dict(let d): return !d.isEmpty
        case .object(let o): return o.truthy
        }
    }
}

/// A key of a Python dict, normalized so that equal Python values hash alike
/// (`1`, `1.0` and `True` are one key). Strings compare by code points, as in Python,
/// not by Swift's canonical equivalence.
enum HashKey: Hashable {
    case none
    case int(Int)
    case float(Double)
    case string(CodePointString)
    case tuple([HashKey])
    case undefined
    case object(ObjectIdentifier)

    init(_ value: Value) throws {
        switch value {
        case .none: self = .none
        case .bool(let b): self = .int(b ? 1 : 0)
        case .int(let i): self = .int(i)
        case .float(let d):
            if d.rounded() == d, abs(d) < 9.2e18 { self = .int(Int(d)) } else { self = .float(d) }
        case .string(let s), .markup(let s): self = .string(CodePointString(s))
        case .tuple(let items): self = .tuple(try items.map(HashKey.init))
        case .undefined: self = .undefined
        case .object(let o): self = .object(ObjectIdentifier(o))
        case .list, .dict:
            throw ChatTemplateError(.type, "unhashable type: '\(value.typeName)'")
        }
    }
}

/// A String whose equality and hash follow its Unicode scalars (Python's `str`).
struct CodePointString: Hashable {
    let value: String
    init(_ value: String) { self.value = value }
    static func == (a: CodePointString, b: CodePointString) -> Bool { a.value.utf8.elementsEqual(b.value.utf8) }
    func hash(into hasher: inout Hasher) {
        for byte in value.utf8 { hasher.combine(byte) }
    }
}

/// A Python dict: insertion-ordered, any hashable key.
struct PyDict {
    private(set) var keys: [Value] = []
    private(set) var values: [Value] = []
    private var index: [HashKey: Int] = [:]

    init() {}

    var count: Int { keys.count }
    var isEmpty: Bool { keys.isEmpty }

    func get(_ key: Value) -> Value? {
        guard let k = try? HashKey(key), let i = index[k] else { return nil }
        return values[i]
    }

    func get(string key: String) -> Value? {
        guard let i = index[.string(CodePointString(key))] else { return nil }
        return values[i]
    }

    func contains(_ key: Value) throws -> Bool { index[try HashKey(key)] != nil }

    /// Sets `key`; an existing key keeps its position (and its original key object).
    mutating func set(_ key: Value, _ value: Value) throws {
        let k = try HashKey(key)
        if let i = index[k] {
            values[i] = value
        } else {
            index[k] = keys.count
            keys.append(key)
            values.append(value)
        }
    }

    mutating func setString(_ key: String, _ value: Value) {
        let k = HashKey.string(CodePointString(key))
        if let i = index[k] {
            values[i] = value
        } else {
            index[k] = keys.count
            keys.append(.string(key))
            values.append(value)
        }
    }

    var items: [(key: Value, value: Value)] { Array(zip(keys, values)).map { (key: $0.0, value: $0.1) } }
}

// MARK: - Objects

/// Base class of the reference-typed template objects (namespaces, loops, macros,
/// iterators, views, bound methods). Subclasses override what they support.
class PyObject {
    /// Python's `type(x).__name__`.
    var typeName: String { "object" }
    /// jinja2's `object_type_repr`, e.g. `jinja2.utils.Namespace object`.
    var objectTypeRepr: String { "\(typeName) object" }
    var truthy: Bool { true }
    var isCallable: Bool { false }

    /// Python's `repr`. Objects whose Python repr holds a memory address (functions,
    /// generators) cannot be reproduced, so they refuse with an unsupported error.
    func repr() throws -> String {
        throw ChatTemplateError(.unsupported, "the Python repr of a \(typeName) object holds a memory address and cannot be reproduced")
    }

    /// The attribute `name`, or nil when the object has no such attribute.
    func attribute(_ name: String, _ interp: Interpreter) throws -> Value? { nil }

    func call(_ args: Arguments, _ interp: Interpreter) throws -> Value {
        throw ChatTemplateError(.type, "'\(typeName)' object is not callable")
    }

    /// The items when the object is iterable; nil when not.
    func iterate() throws -> [Value]? { nil }

    /// `len(x)`, or nil when the object has no length.
    var length: Int? { nil }

    /// `x[key]`, or nil when the object has no such item.
    func item(_ key: Value) throws -> Value? { nil }
}

/// A named tuple (jinja2's `groupby` yields `(grouper, list)` pairs): a tuple whose
/// items can also be read by name.
final class NamedTupleObject: PyObject {
    let name: String
    let fields: [String]
    let values: [Value]

    init(_ name: String, fields: [String], values: [Value]) {
        self.name = name
        self.fields = fields
        self.values = values
    }

    override var typeName: String { name }
    override var objectTypeRepr: String { "jinja2.filters.\(name) object" }
    override var truthy: Bool { !values.isEmpty }
    override var length: Int? { values.count }
    override func iterate() throws -> [Value]? { values }
    override func repr() throws -> String { try pyRepr(.tuple(values)) }
    override func attribute(_ name: String, _ interp: Interpreter) throws -> Value? {
        fields.firstIndex(of: name).map { values[$0] }
    }
    override func item(_ key: Value) throws -> Value? {
        guard case .int(var i) = key else { return nil }
        if i < 0 { i += values.count }
        return values.indices.contains(i) ? values[i] : nil
    }
}

/// jinja2's `namespace(...)`: the one mutable object templates have.
final class NamespaceObject: PyObject {
    var attrs = PyDict()
    override var typeName: String { "Namespace" }
    override var objectTypeRepr: String { "jinja2.utils.Namespace object" }
    override func repr() throws -> String { "<Namespace \(try pyRepr(.dict(attrs)))>" }
    override func attribute(_ name: String, _ interp: Interpreter) throws -> Value? { attrs.get(string: name) }
}

/// A one-shot Python iterator (a generator from `|map`, `|select`, `|items`...): truthy
/// even when empty, has no length, and is consumed by iteration.
final class IteratorObject: PyObject {
    let name: String
    private let items: [Value]
    private var position = 0

    init(_ items: [Value], typeName: String = "generator") {
        self.items = items
        self.name = typeName
    }

    override var typeName: String { name }
    override func iterate() throws -> [Value]? {
        defer { position = items.count }
        return Array(items[position...])
    }

    func next() -> Value? {
        guard position < items.count else { return nil }
        defer { position += 1 }
        return items[position]
    }
}

/// A re-iterable, sized Python view: `dict_items`, `dict_keys`, `dict_values`, `range`.
final class ViewObject: PyObject {
    let name: String
    let items: [Value]
    let reprText: String?
    /// `(start, stop, step)` of a `range`.
    let range: (Int, Int, Int)?

    init(_ items: [Value], typeName: String, repr: String? = nil, range: (Int, Int, Int)? = nil) {
        self.items = items
        self.name = typeName
        self.reprText = repr
        self.range = range
    }

    override var typeName: String { name }
    override var truthy: Bool { !items.isEmpty }
    override var length: Int? { items.count }
    override func iterate() throws -> [Value]? { items }
    override func repr() throws -> String {
        if let reprText { return reprText }
        return "\(name)(\(try pyRepr(.list(items))))"
    }
}

/// Arguments of a call: positional values, then keywords in the order written.
struct Arguments {
    var positional: [Value] = []
    var keywords: [(String, Value)] = []

    init(_ positional: [Value] = [], _ keywords: [(String, Value)] = []) {
        self.positional = positional
        self.keywords = keywords
    }

    func keyword(_ name: String) -> Value? { keywords.first { $0.0 == name }?.1 }

    /// Binds arguments to parameter names (Python-style: positional first, then by
    /// name). Returns one slot per parameter; nil where not given.
    func bind(_ params: [String], function: String) throws -> [Value?] {
        guard positional.count <= params.count else {
            throw ChatTemplateError(.type, "\(function)() takes at most \(params.count) argument(s) (\(positional.count) given)")
        }
        var slots = [Value?](repeating: nil, count: params.count)
        for (i, v) in positional.enumerated() { slots[i] = v }
        for (k, v) in keywords {
            guard let i = params.firstIndex(of: k) else {
                throw ChatTemplateError(.type, "\(function)() got an unexpected keyword argument '\(k)'")
            }
            if slots[i] != nil {
                throw ChatTemplateError(.type, "\(function)() got multiple values for argument '\(k)'")
            }
            slots[i] = v
        }
        return slots
    }
}

/// A callable implemented in Swift: globals (`range`, `namespace`...) and bound methods.
final class BuiltinFunction: PyObject {
    let name: String
    let body: (Arguments, Interpreter) throws -> Value
    let bound: Bool

    init(_ name: String, bound: Bool = false, _ body: @escaping (Arguments, Interpreter) throws -> Value) {
        self.name = name
        self.bound = bound
        self.body = body
    }

    override var typeName: String { "builtin_function_or_method" }
    override var isCallable: Bool { true }
    override func call(_ args: Arguments, _ interp: Interpreter) throws -> Value { try body(args, interp) }
}
