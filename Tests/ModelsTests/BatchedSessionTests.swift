import Kernels
import Models
import TestSupport
import Testing

/// Several sequences stepped together (`BatchedSession`): each sequence's logits must be
/// bit for bit what it gets alone, whatever the others do (join, decode, prefill a chunk,
/// close) and whichever slot it lands in, and equal to an `InferenceSession` fed the same
/// pieces.
@Suite(.serialized) struct BatchedSessionTests {
    /// One sequence of the scenario: its prompt in the chunks it is fed in, how many
    /// tokens it generates (greedy), and the step at which it opens.
    struct Plan {
        let chunks: [[Int]]
        let generate: Int
        let joins: Int
    }

    /// Five sequences in three slots: A and B overlap from the start, C joins while both
    /// decode and leaves first, D takes C's slot with its prompt in two chunks (the second
    /// one token) while the others decode, E joins late with a one-token prompt in A's
    /// freed slot. Prompts of 1 to 12 tokens.
    static let plans = [
        Plan(chunks: [[504, 3575, 282, 4649, 314, 7042, 30]], generate: 8, joins: 0),
        Plan(chunks: [[198, 504, 1797, 1918, 553, 253, 2155, 28, 1069, 30, 198, 22]], generate: 10, joins: 1),
        Plan(chunks: [[1069, 30, 198]], generate: 3, joins: 2),
        Plan(chunks: [[28, 504, 3575, 282, 4649, 314, 7042, 30], [553]], generate: 5, joins: 6),
        Plan(chunks: [[4649]], generate: 4, joins: 9)
    ]

    static func argmax(_ logits: UnsafeBufferPointer<Float>) -> Int {
        var best = 0
        for i in logits.indices where logits[i] > logits[best] { best = i }
        return best
    }

    /// What one sequence saw: its logits after each of its steps, and its greedy tokens.
    struct Trace: Equatable {
        var logits: [[Float]] = []
        var tokens: [Int] = []
    }

    /// Runs the plans together in a session of `slots` slots: at each step every open
    /// sequence takes its next prompt chunk or its last greedy token, in one `step`; a
    /// sequence closes as soon as it has generated its tokens. Returns each plan's trace
    /// and the slots the sequences were given.
    static func together(
        _ model: TransformerModel, _ plans: [Plan], slots: Int, kvCacheType: KVCacheType = .f32, contextLength: Int = 64,
        maxStepTokens: Int = 32
    ) throws -> ([Trace], [Int]) {
        let batch = BatchedSession(
            model: model, slots: slots, contextLength: contextLength, maxStepTokens: maxStepTokens, kvCacheType: kvCacheType)
        var traces = [Trace](repeating: Trace(), count: plans.count)
        var open: [Int: BatchedSession.Sequence] = [:]
        var fed = [Int](repeating: 0, count: plans.count)  // chunks fed
        var slotOf = [Int](repeating: -1, count: plans.count)
        var step = 0
        while traces.enumerated().contains(where: { $0.element.tokens.count < plans[$0.offset].generate }) {
            for (i, plan) in plans.enumerated() where plan.joins == step {
                open[i] = try batch.open()
                slotOf[i] = open[i]!.slot
            }
            var inputs: [BatchedSession.Input] = []
            var members: [Int] = []
            for i in open.keys.sorted() {
                let tokens = fed[i] < plans[i].chunks.count ? plans[i].chunks[fed[i]] : [traces[i].tokens.last!]
                inputs.append(.init(open[i]!, tokens))
                members.append(i)
            }
            // The step's order must not matter either: reverse it every other step.
            if step % 2 == 1 { inputs.reverse() }
            if !inputs.isEmpty { try batch.step(inputs) }
            for i in members {
                let logits = try batch.logits(of: open[i]!)
                traces[i].logits.append(Array(logits))
                fed[i] += 1
                if fed[i] >= plans[i].chunks.count { traces[i].tokens.append(argmax(logits)) }
                if traces[i].tokens.count == plans[i].generate {
                    try batch.close(open[i]!)
                    open[i] = nil
                }
            }
            step += 1
        }
        #expect(batch.freeSlots == slots)
        return (traces, slotOf)
    }

