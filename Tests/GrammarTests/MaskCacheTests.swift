import Testing

@testable import Grammar

/// The mask computer's caches and shortcuts hold masks equal to brute force: literal threads
/// sorted by their next byte (wide objects, enums), exit walks cached per continuation, length
/// bounds cached per count left, and a finished matcher's pool handed to the next one.
@Suite(.serialized) struct MaskCacheTests {
    /// A vocabulary subset that keeps brute force quick in debug builds but has every token
    /// with JSON punctuation (the exits) and the keys' pieces.
    static let vocab: TokenVocabulary = {
        let full = smolVocabulary
        var tokens: [[UInt8]] = []
        var special = Set<Int>()
        for (id, t) in full.tokens.enumerated()
        where id % 11 == 0 || t.count == 1 || t.contains(where: { "\"{}[],: ".utf8.contains($0) })
            || String(decoding: t, as: UTF8.self).lowercased().contains("allow")
        {
            if full.specialTokens.contains(id) { special.insert(tokens.count) }
            tokens.append(t)
        }
        return TokenVocabulary(tokens: tokens, specialTokens: special)
    }()

    /// 30 optional keys with a shared prefix (so that after each member about 30 literal threads
    /// are alive), an enum of 20 values, a short bounded string and a free one.
    static let schema: String = {
        var properties = (0..<30).map { #""allow\#(["Air", "App", "Cam", "Sync", "Drop"][$0 % 5])\#($0)": {"type": "boolean"}"# }
        let values = (0..<20).map { #""value\#($0)""# }.joined(separator: ", ")
        properties.append(#""kind": {"enum": [\#(values)]}"#)
        properties.append(#""code": {"type": "string", "minLength": 2, "maxLength": 5}"#)
        properties.append(#""note": {"type": "string"}"#)
        return #"{"type": "object", "properties": {"# + properties.joined(separator: ", ") + "}}"
    }()

    static let documents = [
        #"{"allowAir0": true, "allowDrop4": false, "allowSync28": true, "kind": "value13", "code": "ab\"c", "note": "x, y"}"#,
        #"{"allowApp1": false, "allowCam22": true, "kind": "value7", "code": "abcde", "note": "a \"quoted\" note"}"#
    ]

    func checkAlong(_ doc: String, grammar: Grammar, computer: TokenMaskComputer) {
        let m = GrammarMatcher(grammar: grammar)
        let bytes = Array(doc.utf8)
        for i in 0...bytes.count {
            if i > 0 { #expect(m.accept(byte: bytes[i - 1]), "\(doc) at \(i)") }
            if i % 2 != 0 && i != bytes.count { continue }
            #expect(computer.mask(for: m).allowed == bruteForceMask(m, Self.vocab), "after \(String(decoding: bytes[..<i], as: UTF8.self))")
        }
        #expect(m.canAcceptEnd)
    }

    @Test func masksEqualBruteForceAcrossMatchersOfOneGrammar() throws {
        let grammar = try JSONSchemaCompiler.compile(Self.schema)
        let computer = TokenMaskComputer(vocabulary: Self.vocab)
        // Each document twice: the second pass starts from the first one's pool and caches.
        for doc in Self.documents + Self.documents { checkAlong(doc, grammar: grammar, computer: computer) }
        #expect(computer.stateCacheHits > 0)
        // Any order: the object guards' sets go through the same caches.
        var options = JSONSchemaCompiler.Options()
        options.propertyOrder = .any
        let anyOrder = try JSONSchemaCompiler.compile(Self.schema, options: options)
        let shuffled = #"{"note": "n", "kind": "value0", "allowSync3": true, "allowAir0": false}"#
        for doc in Self.documents + [shuffled, shuffled] { checkAlong(doc, grammar: anyOrder, computer: computer) }
    }

    @Test func wideStatesSortLiteralThreadsByNextByte() throws {
        let grammar = try JSONSchemaCompiler.compile(Self.schema)
        let m = GrammarMatcher(grammar: grammar)
        #expect(m.accept(#"{"allowAir0": true, "#))
        let partition = try #require(TokenMaskComputer.ThreadPartition(m.state.threads, grammar: grammar))
        #expect(partition.literals.count >= 30)
        #expect(partition.literalBytes == partition.literalBytes.sorted())
        #expect(partition.literals.count + partition.others.count == m.state.threads.count)
    }

    @Test func aFinishedMatchersPoolGoesToTheNextOne() throws {
        let grammar = try JSONSchemaCompiler.compile(#"{"type": "array", "items": {"type": "integer"}}"#)
        var first: GrammarMatcher? = GrammarMatcher(grammar: grammar)
        let pool = first!.pool
        let alongside = GrammarMatcher(grammar: grammar)
        #expect(alongside.pool !== pool, "matchers alive together never share a pool")
        first = nil
        let next = GrammarMatcher(grammar: grammar)
        #expect(next.pool === pool)
        #expect(next.accept("[1, 2]") && next.canAcceptEnd)
    }

    @Test func nothingIsKeptWithAZeroBudget() throws {
        let saved = Grammar.retainedMatcherCacheBytes
        defer { Grammar.retainedMatcherCacheBytes = saved }
        Grammar.retainedMatcherCacheBytes = 0
        let grammar = try JSONSchemaCompiler.compile(#"{"type": "string"}"#)
        var first: GrammarMatcher? = GrammarMatcher(grammar: grammar)
        let pool = first!.pool
        first = nil
        #expect(GrammarMatcher(grammar: grammar).pool !== pool)
    }

    /// A merged exit trie holds every token below every exit, once per exit, each at the
    /// path of the bytes that follow the exit (for a plain string, and for whitespace, whose
    /// exits nest: ` ` and `  ` both end a run).
    @Test func exitTriesHoldEveryTokenPastTheEndAtItsSuffix() {
        let v = smolVocabulary
        let computer = TokenMaskComputer(vocabulary: v)
        for (id, term, state) in [
            (Int32(900), Terminal.string(StringSpec()), LexState(0, StringLexer.normal)),
            (Int32(901), Terminal.whitespace(max: Int.max), LexState())
        ] {
            let info = computer.lexInfo(term, sharedID: id, state: state)
            #expect(info.exits.count > 10, "\(term)")
            var expected: [Int32] = []
            for x in info.exits {
                for node in Int(x) + 1..<Int(v.subtreeEnd[Int(x)]) {
                    expected += v.tokenIDs[Int(v.tokenStart[node])..<Int(v.tokenStart[node + 1])]
                }
            }
            let trie = ExitTrie(exits: info.exits, vocabulary: v)
            var found: [Int32] = []
            // Depth-first with the path of bytes from the root.
            var path: [UInt8] = []
            var open: [Int32] = []
            for node in 1..<trie.nodeByte.count {
                while let last = open.last, Int(last) <= node {
                    open.removeLast()
                    path.removeLast()
                }
                open.append(trie.subtreeEnd[node])
                path.append(trie.nodeByte[node])
                for k in Int(trie.tokenStart[node])..<Int(trie.tokenStart[node + 1]) {
                    let token = trie.tokenIDs[k]
                    found.append(token)
                    #expect(v.tokens[Int(token)].suffix(path.count).elementsEqual(path), "token \(token)")
                }
            }
            #expect(found.sorted() == expected.sorted())
        }
    }

    /// Exit walks above the stand-in stack: a key's exits in an any-order object are walked
    /// once for every set of keys seen (the stand-in path: `":"` into a string value), and
    /// tokens that can complete the value (`":1`), after which the set is read, fall back to
    /// the thread's own stack.
    /// Every mask equals brute force on a vocabulary with such tokens.
    @Test func exitWalksAboveTheStandInEqualBruteForce() throws {
        var tokens = (0..<256).map { [UInt8($0)] }
        for t in [
            #"":"#, #"":1"#, #"":1,"#, #"":1}"#, #","a":"#, #"2,"a"#, #","b":2,"a":1}"#, #"{"c":"#, #""b""#, #""a":1,"c""#, #"":""#,
            #"":"x"#, #"x","a"#
        ] {
            tokens.append(Array(t.utf8))
        }
        let vocab = TokenVocabulary(tokens: tokens)
        let computer = TokenMaskComputer(vocabulary: vocab)
        var options = JSONSchemaCompiler.Options()
        options.propertyOrder = .any
        options.maxWhitespaceRun = 0
        let grammar = try JSONSchemaCompiler.compile(
            #"{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}, "#
                + #""d": {"type": "string"}}, "#
                + #""required": ["a"], "additionalProperties": false}"#, options: options)
        var pool: StackPool?
        for doc in [#"{"b":2,"a":1}"#, #"{"c":3,"d":"x","b":2,"a":1}"#, #"{"a":1,"d":"x"}"#, #"{"d":"x","c":1,"a":1,"b":2}"#] {
            let m = GrammarMatcher(grammar: grammar)
            pool = m.pool
            for (i, byte) in doc.utf8.enumerated() {
                #expect(computer.mask(for: m).allowed == bruteForceMask(m, vocab), "\(doc) after \(i) bytes")
                #expect(m.accept(byte: byte))
            }
            #expect(computer.mask(for: m).allowed == bruteForceMask(m, vocab))
            #expect(m.canAcceptEnd)
        }
        let p = try #require(pool)
        func aboveStandIn(_ stack: Int32) -> Bool {
            var s = stack
            while s != 0 {
                if s == p.standIn { return true }
                s = p.parent[Int(s)]
            }
            return false
        }
        #expect(p.standIn > 0)
        #expect(p.exitCache.keys.contains { $0.continuation.allSatisfy { aboveStandIn($0.stack) } })
        #expect(!p.exitsBelowStandIn.isEmpty)
    }
}
