// `for` loops: running one, the lazily filtered iterator over its items, and jinja2's
// `loop` variable.

extension Interpreter {
    /// Runs a loop. Returns the flow of its `else` body: a `break` there leaves the
    /// enclosing loop, as in jinja2's generated code.
    @discardableResult
    func runFor(_ f: ForLoop, _ frame: Frame, iterable: Value?, depth: Int) throws -> Flow {
        let source = try iterable ?? eval(f.iterable, frame)
        let items = try iterate(source)
        // Names assigned in the body live for one iteration: each starts from the
        // enclosing scope again, as in jinja2.
        let filterScope = Frame(parent: frame)
        var accept: ((Value) throws -> Bool)?
        if let cond = f.condition {
            // jinja2 filters lazily, interleaved with the body, in a scope of its own.
            let filterFrame = Frame(parent: filterScope)
            // Strong captures: a `loop` stored away (`{% set ns.l = loop %}`) may be
            // used after this function returns, always within the same render.
            accept = { item in
                try self.assign(f.target, item, filterFrame)
                return try self.eval(cond, filterFrame).truthy
            }
        }
        let iterator = LoopIterator(items, accept: accept)
        let loop = LoopObject(iterator: iterator, depth: depth)
        if f.recursive {
            loop.recurse = { value in
                try self.capture { try self.runFor(f, frame, iterable: value, depth: depth + 1) }
            }
        }
        var iterated = false
        while let item = try iterator.next() {
            iterated = true
            try countIteration()
            loop.advance(to: item)
            let loopFrame = Frame(parent: frame)
            try assign(f.target, item, loopFrame)
            loopFrame.vars["loop"] = .object(loop)
            if try exec(f.body, loopFrame) == .breakLoop { break }
        }
        if !iterated && !f.elseBody.isEmpty {
            return try exec(f.elseBody, Frame(parent: frame))
        }
        return .normal
    }
}

/// The items of a `for` loop, pulled one at a time so that an inline `if` filter runs
/// interleaved with the body, and peeked only when `loop.last`, `loop.nextitem` or
/// `loop.length` ask, as jinja2's `LoopContext` does.
final class LoopIterator {
    private let items: [Value]
    private var position = 0
    private var buffer: [Value] = []
    private var bufferStart = 0
    private let accept: ((Value) throws -> Bool)?

    init(_ items: [Value], accept: ((Value) throws -> Bool)?) {
        self.items = items
        self.accept = accept
    }

    private func pull() throws -> Value? {
        while position < items.count {
            let v = items[position]
            position += 1
            if try accept?(v) ?? true { return v }
        }
        return nil
    }

    func next() throws -> Value? {
        if bufferStart < buffer.count {
            defer { bufferStart += 1 }
            return buffer[bufferStart]
        }
        return try pull()
    }

    func peek() throws -> Value? {
        if bufferStart < buffer.count { return buffer[bufferStart] }
        guard let v = try pull() else { return nil }
        buffer.append(v)
        return v
    }

    /// How many items remain after the current one.
    func remaining() throws -> Int {
        if accept == nil { return buffer.count - bufferStart + items.count - position }
        while let v = try pull() { buffer.append(v) }
        return buffer.count - bufferStart
    }
}

/// jinja2's `loop` variable.
final class LoopObject: PyObject {
    let iterator: LoopIterator
    let depth: Int
    var index0 = -1
    var current: Value?
    var previous: Value?
    var recurse: ((Value) throws -> String)?
    var lastChanged: [Value]?

    init(iterator: LoopIterator, depth: Int) {
        self.iterator = iterator
        self.depth = depth
    }

    func advance(to item: Value) {
        previous = current
        current = item
        index0 += 1
    }

    func loopLength() throws -> Int { index0 + 1 + (try iterator.remaining()) }

    override var typeName: String { "LoopContext" }
    override var objectTypeRepr: String { "jinja2.runtime.LoopContext object" }
    override var isCallable: Bool { recurse != nil }
    override func repr() throws -> String { "<LoopContext \(index0 + 1)/\(try loopLength())>" }

    override func call(_ args: Arguments, _ interp: Interpreter) throws -> Value {
        guard let recurse else {
            throw ChatTemplateError(.type, "The loop must have the 'recursive' marker to be called recursively.")
        }
        guard args.positional.count == 1 else { throw ChatTemplateError(.type, "loop() takes exactly one argument") }
        return .string(try recurse(args.positional[0]))
    }

    override func attribute(_ name: String, _ interp: Interpreter) throws -> Value? {
        switch name {
        case "index0": return .int(index0)
        case "index": return .int(index0 + 1)
        case "revindex": return .int(try loopLength() - index0)
        case "revindex0": return .int(try loopLength() - index0 - 1)
        case "first": return .bool(index0 == 0)
        case "last": return .bool(try iterator.peek() == nil)
        case "length": return .int(try loopLength())
        case "depth": return .int(depth)
        case "depth0": return .int(depth - 1)
        case "previtem": return previous ?? .undefinedHint("there is no previous item")
        case "nextitem": return try iterator.peek() ?? .undefinedHint("there is no next item")
        case "cycle":
            return .object(
                BuiltinFunction("cycle", bound: true) { args, _ in
                    guard !args.positional.isEmpty else { throw ChatTemplateError(.type, "no items for cycling given") }
                    return args.positional[self.index0 % args.positional.count]
                })
        case "changed":
            return .object(
                BuiltinFunction("changed", bound: true) { args, _ in
                    if let last = self.lastChanged, last.count == args.positional.count,
                        zip(last, args.positional).allSatisfy({ pyEquals($0, $1) })
                    {
                        return .bool(false)
                    }
                    self.lastChanged = args.positional
                    return .bool(true)
                })
        default: return nil
        }
    }
}
