/// One decoder layer of an architecture: its weights, and what it does to the residual
/// stream. Each architecture defines its own (`LlamaLayer`, `LFM2Layer`) from the shared
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
    /// `x ← layer(x)` for the rows of the current pass (`x` is the residual stream).
    func callAsFunction(_ x: Rows, _ f: ForwardPass)
}

extension DecoderLayer {
    var scratchWidth: Int { 0 }
}

/// The per-sequence state a layer keeps: its slice of the caches.
enum LayerCache: Equatable {
    /// Attention keys and values of every position, `kvHeads` heads of `headDim`.
    case keysAndValues(kvHeads: Int, headDim: Int)
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
}

/// All weights of a decoder-only model, as views into the mapped file (norm vectors are
/// small copies in F32):
///
/// ```
/// x      = embed(tokens)                 // token_embd       [vocab, d]
/// x      = layer_l(x), l = 0 ..< L       // blk.l.*
/// logits = output(RMSNorm(x))            // output_norm, output (or token_embd when tied)
/// ```
struct TransformerWeights: Sendable {
    var tokenEmbedding: Linear  // [vocab, d]
    var layers: [any DecoderLayer]
    var outputNorm: RMSNorm  // [d]
    var output: Linear  // [vocab, d] (the embedding itself when tied)
}
