import GGUF

/// A model's tokenizer, built from the `tokenizer.ggml.*` metadata of its GGUF file, that
/// produces exactly the token ids llama.cpp produces.
///
/// Two tokenizer models are supported:
/// - byte-level BPE (`tokenizer.ggml.model` = `gpt2`: GPT-2, Llama 3, Qwen 2, SmolLM,
///   LFM2...), with the pre-tokenizer named by `tokenizer.ggml.pre` (see `PreTokenizer`);
/// - SentencePiece BPE (`tokenizer.ggml.model` = `llama`: Llama 2, Phi-3...), score-based
///   merges with byte fallback.
///
/// A `Tokenizer` is immutable and can be shared between threads.
///
/// ```swift
/// let tokenizer = try Tokenizer(gguf: GGUFFile(path: "SmolLM2-135M-Instruct.Q4_1.gguf"))
/// let ids = tokenizer.encode("<|im_start|>user\nhi<|im_end|>", addSpecial: false, parseSpecial: true)
/// let text = tokenizer.decode(ids, renderSpecial: true)
/// ```
public final class Tokenizer: Sendable {
    /// The tokenizer algorithm.
    public enum Model: String, Sendable {
        /// Byte-level BPE with ranked merges (`tokenizer.ggml.model` = `gpt2`).
        case bytePairEncoding = "gpt2"
        /// SentencePiece BPE with scores and byte fallback (`tokenizer.ggml.model` = `llama`).
        case sentencePiece = "llama"
    }

    /// The tokenizer algorithm.
    public let model: Model
    /// The pre-tokenizer (byte-level BPE only; nil for SentencePiece).
    public let preTokenizer: PreTokenizer?
    /// The value of `tokenizer.ggml.pre` (empty when absent).
    public let preTokenizerName: String

    /// Beginning-of-sequence token (nil when the model has none).
    public let bosID: TokenID?
    /// End-of-sequence token.
    public let eosID: TokenID?
    /// End-of-turn token (`tokenizer.ggml.eot_token_id`, else found by its text:
    /// `<|eot_id|>`, `<|im_end|>`, `<|end|>`, ...).
    public let eotID: TokenID?
    /// End-of-message token (`<|eom_id|>`).
    public let eomID: TokenID?
    /// Unknown token.
    public let unknownID: TokenID?
    /// Padding token.
    public let paddingID: TokenID?
    /// Separator token.
    public let separatorID: TokenID?
    /// The tokens that end generation, as llama.cpp's `is_eog` decides: EOS, EOT, EOM,
    /// the fill-in-the-middle pad/repo/separator tokens, and every token whose text is one
    /// of `<|eot_id|>`, `<|im_end|>`, `<|end|>`, `<|return|>`, `<|call|>`,
    /// `<end_of_turn>`, `<|endoftext|>`, `<|eom_id|>`, `<EOT>`, `_<EOT>`,
    /// `<|end_of_text|>`, `<end_of_utterance>`.
    public let endOfGenerationIDs: Set<TokenID>

    /// Whether `encode(_:addSpecial:parseSpecial:)` with `addSpecial` prepends BOS
    /// (`tokenizer.ggml.add_bos_token`, default per model as in llama.cpp).
    public let addBOS: Bool
    /// Whether `addSpecial` appends EOS (`tokenizer.ggml.add_eos_token`).
    public let addEOS: Bool
    /// Whether SentencePiece text gets a leading space (`tokenizer.ggml.add_space_prefix`,
    /// default true for SentencePiece); decoding then drops one leading space.
    public let addSpacePrefix: Bool
    /// Whether `decode` tidies spaces before punctuation and contractions by default, as
    /// llama.cpp does for GPT-2-style vocabularies (`clean_up_tokenization_spaces`).
    public let cleanSpaces: Bool
    /// Whether a pre-token that is a whole token skips the merges (Llama 3 family).
    let ignoreMerges: Bool

