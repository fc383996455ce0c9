import GGUF

/// llama-quantize's choice of a type per tensor for the K-quant file types (read from
/// llama.cpp's `src/llama-quant.cpp`: `tensor_allows_quantization`, `llama_tensor_get_type`
/// and `tensor_type_fallback`), for the file types of ``LlamaFileType`` and without an
/// importance matrix or manual overrides.
///
/// Tensors are visited in llama-quantize's order (``order(_:)``): tensors outside the
/// layers first, then layer by layer, by name within each. The mixture for `Q4_K_M` and
/// `Q5_K_M`:
///
/// - the output head (and the token embedding when it is tied to the output) in Q6_K, or
///   Q8_0 when its rows are not whole super-blocks of 256;
/// - `attn_v` (and fused `attn_qkv`/`attn_kv_b`) and `ffn_down` in Q6_K for "more bits"
///   layers: the first and last eighth of the layers and every third one between them
///   (llama.cpp also has a rule raising fused `attn_qkv` by one step, but its value branch
///   comes first and takes those tensors, so that rule never applies);
/// - every other quantizable matrix in the default type (Q4_K or Q5_K);
/// - then, for a row that is not a whole number of 256-value super-blocks, the 32-value
///   fallback: Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0 (F16 when even 32 does not divide it).
///
/// `Q6_K` puts every quantizable matrix in Q6_K (with the same fallback, and Q8_0 for an
/// output head whose rows are not whole super-blocks). Norms, 1-D tensors and a few small
/// special matrices are copied unchanged. llama.cpp's rules for models with 8 experts,
/// for Falcon and for 70B llamas are kept too.
struct LlamaQuantizeRules {
    let fileType: LlamaFileType
    let pure: Bool
    let architecture: String
    let layerCount: Int
    let expertCount: Int
    /// llama.cpp's `LLM_TYPE_70B` (a llama with 80 layers and grouped-query attention).
    let is70B: Bool
    /// No `output.weight`: the token embedding doubles as the output head.
    let tiedEmbeddings: Bool
    let attentionVCount: Int
    private var attentionVIndex = 0
    private var ffnDownIndex = 0

    /// The rules for a model with this metadata and these tensors (all of them, for the
    /// counts some rules need).
    init(metadata: GGUFMetadata, tensors: [GGUFTensorInfo], fileType: LlamaFileType, pure: Bool) throws(QuantizationError) {
        self.fileType = fileType
        self.pure = pure
        do {
            architecture = try metadata.string("general.architecture")
            layerCount = try metadata.int("\(architecture).block_count")
            expertCount = try metadata.optional("\(architecture).expert_count", metadata.int) ?? 0
            // Read only for a llama: other architectures (LFM2) give head_count_kv per layer, as an array.
            if architecture == "llama" && layerCount == 80 {
                let heads = try metadata.optional("\(architecture).attention.head_count", metadata.int) ?? 0
                let kvHeads = try metadata.optional("\(architecture).attention.head_count_kv", metadata.int) ?? heads
                is70B = heads != kvHeads
            } else {
                is70B = false
            }
        } catch {
            throw .file(error)
        }
        tiedEmbeddings = !tensors.contains { Category(name: $0.name) == .output }
        attentionVCount = tensors.filter { Category(name: $0.name).isAttentionV }.count
    }

    /// llama-quantize's tensor order: by layer number (`blk.N.`; other tensors count as
    /// layer -1), then by the bytes of the name.
    static func order(_ tensors: [GGUFTensorInfo]) -> [GGUFTensorInfo] {
        func layer(_ name: String) -> Int {
            guard name.hasPrefix("blk.") else { return -1 }
            let digits = name.dropFirst(4).prefix { $0.isASCII && $0.isNumber }
            guard !digits.isEmpty, name.dropFirst(4 + digits.count).first == "." else { return -1 }
            return Int(digits) ?? -1
        }
        return tensors.sorted { a, b in
            let la = layer(a.name), lb = layer(b.name)
            if la != lb { return la < lb }
            return Array(a.name.utf8).lexicographicallyPrecedes(Array(b.name.utf8))
        }
    }

    /// The type `tensor` gets. Call once per tensor, in ``order(_:)``: the attention-V and
    /// feed-forward-down counters advance as they go.
    mutating func targetType(for tensor: GGUFTensorInfo) throws(QuantizationError) -> GGMLType {
        guard Self.allowsQuantization(tensor) else { return tensor.type }
        var type = fileType.defaultType
        if !pure { type = try mixtureType(for: tensor, default: type) }
        return Self.fallback(type, rowLength: tensor.rowLength)
    }