    /// One plan alone, in a one-slot BatchedSession.
    static func alone(_ model: TransformerModel, _ plan: Plan, kvCacheType: KVCacheType = .f32, contextLength: Int = 64) throws -> Trace {
        try together(
            model, [Plan(chunks: plan.chunks, generate: plan.generate, joins: 0)], slots: 1, kvCacheType: kvCacheType,
            contextLength: contextLength
        ).0[0]
    }

    /// One plan through an InferenceSession, fed the same pieces and the greedy tokens of
    /// `trace` (so that a near tie cannot send it down another path).
    static func classic(_ model: TransformerModel, _ plan: Plan, following trace: Trace) throws -> Trace {
        let session = InferenceSession(model: model, contextLength: 64, maxBatch: 32)
        var out = Trace()
        for chunk in plan.chunks {
            try session.evaluate(chunk)
            out.logits.append(Array(session.logits))
        }
        out.tokens.append(argmax(session.logits))
        for token in trace.tokens.dropLast() {
            try session.evaluate([token])
            out.logits.append(Array(session.logits))
            out.tokens.append(argmax(session.logits))
        }
        return out
    }

    static func modelPath(_ name: String) throws -> String {
        name.hasSuffix("-tiny") ? TestFixtures.path("models/\(name).gguf") : try TestFixtures.require(TestFixtures.modelCache + "/" + name)
    }

    @Test(arguments: [
        "lfm2-tiny", "lfm2moe-tiny", "SmolLM2-135M-Instruct.Q4_0.gguf", "SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct.F32.gguf"
    ])
    func batchedSequencesMatchEachAloneBitForBit(_ name: String) throws {
        let model = try TransformerModel(path: try Self.modelPath(name))
        let (traces, slots) = try Self.together(model, Self.plans, slots: 3)
        // The scenario does what it says: C's slot goes to D, A's to E.
        #expect(slots == [0, 1, 2, 2, 0])
        for (i, plan) in Self.plans.enumerated() {
            let alone = try Self.alone(model, plan)
            #expect(traces[i].tokens == alone.tokens, "\(name) sequence \(i): tokens")
            #expect(traces[i].logits.count == alone.logits.count)
            for (step, (a, b)) in zip(traces[i].logits, alone.logits).enumerated() {
                #expect(a.map(\.bitPattern) == b.map(\.bitPattern), "\(name) sequence \(i) step \(step): logits differ")
            }
            // The same machinery with one sequence: an InferenceSession fed the same pieces
            // gives the same logits bit for bit, decode included (both send one-token rows
            // through the multi-row matvec, chunks through the prefill product).
            let classic = try Self.classic(model, plan, following: alone)
            #expect(classic.tokens == alone.tokens, "\(name) sequence \(i): InferenceSession's tokens")
            for (step, (a, b)) in zip(classic.logits, alone.logits).enumerated() {
                #expect(a.map(\.bitPattern) == b.map(\.bitPattern), "\(name) sequence \(i) step \(step): InferenceSession's logits differ")
            }
            #expect(classic.logits.count == alone.logits.count)
        }
    }

    @Test func f16CacheSequencesMatchEachAlone() throws {
        let model = try TransformerModel(path: Self.modelPath("lfm2-tiny"))
        let (traces, _) = try Self.together(model, Self.plans, slots: 3, kvCacheType: .f16)
        for (i, plan) in Self.plans.enumerated() {
            #expect(traces[i] == (try Self.alone(model, plan, kvCacheType: .f16)), "sequence \(i)")
        }
    }