    let vocabulary: Vocabulary
    let attributes: [TokenAttributes]
    let bpe: BPEModel?
    let spm: SentencePieceModel?
    let specials: SpecialTokenMatcher
    /// The most bytes of text one token stands for.
    let longestTokenBytes: Int
    /// Whether every byte of a text that has a token ends up in one, so that a text with
    /// `n` such bytes has at least `n / longestTokenBytes` tokens: every merge makes a
    /// token (byte-level BPE, where bytes without a token are dropped, as the limited
    /// encoding counts), or every byte has one (SentencePiece, with byte fallback or the
    /// unknown token). Otherwise only the tokens produced count.
    let tokenCountBoundIsValid: Bool
    /// What each token contributes to decoded text when special tokens are rendered.
    let pieceArena: [UInt8]
    let pieceStarts: [Int32]

    /// Builds the tokenizer of a GGUF model.
    public convenience init(gguf file: GGUFFile) throws(TokenizerError) {
        try self.init(metadata: file.metadata)
    }

    /// Opens a GGUF file and builds its tokenizer.
    public convenience init(path: String) throws {
        try self.init(gguf: GGUFFile(path: path))
    }

    /// Builds a tokenizer from GGUF metadata (`tokenizer.ggml.*` and `general.name`).
    public init(metadata m: GGUFMetadata) throws(TokenizerError) {
        let r = MetadataReader(metadata: m)
        let modelName = try r.string("tokenizer.ggml.model")
        guard let model = Model(rawValue: modelName) else { throw .unsupportedModel(modelName) }
        self.model = model
        let preName = try r.optionalString("tokenizer.ggml.pre") ?? ""
        preTokenizerName = preName

        let tokens = try r.stringArray("tokenizer.ggml.tokens")
        guard !tokens.isEmpty else { throw .malformedKey(key: "tokenizer.ggml.tokens", reason: "the vocabulary is empty") }
        guard tokens.count < Int(Int32.max) else { throw .malformedKey(key: "tokenizer.ggml.tokens", reason: "too many tokens") }
        let n = tokens.count
        let vocabulary = Vocabulary(tokens: tokens)
        self.vocabulary = vocabulary

        var attributes = [TokenAttributes](repeating: .normal, count: n)
        if let types = try r.optionalIntArray("tokenizer.ggml.token_type") {
            guard types.count >= n else {
                throw .malformedKey(key: "tokenizer.ggml.token_type", reason: "it has \(types.count) entries for \(n) tokens")
            }
            for i in 0..<n { attributes[i] = TokenAttributes(type: types[i]) }
        }

        // Defaults per model, as llama.cpp's llama_vocab::impl::load.
        var bos: Int32?, eos: Int32?, unk: Int32?
        var addBOS: Bool, addEOS = false, addSpacePrefix: Bool, cleanSpaces: Bool, ignoreMerges = false
        switch model {
        case .bytePairEncoding:
            let settings: PreTokenizer.Settings
            if preName.isEmpty {
                settings = PreTokenizer.Settings(preTokenizer: .default)
            } else if let s = PreTokenizer.settings(forGGUFName: preName) {
                settings = s
            } else {
                throw .unsupportedPreTokenizer(preName)
            }
            preTokenizer = settings.preTokenizer
            bos = settings.hasBOS ? 11 : nil
            eos = 11
            unk = nil
            addBOS = settings.addBOS
            addSpacePrefix = false
            cleanSpaces = settings.cleanSpaces
            ignoreMerges = settings.ignoreMerges
        case .sentencePiece:
            preTokenizer = nil
            bos = 1
            eos = 2
            unk = 0
            addBOS = true
            addSpacePrefix = true
            cleanSpaces = false
        }
        if let v = try r.optionalBool("tokenizer.ggml.add_space_prefix") { addSpacePrefix = v }

        // Special token ids: a key holding an id outside the vocabulary is ignored.
        func special(_ key: String, _ fallback: Int32?) throws(TokenizerError) -> Int32? {
            guard let v = try r.optionalInt("tokenizer.ggml." + key) else { return fallback }
            return v >= 0 && v < n ? Int32(v) : fallback
        }
        bos = try special("bos_token_id", bos)
        eos = try special("eos_token_id", eos)
        unk = try special("unknown_token_id", unk)
        var eot = try special("eot_token_id", nil)
        var eom = try special("eom_token_id", nil)
        let sep = try special("seperator_token_id", nil)
        let pad = try special("padding_token_id", nil)
        var fimPad = try special("fim_pad_token_id", nil)
        var fimRep = try special("fim_rep_token_id", nil)
        var fimSep = try special("fim_sep_token_id", nil)
        if let v = try r.optionalBool("tokenizer.ggml.add_bos_token") { addBOS = v }
        if let v = try r.optionalBool("tokenizer.ggml.add_eos_token") { addEOS = v }
        // Out-of-range defaults (a tiny vocabulary) are dropped.
        func valid(_ id: Int32?) -> Int32? { id.flatMap { $0 >= 0 && Int($0) < n ? $0 : nil } }
        bos = valid(bos)
        eos = valid(eos)
        unk = valid(unk)

        // Tokens found by their text. llama.cpp scans a hash map, so when several texts
        // match its choice is arbitrary; we take the first name of each list present.
        func firstPresent(_ names: [String]) -> Int32? {
            for name in names { if let id = vocabulary.id(of: name) { return id } }
            return nil
        }
        var forcedControl: [Int32] = []
        if eot == nil {
            eot = firstPresent([
                "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<end_of_utterance>"
            ])
            if let eot { forcedControl.append(eot) }
        }
        if eom == nil {
            eom = firstPresent(["<|eom_id|>"])
            if let eom { forcedControl.append(eom) }
        }
        // Fill-in-the-middle markers found by text also become control tokens.
        let fimKeys: [(String, String, [String])] = [
            (
                "fim_pre_token_id", "prefix_token_id",
                ["<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "<|code_prefix|>", "<|prefix|>"]
            ),
            (
                "fim_suf_token_id", "suffix_token_id",
                ["<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>", "<|code_suffix|>", "<|suffix|>"]
            ),
            (
                "fim_mid_token_id", "middle_token_id",
                ["<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>", "<|code_middle|>", "<|middle|>"]
            )
        ]
        for (key, deprecatedKey, names) in fimKeys {
            if try special(key, nil) == nil, try special(deprecatedKey, nil) == nil, let id = firstPresent(names) {
                forcedControl.append(id)
            }
        }
        if fimPad == nil {
            fimPad = firstPresent(["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"])
            if let fimPad { forcedControl.append(fimPad) }
        }
        if fimRep == nil {
            fimRep = firstPresent(["<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"])
            if let fimRep { forcedControl.append(fimRep) }
        }
        if fimSep == nil {
            fimSep = firstPresent(["<|file_sep|>"])
            if let fimSep { forcedControl.append(fimSep) }
        }

        var eog = Set<Int32>()
        for id in [fimPad, fimRep, fimSep] { if let id { eog.insert(id) } }
        let eogNames = [
            "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
            "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
            "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>"
        ]
        for name in eogNames {
            if let id = vocabulary.id(of: name) {
                eog.insert(id)
                forcedControl.append(id)
            }
        }
        // Tokens that look like control tokens get the control attribute added (llama.cpp
        // warns "control-looking token ... was not control-type" and ORs the flag in: a
        // user-defined `</s>` becomes user-defined + control, hidden and matched only when
        // special tokens are parsed).
        for id in forcedControl {
            attributes[Int(id)].insert(.control)
        }
        // Control tokens whose text contains "unused" are marked unused.
        for id in 0..<n where attributes[id].contains(.control) {
            let text = vocabulary.text(id), unused = Array("unused".utf8)
            if text.count >= unused.count,
                (0...(text.count - unused.count)).contains(where: { text[$0..<$0 + unused.count].elementsEqual(unused) })
            {
                attributes[id].insert(.unused)
            }
        }
        // gpt-oss: these are always rendered.
        for name in ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"] {
            if let id = vocabulary.id(of: name) { attributes[Int(id)] = .userDefined }
        }
        for id in [eos, eot, eom] { if let id { eog.insert(id) } }
        // o200k_harmony (<|return|> and <|call|>) and solar-open (<|calls|> and <|flush|>):
        // <|end|> does not end generation there.
        func eogToken(_ text: String) -> Int32? {
            eog.first { vocabulary.text(Int($0)).elementsEqual(text.utf8) }
        }
        let hasCall = eogToken("<|call|>") != nil || eogToken("<|calls|>") != nil
        if let end = eogToken("<|end|>"), hasCall, eogToken("<|return|>") != nil || eogToken("<|flush|>") != nil {
            eog.remove(end)
            attributes[Int(end)] = .userDefined
        }
        // Gemma 4 and PaddleOCR: with <|tool_response>, </s> is ordinary text.
        if eogToken("<|tool_response>") != nil, let s = eogToken("</s>") {
            eog.remove(s)
            attributes[Int(s)] = .normal
        }

        // Per-model strip attributes (llama.cpp sets them by model name).
        let generalName = ((try? m.string("general.name")) ?? "").lowercased()
        if generalName.contains("phi-3") || generalName.contains("phi3") {
            for id in 0..<n where !attributes[id].isDisjoint(with: [.control, .userDefined, .unknown]) {
                attributes[id].insert(.rstrip)
            }
            if let id = vocabulary.id(of: "</s>") { attributes[Int(id)].insert(.rstrip) }
            for text in ["<unk>", "<s>", "<|endoftext|>"] {
                if let id = vocabulary.id(of: text) { attributes[Int(id)].remove(.rstrip) }
            }
        }

        switch model {
        case .bytePairEncoding:
            let merges = try r.stringArray("tokenizer.ggml.merges")
            bpe = BPEModel(vocabulary: vocabulary, merges: merges)
            spm = nil
        case .sentencePiece:
            var scores = [Float](repeating: 0, count: n)
            if let s = try r.optionalFloatArray("tokenizer.ggml.scores") {
                guard s.count >= n else {
                    throw .malformedKey(key: "tokenizer.ggml.scores", reason: "it has \(s.count) entries for \(n) tokens")
                }
                scores = Array(s.prefix(n))
            }
            bpe = nil
            spm = SentencePieceModel(vocabulary: vocabulary, scores: scores, unknownID: unk)
        }

        self.attributes = attributes
        self.bosID = bos
        self.eosID = eos
        self.eotID = eot
        self.eomID = eom
        self.unknownID = unk
        self.paddingID = pad
        self.separatorID = sep
        self.endOfGenerationIDs = eog
        self.addBOS = addBOS
        self.addEOS = addEOS
        self.addSpacePrefix = addSpacePrefix
        self.cleanSpaces = cleanSpaces
        self.ignoreMerges = ignoreMerges
        self.specials = SpecialTokenMatcher(vocabulary: vocabulary, attributes: attributes)
        (pieceArena, pieceStarts) = Tokenizer.buildPieces(vocabulary: vocabulary, attributes: attributes, model: model)
        longestTokenBytes = Tokenizer.longestTokenBytes(vocabulary, byteLevel: model == .bytePairEncoding)
        if let bpe {
            tokenCountBoundIsValid = bpe.extraTexts.isEmpty
        } else {
            tokenCountBoundIsValid = spm?.byteTokens.allSatisfy { $0 != nil } ?? false
        }
    }

