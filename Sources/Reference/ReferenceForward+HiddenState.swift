extension ReferenceForward {
    /// Evaluates `token` at the next position and returns the hidden state the output
    /// head would read: the last layer's output after the final norm (`embeddingLength`
    /// values), without the head's product. LFM2.5-Audio's depthformer starts from it.
    public func hiddenState(after token: Int) -> [Float] {
        rmsNorm(layers(row("token_embd.weight", token).map { $0 * embeddingScale }), finalNorm)
    }

    /// ``hiddenState(after:)`` for an embedding row given in place of a token (a media
    /// encoder's output row, or an audio frame's summed code embeddings; not scaled).
    public func hiddenState(afterEmbedding embedding: [Float]) -> [Float] {
        precondition(embedding.count == hp.embeddingLength, "an embedding row of the model's width")
        return rmsNorm(layers(embedding), finalNorm)
    }
}
