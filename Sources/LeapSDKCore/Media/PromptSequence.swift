import Foundation

/// A prompt as the model reads it: runs of token ids, and media chunks (an image slice's
/// or an audio clip's encoder output, one embedding row per position) where the message
/// put its image or audio part.
///
/// ```
/// <|startoftext|><|im_start|>user\n  <|image_start|> [64..256 image rows] <|image_end|>  Describe...<|im_start|>assistant\n
/// └──────── tokens ─────────┘        └── token ──┘  └──── media ───────┘  └─ token ─┘  └──────────── tokens ───────────┘
/// ```
///
/// Every position has a prompt-cache key (`keys`): a token's is its id; a media position's
/// is a negative number derived from the chunk's content hash and the row, so that a
/// second turn about the same image finds the whole first turn in the cache, and another
/// image never matches.
struct PromptSequence: Sendable {
    /// A run of positions.
    enum Piece: Sendable {
        case tokens([Int])
        case media(MediaChunk)

        var count: Int {
            switch self {
            case .tokens(let t): return t.count
            case .media(let m): return m.positions
            }
        }
    }

    private(set) var pieces: [Piece] = []
    /// The prompt-cache key of every position.
    private(set) var keys: [Int] = []
    /// Where each piece starts.
    private var starts: [Int] = []

    init() {}

    /// A prompt of tokens only.
    init(tokens: [Int]) {
        append(.tokens(tokens))
    }

    var count: Int { keys.count }
    var hasMedia: Bool { pieces.contains { if case .media = $0 { return true } else { return false } } }

    mutating func append(_ piece: Piece) {
        guard piece.count > 0 else { return }
        if case .tokens(let more) = piece, case .tokens(let last)? = pieces.last {
            pieces[pieces.count - 1] = .tokens(last + more)
            keys += more
            return
        }
        starts.append(keys.count)
        pieces.append(piece)
        switch piece {
        case .tokens(let t): keys += t
        case .media(let m): keys += (0..<m.positions).map(m.key)
        }
    }

    /// The piece holding `position`, and where that piece starts.
    func piece(at position: Int) -> (piece: Piece, start: Int) {
        precondition(position >= 0 && position < count, "a position outside the prompt")
        var lo = 0, hi = starts.count - 1
        while lo < hi {
            let mid = (lo + hi + 1) / 2
            if starts[mid] <= position { lo = mid } else { hi = mid - 1 }
        }
        return (pieces[lo], starts[lo])
    }
}

/// One media chunk of a prompt: its positions, its content key, and how to compute its
/// embeddings (the encoder runs when a prompt first needs them, on the engine's queue; a
/// chunk whose positions come from the prompt cache is never encoded).
final class MediaChunk: @unchecked Sendable {
    // @unchecked: `encoded` is written once, on the engine's queue.

    /// What it is, for reports (`"image"`, `"audio"`).
    let kind: String
    /// Positions (embedding rows) it takes.
    let positions: Int
    /// A hash of the content the rows are computed from (the media bytes and which slice).
    let contentHash: UInt64
    private let encode: @Sendable () throws(ServingError) -> [Float]
    private var encoded: [Float]?

    init(kind: String, positions: Int, contentHash: UInt64, encode: @escaping @Sendable () throws(ServingError) -> [Float]) {
        self.kind = kind
        self.positions = positions
        self.contentHash = contentHash
        self.encode = encode
    }

    /// The prompt-cache key of row `i`: negative, so never a token id.
    func key(_ i: Int) -> Int {
        let mixed = (contentHash &+ UInt64(i) &* 0x9E37_79B9_7F4A_7C15) & 0x3FFF_FFFF_FFFF_FFFF
        return -1 - Int(mixed)
    }

    /// The rows (`positions` × the model's width), computed on first use.
    func embeddings() throws(ServingError) -> [Float] {
        if let encoded { return encoded }
        let rows = try encode()
        encoded = rows
        return rows
    }

    /// Whether the rows are computed and kept (the encoder has run since the last `release`).
    var isEncoded: Bool { encoded != nil }

    /// Forgets the computed rows (after the prompt is in the caches).
    func release() { encoded = nil }
}

/// FNV-1a, 64 bits: the content hash of media bytes.
enum ContentHash {
    static func of<Bytes: Sequence>(_ bytes: Bytes, seed: UInt64 = 0xCBF2_9CE4_8422_2325) -> UInt64 where Bytes.Element == UInt8 {
        var h = seed
        for b in bytes {
            h ^= UInt64(b)
            h = h &* 0x0000_0100_0000_01B3
        }
        return h
    }
}
