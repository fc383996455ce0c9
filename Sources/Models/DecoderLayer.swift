import Kernels

/// One decoder layer of an architecture: its weights, and what it does to the residual
/// stream. Each architecture defines its own (`LlamaLayer`, `LFM2Layer`, `Gemma3Layer`) from the shared
/// blocks (`RMSNorm`, `Attention`, `SwiGLU`) and its own (`ShortConv`), so that the
/// layer's `callAsFunction` reads like the paper's block equations; the engine
/// (`ForwardPass`) runs the layers in order and owns every buffer they write.
protocol DecoderLayer: Sendable {
    /// What the layer keeps per sequence between forward passes.
    var cache: LayerCache { get }
    /// Its weight matrices (for sizing scratch and for reports).
    var linears: [Linear] { get }
    /// The rotary embedding of the layer's attention (nil without attention): the engine
    /// computes each distinct one's angles once per pass.
    var rope: RotaryEmbedding? { get }
    /// Floats per row of `ForwardPass.scratch` the layer needs (default 0).
    var scratchWidth: Int { get }
    /// The layer's mixture-of-experts block, if its feed-forward block is one (default
    /// nil): the engine sizes `ForwardPass.experts` from them.
    var mixtureOfExperts: MixtureOfExperts? { get }
    /// `x ← layer(x)` for the rows of the current pass (`x` is the residual stream).
    func callAsFunction(_ x: Rows, _ f: ForwardPass)
}

extension DecoderLayer {
    var scratchWidth: Int { 0 }
    var mixtureOfExperts: MixtureOfExperts? { nil }
}

/// The per-sequence state a layer keeps: its slice of the caches.
enum LayerCache: Equatable {
    /// Attention keys and values of every position, `kvHeads` heads of `headDim`.
    case keysAndValues(kvHeads: Int, headDim: Int)
    /// Attention keys and values of the latest `window` positions only (a sliding-window
    /// layer, which never looks further back): a ring whatever the context length.
    case windowedKeysAndValues(kvHeads: Int, headDim: Int, window: Int)
    /// The `width` inputs of a causal convolution at every position (LFM2).
    case convolutionInputs(width: Int)
}

/// `count` rows of `width` floats, row-major: one activation vector per token of a pass.
/// A view into a buffer the engine owns.
struct Rows {
    let base: UnsafeMutablePointer<Float>
    let count: Int
    let width: Int

    /// Row `i` (`width` floats).
    @inline(__always)
    subscript(_ i: Int) -> UnsafeMutablePointer<Float> { base + i * width }

    /// `x += y`, row by row: a residual connection (`x` is the residual stream, `y` a
    /// block's output of the same shape).
    static func += (x: Rows, y: Rows) {
        precondition(x.count == y.count && x.width == y.width, "a residual of another shape")
        Elementwise.add(y.base, into: x.base, count: x.count * x.width)
    }
}

/// All weights of a decoder-only model, as views into the mapped file (norm vectors are
/// small copies in F32):
///
/// ```
/// x      = embed(tokens) · embeddingScale  // token_embd       [vocab, d]
/// x      = layer_l(x), l = 0 ..< L         // blk.l.*
/// logits = output(RMSNorm(x))              // output_norm, output (or token_embd when tied)
/// logits = c · tanh(logits / c)            // only with a final soft cap c
/// ```
struct TransformerWeights: Sendable {
    var tokenEmbedding: Linear  // [vocab, d]
    var layers: [any DecoderLayer]
    var outputNorm: RMSNorm  // [d]
    var output: Linear  // [vocab, d] (the embedding itself when tied)
    /// What the embedding rows are multiplied by (Gemma: `sqrt(d)`).
    var embeddingScale: Float = 1
    /// The final logit soft cap `c` (Gemma 2 style; nil: none).
    var finalLogitSoftcap: Float? = nil
    /// An embedding model's output projection (nil for a language model): what its final
    /// hidden states (`InferenceSession.evaluateHiddenStates`) are mapped through in place
    /// of the head, by the model's user (`AudioDetokenizer`).
    var outputProjection: OutputProjection? = nil
}

/// An embedding model's output projection, `y = W h + b` on each final-normed hidden
/// state `h` (`W`: `[outputWidth, d]`): LFM2.5-Audio's detokenizer maps each row to the
/// 1282 values of a spectrum row through `dense_2` (`<arch>.embedding_length_out` wide).
struct OutputProjection: Sendable {
    let weight: Linear  // [outputWidth, d]
    let bias: [Float]  // [outputWidth]
}
