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

    /// The token embedding (`token_embd.weight`, `vocabularySize x embeddingLength`) and
    /// the output head: `output.weight`, or the embedding itself when the model ties them.
    /// An embedding that is only looked up row by row gets no decode copy; a tied one gets
    /// it, and its lookups read that copy.
    func embeddingAndOutputHead() throws(ModelError) -> (embedding: Linear, output: Linear) {
        let rows = hp.vocabularySize, cols = hp.embeddingLength
        guard has("output.weight") else {
            let tied = try linear("token_embd.weight", rows: rows, cols: cols)
            return (tied, tied)
        }
        return (
            try Linear(file: file, name: "token_embd.weight", rows: rows, cols: cols, forDecode: false),
            try linear("output.weight", rows: rows, cols: cols)
        )
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

    /// `blk.i.ffn_gate`, `ffn_up`, `ffn_down`: the matrices of a gated feed-forward block.
    func feedForward(_ i: Int) throws(ModelError) -> (gate: Linear, up: Linear, down: Linear) {
        let d = hp.embeddingLength, ff = hp.feedForwardLength
        return (
            try linear("blk.\(i).ffn_gate.weight", rows: ff, cols: d),
            try linear("blk.\(i).ffn_up.weight", rows: ff, cols: d),
            try linear("blk.\(i).ffn_down.weight", rows: d, cols: ff)
        )
    }

    /// `blk.i.ffn_gate`, `ffn_up`, `ffn_down` as a SwiGLU block.
    func swiGLU(_ i: Int) throws(ModelError) -> SwiGLU {
        let (gate, up, down) = try feedForward(i)
        return SwiGLU(gate: gate, up: up, down: down)
    }

    /// `blk.i.attn_q`, `attn_k`, `attn_v`, `attn_output` (and `attn_q_norm`, `attn_k_norm`
    /// when `queryKeyNorm`) as an attention block with the layer's `head_count_kv`
    /// key/value heads (which must be positive: 0 marks a layer without attention), RoPE
    /// over the file's dimensions with base `ropeBase` (default: the file's), the query
    /// scale `scale` (default `1/sqrt(head width)`), and a sliding `window` (default: none).
    func attention(
        _ i: Int, queryKeyNorm: Bool, ropeStyle: Elementwise.RopeStyle, ropeBase: Float? = nil, scale: Float? = nil,
        window: Int? = nil
    ) throws(ModelError) -> Attention {
        let d = hp.embeddingLength, hd = hp.headDim, kvHeads = hp.headCountKV[i]
        guard kvHeads > 0 else {
            throw .invalidHyperParameter(
                key: "\(hp.architecture).attention.head_count_kv", value: String(kvHeads),
                reason: "must be positive in layer \(i), which has attention")
        }
        return Attention(
            layer: i,
            wq: try linear("blk.\(i).attn_q.weight", rows: hp.headCount * hd, cols: d),
            wk: try linear("blk.\(i).attn_k.weight", rows: kvHeads * hd, cols: d),
            wv: try linear("blk.\(i).attn_v.weight", rows: kvHeads * hd, cols: d),
            wo: try linear("blk.\(i).attn_output.weight", rows: d, cols: hp.headCount * hd),
            queryKeyNorm: queryKeyNorm
                ? (try norm("blk.\(i).attn_q_norm.weight", count: hd), try norm("blk.\(i).attn_k_norm.weight", count: hd)) : nil,
            rope: RotaryEmbedding(base: ropeBase ?? hp.ropeFreqBase, dimensions: hp.ropeDimensions, style: ropeStyle),
            heads: hp.headCount, kvHeads: kvHeads, headDim: hd, scale: scale ?? 1 / Float(hd).squareRoot(), window: window)
    }
}
