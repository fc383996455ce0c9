import GGUF
import Kernels
import Models
import Reference
import Sampling
import TestSupport
import Testing

/// LFM2.5-Audio's depthformer step (`Depthformer`) and frame embedding
/// (`SpeechVocoder.frameEmbedding`) against their plain reference (`ReferenceDepthformer`,
/// Double) on seeded random hidden states, the end-of-audio rule, teacher forcing, the
/// code samplers, and the language model's hidden state (`InferenceSession.hiddenState`,
/// `BatchedSession.hiddenState(of:)`) against the reference forward pass.
///
/// Bounds: F32 weights (`.float32`) against Double: float rounding only, 1e-4 on logits of
/// spread about 6 (measured 7.2e-6). The stored-weights path (`.asStored`) rounds each
/// product's input to 8 bits: 1 (measured 0.44; a tiny model of random weights magnifies
/// rounding, SpeechGoldenTests measures it on the goldens' hidden states).
@Suite struct DepthformerTests {
    static let vocoderPath = TestFixtures.path("models/vocoder-lfm2-audio-tiny.gguf")
    static let languageModelPath = TestFixtures.path("models/lfm2-audio-out-tiny.gguf")
    static let pool = ThreadPool(threads: 2)

    static func vocoder(_ storage: SpeechVocoder.WeightStorage) throws -> SpeechVocoder {
        try SpeechVocoder(path: vocoderPath, pool: pool, weights: storage)
    }

    static func reference() throws -> ReferenceDepthformer {
        try ReferenceDepthformer(file: GGUFFile(path: vocoderPath), path: vocoderPath)
    }

    /// The largest |a - b| over codebooks' logits.
    static func maxDifference(_ depthformer: Depthformer, _ reference: [[Double]]) -> Double {
        var worst = 0.0
        for c in 0..<AudioFrame.codebookCount {
            let fast = depthformer.logits(codebook: c)
            for i in 0..<AudioFrame.codesPerCodebook { worst = max(worst, abs(Double(fast[i]) - reference[c][i])) }
        }
        return worst
    }

    @Test func theShapeComesFromTheKeysAndTensors() throws {
        let v = try Self.vocoder(.asStored)
        let s = v.shape
        #expect(s.layers == 2 && s.width == 128 && s.heads == 32 && s.kvHeads == 8 && s.headDim == 4)
        #expect(s.feedForwardWidth == 512 && s.languageModelWidth == 128 && s.detokenizerWidth == 64)
        #expect(v.detokenizerEmbedding.rows == 16384 && v.detokenizerEmbedding.cols == 64 && v.detokenizerEmbedding.type == .q4_0)
        try v.checkLanguageModelWidth(128, languageModel: "lm.gguf")
        // The stored path reads the Q4_0 bytes, the F32 one their dequantized floats.
        let f32 = try Self.vocoder(.float32)
        #expect(f32.depthformerByteCount * 18 == v.depthformerByteCount * 128)
    }

    /// Seeded random hidden states, several frames, both weight storages: each step's
    /// logits against the reference's given the same codes fed (the reference's greedy
    /// choices), the choices equal where the reference's margin is clear.
    @Test(arguments: [SpeechVocoder.WeightStorage.float32, .asStored])
    func agreesWithTheReference(storage: SpeechVocoder.WeightStorage) throws {
        let vocoder = try Self.vocoder(storage), reference = try Self.reference()
        let depthformer = Depthformer(vocoder: vocoder)
        var random = SeededRandom(seed: 43)
        var worst = 0.0
        for frame in 0..<6 {
            let h = random.normal(128, scale: 1.5)
            let expected = try reference.frame(hiddenState: h)
            let step = try depthformer.step(h, forcing: AudioFrame(expected.fed))
            let difference = Self.maxDifference(depthformer, expected.logits)
            worst = max(worst, difference)
            #expect(difference <= (storage == .float32 ? 1e-4 : 1), "frame \(frame)")
            for c in 0..<AudioFrame.codebookCount {
                let sorted = expected.logits[c].sorted(by: >)
                if sorted[0] - sorted[1] > 2 * difference {
                    #expect(step.choices[c] == expected.choices[c], "frame \(frame) codebook \(c)")
                }
                #expect(abs(Double(step.margins[c]) - (sorted[0] - sorted[1])) <= 2 * difference + 1e-6)
            }
            #expect(step.frame == AudioFrame(expected.fed))
        }
        print("Depthformer \(storage) against ReferenceDepthformer: max |logit diff| \(worst) over 6 frames")
    }

