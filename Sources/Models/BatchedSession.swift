import Kernels

/// Several independent sequences evaluated by one model in shared forward passes: decoding
/// a token for each of B sequences reads every weight once per step instead of B times.
///
/// Each sequence lives in a slot with its own caches (attention keys and values, LFM2's
/// convolution inputs) and position, allocated once when the session is created. A
/// sequence is opened in a free slot (`open`), fed through `step` (one new token, or a
/// chunk of prompt, for any subset of the open sequences), and closed when it is done or
/// cancelled (`close`), which frees the slot for the next `open`.
///
/// ```swift
/// let batch = BatchedSession(model: model, slots: 4, contextLength: 2048)
/// let a = try batch.open(), b = try batch.open()
/// try batch.step([.init(a, promptA)])              // prefill a (a chunk of at most maxStepTokens)
/// try batch.step([.init(b, promptB)])              // prefill b
/// var next = [a: argmax(try batch.logits(of: a)), b: argmax(try batch.logits(of: b))]
/// while ... {
///     try batch.step([.init(a, [next[a]!]), .init(b, [next[b]!])])   // one shared step
///     next[a] = argmax(try batch.logits(of: a)); next[b] = argmax(try batch.logits(of: b))
/// }
/// try batch.close(a)                                // b goes on; a's slot is free again
/// ```
///
/// Results: a sequence's logits are bitwise identical whether it is stepped alone or with
/// others, in any slot, joined at any step, and equal to an `InferenceSession`'s fed the
/// same pieces (the rule and why it holds: docs/architecture.md, "Several sequences at
/// once").
///
/// Memory: every slot holds `cacheByteCountPerSlot` bytes of caches (pages are touched
/// only as positions fill; a closed slot keeps its touched pages for the next sequence),
/// plus the shared buffers of one pass of `maxStepTokens` rows and `slots` rows of logits.
///
/// Not thread-safe: one call at a time (a scheduler serializes the steps of all its
/// sequences). The model may be shared with other sessions; its thread pool runs one
/// session's pass at a time.
public final class BatchedSession: @unchecked Sendable {
    // @unchecked: mutable state, used by one caller at a time (see above).

    /// A sequence of this session: the slot it occupies. A handle stays valid until the
    /// sequence is closed; after that, using it is an error (`ModelError.unknownSequence`),
    /// even when its slot holds a new sequence.
    public struct Sequence: Hashable, Sendable, CustomStringConvertible {
        /// The slot, `0..<slots`.
        public let slot: Int
        let generation: Int
        public var description: String { "sequence in slot \(slot)" }
    }

    /// What one sequence evaluates in a step: tokens, or rows of embeddings given directly
    /// (an image's or an audio clip's projected encoder output: `embeddingLength` floats a
    /// row, one position each).
    public struct Input: Sendable {
        public var sequence: Sequence
        /// The token ids (empty for an input of embeddings).
        public var tokens: [Int]
        /// The embedding rows, row-major (empty for an input of tokens).
        public var embeddings: [Float]
        /// Whether the step computes this input's logits. When no input of a step needs
        /// them the output head is skipped, and `logits(of:)` is left as it was; the hidden
        /// state is computed either way.
        public var needsLogits = true

        public init(_ sequence: Sequence, _ tokens: [Int]) {
            self.sequence = sequence
            self.tokens = tokens
            embeddings = []
        }

        public init(_ sequence: Sequence, embeddings: [Float], needsLogits: Bool = true) {
            self.sequence = sequence
            tokens = []
            self.embeddings = embeddings
            self.needsLogits = needsLogits
        }
    }

    public let model: TransformerModel
    /// Number of slots: the most sequences open at once.
    public let slotCount: Int
    /// Capacity of each sequence's caches in tokens.
    public let contextLength: Int
    /// Most tokens in one step, all sequences together.
    public let maxStepTokens: Int

    let forward: ForwardPass
    let slots: [SequenceState]
    /// Per slot: the generation of the sequence in it, and whether it is open.
    private var generations: [Int]
    private var isOpen: [Bool]
    /// Per slot: the logits of its sequence's last evaluated token.
    private let slotLogits: UnsafeMutablePointer<Float>
    /// Per slot: the hidden state of its sequence's last evaluated token (`hiddenState(of:)`).
    private let slotHiddenStates: UnsafeMutablePointer<Float>
    /// A step's tokens, input after input, and its pass inputs (kept: a step allocates
    /// nothing but what the caller passes).
    private let stepTokens: UnsafeMutablePointer<Int>
    /// A step's given embeddings (allocated at the first step that has some).
    private var stepEmbeddings: UnsafeMutablePointer<Float>?
    private var pass: [PassInput] = []
    /// Per slot: the last step that named it (to refuse a sequence twice in one step).
    private var lastStep: [Int]
    private var stepCount = 0