    /// The most bytes of text a token stands for: its text's length, or in a byte-level
    /// vocabulary (whose texts spell each byte as one character of GPT-2's alphabet, and
    /// whose merges start from those characters) its number of characters.
    static func longestTokenBytes(_ vocabulary: Vocabulary, byteLevel: Bool) -> Int {
        var longest = 0
        vocabulary.arena.withUnsafeBufferPointer { arena in
            for id in 0..<vocabulary.count {
                let text = arena[Int(vocabulary.starts[id])..<Int(vocabulary.starts[id + 1])]
                longest = max(longest, byteLevel ? text.count { $0 & 0xC0 != 0x80 } : text.count)
            }
        }
        return longest
    }

    // MARK: Vocabulary

    /// Number of tokens in the vocabulary.
    public var vocabularySize: Int { vocabulary.count }

    /// Whether `id` is a valid token id.
    public func contains(_ id: TokenID) -> Bool { id >= 0 && Int(id) < vocabulary.count }

    /// The type of token `id` (after llama.cpp's adjustments: tokens that look like
    /// end-of-turn markers are control tokens).
    public func tokenType(_ id: TokenID) -> TokenType {
        contains(id) ? attributes[Int(id)].tokenType : .undefined
    }

    /// Whether `id` is a control token (`<|im_start|>`, `<s>`...): not rendered by default.
    public func isControl(_ id: TokenID) -> Bool {
        contains(id) && attributes[Int(id)].contains(.control)
    }