    /// Greedy steps (no forcing) feed their own choices: the same frame as the reference's
    /// greedy frame, and every codebook's logits as the reference's.
    @Test func greedyFramesFollowTheirOwnCodes() throws {
        let depthformer = Depthformer(vocoder: try Self.vocoder(.float32)), reference = try Self.reference()
        var random = SeededRandom(seed: 7)
        for _ in 0..<4 {
            let h = random.normal(128, scale: 1.5)
            let expected = try reference.frame(hiddenState: h)
            let step = try depthformer.step(h)
            #expect(step.choices == AudioFrame(expected.choices))
            #expect(step.frame == AudioFrame(expected.fed))
            #expect(Self.maxDifference(depthformer, expected.logits) <= 1e-4)
        }
    }

    /// Code 0 at end of audio (2048, forced here): codebooks 1-7 still run, each greedily
    /// after the previous greedy code whatever is forced, and the frame is all 2048.
    @Test func endOfAudioRunsTheOtherCodebooksGreedily() throws {
        let depthformer = Depthformer(vocoder: try Self.vocoder(.float32)), reference = try Self.reference()
        var random = SeededRandom(seed: 11)
        let h = random.normal(128)
        let forced = AudioFrame([2048, 1, 2, 3, 4, 5, 6, 7])
        let expected = try reference.frame(hiddenState: h, forcing: forced.codes)
        let step = try depthformer.step(h, forcing: forced)
        #expect(step.frame == .endOfAudio && step.isEndOfAudio)
        #expect(expected.fed == AudioFrame.endOfAudio.codes)
        #expect(Array(step.choices.codes.dropFirst()) == Array(expected.choices.dropFirst()))
        #expect(Array(step.choices.codes.dropFirst()) != [1, 2, 3, 4, 5, 6, 7])
        #expect(Self.maxDifference(depthformer, expected.logits) <= 1e-4)
        // A sampler that would choose end of audio for codebook 0 gives the same frame.
        struct EndsAudio: AudioCodeSampler {
            var calls = 0
            mutating func code(codebook: Int, logits: UnsafeBufferPointer<Float>) -> Int {
                calls += 1
                return codebook == 0 ? AudioFrame.endOfAudioCode : 0
            }
        }
        var sampler = EndsAudio()
        let sampled = try depthformer.step(h, sampler: &sampler)
        #expect(sampled.frame == .endOfAudio && sampled.choices[0] == AudioFrame.endOfAudioCode && sampler.calls == 1)
        #expect(Array(sampled.choices.codes.dropFirst()) == Array(step.choices.codes.dropFirst()))
    }

    /// Code 2048 chosen in codebooks 1-7 of a spoken frame (it has no detokenizer row):
    /// the sampler chooses again without it, the next best when greedy; the logits stay as
    /// computed. After an end of audio the codebooks run greedily as before.
    @Test func aSpokenFrameNeverHoldsTheEndOfAudioCodeBeyondCodebookZero() throws {
        let depthformer = Depthformer(vocoder: try Self.vocoder(.float32))
        var random = SeededRandom(seed: 23)
        let h = random.normal(128)
        /// Greedy, but the first choice of codebooks 3 and 7 is 2048.
        struct PrefersEndCode: AudioCodeSampler {
            var asked: [Int] = []
            mutating func code(codebook: Int, logits: UnsafeBufferPointer<Float>) -> Int {
                defer { asked.append(codebook) }
                if (codebook == 3 || codebook == 7) && !asked.contains(codebook) { return AudioFrame.endOfAudioCode }
                return GreedyAudioCodes.argmax(logits)
            }
        }
        var sampler = PrefersEndCode()
        let step = try depthformer.step(h, sampler: &sampler)
        let greedy = try depthformer.step(h)
        #expect(!greedy.isEndOfAudio && !step.isEndOfAudio)
        #expect(sampler.asked == [0, 1, 2, 3, 3, 4, 5, 6, 7, 7])
        #expect(step.frame == greedy.frame && !step.frame.codes.dropFirst().contains(AudioFrame.endOfAudioCode))
        for c in [3, 7] {
            let logits = depthformer.logits(codebook: c)
            #expect(logits[AudioFrame.endOfAudioCode].isFinite, "codebook \(c)'s logits are left as computed")
        }
    }

