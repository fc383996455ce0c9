import Kernels

/// One sequence being evaluated by a model: the attention and convolution caches for a
/// context window, and every buffer the forward pass needs, allocated once. Evaluating
/// tokens allocates nothing.
///
/// Not thread-safe: one evaluation at a time (the SDK layer serializes work per model).
public final class InferenceSession: @unchecked Sendable {
    public let model: TransformerModel
    /// Capacity of the caches in tokens.
    public let contextLength: Int
    /// Most tokens evaluated in one forward batch; longer inputs are split.
    public let maxBatch: Int
    /// Tokens currently in the caches; the next token is evaluated at this position.
    public var position: Int { sequence.position }

    let forward: ForwardPass
    let sequence: SequenceState
    /// The one input of each pass, kept so that a pass allocates nothing.
    private var input: [PassInput]

    /// Creates the caches and buffers. `contextLength` defaults to the model's trained
    /// context, capped at 4096 tokens to bound memory (pass more if you need it).
    /// `kvCacheType` `.f16` halves the attention cache (llama.cpp's default type).
    public init(model: TransformerModel, contextLength: Int? = nil, maxBatch: Int = 512, kvCacheType: KVCacheType = .f32) {
        let hp = model.hyperparameters
        self.model = model
        self.contextLength = max(1, contextLength ?? min(hp.trainedContextLength, 4096))
        self.maxBatch = max(1, maxBatch)
        forward = ForwardPass(
            model: model, maxRows: self.maxBatch, maxSequences: 1, contextLength: self.contextLength,
            kvCacheType: kvCacheType)
        sequence = SequenceState(model: model, contextLength: self.contextLength, maxRows: self.maxBatch, kvCacheType: kvCacheType)
        input = [PassInput(sequence: sequence, tokens: UnsafeBufferPointer(start: nil, count: 0))]
    }

    /// Whether decode steps (one token per sequence) measure their own times and run on
    /// the calling thread alone while that is faster than the model's threads, as when
    /// another process keeps the cores busy (`DecodeThreading`). Default true; results
    /// are the same bits either way.
    public var adaptsDecodeThreads: Bool {
        get { forward.adaptsDecodeThreads }
        set { forward.adaptsDecodeThreads = newValue }
    }

    /// Evaluations of at most this many rows multiply every row through the multi-row
    /// matvec, which reads each weight once for all of them, instead of the prompt
    /// products: for a model that runs a few rows at a time, such as the audio
    /// detokenizer's 6 rows per frame, whose F16 weights the prompt products would
    /// dequantize on every call. Float weights give float products either way (in another
    /// order of summation); 0, the default, keeps every chunk on the prompt products.
    public var matvecRowLimit: Int {
        get { forward.matvecRowLimit }
        set { forward.matvecRowLimit = max(0, newValue) }
    }

    /// The logits of the last evaluated token (`vocabularySize` floats). Valid until the
    /// next evaluation.
    public var logits: UnsafeBufferPointer<Float> {
        UnsafeBufferPointer(start: forward.logits, count: model.hyperparameters.vocabularySize)
    }

    /// The hidden state of the last evaluated token (or embedding row): the last layer's
    /// output after the final norm, the output head's input (`embeddingLength` floats).
    /// LFM2.5-Audio's depthformer turns it into audio codes (`Depthformer`). Valid after
    /// an evaluation, until the next one.
    public var hiddenState: UnsafeBufferPointer<Float> {
        // ForwardPass.run leaves row i of `normed` as input i's last row, output-normed.
        UnsafeBufferPointer(start: forward.normed, count: model.hyperparameters.embeddingLength)
    }

    /// Bytes held by the attention and convolution caches (their capacity; pages are
    /// touched only as positions fill).
    public var cacheByteCount: Int { sequence.byteCount }

    /// Forgets every token (an empty sequence).
    public func reset() { sequence.reset() }

    /// Forgets the tokens from `newPosition` on, keeping the caches of the prefix: the next
    /// evaluation continues from there exactly as if the later tokens were never seen.
    /// Returns the position the session goes on from: `newPosition` (clamped to
    /// `0...position`), or 0 when a sliding-window layer (Gemma 3) has overwritten part of
    /// the window the prefix needs. Its ring keeps the latest `window - 1 + maxBatch`
    /// positions, so going back at most `maxBatch` tokens always works; going back
    /// further may empty the session, and the caller evaluates the prefix again.
    @discardableResult
    public func truncate(to newPosition: Int) -> Int {
        sequence.truncate(to: newPosition)
    }