    /// Decoding over caches longer than one block of keys (`CausalAttention.decodeKeyBlock`):
    /// the attention of a decoded token is split into key blocks that the threads share and
    /// merged, and a sequence still gets, bit for bit, what it gets alone, beside a short
    /// sequence (one block) and another long one, with F32 and F16 caches.
    @Test(arguments: [KVCacheType.f32, .f16])
    func longCachesSplitIntoKeyBlocksMatchEachAlone(_ type: KVCacheType) throws {
        let model = try TransformerModel(path: Self.modelPath("lfm2-tiny"))
        func prompt(_ count: Int, seed: Int) -> [[Int]] {
            let tokens = (0..<count).map { 200 + ($0 * 37 + seed * 101) % 4000 }
            return stride(from: 0, to: count, by: 8).map { Array(tokens[$0..<min(count, $0 + 8)]) }
        }
        let blockKeys = CausalAttention.decodeKeyBlock
        let plans = [
            Plan(chunks: prompt(blockKeys + 60, seed: 1), generate: 6, joins: 0),  // crosses into a second block while decoding
            Plan(chunks: prompt(9, seed: 2), generate: 12, joins: 3),
            Plan(chunks: prompt(blockKeys - 3, seed: 3), generate: 8, joins: 1)  // 512 keys, then 513: one block, then two
        ]
        let context = blockKeys + 80
        let (traces, _) = try Self.together(model, plans, slots: 3, kvCacheType: type, contextLength: context)
        for (i, plan) in plans.enumerated() {
            let alone = try Self.alone(model, plan, kvCacheType: type, contextLength: context)
            #expect(traces[i].tokens == alone.tokens, "sequence \(i): tokens")
            #expect(traces[i].logits.map { $0.map(\.bitPattern) } == alone.logits.map { $0.map(\.bitPattern) }, "sequence \(i): logits")
        }
    }

    /// Decode attention runs each sequence as a task of its own, its scores in a row of
    /// their own (more rows than a prompt's query block, 64, when the session has more
    /// slots): 3 and 66 sequences decoding together (two tokens of prompt each, joining at
    /// different steps) each get what they get alone.
    @Test(arguments: [3, 66])
    func manyDecodingSequencesMatchEachAlone(_ count: Int) throws {
        let model = try TransformerModel(path: Self.modelPath("lfm2-tiny"))
        let plans = (0..<count).map { i in
            Plan(chunks: [[200 + i * 53 % 3000, 300 + i * 97 % 3000]], generate: 3 + i % 3, joins: i % 2)
        }
        let (traces, _) = try Self.together(model, plans, slots: count, maxStepTokens: 2 * count)
        for (i, plan) in plans.enumerated() {
            let alone = try Self.alone(model, plan)
            #expect(traces[i].tokens == alone.tokens, "\(count) sequences, sequence \(i): tokens")
            let sameLogits = traces[i].logits.map { $0.map(\.bitPattern) } == alone.logits.map { $0.map(\.bitPattern) }
            #expect(sameLogits, "\(count) sequences, sequence \(i): logits")
        }
    }