    /// llama.cpp's `tensor_allows_quantization`: matrices (2 or more dimensions, not
    /// counting trailing 1s) named `*weight`, except norms and a list of small or special
    /// tensors.
    static func allowsQuantization(_ tensor: GGUFTensorInfo) -> Bool {
        var dims = tensor.shape
        while dims.count > 1, dims.last == 1 { dims.removeLast() }
        guard dims.count >= 2 else { return false }
        let name = tensor.name
        guard name.hasSuffix("weight"), !name.contains("_norm.weight") else { return false }
        if name == "position_embd.weight" || name == "token_types.weight" { return false }
        let excluded = [
            "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel", "per_layer_model_proj", "ssm_conv1d",
            "shortconv.conv.weight", "indexer.k_proj.weight", "indexer.q_proj.weight", "time_mix_first.weight",
            "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight",
            "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight",
            "time_mix_g2.weight", "time_mix_decay_w1.weight", "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight",
            "attn_rel_b.weight", ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd",
            ".patch_merger", "a.rvq.codebook", "mm.a.code_embd"
        ]
        return !excluded.contains { name.contains($0) }
    }

    /// llama.cpp's `tensor_type_fallback`: a 32-value type for rows that are not whole
    /// super-blocks.
    static func fallback(_ type: GGMLType, rowLength: Int) -> GGMLType {
        guard rowLength % type.blockSize != 0 else { return type }
        let replacement: GGMLType
        switch type {
        case .q4_K: replacement = .q5_0
        case .q5_K: replacement = .q5_1
        case .q6_K: replacement = .q8_0
        default: replacement = type
        }
        return rowLength % replacement.blockSize == 0 ? replacement : .f16
    }

    /// llama.cpp's `use_more_bits`: the first and last eighth of the layers, and every
    /// third layer in between.
    static func useMoreBits(_ layer: Int, of count: Int) -> Bool {
        layer < count / 8 || layer >= 7 * count / 8 || (layer - count / 8) % 3 == 2
    }

    private mutating func mixtureType(for tensor: GGUFTensorInfo, default type: GGMLType) throws(QuantizationError) -> GGMLType {
        let category = Category(name: tensor.name)
        let falcon = architecture == "falcon"
        switch category {
        case _ where category == .output || (category == .tokenEmbedding && tiedEmbeddings):
            if falcon || tensor.rowLength % type.blockSize != 0 { return .q8_0 }
            return type == .q8_0 ? type : .q6_K
        case .attentionV, .attentionQKV, .attentionKVB:
            defer { attentionVIndex += 1 }
            var chosen = type
            if fileType != .q6_K && Self.useMoreBits(attentionVIndex, of: attentionVCount) { chosen = .q6_K }
            if is70B && (chosen == .q3_K || chosen == .q4_K) { chosen = .q5_K }
            if expertCount == 8 { chosen = .q8_0 }
            return chosen
        case .attentionK:
            return expertCount == 8 ? .q8_0 : type
        case .ffnDown:
            let (layer, layers) = try layerInfo(ffnDownIndex, tensor.name)
            ffnDownIndex += 1
            switch fileType {
            case .q4_K_M where falcon:
                return layer < layers / 16 ? .q6_K : Self.useMoreBits(layer, of: layers) ? .q5_K : .q4_K
            case .q4_K_M, .q5_K_M:
                return Self.useMoreBits(layer, of: layers) ? .q6_K : type
            case .q6_K:
                return type
            }
        case .attentionOutput:
            return !falcon && expertCount == 8 && fileType == .q4_K_M ? .q5_K : type
        case .ffnGate, .ffnUp:
            // No rule for these file types, but llama.cpp still checks the layer number of
            // expert tensors.
            _ = try layerInfo(0, tensor.name)
            return type
        default:
            return type
        }
    }

    /// llama.cpp's `layer_info`: the layer of a feed-forward tensor is its running count,
    /// except in mixtures of experts, where it is read from the name.
    private func layerInfo(_ index: Int, _ name: String) throws(QuantizationError) -> (layer: Int, layers: Int) {
        guard expertCount > 1 else { return (index, layerCount) }
        guard name.hasPrefix("blk."), let layer = Int(name.dropFirst(4).prefix { $0 != "." }), (0..<layerCount).contains(layer)
        else { throw .badLayerName(name, layers: layerCount) }
        return (layer, layerCount)
    }

    /// llama.cpp's `tensor_get_category`, by name.
    enum Category: Equatable {
        case output, tokenEmbedding, attentionQKV, attentionKVB, attentionV, attentionK, attentionQ, attentionOutput
        case ffnUp, ffnGate, ffnDown, other

        init(name: String) {
            if name == "output.weight" {
                self = .output
            } else if name == "token_embd.weight" || name == "per_layer_token_embd.weight" {
                self = .tokenEmbedding
            } else {
                let rules: [(String, Category)] = [
                    ("attn_qkv.weight", .attentionQKV), ("attn_kv_b.weight", .attentionKVB), ("attn_v.weight", .attentionV),
                    ("attn_k.weight", .attentionK), ("attn_q.weight", .attentionQ), ("attn_output.weight", .attentionOutput),
                    ("ffn_up", .ffnUp), ("ffn_gate", .ffnGate), ("ffn_down", .ffnDown)
                ]
                self = rules.first { name.contains($0.0) }?.1 ?? .other
            }
        }

        /// The value projections, which llama.cpp treats as the most sensitive.
        var isAttentionV: Bool { self == .attentionV || self == .attentionQKV || self == .attentionKVB }
    }
}
