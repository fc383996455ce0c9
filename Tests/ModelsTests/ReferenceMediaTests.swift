import GGUF
import Kernels
import Models
import Reference
import TestSupport
import Testing

/// Media in the prompt against the independent path: the fast encoder's rows spliced into
/// the fast engine's prompt (`InferenceSession.evaluate(embeddings:)`) against the plain
/// reference encoder's rows fed to `ReferenceForward.next(embedding:)`, position by
/// position, for LFM2-VL (an image slice between its marker tokens) and LFM2-Audio (a mel
/// matrix where the audio part is). The encoders agree with their references within 1e-5 (vision) and 1e-4 (audio), their own tests; what
/// this checks is the splice: the rows go in unscaled, at the right positions, and the
/// tokens after them attend to them. The bound is ReferenceTests' 3% for these tiny
/// quantized language models (measured 2.7% for the image, 1.4% for the clip; decoding
/// one token at a time instead puts lfm2-vl-tiny at 4.5% before any image, so every run
/// goes in as a prompt does); splicing rows in the wrong order or scaling them moves the
/// logits far past it (the last test: 74% and 59%).
@Suite(.serialized) struct ReferenceMediaTests {
    static let vision = (model: TestFixtures.path("models/lfm2-vl-tiny.gguf"), mmproj: TestFixtures.path("models/mmproj-lfm2-vl-tiny.gguf"))
    static let audio = (
        model: TestFixtures.path("models/lfm2-audio-tiny.gguf"), mmproj: TestFixtures.path("models/mmproj-lfm2-audio-tiny.gguf")
    )
    static let before = [1, 6, 6423, 708], after = [1098, 3512, 779, 7, 708, 6, 24015, 708]

    /// The worst relative error over the logits of tokens, the last media row, tokens, each run
    /// evaluated as a prompt is (one batch).
    static func worstError(model path: String, rows: [Float], referenceRows: [Float], transform: ([Float]) -> [Float] = { $0 }) throws
        -> Float
    {
        let model = try TransformerModel(path: path)
        let d = model.hyperparameters.embeddingLength
        let session = InferenceSession(model: model, contextLength: 128)
        let reference = try ReferenceForward(model: model)
        var worst: Float = 0
        func compare(_ logits: [Float], _ expected: [Float]) {
            worst = max(worst, ReferenceTests.relativeError(logits, expected))
        }
        // Each run as one batch (the prompt path), every row's logits compared.
        for (row, token) in zip(try session.evaluateAllLogits(before), before) { compare(row, reference.next(token)) }
        try session.evaluate(embeddings: transform(rows))
        var expected: [Float] = []
        for r in 0..<(referenceRows.count / d) { expected = reference.next(embedding: Array(referenceRows[(r * d)..<((r + 1) * d)])) }
        compare(Array(session.logits), expected)
        for (row, token) in zip(try session.evaluateAllLogits(after), after) { compare(row, reference.next(token)) }
        return worst
    }

    static func imageRows() throws -> (fast: [Float], reference: [Float]) {
        let pixels = EncoderRandom.slice(width: 64, height: 96, seed: 17)
        let fast = try SigLIP2VisionEncoder(path: vision.mmproj, pool: ThreadPool(threads: 2)).encode(pixels: pixels, width: 64, height: 96)
        let reference = try ReferenceSigLIP2VisionEncoder(file: GGUFFile(path: vision.mmproj), path: vision.mmproj)
            .encode(pixels: pixels, width: 64, height: 96)
        return (fast, reference)
    }

    @Test func imageRowsReachTheModelAsInTheReference() throws {
        let (fast, reference) = try Self.imageRows()
        let worst = try Self.worstError(model: Self.vision.model, rows: fast, referenceRows: reference)
        print("lfm2-vl-tiny, an image slice in the prompt vs reference: \(worst * 100)% of range")
        #expect(worst <= ReferenceTests.lfm2Tolerance)
    }

    @Test func audioRowsReachTheModelAsInTheReference() throws {
        let encoder = try FastConformerEncoder(path: Self.audio.mmproj, pool: ThreadPool(threads: 2))
        let frames = 101
        let mel = EncoderRandom.mel(bins: encoder.melBinCount, frames: frames, seed: 9)
        let fast = try encoder.encode(mel: mel, frames: frames)
        let reference = try ReferenceFastConformerEncoder(file: GGUFFile(path: Self.audio.mmproj), path: Self.audio.mmproj)
            .encode(mel: mel, frames: frames)
        let worst = try Self.worstError(model: Self.audio.model, rows: fast, referenceRows: reference)
        print("lfm2-audio-tiny, a clip in the prompt vs reference: \(worst * 100)% of range")
        #expect(worst <= ReferenceTests.lfm2Tolerance)
    }

    /// The check has teeth: rows in reverse order, or scaled as a token's embedding would
    /// be by a model with an embedding scale, are far outside the bound.
    @Test func misplacedOrScaledRowsAreCaught() throws {
        let (fast, reference) = try Self.imageRows()
        let d = try TransformerModel(path: Self.vision.model).hyperparameters.embeddingLength
        let reversed = try Self.worstError(model: Self.vision.model, rows: fast, referenceRows: reference) { rows in
            (0..<(rows.count / d)).reversed().flatMap { rows[($0 * d)..<(($0 + 1) * d)] }
        }
        let scaled = try Self.worstError(model: Self.vision.model, rows: fast, referenceRows: reference) { rows in
            rows.map { $0 * Float(d).squareRoot() }
        }
        print("rows reversed: \(reversed * 100)%, rows scaled by sqrt(d): \(scaled * 100)% of range")
        #expect(reversed > 3 * ReferenceTests.lfm2Tolerance)
        #expect(scaled > 3 * ReferenceTests.lfm2Tolerance)
    }
}
