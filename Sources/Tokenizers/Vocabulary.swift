/// A token id, as in llama.cpp (`llama_token`).
public typealias TokenID = Int32

/// The type of a token, from `tokenizer.ggml.token_type`.
public enum TokenType: Int32, Sendable {
    /// No or an unrecognized type; contributes nothing to decoded text.
    case undefined = 0
    /// Ordinary text.
    case normal = 1
    /// The unknown token (`<unk>`); hidden unless special tokens are rendered.
    case unknown = 2
    /// A control token (`<s>`, `<|im_start|>`); hidden unless special tokens are rendered,
    /// matched in text only when special tokens are parsed.
    case control = 3
    /// A token added to the vocabulary (`[PAD151646]`); always matched in text and rendered.
    case userDefined = 4
    /// A reserved token; contributes nothing to decoded text.
    case unused = 5
    /// A SentencePiece byte-fallback token `<0xXX>`.
    case byte = 6
}

/// Per-token attributes, following llama.cpp's `llama_token_attr` (the type, plus the
/// strip flags some special tokens carry).
struct TokenAttributes: OptionSet, Sendable {
    let rawValue: UInt16
    static let unknown = TokenAttributes(rawValue: 1 << 0)
    static let unused = TokenAttributes(rawValue: 1 << 1)
    static let normal = TokenAttributes(rawValue: 1 << 2)
    static let control = TokenAttributes(rawValue: 1 << 3)
    static let userDefined = TokenAttributes(rawValue: 1 << 4)
    static let byte = TokenAttributes(rawValue: 1 << 5)
    /// Spaces before the token are removed when it is matched as a special token.
    static let lstrip = TokenAttributes(rawValue: 1 << 7)
    /// Spaces after the token are removed when it is matched as a special token.
    static let rstrip = TokenAttributes(rawValue: 1 << 8)

    init(rawValue: UInt16) { self.rawValue = rawValue }

    init(type: Int) {
        switch type {
        case 1: self = .normal
        case 2: self = .unknown
        case 3: self = .control
        case 4: self = .userDefined
        case 5: self = .unused
        case 6: self = .byte
        default: self = []
        }
    }

    var tokenType: TokenType {
        if contains(.normal) { return .normal }
        if contains(.unknown) { return .unknown }
        if contains(.control) { return .control }
        if contains(.userDefined) { return .userDefined }
        if contains(.unused) { return .unused }
        if contains(.byte) { return .byte }
        return .undefined
    }
}

/// The token texts as stored in the GGUF file (byte-level BPE's `Ġ` alphabet, or
/// SentencePiece's `▁`), packed back to back, with a text -> id table.
struct Vocabulary: Sendable {
    /// All token texts, concatenated.
    let arena: [UInt8]
    /// Token `i`'s text is `arena[starts[i]..<starts[i+1]]`.
    let starts: [Int32]
    /// Text -> id. For duplicate texts the highest id wins, as in llama.cpp's `token_to_id`.
    let table: ByteStringTable

    var count: Int { starts.count - 1 }

    /// Builds the vocabulary; empty token texts become `[EMPTY_<id>]` as in llama.cpp.
    init(tokens: [String]) {
        var arena: [UInt8] = []
        arena.reserveCapacity(tokens.count * 8)
        var starts: [Int32] = []
        starts.reserveCapacity(tokens.count + 1)
        for (i, token) in tokens.enumerated() {
            starts.append(Int32(arena.count))
            if token.isEmpty {
                arena.append(contentsOf: "[EMPTY_\(i)]".utf8)
            } else {
                arena.append(contentsOf: token.utf8)
            }
        }
        starts.append(Int32(arena.count))
        var table = ByteStringTable(capacity: tokens.count)
        arena.withUnsafeBufferPointer { a in
            for i in stride(from: tokens.count - 1, through: 0, by: -1) {
                let slice = UnsafeBufferPointer(rebasing: a[Int(starts[i])..<Int(starts[i + 1])])
                table.insertIfAbsent(slice, Int32(i))
            }
        }
        self.arena = arena
        self.starts = starts
        self.table = table
    }

    /// The text of token `id`.
    func text(_ id: Int) -> [UInt8] {
        Array(arena[Int(starts[id])..<Int(starts[id + 1])])
    }

    /// The id of the token whose text is `bytes`, or nil.
    @inline(__always)
    func id(of bytes: UnsafeBufferPointer<UInt8>) -> Int32? {
        table.find(bytes)
    }

    func id(of bytes: [UInt8]) -> Int32? {
        table.find(bytes)
    }

    func id(of string: String) -> Int32? {
        table.find(Array(string.utf8))
    }
}