    /// A step none of whose inputs needs logits (a spoken reply's frame before another
    /// frame) skips the output head: the logits stay as they were, the hidden state and
    /// every later step are what they are with logits computed. A step where one input
    /// needs them computes them for all. `InferenceSession` likewise.
    @Test func stepsWithoutLogitsKeepTheHiddenStateAndTheLogitsAsTheyWere() throws {
        let model = try TransformerModel(path: Self.modelPath("lfm2-tiny"))
        let d = model.hyperparameters.embeddingLength
        var random = SeededRandom(seed: 41)
        let rows = (0..<3).map { _ in random.normal(d, scale: 0.5) }
        func run(needsLogits: Bool) throws -> (hidden: [[Float]], logits: [[Float]]) {
            let batch = BatchedSession(model: model, slots: 2, contextLength: 32, maxStepTokens: 16)
            let a = try batch.open(), b = try batch.open()
            try batch.step([.init(a, [504, 3575, 282]), .init(b, [198, 22])])
            var hidden: [[Float]] = [], logits: [[Float]] = []
            for (i, row) in rows.enumerated() {
                // Step 1 of 3 has b needing logits: the head runs for both.
                try batch.step([
                    .init(a, embeddings: row, needsLogits: needsLogits), .init(b, embeddings: row, needsLogits: needsLogits || i == 1)
                ])
                hidden.append(Array(try batch.hiddenState(of: a)))
                logits.append(Array(try batch.logits(of: a)))
            }
            try batch.step([.init(a, [30]), .init(b, [30])])
            logits.append(Array(try batch.logits(of: a)))
            return (hidden, logits)
        }
        let with = try run(needsLogits: true), without = try run(needsLogits: false)
        #expect(with.hidden.map { $0.map(\.bitPattern) } == without.hidden.map { $0.map(\.bitPattern) })
        #expect(without.logits[0] != with.logits[0], "step 0 skipped the head")
        #expect(without.logits[1] == with.logits[1] && without.logits[3] == with.logits[3])
        #expect(without.logits[2] == with.logits[1], "step 2 skipped the head: step 1's logits stay")

        let session = InferenceSession(model: model, contextLength: 16)
        try session.evaluate([504, 3575])
        let before = Array(session.logits)
        try session.evaluate(embeddings: rows[0], needsLogits: false)
        #expect(Array(session.logits) == before)
        let hidden = Array(session.hiddenState)
        let again = InferenceSession(model: model, contextLength: 16)
        try again.evaluate([504, 3575])
        try again.evaluate(embeddings: rows[0])
        #expect(Array(again.hiddenState) == hidden && Array(again.logits) != before)
    }

    @Test func sequenceHandlesAndStepsAreChecked() throws {
        let model = try TransformerModel(path: Self.modelPath("lfm2-tiny"))
        let batch = BatchedSession(model: model, slots: 2, contextLength: 8, maxStepTokens: 6)
        let a = try batch.open(), b = try batch.open()
        #expect(throws: ModelError.noFreeSlot(slots: 2)) { try batch.open() }
        let empty = try batch.logits(of: a).allSatisfy { $0 == 0 }
        #expect(empty, "no logits before the first step")
        #expect(throws: ModelError.repeatedSequence(slot: a.slot)) { try batch.step([.init(a, [1]), .init(a, [2])]) }
        #expect(throws: ModelError.invalidBatch(count: 7, maximum: 6)) { try batch.step([.init(a, [1, 2, 3]), .init(b, [4, 5, 6, 7])]) }
        #expect(throws: ModelError.invalidBatch(count: 0, maximum: 6)) { try batch.step([]) }
        #expect(throws: ModelError.invalidToken(id: 49161, vocabularySize: 49161)) { try batch.step([.init(b, [49161])]) }
        try batch.step([.init(a, [1, 2, 3, 4, 5]), .init(b, [6])])
        #expect(try batch.position(of: a) == 5 && batch.position(of: b) == 1)
        let before = Array(try batch.logits(of: b))
        #expect(throws: ModelError.contextOverflow(position: 5, tokens: 4, contextLength: 8)) {
            try batch.step([.init(b, [7]), .init(a, [1, 2, 3, 4])])
        }
        #expect(try batch.position(of: a) == 5 && batch.position(of: b) == 1, "a refused step changes nothing")
        #expect(Array(try batch.logits(of: b)) == before)
        try batch.close(a)
        #expect(throws: ModelError.unknownSequence(slot: a.slot)) { try batch.step([.init(a, [1])]) }
        #expect(throws: ModelError.unknownSequence(slot: a.slot)) { try batch.close(a) }
        let c = try batch.open()
        #expect(c.slot == a.slot && c != a)
        #expect(try batch.position(of: c) == 0)
        #expect(throws: ModelError.unknownSequence(slot: a.slot)) { try batch.position(of: a) }
        try batch.truncate(b, to: 0)
        #expect(try batch.position(of: b) == 0)
        #expect(ModelError.noFreeSlot(slots: 2).description.contains("2 slots"))
    }
}
