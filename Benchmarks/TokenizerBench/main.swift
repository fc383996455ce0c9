// TokenizerBench: encode and decode throughput of a model's tokenizer on ~1 MB of text.
//
//   swift run -c release TokenizerBench MODEL.gguf [MEGABYTES] [--stress]
//
// --stress also times degenerate inputs of the same size (one letter repeated: a single
// pre-token piece; only spaces; only digits; only emoji; a special token repeated), which
// must stay linear or n log n.
//
// The text is generated deterministically: varied English paragraphs with numbers,
// punctuation, a little code, some non-ASCII (accents, CJK, emoji), stitched together by
// a fixed pseudo-random sequence so that words repeat as in real text but the text is not
// one paragraph copied over and over.

import Foundation
import GGUF
import Tokenizers

let paragraphs = [
    "The quick brown fox jumps over the lazy dog. In 1987, 42 foxes were counted in the valley; by 2023 there were 1,204 of them, an increase of roughly 2766.7%.",
    "Hello, world! It's a fine day, isn't it? We'll see whether the results hold up: 3.14159 is close to pi, and e ≈ 2.71828 (to six figures).",
    "Machine learning models turn text into tokens before they can read it. A tokenizer that gets one id wrong can silently ruin every answer the model gives.",
    "func add(_ a: Int, _ b: Int) -> Int { return a + b }  // adds two numbers\n    let x = add(17, 25)\n    print(\"x = \\(x)\")",
    "Café, naïve, résumé and façade keep their accents; Straße and Øresund keep their letters. 東京 is Tokyo, and 🙂 is a smile.",
    "Revenue rose from $4.2 million in Q1 to $5.7 million in Q2 (up 35.7%), while costs fell by 12% — a good quarter by any measure.",
    "\"Don't panic,\" she said. \"We've got time: the train leaves at 10:45, and it's only 9:30 now.\" He wasn't so sure.",
    "Section 3.2 describes the method; Table 4 lists the 16 datasets, and Figure 7 shows accuracy versus model size (125M to 1.3B parameters)."
]

func makeText(bytes target: Int) -> String {
    var text = ""
    var state: UInt64 = 0x9E37_79B9_7F4A_7C15
    var index = 0
    while text.utf8.count < target {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        index = Int((state >> 33) % UInt64(paragraphs.count))
        text += paragraphs[index]
        text += (state >> 20) & 3 == 0 ? "\n\n" : " "
    }
    return text
}

/// CPU time of the calling thread: on a shared machine, wall time also counts the time
/// other processes hold the core.
func threadCPUSeconds() -> Double {
    var t = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
    return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
}

let stress = CommandLine.arguments.contains("--stress")
let arguments = CommandLine.arguments.filter { $0 != "--stress" }
guard arguments.count >= 2 else {
    FileHandle.standardError.write(Data("usage: TokenizerBench MODEL.gguf [MEGABYTES] [--stress]\n".utf8))
    exit(2)
}
let megabytes = arguments.count >= 3 ? Double(arguments[2]) ?? 1 : 1

do {
    let openStart = Date()
    let file = try GGUFFile(path: arguments[1])
    let openSeconds = Date().timeIntervalSince(openStart)
    let loadStart = Date()
    let loadCPUStart = threadCPUSeconds()
    let tokenizer = try Tokenizer(gguf: file)
    let loadSeconds = Date().timeIntervalSince(loadStart)
    let loadCPUSeconds = threadCPUSeconds() - loadCPUStart
    let text = makeText(bytes: Int(megabytes * 1_000_000))
    let bytes = Double(text.utf8.count)

    func best(_ runs: Int, _ body: () -> Void) -> Double {
        var best = Double.infinity
        for _ in 0..<runs {
            let start = DispatchTime.now().uptimeNanoseconds
            body()
            best = min(best, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
        }
        return best
    }

    var ids: [TokenID] = []
    let encodeSeconds = best(10) { ids = tokenizer.encode(text, addSpecial: false, parseSpecial: false) }
    let encodeSpecialSeconds = best(10) { _ = tokenizer.encode(text, addSpecial: true, parseSpecial: true) }
    var decoded = ""
    let decodeSeconds = best(10) { decoded = tokenizer.decode(ids, cleanSpaces: false) }
    let streamSeconds = best(5) {
        var detokenizer = StreamingDetokenizer(tokenizer: tokenizer)
        var total = 0
        for id in ids { total += detokenizer.append(id).utf8.count }
        total += detokenizer.finish().utf8.count
        precondition(total > 0)
    }

    let pre = tokenizer.preTokenizer?.rawValue ?? "none"
    print("model:      \(arguments[1])")
    print(
        "tokenizer:  \(tokenizer.model.rawValue), pre-tokenizer \(pre) ('\(tokenizer.preTokenizerName)'), \(tokenizer.vocabularySize) tokens"
    )
    print(
        "load:       GGUF opened in \(String(format: "%.0f", openSeconds * 1000)) ms, tokenizer built in \(String(format: "%.0f", loadSeconds * 1000)) ms"
            + " (\(String(format: "%.0f", loadCPUSeconds * 1000)) ms of CPU)"
    )
    print("text:       \(Int(bytes)) bytes -> \(ids.count) tokens (\(String(format: "%.2f", bytes / Double(ids.count))) bytes/token)")
    print("round trip: \(decoded == text ? "exact" : "differs")")
    print("")
    print("| operation                         |    MB/s | ms per MB |")
    print("|-----------------------------------|--------:|----------:|")
    for (name, seconds) in [
        ("encode", encodeSeconds), ("encode (BOS, parse special)", encodeSpecialSeconds),
        ("decode", decodeSeconds), ("streaming decode (token by token)", streamSeconds)
    ] {
        let mbps = bytes / 1e6 / seconds
        print(
            "| \(name.padding(toLength: 33, withPad: " ", startingAt: 0)) | \(String(format: "%7.1f", mbps)) | \(String(format: "%9.1f", 1000 / mbps)) |"
        )
    }

    if stress {
        let size = Int(megabytes * 1_000_000)
        let special = tokenizer.tokenText(tokenizer.eosID ?? 0)
        let cases: [(String, String, Bool)] = [
            ("one letter repeated", String(repeating: "a", count: size), false),
            ("spaces only", String(repeating: " ", count: size), false),
            ("digits only", String(repeating: "1234567890", count: size / 10), false),
            ("emoji only", String(repeating: "🙂", count: size / 4), false),
            ("'\(special)' repeated, parsed", String(repeating: special, count: max(1, size / max(1, special.utf8.count))), true)
        ]
        print("")
        print("| degenerate input (\(size) bytes)          |  seconds | tokens |")
        print("|-------------------------------------------|---------:|-------:|")
        for (name, text, parse) in cases {
            var n = 0
            let seconds = best(1) { n = tokenizer.encode(text, addSpecial: false, parseSpecial: parse).count }
            print(
                "| \(name.padding(toLength: 41, withPad: " ", startingAt: 0)) | \(String(format: "%8.3f", seconds)) | \(String(format: "%6d", n)) |"
            )
        }
    }
} catch {
    FileHandle.standardError.write(Data("TokenizerBench: \(error)\n".utf8))
    exit(1)
}
