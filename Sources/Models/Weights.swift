import GGUF
import Kernels

/// Weights of one attention block.
struct AttentionWeights: Sendable {
    var wq: Linear  // (heads·headDim) x d
    var wk: Linear  // (kvHeads·headDim) x d
    var wv: Linear  // (kvHeads·headDim) x d
    var wo: Linear  // d x (heads·headDim)
    var qNorm: [Float]?  // headDim, LFM2 only
    var kNorm: [Float]?  // headDim, LFM2 only
    var kvHeads: Int
}

/// Weights of one LFM2 gated short-convolution block.
struct ShortConvWeights: Sendable {
    var inProj: Linear  // 3d x d, producing B, C, x in that order
    var kernel: [Float]  // d x L: `kernel[c * L + k]`, tap k of channel c (k = L-1 is the newest input)
    var outProj: Linear  // d x d
}

/// The token mixer of a layer.
enum Mixer: Sendable {
    case attention(AttentionWeights)
    case shortConv(ShortConvWeights)
}

/// SwiGLU feed-forward weights: `down(silu(gate x) * up x)`.
struct FeedForwardWeights: Sendable {
    var gate: Linear  // ff x d
    var up: Linear  // ff x d
    var down: Linear  // d x ff
}

/// One decoder layer: `h = x + mixer(norm(x)); out = h + ffn(norm(h))`.
struct DecoderLayer: Sendable {
    var mixerNorm: [Float]
    var mixer: Mixer
    var ffnNorm: [Float]
    var ffn: FeedForwardWeights
}

/// All weights of a decoder-only model, as views into the mapped file (norm vectors are
/// small copies in F32).
struct TransformerWeights: Sendable {
    var tokenEmbedding: Linear  // vocab x d
    var layers: [DecoderLayer]
    var outputNorm: [Float]
    var output: Linear  // vocab x d (the embedding itself when tied)
}

/// Reads weights by name with shape checks: one instance per load.
struct WeightLoader {
    let file: GGUFFile
    let hp: Hyperparameters

    func linear(_ name: String, rows: Int, cols: Int) throws(ModelError) -> Linear {
        try Linear(file: file, name: name, rows: rows, cols: cols)
    }

    /// A 1-D (or small 2-D) float tensor copied out as F32.
    func vector(_ name: String, count: Int) throws(ModelError) -> [Float] {
        let t: GGUFTensorInfo
        do { t = try file.requireTensor(name) } catch { throw .file(error) }
        guard t.elementCount == count else { throw .tensorShapeMismatch(name: name, expected: [count], found: t.shape) }
        guard t.type.hasKernels else { throw .unsupportedTensorType(name: name, type: t.type) }
        var out = [Float](repeating: 0, count: count)
        let src = file.data(for: t).baseAddress!
        let rowBytes = t.type.rowBytes(count: t.rowLength)!
        out.withUnsafeMutableBufferPointer { buf in
            for r in 0..<t.rowCount {
                t.type.dequantizeRow(src + r * rowBytes, into: buf.baseAddress! + r * t.rowLength, count: t.rowLength)
            }
        }
        return out
    }

    func has(_ name: String) -> Bool { file.tensor(named: name) != nil }

    func feedForward(_ i: Int) throws(ModelError) -> FeedForwardWeights {
        let d = hp.embeddingLength, ff = hp.feedForwardLength
        return FeedForwardWeights(
            gate: try linear("blk.\(i).ffn_gate.weight", rows: ff, cols: d),
            up: try linear("blk.\(i).ffn_up.weight", rows: ff, cols: d),
            down: try linear("blk.\(i).ffn_down.weight", rows: d, cols: ff))
    }

    func attention(_ i: Int, kvHeads: Int, queryKeyNorm: Bool) throws(ModelError) -> AttentionWeights {
        let d = hp.embeddingLength, hd = hp.headDim
        return AttentionWeights(
            wq: try linear("blk.\(i).attn_q.weight", rows: hp.headCount * hd, cols: d),
            wk: try linear("blk.\(i).attn_k.weight", rows: kvHeads * hd, cols: d),
            wv: try linear("blk.\(i).attn_v.weight", rows: kvHeads * hd, cols: d),
            wo: try linear("blk.\(i).attn_output.weight", rows: d, cols: hp.headCount * hd),
            qNorm: queryKeyNorm ? try vector("blk.\(i).attn_q_norm.weight", count: hd) : nil,
            kNorm: queryKeyNorm ? try vector("blk.\(i).attn_k_norm.weight", count: hd) : nil,
            kvHeads: kvHeads)
    }

    /// The output head: `output.weight`, or the token embedding when the model ties them.
    func outputHead(embedding: Linear) throws(ModelError) -> Linear {
        has("output.weight") ? try linear("output.weight", rows: hp.vocabularySize, cols: hp.embeddingLength) : embedding
    }
}
