/// Objects whose properties may come in any order (`JSONSchemaCompiler.Options.propertyOrder`).
///
/// The grammar of such an object is the same small set of rules whatever the order: after
/// `{`, any declared member not seen yet or any extra member, then `,` and again, or `}`.
/// What makes it exact is a set of the declared members seen so far, kept in the matcher's
/// return stack: the object's `open` guard pushes a frame holding the empty set, the guard
/// before each declared member (`claim`) refuses the parse if the member was seen and adds
/// it otherwise, and the guard before `}` (`close`) refuses the parse unless every required
/// member was seen, then pops the frame. Without extra members, a `more` guard before each
/// `,` refuses it once every member was seen, so that every byte the matcher accepts can
/// still lead to a complete object (the token masks rely on that). The guards are zero-width terminals that the
/// matcher applies while expanding a parse (no thread ever rests inside one), so a thread's
/// stack id carries the set and everything keyed by states (deduplication, mask caches)
/// stays exact. Nothing is enumerated: the states are the sets the input actually reaches.
///
/// The grammar is laid out so that each guard runs with the object's frame on top of the
/// stack: the guards open the alternatives of rules called in last position (`first`,
/// `next`) or follow the member's call (`close`, after the members' return).
enum ObjectGuard: Hashable, Sendable {
    /// Pushes a frame holding the empty set.
    case open
    /// Declared member `index`: refused when already in the set, else added to it.
    case claim(Int32)
    /// Refused unless the set contains every bit of `required` (one word per 64 members);
    /// pops the frame.
    case close(required: [UInt64])
    /// Before `,` in an object without extra members: refused when every member of
    /// `available` was seen (nothing could follow the comma). `rules` (the rule of each
    /// member, -1 for none) is the builder's form: `GrammarBuilder.build` sets `available`
    /// to the members whose rule can derive some text, and empties `rules`.
    case more(available: [UInt64], rules: [Int32])
}

extension ObjectGuard {
    /// Whether the guard reads the key set on top of the stack (all but `open`).
    var readsTheSet: Bool {
        if case .open = self { return false }
        return true
    }
}

extension StackPool {
    /// The stack after a guard, or nil when the guard refuses the parse.
    func apply(_ guardOp: ObjectGuard, to stack: Int32) -> Int32? {
        if stack == standIn, guardOp.readsTheSet {
            // The guard would read the set below an exit walk's stand-in (see `standIn`).
            standInReached = true
            return nil
        }
        switch guardOp {
        case .open:
            return push(stack, frame(of: []))
        case .claim(let index):
            guard stack != 0, top[Int(stack)] <= -2 else { return nil }
            let current = top[Int(stack)]
            // The matcher expands the same claims byte after byte: the transition is cached
            // (0 for a refusal; frames are <= -2), so only a new set allocates.
            let key = UInt64(UInt32(bitPattern: current)) << 32 | UInt64(UInt32(bitPattern: index))
            if let known = claimed[key] { return known == 0 ? nil : push(parent[Int(stack)], known) }
            var set = seenSets[Int(-current - 2)]
            let word = Int(index) >> 6, bit = UInt64(1) << UInt64(index & 63)
            if word < set.count && set[word] & bit != 0 {
                claimed[key] = 0
                return nil
            }
            while set.count <= word { set.append(0) }
            set[word] |= bit
            let next = frame(of: set)
            claimed[key] = next
            return push(parent[Int(stack)], next)
        case .close(let required):
            guard stack != 0, top[Int(stack)] <= -2 else { return nil }
            let set = seenSets[Int(-top[Int(stack)] - 2)]
            for (i, r) in required.enumerated() where r != 0 {
                guard i < set.count, set[i] & r == r else { return nil }
            }
            return parent[Int(stack)]
        case .more(let available, _):
            guard stack != 0, top[Int(stack)] <= -2 else { return nil }
            let set = seenSets[Int(-top[Int(stack)] - 2)]
            for (i, a) in available.enumerated() where a != 0 {
                if i >= set.count || set[i] & a != a { return stack }
            }
            return nil
        }
    }

    /// The frame value (a negative `top`) of a key set.
    func frame(of set: [UInt64]) -> Int32 {
        if let id = seenSetIndex[set] { return -(id + 2) }
        seenSets.append(set)
        let id = Int32(seenSets.count - 1)
        seenSetIndex[set] = id
        return -(id + 2)
    }
}

extension SchemaCompiler {
    /// Members in any order, each declared one at most once, the required ones all present
    /// before `}`, extras anywhere (see `ObjectGuard`); `{}` only when `allowEmpty`.
    func anyOrderObjectAlternatives(
        kv: [GrammarBuilder.Symbol?], isRequired: [Bool], extra: GrammarBuilder.Symbol?, allowEmpty: Bool
    ) -> [[GrammarBuilder.Symbol]] {
        let comma = b.literal(","), close = b.literal("}"), open = b.literal("{")
        var required = [UInt64](repeating: 0, count: (kv.count + 63) / 64), available = required
        for (i, r) in isRequired.enumerated() where r { required[i >> 6] |= 1 << UInt64(i & 63) }
        for (i, m) in kv.enumerated() where m != nil { available[i >> 6] |= 1 << UInt64(i & 63) }
        while required.last == 0 { required.removeLast() }
        let openGuard = b.terminal(.objectGuard(.open))
        let closeGuard = b.terminal(.objectGuard(.close(required: required)))
        let first = b.declareRule("obj-any-first"), next = b.declareRule("obj-any-next"), rest = b.declareRule("obj-any-rest")
        var members: [[GrammarBuilder.Symbol]] = []
        for (i, m) in kv.enumerated() {
            guard let m else { continue }
            members.append([b.terminal(.objectGuard(.claim(Int32(i)))), m, rest])
        }
        if let extra { members.append([extra, rest]) }
        b.define(next, members)
        b.define(first, allowEmpty ? members + [[closeGuard, close]] : members)
        let rules = kv.map { $0.map(\.ruleID) ?? -1 }
        let more: [GrammarBuilder.Symbol] = extra == nil ? [b.terminal(.objectGuard(.more(available: available, rules: rules)))] : []
        b.define(rest, [more + [ws, comma, ws, next], [closeGuard, ws, close]])
        // A required member that can derive no text makes the object unsatisfiable (the
        // close guard would never pass): the builder's productivity analysis must know it.
        let object = b.rule("obj-any", [[open, openGuard, ws, first]])
        b.productiveOnlyWith[object.ruleID] = kv.indices.filter { isRequired[$0] }.compactMap { kv[$0]?.ruleID }
        return [[object]]
    }
}