    /// Evaluates `tokens` at the current position, appending them to the caches, and
    /// leaves the last token's logits in `logits`.
    public func evaluate(_ tokens: [Int]) throws(ModelError) {
        try evaluate(tokens, allLogits: nil)
    }

    /// Evaluates `tokens` and returns the logits of every one of them (`tokens.count`
    /// rows of `vocabularySize`). For tests and tools; allocates the result.
    public func evaluateAllLogits(_ tokens: [Int]) throws(ModelError) -> [[Float]] {
        var rows: [[Float]] = []
        try evaluate(tokens, allLogits: { rows.append(Array($0)) })
        return rows
    }

    /// Evaluates rows of embeddings given directly (an image's or an audio clip's projected
    /// encoder output, `embeddingLength` floats a row, one position each) at the current
    /// position, and leaves the last row's logits in `logits` (with `needsLogits` false, no
    /// logits are computed and `logits` is left as it was: `hiddenState` is what is read).
    public func evaluate(embeddings: [Float], needsLogits: Bool = true) throws(ModelError) {
        let d = model.hyperparameters.embeddingLength
        let rows = try BatchedSession.rowCount(tokens: [], embeddings: embeddings, width: d, vocabularySize: 1)
        guard position + rows <= contextLength else {
            throw .contextOverflow(position: position, tokens: rows, contextLength: contextLength)
        }
        var start = 0
        embeddings.withUnsafeBufferPointer { buf in
            while start < rows {
                let end = min(rows, start + maxBatch)
                input[0] = PassInput(sequence: sequence, embeddings: buf.baseAddress! + start * d, rows: end - start)
                input[0].needsLogits = needsLogits && end == rows
                forward.run(input)
                start = end
            }
        }
    }

    /// Evaluates rows of embeddings given directly (`embeddingLength` floats a row, one
    /// position each) at the current position and returns every row's hidden state: the
    /// last layer's output after the final norm, `embeddingLength` floats a row, in order.
    /// This is an embedding model's evaluation (LFM2.5-Audio's detokenizer, which maps the
    /// rows through its own projection): no logits are computed, `logits` is left as it
    /// was; `hiddenState` is the last row's.
    public func evaluateHiddenStates(embeddings: [Float]) throws(ModelError) -> [Float] {
        let d = model.hyperparameters.embeddingLength
        let rows = try BatchedSession.rowCount(tokens: [], embeddings: embeddings, width: d, vocabularySize: 1)
        guard position + rows <= contextLength else {
            throw .contextOverflow(position: position, tokens: rows, contextLength: contextLength)
        }
        var hidden: [Float] = []
        hidden.reserveCapacity(rows * d)
        var start = 0
        embeddings.withUnsafeBufferPointer { buf in
            while start < rows {
                let end = min(rows, start + maxBatch)
                input[0] = PassInput(sequence: sequence, embeddings: buf.baseAddress! + start * d, rows: end - start)
                forward.run(input, allHiddenStates: { hidden.append(contentsOf: $0) })
                start = end
            }
        }
        return hidden
    }

    private func evaluate(_ tokens: [Int], allLogits: ((UnsafeBufferPointer<Float>) -> Void)?) throws(ModelError) {
        let vocab = model.hyperparameters.vocabularySize
        guard !tokens.isEmpty else { throw .invalidBatch(count: 0, maximum: maxBatch) }
        guard position + tokens.count <= contextLength else {
            throw .contextOverflow(position: position, tokens: tokens.count, contextLength: contextLength)
        }
        for t in tokens where t < 0 || t >= vocab {
            throw .invalidToken(id: t, vocabularySize: vocab)
        }
        var start = 0
        while start < tokens.count {
            let end = min(tokens.count, start + maxBatch)
            tokens.withUnsafeBufferPointer { buf in
                input[0] = PassInput(sequence: sequence, tokens: UnsafeBufferPointer(rebasing: buf[start..<end]))
                forward.run(input, allLogits: allLogits)
            }
            start = end
        }
    }
}
