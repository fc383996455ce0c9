import GGUF

/// The shape of an LFM2-Audio encoder (a FastConformer and its adapter), read from an
/// mmproj file's `clip.audio.*` keys and, where llama.cpp takes it from them, its tensors,
/// and validated.
public struct AudioHyperparameters: Sendable, Equatable {
    /// `clip.audio.num_mel_bins`: mel bins per frame of the input (128).
    public var melBins: Int
    /// `clip.audio.embedding_length`: the encoder's width `d`.
    public var width: Int
    /// The width of the feed-forward modules: the rows of `a.blk.0.ffn_up.weight`
    /// (`clip.audio.feed_forward_length` holds `d` for LFM2-Audio, as its converter writes it).
    public var feedForwardLength: Int
    /// `clip.audio.block_count`: the number of Conformer blocks.
    public var layerCount: Int
    /// `clip.audio.attention.head_count`; each head is `width / headCount` wide.
    public var headCount: Int
    /// `clip.audio.attention.layer_norm_epsilon`: the LayerNorms' epsilon.
    public var layerNormEpsilon: Float
    /// `clip.audio.projection_dim`: the adapter's output width, which must be the language
    /// model's embedding width.
    public var projectionDim: Int
    /// Channels of the subsampling convolutions (from `a.conv1d.0.weight`).
    public var subsamplingChannels: Int
    /// The depthwise convolution's kernel length over time (from `a.blk.0.conv_dw.weight`).
    public var convolutionKernelLength: Int
    /// The width of the relative-position sinusoid table (the columns of `linear_pos`;
    /// 512 in llama.cpp, fixed).
    public var positionTableWidth: Int
    /// Rows of `a.position_embd.weight`, which bound the input length (see
    /// `FastConformerEncoder.maximumFrameCount`).
    public var positionRows: Int

    /// Width of one attention head.
    public var headDim: Int { width / headCount }

    /// Reads and checks the keys (the file must already be known to be a `clip` file of
    /// projector type `lfm2a`), and the tensors that carry the rest of the shape.
    static func reading(_ r: ProjectorFileReader) throws(ProjectorError) -> AudioHyperparameters {
        let p = "clip.audio."
        try r.requireEncoder("audio")
        let width = try r.int(p + "embedding_length", in: 1...65_536)
        let heads = try r.int(p + "attention.head_count", in: 1...width)
        guard width % heads == 0 else {
            throw .invalidValue(
                path: r.path, key: p + "attention.head_count", value: String(heads), reason: "must divide the width \(width)")
        }
        let melBins = try r.int(p + "num_mel_bins", in: 1...4096)
        // Required by llama.cpp, but it holds d for LFM2-Audio: the width comes from ffn_up.
        _ = try r.int(p + "feed_forward_length", in: 1...(1 << 20))
        let layers = try r.int(p + "block_count", in: 1...1024)
        let eps = try r.float(p + "attention.layer_norm_epsilon", in: Double(Float.leastNormalMagnitude)...0.1)
        let projection = try r.int(p + "projection_dim", in: 1...65_536)

        let first = try r.tensor("a.conv1d.0.weight")
        guard first.shape.count == 4, first.shape[0] == 3, first.shape[1] == 3, first.shape[2] == 1, (1...4096).contains(first.shape[3])
        else {
            throw .tensorShape(path: r.path, name: first.name, expected: [3, 3, 1, first.shape.last ?? 1], found: first.shape)
        }
        let ffn = try r.tensor("a.blk.0.ffn_up.weight")
        guard ffn.shape.count == 2, ffn.shape[0] == width, ffn.shape[1] <= (1 << 20) else {
            throw .tensorShape(path: r.path, name: ffn.name, expected: [width, ffn.shape.last ?? 1], found: ffn.shape)
        }
        let dw = try r.tensor("a.blk.0.conv_dw.weight")
        guard dw.shape.count == 2, dw.shape[1] == width, dw.shape[0] % 2 == 1, dw.shape[0] <= 255 else {
            throw .tensorShape(path: r.path, name: dw.name, expected: [9, width], found: dw.shape)
        }
        let pos = try r.tensor("a.blk.0.linear_pos.weight")
        guard pos.shape.count == 2, pos.shape[1] == width, pos.shape[0] % 2 == 0, pos.shape[0] <= 65536 else {
            throw .tensorShape(path: r.path, name: pos.name, expected: [512, width], found: pos.shape)
        }
        // llama.cpp takes the output width from the audio-code table and asserts it holds
        // at least frames / 2 rows.
        let table = try r.tensor("a.position_embd.weight")
        guard table.shape.count == 2, table.shape[0] == projection, table.shape[1] <= (1 << 24) else {
            throw .tensorShape(path: r.path, name: table.name, expected: [projection, table.shape.last ?? 1], found: table.shape)
        }
        return AudioHyperparameters(
            melBins: melBins, width: width, feedForwardLength: ffn.shape[1], layerCount: layers, headCount: heads,
            layerNormEpsilon: eps, projectionDim: projection, subsamplingChannels: first.shape[3],
            convolutionKernelLength: dw.shape[0], positionTableWidth: pos.shape[0], positionRows: table.shape[1])
    }
}