    /// Whether `id` ends generation (see `endOfGenerationIDs`).
    public func isEndOfGeneration(_ id: TokenID) -> Bool { endOfGenerationIDs.contains(id) }

    /// The token's text as stored in the vocabulary (`Ġworld`, `▁the`, `<0x0A>`,
    /// `<|im_end|>`); empty for an invalid id.
    public func tokenText(_ id: TokenID) -> String {
        guard contains(id) else { return "" }
        return String(decoding: vocabulary.text(Int(id)), as: UTF8.self)
    }

    /// The id of the token whose stored text is `text`, if any.
    public func tokenID(forText text: String) -> TokenID? { vocabulary.id(of: text) }

    /// The score of a SentencePiece token (0 for BPE vocabularies).
    public func score(_ id: TokenID) -> Float {
        guard contains(id), let spm else { return 0 }
        return spm.scores[Int(id)]
    }
}

/// Typed metadata lookups that report `TokenizerError`s naming the key.
private struct MetadataReader {
    let metadata: GGUFMetadata

    private func wrap<T>(_ body: () throws(GGUFError) -> T) throws(TokenizerError) -> T {
        do { return try body() } catch { throw TokenizerError.from(error) }
    }

    func string(_ key: String) throws(TokenizerError) -> String {
        try wrap { () throws(GGUFError) in try metadata.string(key) }
    }

