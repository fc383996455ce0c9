import Dispatch
import Foundation
import Models
import Tokenizers

/// A spoken turn fed along given steps (teacher forcing), for checking leap-ref against
/// the reference step by step (`leap-ref speak --follow`): the conversation's prompt is
/// evaluated in a session of its own, then each given step is fed in turn (a text token,
/// or a frame: its codes fed to the depthformer codebook by codebook, then its embedding
/// to the backbone) while the probe records the greedy choice the model makes at that step
/// given the history before it. An engine that rounds its activations can be compared so,
/// one step at a time, without its own choices carrying it elsewhere. Not a generation:
/// the serving engine's step is not used and the runner's caches are not touched.
@_spi(Tools)
public struct SpeechProbe {
    /// What the probe found.
    public struct Report: Sendable {
        /// At each given step, the model's greedy choice there: a text token, or a frame
        /// (all end-of-audio codes when its first choice is the end of audio, as the
        /// reference emits it).
        public var choices: [SpeechStep]
        /// The waveform of the frames fed (end-of-audio frames skipped), 24 kHz.
        public var waveform: [Float]
        /// The text of the tokens fed (the steering tokens left out).
        public var text: String
    }

    let runner: LiquidInferenceEngineRunner

    /// A probe over `runner`'s model, which must have its speech files.
    public init(runner: LiquidInferenceEngineRunner) { self.runner = runner }

    /// Feeds `steps` after the prompt of `messages` (the generation prompt added).
    /// Throws for a model that cannot speak, a token outside the vocabulary, a frame that
    /// is not 8 codes in range, or steps past the context.
    public func run(messages: [ChatMessage], follow steps: [SpeechStep]) throws -> Report {
        let loaded = runner.loaded
        guard let speech = loaded.speech else {
            throw LeapError.unsupportedContent("this model cannot speak: it has no vocoder-*.gguf and tokenizer-*.gguf files")
        }
        let prompt: PromptSequence
        do {
            prompt = try loaded.prompt(messages: messages, tools: [], callFormat: runner.functionCallParser, enableThinking: nil)
        } catch {
            throw LeapError(error)
        }
        return try loaded.queue.sync { () throws -> Report in
            let session = InferenceSession(model: loaded.model, contextLength: loaded.contextSize, kvCacheType: loaded.kvCacheType)
            for piece in prompt.pieces {
                switch piece {
                case .tokens(let ids): try session.evaluate(ids)
                case .media(let chunk):
                    try session.evaluate(embeddings: try chunk.embeddings())
                    chunk.release()
                }
            }
            let depthformer = Depthformer(vocoder: speech.vocoder)
            let stream = speech.detokenizer.makeStream()
            var report = Report(choices: [], waveform: [], text: "")
            var fedText: [Int] = []
            let steering = Set([speech.tokens.endOfTurn, speech.tokens.textEnd, speech.tokens.audioStart])
            for (index, step) in steps.enumerated() {
                guard session.position < session.contextLength else {
                    throw LeapError.promptExceedContextLengthFailure(
                        tokens: session.position + steps.count - index, limit: session.contextLength)
                }
                switch step {
                case .text(let id):
                    report.choices.append(.text(GreedyProbe.best(session.logits, 1)[0].id))
                    try session.evaluate([id])
                    if !steering.contains(id) { fedText.append(id) }
                case .frame(let codes):
                    guard let frame = AudioFrame(checking: codes) else {
                        throw LeapError.generationFailure(
                            "step \(index): a frame is \(AudioFrame.codebookCount) codes of 0...\(AudioFrame.endOfAudioCode), not \(codes)")
                    }
                    let made = try depthformer.step(hiddenState: session.hiddenState, forcing: frame)
                    let choice = made.choices.isEndOfAudio ? AudioFrame.endOfAudio : made.choices
                    report.choices.append(.frame(choice.codes))
                    report.waveform += try stream.append([frame])
                    try session.evaluate(embeddings: speech.vocoder.frameEmbedding(frame))
                }
            }
            report.waveform += stream.finish()
            report.text = loaded.tokenizer.decode(fedText.map { TokenID($0) }, renderSpecial: true)
            return report
        }
    }
}