    /// The Sampling module's sampler: temperature 0 and top-k 1 are greedy; a seed repeats
    /// its frames exactly; each code is among its codebook's top k.
    @Test func samplersChooseCodes() throws {
        let vocoder = try Self.vocoder(.float32)
        let greedy = Depthformer(vocoder: vocoder), sampled = Depthformer(vocoder: vocoder), again = Depthformer(vocoder: vocoder)
        var random = SeededRandom(seed: 5)
        var zero = Sampler(.audioCodes(temperature: 0, topK: 0, seed: 1))
        var topOne = Sampler(.audioCodes(temperature: 1, topK: 1, seed: 2))
        var first = Sampler(.audioCodes(temperature: 1, topK: 4, seed: 3)), second = first
        var other = Sampler(.audioCodes(temperature: 1, topK: 4, seed: 4))
        var differs = false
        for _ in 0..<8 {
            let h = random.normal(128, scale: 1.5)
            let expected = try greedy.step(h)
            #expect(try sampled.step(h, sampler: &zero) == expected)
            #expect(try sampled.step(h, sampler: &topOne) == expected)
            let a = try sampled.step(h, sampler: &first)
            for c in 0..<AudioFrame.codebookCount {
                let logits = sampled.logits(codebook: c), kth = logits.sorted(by: >)[3]
                #expect(logits[a.choices[c]] >= kth)
            }
            #expect(try again.step(h, sampler: &second) == a)
            if try again.step(h, sampler: &other).choices != a.choices { differs = true }
        }
        #expect(differs)
    }

    @Test func frameEmbeddingIsTheSumOfTheCodesRows() throws {
        let vocoder = try Self.vocoder(.asStored), reference = try Self.reference()
        var random = SeededRandom(seed: 9)
        var frames = [AudioFrame.endOfAudio, AudioFrame([0, 0, 0, 0, 0, 0, 0, 0])]
        for _ in 0..<4 { frames.append(AudioFrame((0..<8).map { _ in Int.random(in: 0..<2049, using: &random) })) }
        for frame in frames {
            let fast = vocoder.frameEmbedding(frame), expected = try reference.frameEmbedding(frame.codes)
            #expect(fast.count == 128)
            #expect(zip(fast, expected).allSatisfy { abs(Double($0) - $1) <= 1e-5 }, "\(frame)")
        }
    }

