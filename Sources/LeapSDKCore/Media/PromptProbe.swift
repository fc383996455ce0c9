import Dispatch
import Foundation
import Models

/// What a prompt makes of a conversation, position by position, and the logits it leads
/// to: for checking leap-ref against llama.cpp's goldens (`leap-ref logits --mmproj`) and
/// for tools. It renders one conversation through the model's chat template, reads its
/// images and audio with the model's media encoder, evaluates the prompt in a session of
/// its own (the runner's prompt cache is not touched), and reports the prompt's chunks,
/// the media embeddings, the top logits after the prompt and a greedy continuation.
@_spi(Tools)
public struct PromptProbe {
    /// A run of the prompt: tokens, or a media chunk's positions.
    public enum Chunk: Equatable, Sendable {
        case text([Int])
        /// `kind` is `"image"` or `"audio"`.
        case media(kind: String, positions: Int)
    }

    /// What the probe found.
    public struct Report: Sendable {
        public var chunks: [Chunk]
        /// Every media chunk's embedding rows, concatenated in prompt order (rows of the
        /// language model's width).
        public var embeddings: [Float]
        /// The language model's width.
        public var width: Int
        /// The `top` highest logits after the prompt, best first.
        public var top: [(id: Int, logit: Float)]
        /// The greedy continuation (or the followed tokens).
        public var greedy: [Int]
        /// The top logits after each continuation token.
        public var greedyTop: [[(id: Int, logit: Float)]]
    }

    let runner: LiquidInferenceEngineRunner

    public init(runner: LiquidInferenceEngineRunner) { self.runner = runner }

    /// Probes `messages` (the generation prompt added): `top` logits, `greedy` tokens of
    /// continuation decoded one at a time, each chosen by argmax or taken from `follow`.
    public func run(messages: [ChatMessage], top: Int, greedy: Int, follow: [Int]? = nil) throws -> Report {
        let loaded = runner.loaded
        let prompt = try loaded.prompt(
            messages: messages, tools: [], callFormat: runner.functionCallParser, enableThinking: nil)
        return try loaded.queue.sync { () throws -> Report in
            let session = InferenceSession(model: loaded.model, contextLength: loaded.contextSize, kvCacheType: loaded.kvCacheType)
            var chunks: [Chunk] = [], embeddings: [Float] = []
            for piece in prompt.pieces {
                switch piece {
                case .tokens(let ids):
                    chunks.append(.text(ids))
                    try session.evaluate(ids)
                case .media(let chunk):
                    let rows = try chunk.embeddings()
                    chunks.append(.media(kind: chunk.kind, positions: chunk.positions))
                    embeddings += rows
                    try session.evaluate(embeddings: rows)
                    chunk.release()
                }
            }
            let after = Array(session.logits)
            let continuation = try GreedyProbe(session: session, after: after, steps: greedy, follow: follow, top: top)
            return Report(
                chunks: chunks, embeddings: embeddings, width: loaded.model.hyperparameters.embeddingLength,
                top: after.withUnsafeBufferPointer { GreedyProbe.best($0, top) }, greedy: continuation.tokens,
                greedyTop: continuation.topAfterEach)
        }
    }
}
