/// The pre-tokenizer of a byte-level BPE vocabulary: how text is cut into pieces before
/// merges run inside each piece (merges never cross a piece boundary).
///
/// Each case is one of llama.cpp's regex families (`llm_tokenizer_bpe`), selected from the
/// GGUF key `tokenizer.ggml.pre` by `PreTokenizer.init(ggufName:)`. The regexes are not run
/// by a regex engine: each is a hand-written scanner over code points that reproduces the
/// regex's leftmost, first-alternative-wins matching. Like llama.cpp, the text between two
/// matches (if any) is also a piece, and a family with several regexes applies them in
/// turn, each one splitting the pieces the previous one produced.
public enum PreTokenizer: String, Sendable, CaseIterable {
    /// GPT-2: `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`.
    case gpt2
    /// Llama 3 (also LFM2 and others): `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`.
    case llama3
    /// Qwen 2: the Llama 3 regex with single digits, `\p{N}` instead of `\p{N}{1,3}`.
    case qwen2
    /// SmolLM / StarCoder: first `\p{N}` (every digit is a piece of its own), then GPT-2's regex.
    case smollm
    /// Falcon: `[\p{P}\$\+<=>\^~\|`]+`, then GPT-2's regex, then `[0-9][0-9][0-9]`.
    case falcon
    /// llama.cpp's default for BPE: `[\p{P}\$\+<=>\^~\|]+`, then GPT-2's regex, then
    /// `\p{N}+`, then `[0-9][0-9][0-9]`.
    case `default`

    /// How llama.cpp's `tokenizer.ggml.pre` names map to a regex family, and whether the
    /// name also turns on `ignore_merges` (a piece that is a whole token is taken as is),
    /// adds BOS by default, and cleans up spaces when decoding (`clean_spaces`).
    struct Settings {
        var preTokenizer: PreTokenizer
        var ignoreMerges = false
        var addBOS = false
        var cleanSpaces = true
        var hasBOS = true
    }

    /// The settings llama.cpp (`llama_vocab::impl::load`) uses for a pre-tokenizer name;
    /// nil for names it does not know or whose regexes leap-ref does not implement.
    static func settings(forGGUFName name: String) -> Settings? {
        switch name {
        case "default":
            return Settings(preTokenizer: .default)
        case "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2":
            return Settings(preTokenizer: .llama3, ignoreMerges: true, addBOS: true)
        case "dbrx", "smaug-bpe":
            return Settings(preTokenizer: .llama3)
        case "glm4", "chatglm-bpe":
            return Settings(preTokenizer: .llama3, hasBOS: false)
        case "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0",
            "mellum", "jina-v1-en", "jina-v2-code", "roberta-bpe", "mpt", "olmo", "jais", "exaone4":
            return Settings(preTokenizer: .gpt2)
        case "trillion", "granite-docling":
            return Settings(preTokenizer: .gpt2, cleanSpaces: false)
        case "qwen2", "deepseek-r1-qwen", "kormo", "hunyuan", "grok-2":
            return Settings(preTokenizer: .qwen2, cleanSpaces: false)
        case "stablelm2", "megrez":
            return Settings(preTokenizer: .qwen2)
        case "smollm", "command-r":
            return Settings(preTokenizer: .smollm, cleanSpaces: false)
        case "starcoder", "refact", "codeshell", "exaone", "minerva-7b":
            return Settings(preTokenizer: .smollm)
        case "falcon":
            return Settings(preTokenizer: .falcon)
        default:
            return nil
        }
    }

    /// The `tokenizer.ggml.pre` names leap-ref accepts.
    public static let supportedGGUFNames: [String] = [
        "default", "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
        "dbrx", "smaug-bpe", "glm4", "chatglm-bpe", "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat",
        "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum", "jina-v1-en", "jina-v2-code", "roberta-bpe", "mpt",
        "olmo", "jais", "exaone4", "trillion", "granite-docling", "qwen2", "deepseek-r1-qwen", "kormo",
        "hunyuan", "grok-2", "stablelm2", "megrez", "smollm", "command-r", "starcoder", "refact", "codeshell",
        "exaone", "minerva-7b", "falcon"
    ]