    /// Whether decode steps (one token per sequence) measure their own times and run on
    /// the calling thread alone while that is faster than the model's threads, as when
    /// another process keeps the cores busy (`DecodeThreading`). Default true; results
    /// are the same bits either way.
    public var adaptsDecodeThreads: Bool {
        get { forward.adaptsDecodeThreads }
        set { forward.adaptsDecodeThreads = newValue }
    }

    /// Creates `slots` slots of caches for `contextLength` tokens each (default: the
    /// model's trained context, capped at 4096) and the buffers of a step of up to
    /// `maxStepTokens` tokens. `kvCacheType` `.f16` halves the attention caches.
    public init(model: TransformerModel, slots: Int, contextLength: Int? = nil, maxStepTokens: Int = 512, kvCacheType: KVCacheType = .f32) {
        let hp = model.hyperparameters
        self.model = model
        self.slotCount = max(1, slots)
        self.contextLength = max(1, contextLength ?? min(hp.trainedContextLength, 4096))
        self.maxStepTokens = max(1, maxStepTokens)
        forward = ForwardPass(
            model: model, maxRows: self.maxStepTokens, maxSequences: slotCount, contextLength: self.contextLength,
            kvCacheType: kvCacheType)
        let context = self.contextLength
        let chunk = self.maxStepTokens
        self.slots = (0..<slotCount).map { _ in
            SequenceState(model: model, contextLength: context, maxRows: chunk, kvCacheType: kvCacheType)
        }
        generations = Array(repeating: 0, count: slotCount)
        isOpen = Array(repeating: false, count: slotCount)
        slotLogits = .allocate(capacity: slotCount * hp.vocabularySize)
        slotLogits.initialize(repeating: 0, count: slotCount * hp.vocabularySize)
        slotHiddenStates = .allocate(capacity: slotCount * hp.embeddingLength)
        slotHiddenStates.initialize(repeating: 0, count: slotCount * hp.embeddingLength)
        stepTokens = .allocate(capacity: self.maxStepTokens)
        pass.reserveCapacity(slotCount)
        lastStep = Array(repeating: 0, count: slotCount)
    }

    deinit {
        slotLogits.deallocate()
        slotHiddenStates.deallocate()
        stepTokens.deallocate()
        stepEmbeddings?.deallocate()
    }

    /// Bytes of caches each slot holds (their capacity).
    public var cacheByteCountPerSlot: Int { slots[0].byteCount }

    /// Slots free for `open`.
    public var freeSlots: Int { isOpen.lazy.filter { !$0 }.count }

    /// Starts an empty sequence in a free slot (the lowest).
    public func open() throws(ModelError) -> Sequence {
        guard let slot = isOpen.firstIndex(of: false) else { throw .noFreeSlot(slots: slotCount) }
        isOpen[slot] = true
        generations[slot] += 1
        slots[slot].reset()
        let vocab = model.hyperparameters.vocabularySize
        (slotLogits + slot * vocab).update(repeating: 0, count: vocab)
        let d = model.hyperparameters.embeddingLength
        (slotHiddenStates + slot * d).update(repeating: 0, count: d)
        return Sequence(slot: slot, generation: generations[slot])
    }

    /// Ends a sequence (finished or cancelled) and frees its slot. The other sequences are
    /// not affected.
    public func close(_ sequence: Sequence) throws(ModelError) {
        try check(sequence)
        isOpen[sequence.slot] = false
    }

    /// Tokens in the sequence's caches; its next token is evaluated at this position.
    public func position(of sequence: Sequence) throws(ModelError) -> Int {
        try check(sequence)
        return slots[sequence.slot].position
    }

    /// Forgets the sequence's tokens from `newPosition` on, keeping the caches of the prefix,
    /// and returns the position it goes on from: `newPosition` (clamped to
    /// `0...position`), or 0 when a sliding-window layer has overwritten part of the window
    /// the prefix needs (see `InferenceSession.truncate(to:)`; here the ring keeps
    /// `window - 1 + maxStepTokens` positions).
    @discardableResult
    public func truncate(_ sequence: Sequence, to newPosition: Int) throws(ModelError) -> Int {
        try check(sequence)
        return slots[sequence.slot].truncate(to: newPosition)
    }

    /// The logits of the sequence's last evaluated token (`vocabularySize` floats), valid
    /// until its next step. Zeros before its first step.
    public func logits(of sequence: Sequence) throws(ModelError) -> UnsafeBufferPointer<Float> {
        try check(sequence)
        let vocab = model.hyperparameters.vocabularySize
        return UnsafeBufferPointer(start: slotLogits + sequence.slot * vocab, count: vocab)
    }

