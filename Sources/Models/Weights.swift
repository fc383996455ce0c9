import GGUF
import Kernels

/// Reads weights by name with shape checks, and builds the shared blocks from llama.cpp's
/// tensor names (`blk.i.attn_q.weight` ...): one instance per load.
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

    /// An RMSNorm weight of `count` values (the model width unless given).
    func norm(_ name: String, count: Int? = nil) throws(ModelError) -> RMSNorm {
        RMSNorm(weight: try vector(name, count: count ?? hp.embeddingLength), epsilon: hp.rmsEpsilon)
    }

    /// `blk.i.ffn_gate`, `ffn_up`, `ffn_down` as a SwiGLU block.
    func swiGLU(_ i: Int) throws(ModelError) -> SwiGLU {
        let d = hp.embeddingLength, ff = hp.feedForwardLength
        return SwiGLU(
            gate: try linear("blk.\(i).ffn_gate.weight", rows: ff, cols: d),
            up: try linear("blk.\(i).ffn_up.weight", rows: ff, cols: d),
            down: try linear("blk.\(i).ffn_down.weight", rows: d, cols: ff))
    }

    /// `blk.i.attn_q`, `attn_k`, `attn_v`, `attn_output` (and `attn_q_norm`, `attn_k_norm`
    /// when `queryKeyNorm`) as an attention block with `kvHeads` key/value heads and the
    /// file's RoPE base and dimensions.
    func attention(_ i: Int, kvHeads: Int, queryKeyNorm: Bool, ropeStyle: Elementwise.RopeStyle) throws(ModelError) -> Attention {
        let d = hp.embeddingLength, hd = hp.headDim
        return Attention(
            layer: i,
            wq: try linear("blk.\(i).attn_q.weight", rows: hp.headCount * hd, cols: d),
            wk: try linear("blk.\(i).attn_k.weight", rows: kvHeads * hd, cols: d),
            wv: try linear("blk.\(i).attn_v.weight", rows: kvHeads * hd, cols: d),
            wo: try linear("blk.\(i).attn_output.weight", rows: d, cols: hp.headCount * hd),
            queryKeyNorm: queryKeyNorm
                ? (try norm("blk.\(i).attn_q_norm.weight", count: hd), try norm("blk.\(i).attn_k_norm.weight", count: hd)) : nil,
            rope: RotaryEmbedding(base: hp.ropeFreqBase, dimensions: hp.ropeDimensions, style: ropeStyle),
            heads: hp.headCount, kvHeads: kvHeads, headDim: hd, scale: 1 / Float(hd).squareRoot())
    }

    /// The output head: `output.weight`, or the token embedding when the model ties them.
    func outputHead(embedding: Linear) throws(ModelError) -> Linear {
        has("output.weight") ? try linear("output.weight", rows: hp.vocabularySize, cols: hp.embeddingLength) : embedding
    }
}