    /// Splits code points `lo..<hi` of `text` into pieces and appends the end index of
    /// each piece to `ends` (pieces are contiguous and start at `lo`).
    func split(_ text: CodePoints, _ lo: Int, _ hi: Int, into ends: inout [Int32]) {
        text.values.withUnsafeBufferPointer { cps in
            text.flags.withUnsafeBufferPointer { flags in
                let scanner = Scanner(cps: cps, flags: flags)
                switch self {
                case .gpt2:
                    scanner.gpt2(lo, hi, &ends)
                case .llama3:
                    scanner.llama3(lo, hi, maxDigits: 3, &ends)
                case .qwen2:
                    scanner.llama3(lo, hi, maxDigits: 1, &ends)
                case .smollm:
                    // `\p{N}` isolates every digit; GPT-2's regex then runs on the text
                    // between digits (done in one pass, without an intermediate list).
                    var start = lo
                    for pos in lo..<hi where flags[pos] & UnicodeFlags.number != 0 {
                        scanner.gpt2(start, pos, &ends)
                        ends.append(Int32(pos + 1))
                        start = pos + 1
                    }
                    scanner.gpt2(start, hi, &ends)
                case .falcon, .default:
                    var stage1: [Int32] = []
                    scanner.punctuationRuns(lo, hi, withBacktick: self == .falcon, &stage1)
                    var stage2: [Int32] = []
                    scanner.forEachPiece(lo, stage1) { scanner.gpt2($0, $1, &stage2) }
                    if self == .default {
                        var stage3: [Int32] = []
                        scanner.forEachPiece(lo, stage2) { scanner.runs($0, $1, UnicodeFlags.number, &stage3) }
                        scanner.forEachPiece(lo, stage3) { scanner.asciiDigitTriples($0, $1, &ends) }
                    } else {
                        scanner.forEachPiece(lo, stage2) { scanner.asciiDigitTriples($0, $1, &ends) }
                    }
                }
            }
        }
    }
}

/// The scanners behind `PreTokenizer`. Positions are code point indices; a class test at
/// a position outside the current piece is false (as llama.cpp's `_get_flags` returns no
/// flags out of range).
private struct Scanner {
    let cps: UnsafeBufferPointer<UInt32>
    let flags: UnsafeBufferPointer<UInt8>

    static let L = UnicodeFlags.letter
    static let N = UnicodeFlags.number
    static let W = UnicodeFlags.whitespace
    static let P = UnicodeFlags.punctuation
    /// Marks "a code point is present" (llama.cpp's `flags.as_uint() != 0`).
    static let present: UInt8 = 0x80

    @inline(__always)
    func f(_ pos: Int, _ hi: Int) -> UInt8 {
        pos < hi ? flags[pos] | Scanner.present : 0
    }

    @inline(__always)
    func add(_ end: Int, _ prevEnd: inout Int, _ ends: inout [Int32]) {
        if end > prevEnd {
            ends.append(Int32(end))
            prevEnd = end
        }
    }

    func forEachPiece(_ lo: Int, _ ends: [Int32], _ body: (Int, Int) -> Void) {
        var start = lo
        for end in ends {
            body(start, Int(end))
            start = Int(end)
        }
    }

    /// `'s|'t|'m|'d` then `'re|'ve|'ll` at `pos`; returns the match length or 0.
    @inline(__always)
    func contraction(_ pos: Int, _ hi: Int, caseInsensitive: Bool) -> Int {
        guard cps[pos] == 0x27, pos + 1 < hi else { return 0 }
        var next = cps[pos + 1]
        if caseInsensitive, next >= 0x41, next <= 0x5A { next += 0x20 }
        if next == 0x73 || next == 0x74 || next == 0x6D || next == 0x64 { return 2 }  // s t m d
        guard pos + 2 < hi else { return 0 }
        var next2 = cps[pos + 2]
        if caseInsensitive, next2 >= 0x41, next2 <= 0x5A { next2 += 0x20 }
        if (next == 0x72 && next2 == 0x65) || (next == 0x76 && next2 == 0x65) || (next == 0x6C && next2 == 0x6C) {
            return 3  // re ve ll
        }
        return 0
    }

    /// GPT-2's regex `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`.
    func gpt2(_ lo: Int, _ hi: Int, _ ends: inout [Int32]) {
        let L = Scanner.L, N = Scanner.N, W = Scanner.W
        var pos = lo
        var prevEnd = lo
        while pos < hi {
            let c = cps[pos]
            let fl = f(pos, hi)
            let k = contraction(pos, hi, caseInsensitive: false)
            if k > 0 {
                pos += k
                add(pos, &prevEnd, &ends)
                continue
            }
            let f2 = c == 0x20 ? f(pos + 1, hi) : fl
            let skipSpace = c == 0x20 ? 1 : 0
            if f2 & L != 0 {  // ` ?\p{L}+`
                pos += skipSpace + 1
                while f(pos, hi) & L != 0 { pos += 1 }
                add(pos, &prevEnd, &ends)
                continue
            }
            if f2 & N != 0 {  // ` ?\p{N}+`
                pos += skipSpace + 1
                while f(pos, hi) & N != 0 { pos += 1 }
                add(pos, &prevEnd, &ends)
                continue
            }
            if f2 & (W | L | N) == 0 && f2 != 0 {  // ` ?[^\s\p{L}\p{N}]+`
                pos += skipSpace + 1
                while true {
                    let g = f(pos, hi)
                    if g == 0 || g & (W | L | N) != 0 { break }
                    pos += 1
                }
                add(pos, &prevEnd, &ends)
                continue
            }
            var spaces = 0
            while f(pos + spaces, hi) & W != 0 { spaces += 1 }
            if spaces > 1 && pos + spaces < hi {  // `\s+(?!\S)`: leave one space for the next piece
                pos += spaces - 1
                add(pos, &prevEnd, &ends)
                continue
            }
            if spaces > 0 {  // `\s+`
                pos += spaces
                add(pos, &prevEnd, &ends)
                continue
            }
            pos += 1
            add(pos, &prevEnd, &ends)
        }
    }