    @Test func refusesUnusableInput() throws {
        let depthformer = Depthformer(vocoder: try Self.vocoder(.asStored))
        func refusal(_ h: [Float]) -> SpeechError? {
            do {
                _ = try depthformer.step(h)
                return nil
            } catch { return error }
        }
        #expect(refusal([Float](repeating: 0.5, count: 128)) == nil)
        #expect(
            refusal([Float](repeating: 0.5, count: 64))
                == .invalidInput("a depthformer step takes the language model's hidden state of 128 values, got 64"))
        var h = [Float](repeating: 0.5, count: 128)
        h[17] = .nan
        #expect(refusal(h)?.description.contains("index 17") == true)
        // Codes read from outside are checked before they make a frame.
        #expect(AudioFrame(checking: [1, 2, 3, 4, 5, 6, 7, 2048])?.codes == [1, 2, 3, 4, 5, 6, 7, 2048])
        #expect(AudioFrame(checking: [1, 2, 3, 4, 5, 6, 7, 2049]) == nil && AudioFrame(checking: [1, 2, -1, 4, 5, 6, 7, 8]) == nil)
        #expect(AudioFrame(checking: [1, 2, 3]) == nil && AudioFrame(checking: []) == nil)
        struct OutOfRange: AudioCodeSampler {
            func code(codebook: Int, logits: UnsafeBufferPointer<Float>) -> Int { logits.count }
        }
        var sampler = OutOfRange()
        #expect(throws: SpeechError.invalidInput("the sampler chose code 2049 for codebook 0, outside 0..<2049")) {
            _ = try depthformer.step([Float](repeating: 0.5, count: 128), sampler: &sampler)
        }
    }

    /// `hiddenState` is the output head's input: the last row after the final norm. The
    /// engine on an F32 copy of the language model (products on float inputs) against the
    /// reference forward pass (F32 plain loops) over a prompt, decoded tokens and a frame
    /// embedding: float rounding only. `BatchedSession.hiddenState(of:)` is bitwise
    /// `InferenceSession.hiddenState` (the Q4_0 file, next to another sequence).
    @Test func languageModelHiddenState() throws {
        let quantized = try TransformerModel(path: Self.languageModelPath)
        let model = try TransformerModel(file: SpeechGoldenTests.float32Copy(of: Self.languageModelPath))
        let session = InferenceSession(model: model, contextLength: 64)
        let single = InferenceSession(model: quantized, contextLength: 64)
        let batch = BatchedSession(model: quantized, slots: 2, contextLength: 64)
        let other = try batch.open(), sequence = try batch.open()
        let reference = try ReferenceForward(model: quantized)
        let prompt = [49152, 1, 9690, 198, 10598, 847, 351, 843, 46749, 2, 198, 1, 520, 9531, 198]
        try session.evaluate(prompt)
        try single.evaluate(prompt)
        try batch.step([.init(other, [5, 6, 7]), .init(sequence, prompt)])
        var expected: [Float] = []
        for t in prompt { expected = reference.hiddenState(after: t) }
        var worst: Float = 0
        let vocoder = try Self.vocoder(.asStored)
        let frame = vocoder.frameEmbedding(AudioFrame([1, 2, 3, 4, 5, 6, 7, 8]))
        for step in 0..<7 {
            let difference = zip(session.hiddenState, expected).map { abs($0 - $1) }.max()! / expected.map(abs).max()!
            worst = max(worst, difference)
            #expect(difference <= 1e-4, "step \(step)")
            #expect(Array(single.hiddenState) == Array(try batch.hiddenState(of: sequence)), "step \(step)")
            if step == 3 {
                // A frame embedding as input, as speech generation feeds it back.
                try session.evaluate(embeddings: frame)
                try single.evaluate(embeddings: frame)
                try batch.step([.init(sequence, embeddings: frame)])
                expected = reference.hiddenState(afterEmbedding: frame)
                continue
            }
            let next = GreedyAudioCodes.argmax(session.logits)
            try session.evaluate([next])
            try single.evaluate([next])
            try batch.step([.init(sequence, [next]), .init(other, [next])])
            expected = reference.hiddenState(after: next)
        }
        print("InferenceSession.hiddenState (F32 weights) against ReferenceForward: max |diff| / max |h| \(worst)")
        // Zeros before a sequence's first step.
        try batch.close(other)
        let fresh = try batch.open()
        #expect(try batch.hiddenState(of: fresh).allSatisfy { $0 == 0 })
    }
}

extension Depthformer {
    /// ``step(hiddenState:forcing:)`` of an array.
    func step(_ h: [Float], forcing forced: AudioFrame? = nil) throws(SpeechError) -> DepthformerStep {
        try h.withUnsafeBufferPointer { (h) throws(SpeechError) in try step(hiddenState: h, forcing: forced) }
    }

    /// ``step(hiddenState:sampler:forcing:)`` of an array.
    func step<S: AudioCodeSampler>(_ h: [Float], sampler: inout S) throws(SpeechError) -> DepthformerStep {
        try h.withUnsafeBufferPointer { (h) throws(SpeechError) in try step(hiddenState: h, sampler: &sampler) }
    }
}