    /// The hidden state of the sequence's last evaluated token: the last layer's output
    /// after the final norm, the output head's input (`embeddingLength` floats), as
    /// `InferenceSession.hiddenState`. Valid until its next step; zeros before its first.
    public func hiddenState(of sequence: Sequence) throws(ModelError) -> UnsafeBufferPointer<Float> {
        try check(sequence)
        let d = model.hyperparameters.embeddingLength
        return UnsafeBufferPointer(start: slotHiddenStates + sequence.slot * d, count: d)
    }

    /// Evaluates each input's tokens at its sequence's next positions in one forward pass
    /// (each sequence at most once; `maxStepTokens` tokens at most in all), appends them to
    /// the sequences' caches, and leaves each one's last logits in `logits(of:)` (and its
    /// last hidden state in `hiddenState(of:)`). A refused
    /// step (a closed sequence, a token outside the vocabulary, a sequence past its
    /// context, too many tokens) throws and changes nothing.
    public func step(_ inputs: [Input]) throws(ModelError) {
        let vocab = model.hyperparameters.vocabularySize, d = model.hyperparameters.embeddingLength
        stepCount += 1
        var total = 0, embeddingRows = 0
        for input in inputs {
            try check(input.sequence)
            let slot = input.sequence.slot
            guard lastStep[slot] != stepCount else { throw .repeatedSequence(slot: slot) }
            lastStep[slot] = stepCount
            let rows = try Self.rowCount(tokens: input.tokens, embeddings: input.embeddings, width: d, vocabularySize: vocab)
            let position = slots[slot].position
            guard position + rows <= contextLength else {
                throw .contextOverflow(position: position, tokens: rows, contextLength: contextLength)
            }
            total += rows
            if input.tokens.isEmpty { embeddingRows += rows }
        }
        guard total > 0, total <= maxStepTokens else { throw .invalidBatch(count: total, maximum: maxStepTokens) }

        pass.removeAll(keepingCapacity: true)
        if embeddingRows > 0 && stepEmbeddings == nil {
            stepEmbeddings = .allocate(capacity: maxStepTokens * d)
        }
        var offset = 0, embeddingOffset = 0
        for input in inputs {
            let sequence = slots[input.sequence.slot]
            if input.tokens.isEmpty, let rows = stepEmbeddings {
                let count = input.embeddings.count
                input.embeddings.withUnsafeBufferPointer { (rows + embeddingOffset).update(from: $0.baseAddress!, count: count) }
                var row = PassInput(sequence: sequence, embeddings: rows + embeddingOffset, rows: count / d)
                row.needsLogits = input.needsLogits
                pass.append(row)
                embeddingOffset += count
                continue
            }
            let count = input.tokens.count
            input.tokens.withUnsafeBufferPointer { (stepTokens + offset).update(from: $0.baseAddress!, count: count) }
            var row = PassInput(sequence: sequence, tokens: UnsafeBufferPointer(start: stepTokens + offset, count: count))
            row.needsLogits = input.needsLogits
            pass.append(row)
            offset += count
        }
        forward.run(pass)
        pass.removeAll(keepingCapacity: true)
        let logitsComputed = inputs.contains(where: \.needsLogits)
        for (i, input) in inputs.enumerated() {
            if logitsComputed { (slotLogits + input.sequence.slot * vocab).update(from: forward.logits + i * vocab, count: vocab) }
            // Row i of `normed` is input i's last row, output-normed (ForwardPass.run).
            (slotHiddenStates + input.sequence.slot * d).update(from: forward.normed + i * d, count: d)
        }
    }

    /// The rows of an input of `tokens` or `embeddings` (exactly one of them non-empty):
    /// tokens must be in the vocabulary, embeddings whole rows of finite values.
    static func rowCount(tokens: [Int], embeddings: [Float], width d: Int, vocabularySize vocab: Int) throws(ModelError) -> Int {
        guard tokens.isEmpty != embeddings.isEmpty else { throw .invalidEmbeddings(values: embeddings.count, width: d) }
        for t in tokens where t < 0 || t >= vocab { throw .invalidToken(id: t, vocabularySize: vocab) }
        guard embeddings.count % d == 0 else { throw .invalidEmbeddings(values: embeddings.count, width: d) }
        guard embeddings.allSatisfy(\.isFinite) else { throw .invalidEmbeddings(values: embeddings.count, width: d) }
        return tokens.isEmpty ? embeddings.count / d : tokens.count
    }

    private func check(_ sequence: Sequence) throws(ModelError) {
        guard sequence.slot >= 0, sequence.slot < slotCount, isOpen[sequence.slot], generations[sequence.slot] == sequence.generation
        else { throw .unknownSequence(slot: sequence.slot) }
    }
}