    /// Llama 3's regex (and Qwen 2's, with `maxDigits` 1):
    /// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,maxDigits}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`.
    func llama3(_ lo: Int, _ hi: Int, maxDigits: Int, _ ends: inout [Int32]) {
        let L = Scanner.L, N = Scanner.N, W = Scanner.W
        var pos = lo
        var prevEnd = lo
        while pos < hi {
            let c = cps[pos]
            let fl = f(pos, hi)
            let k = contraction(pos, hi, caseInsensitive: true)
            if k > 0 {
                pos += k
                add(pos, &prevEnd, &ends)
                continue
            }
            // `[^\r\n\p{L}\p{N}]?\p{L}+`
            if !(c == 0x0D || c == 0x0A || fl & N != 0) {
                if fl & L != 0 || f(pos + 1, hi) & L != 0 {
                    pos += 1
                    while f(pos, hi) & L != 0 { pos += 1 }
                    add(pos, &prevEnd, &ends)
                    continue
                }
            }
            // `\p{N}{1,maxDigits}`
            if fl & N != 0 {
                var start = pos
                while f(pos, hi) & N != 0 {
                    pos += 1
                    if pos - start >= maxDigits {
                        add(pos, &prevEnd, &ends)
                        start = pos
                    }
                }
                add(pos, &prevEnd, &ends)
                continue
            }
            // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
            let f2 = c == 0x20 ? f(pos + 1, hi) : fl
            if f2 & (W | L | N) == 0 && fl != 0 {
                if c == 0x20 { pos += 1 }
                while true {
                    let g = f(pos, hi)
                    if g == 0 || g & (W | L | N) != 0 { break }
                    pos += 1
                }
                while pos < hi && (cps[pos] == 0x0D || cps[pos] == 0x0A) { pos += 1 }
                add(pos, &prevEnd, &ends)
                continue
            }
            var spaces = 0
            var lastNewlineEnd = -1
            while f(pos + spaces, hi) & W != 0 {
                let s = cps[pos + spaces]
                if s == 0x0D || s == 0x0A { lastNewlineEnd = pos + spaces + 1 }
                spaces += 1
            }
            if lastNewlineEnd >= 0 {  // `\s*[\r\n]+`
                pos = lastNewlineEnd
                add(pos, &prevEnd, &ends)
                continue
            }
            if spaces > 1 && pos + spaces < hi {  // `\s+(?!\S)`
                pos += spaces - 1
                add(pos, &prevEnd, &ends)
                continue
            }
            if spaces > 0 {  // `\s+`
                pos += spaces
                add(pos, &prevEnd, &ends)
                continue
            }
            pos += 1
            add(pos, &prevEnd, &ends)
        }
    }

    /// A regex `[class]+`: each maximal run of class `cls` is a piece, and so is each run
    /// of other code points.
    func runs(_ lo: Int, _ hi: Int, _ cls: UInt8, _ ends: inout [Int32]) {
        var prevEnd = lo
        var pos = lo
        while pos < hi {
            if flags[pos] & cls != 0 {
                add(pos, &prevEnd, &ends)
                while pos < hi && flags[pos] & cls != 0 { pos += 1 }
                add(pos, &prevEnd, &ends)
            } else {
                pos += 1
            }
        }
        add(hi, &prevEnd, &ends)
    }

    /// `[\p{P}\$\+<=>\^~\|]+` (with a backtick too for Falcon).
    func punctuationRuns(_ lo: Int, _ hi: Int, withBacktick: Bool, _ ends: inout [Int32]) {
        @inline(__always) func member(_ i: Int) -> Bool {
            if flags[i] & Scanner.P != 0 { return true }
            switch cps[i] {
            case 0x24, 0x2B, 0x3C, 0x3D, 0x3E, 0x5E, 0x7E, 0x7C: return true  // $ + < = > ^ ~ |
            case 0x60: return withBacktick
            default: return false
            }
        }
        var prevEnd = lo
        var pos = lo
        while pos < hi {
            if member(pos) {
                add(pos, &prevEnd, &ends)
                while pos < hi && member(pos) { pos += 1 }
                add(pos, &prevEnd, &ends)
            } else {
                pos += 1
            }
        }
        add(hi, &prevEnd, &ends)
    }

    /// `[0-9][0-9][0-9]`: non-overlapping triples of ASCII digits, leftmost first.
    func asciiDigitTriples(_ lo: Int, _ hi: Int, _ ends: inout [Int32]) {
        @inline(__always) func digit(_ i: Int) -> Bool { cps[i] >= 0x30 && cps[i] <= 0x39 }
        var prevEnd = lo
        var pos = lo
        while pos + 3 <= hi {
            if digit(pos) && digit(pos + 1) && digit(pos + 2) {
                add(pos, &prevEnd, &ends)
                add(pos + 3, &prevEnd, &ends)
                pos += 3
            } else {
                pos += 1
            }
        }
        add(hi, &prevEnd, &ends)
    }
}