    func stringArray(_ key: String) throws(TokenizerError) -> [String] {
        try wrap { () throws(GGUFError) in try metadata.stringArray(key) }
    }

    func optionalString(_ key: String) throws(TokenizerError) -> String? {
        metadata.contains(key) ? try string(key) : nil
    }

    func optionalInt(_ key: String) throws(TokenizerError) -> Int? {
        guard metadata.contains(key) else { return nil }
        return try wrap { () throws(GGUFError) in try metadata.int(key) }
    }

    func optionalBool(_ key: String) throws(TokenizerError) -> Bool? {
        guard metadata.contains(key) else { return nil }
        return try wrap { () throws(GGUFError) in try metadata.bool(key) }
    }

    func optionalIntArray(_ key: String) throws(TokenizerError) -> [Int]? {
        guard metadata.contains(key) else { return nil }
        return try wrap { () throws(GGUFError) in try metadata.intArray(key) }
    }

    func optionalFloatArray(_ key: String) throws(TokenizerError) -> [Float]? {
        guard metadata.contains(key) else { return nil }
        return try wrap { () throws(GGUFError) in try metadata.floatArray(key) }
    }
}

extension Tokenizer: CustomStringConvertible {
    /// A one-line summary: model, pre-tokenizer, size and special ids.
    public var description: String {
        func id(_ v: TokenID?) -> String { v.map { "\($0) \(tokenText($0).debugDescription)" } ?? "none" }
        let pre = preTokenizer.map { ", pre-tokenizer \($0.rawValue) ('\(preTokenizerName)')" } ?? ""
        return "Tokenizer(\(model.rawValue)\(pre), \(vocabularySize) tokens, BOS \(id(bosID))\(addBOS ? " (added)" : ""), "
            + "EOS \(id(eosID)), EOT \(id(eotID)), end of generation \(endOfGenerationIDs.sorted()))"
    }
}
