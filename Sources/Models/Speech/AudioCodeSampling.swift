import Sampling

/// The Sampling module's sampler chooses audio codes too: one `Sampler` for a
/// generation's codes, drawing from its own seeded random state codebook after codebook.
/// Give it ``SamplingParameters/audioCodes(temperature:topK:seed:)`` (the reference's
/// `audio_temperature` and `audio_top_k`); penalties would count codes of every codebook
/// together, so leave them off.
extension Sampler: AudioCodeSampler {
    /// `sample(logits)`; the argmax when no code can be drawn (every logit NaN).
    public mutating func code(codebook: Int, logits: UnsafeBufferPointer<Float>) -> Int {
        sample(logits) ?? GreedyAudioCodes.argmax(logits)
    }
}

extension SamplingParameters {
    /// Sampling of audio codes as the reference samples them: the `topK` most likely
    /// codes (0: all), their probabilities at `temperature`, a draw seeded by `seed`; no
    /// top-p, min-p or penalties. A temperature of 0 is greedy.
    public static func audioCodes(temperature: Float, topK: Int, seed: UInt64) -> SamplingParameters {
        SamplingParameters(temperature: temperature, topK: topK, topP: 1, minP: 0, seed: seed)
    }
}
