/// One frame of LFM2.5-Audio's speech output: a code for each of the 8 codebooks, 80 ms
/// of audio. Codes are `0..<2048`, or ``endOfAudioCode`` (2048), which ends an audio
/// segment: an end-of-audio frame has it in every codebook. A value type without heap
/// storage, so that a frame costs no allocation.
public struct AudioFrame: Sendable, Hashable, CustomStringConvertible {
    /// Codebooks per frame.
    public static let codebookCount = 8
    /// Codes per codebook in the depthformer and the backbone's audio embedding: the
    /// 2048 audio codes and the end-of-audio code.
    public static let codesPerCodebook = 2049
    /// The code that ends an audio segment (the last of each codebook).
    public static let endOfAudioCode = 2048

    private var storage: SIMD8<Int32>

    /// The frame of `codes` (8 of them, each in `0..<codesPerCodebook`; anything else stops
    /// the process: use ``init(checking:)`` for codes read from outside).
    public init(_ codes: [Int]) {
        precondition(codes.count == Self.codebookCount, "an audio frame has \(Self.codebookCount) codes, got \(codes.count)")
        storage = SIMD8<Int32>()
        for (c, code) in codes.enumerated() { self[c] = code }
    }

    /// The frame of `codes`, or nil unless they are 8 codes in `0..<codesPerCodebook`.
    public init?(checking codes: [Int]) {
        guard codes.count == Self.codebookCount, codes.allSatisfy({ (0..<Self.codesPerCodebook).contains($0) }) else { return nil }
        self.init(codes)
    }

    /// The end-of-audio frame: ``endOfAudioCode`` in every codebook.
    public static let endOfAudio = AudioFrame(repeating: endOfAudioCode)

    init(repeating code: Int) { storage = SIMD8(repeating: Int32(code)) }

    /// The code of codebook `c` (`0..<8`).
    public subscript(c: Int) -> Int {
        get { Int(storage[c]) }
        set {
            precondition((0..<Self.codesPerCodebook).contains(newValue), "audio code \(newValue) outside 0..<\(Self.codesPerCodebook)")
            storage[c] = Int32(newValue)
        }
    }

    /// The 8 codes, codebook 0 first.
    public var codes: [Int] { (0..<Self.codebookCount).map { self[$0] } }

    /// Whether codebook 0 holds the end-of-audio code: the frame ends the audio segment
    /// (and, as emitted, is ``endOfAudio``).
    public var isEndOfAudio: Bool { self[0] == Self.endOfAudioCode }

    public var description: String { "\(codes)" }
}

/// How a depthformer step chooses each codebook's code from its logits
/// (`AudioFrame.codesPerCodebook` values). `GreedyAudioCodes` takes the argmax; the
/// Sampling module's `Sampler` conforms (temperature and top-k, seeded: the reference's
/// `audio_temperature` and `audio_top_k`).
public protocol AudioCodeSampler {
    /// The code of `codebook` (`0..<8`), in `0..<logits.count`.
    mutating func code(codebook: Int, logits: UnsafeBufferPointer<Float>) -> Int
}

/// The most likely code, the lower one on a tie (the reference's greedy decoding,
/// `torch.argmax`).
public struct GreedyAudioCodes: AudioCodeSampler, Sendable {
    public init() {}

    public func code(codebook: Int, logits: UnsafeBufferPointer<Float>) -> Int { Self.argmax(logits) }

    /// The index of the largest value, the first one on a tie (NaN never wins).
    public static func argmax(_ logits: UnsafeBufferPointer<Float>) -> Int {
        var best = 0
        var top = -Float.infinity
        for (i, v) in logits.enumerated() where v > top {
            best = i
            top = v
        }
        return best
    }
}
