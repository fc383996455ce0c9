import ArgumentParser
import Foundation
import Kernels
import Models
import Sampling

/// `leap-ref bench`: prompt-processing and generation speed, in llama-bench's layout.
struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Measure prompt processing (pp) and generation (tg) speed, printed as llama-bench's markdown table.",
        discussion: """
            pp N: one batch of N tokens evaluated from an empty cache (tokens/s over the batch). \
            tg N: N tokens evaluated one at a time from an empty cache (tokens/s over the N), \
            followed by the bytes of weights one decoded token reads (of a mixture-of-experts \
            model, only the experts it is routed to), the memory bandwidth that rate implies, and \
            its share of the machine's read bandwidth (measured right after, on the same threads). \
            With --parallel B1,B2,...: for each B, B sequences each prefill a -p token prompt, then \
            generate -n tokens together, one batched step per token; the table gives the \
            generated tokens of all sequences per second of the generation phase (aggregate) and \
            of one sequence (per-sequence). \
            With -d N, each pp and tg test runs after N tokens already in the cache (llama-bench's \
            -d): the N tokens are evaluated before the test, untimed, and kept between runs. \
            Token ids are fixed pseudo-random ids; each test runs once to warm up, then -r times.
            With --image FILE or --audio FILE.wav: the media encoder of --mmproj (or of the \
            mmproj-*.gguf beside --model) instead, its two stages timed apart: preprocessing (an \
            image's decoding, resizing, slicing and normalization; a clip's WAV decoding to \
            16 kHz and log-mel spectrogram) and the encoder (every slice, or the mel frames); \
            one warm-up, then -r runs, medians reported in ms, with the total per image or per \
            second of audio and the positions (embedding rows) produced; --json prints them as \
            one JSON object.
            With --speech (a speech model with its --vocoder and --audio-tokenizer): a spoken \
            reply timed part by part: the -p token prompt's prefill, then -n audio frames, each \
            the depthformer's 8 codes, the detokenizer's samples and the backbone's step on the \
            frame's embedding; the time to the first sample, the real-time factor (compute \
            seconds per second of speech); one warm-up, then -r runs, medians.
            """
    )

    @Option(help: "The GGUF model (default: the model installed by scripts/setup.sh).")
    var model: String?

    @Option(name: .shortAndLong, help: "Prompt length for the pp test (0 to skip).")
    var prompt = 512

    @Option(name: .shortAndLong, help: "Tokens to generate for the tg test (0 to skip).")
    var n = 128

    @Option(name: .shortAndLong, help: "Threads (default: the cores granted to the process: its affinity mask and CPU quota).")
    var threads: Int?

    @Option(name: .shortAndLong, help: "Repetitions of each test.")
    var repetitions = 3

    @Option(name: .shortAndLong, help: "Tokens already in the cache before each pp and tg test (llama-bench's -d).")
    var depth = 0

    @Option(help: "Batched decoding: comma-separated numbers of sequences generating together (e.g. 1,2,4,8).")
    var parallel: String?

    @Option(
        name: .customLong("cache-type"),
        help: "The attention cache's type: f32 (exact; the default) or f16 (half the bytes; llama-bench's default, -ctk f16 -ctv f16).")
    var cacheType: KVCacheType = .f32

    @Option(help: "The media encoder, an mmproj-*.gguf file (default: the one beside --model).")
    var mmproj: String?

    @Option(help: "Time the vision encoder on this image (JPEG or PNG).")
    var image: String?

    @Option(help: "Time the audio encoder on this WAV file.")
    var audio: String?

    @Flag(help: "With --image, --audio or --speech: print the measurements as one JSON object.")
    var json = false

    @Flag(help: "Time speech out instead: -p prompt tokens, then -n audio frames through the depthformer and the detokenizer.")
    var speech = false

    @Option(help: "With --speech: the vocoder-*.gguf file (default: the one beside the model).")
    var vocoder: String?

    @Option(
        name: .customLong("audio-tokenizer"),
        help: "With --speech: the tokenizer-*.gguf audio detokenizer (default: the one beside the model).")
    var audioTokenizer: String?

    @Option(name: .customLong("vocoder-weights"), help: "With --speech: stored (8-bit products, serve's default) or f32.")
    var vocoderWeights = "stored"

    func run() async throws {
        try await runReportingErrors {
            if speech { return try runSpeech() }
            if image != nil || audio != nil { return try runMedia() }
            if mmproj != nil || json { throw CLIError("--mmproj and --json go with --image, --audio or --speech") }
            guard prompt >= 0, n >= 0, depth >= 0, repetitions >= 1 else { throw CLIError("-p, -n and -d must be >= 0 and -r >= 1") }
            guard depth == 0 || parallel == nil else { throw CLIError("-d applies to the pp and tg tests, not to --parallel") }
            let path = try ModelCache.resolve(model)
            let threadCount = max(1, threads ?? ThreadPool.defaultThreads)
            BLAS.setThreads(threadCount)
            let lm = try TransformerModel(path: path, threads: threadCount)
            let hp = lm.hyperparameters
            var rng = SplitMix64(seed: 42)
            let tokens = (0..<max(prompt, n)).map { _ in Int(rng.next() % UInt64(hp.vocabularySize)) }
            let depthTokens = (0..<depth).map { _ in Int(rng.next() % UInt64(hp.vocabularySize)) }

            let sizeText = formatBytes(lm.file.fileSize).replacingOccurrences(of: " ", with: " ")
            let params = String(format: "%.2f M", Double(lm.parameterCount) / 1e6)
            let name = "\(hp.architecture) \(Bench.typeLabel(lm))"
            if let parallel {
                let counts = try parallel.split(separator: ",").map {
                    guard let b = Int($0.trimmingCharacters(in: .whitespaces)), b >= 1, b <= 256 else {
                        throw CLIError("--parallel takes numbers of sequences from 1 to 256, e.g. 1,2,4,8")
                    }
                    return b
                }
                guard n > 0 else { throw CLIError("--parallel needs -n > 0 tokens to generate") }
                print("| model | size | params | backend | threads | parallel | aggregate t/s | per-sequence t/s |")
                print("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
                for b in counts {
                    let rates = try Bench.parallelRates(
                        lm, sequences: b, prompt: prompt, generate: n, tokens: tokens, repetitions: repetitions, cacheType: cacheType)
                    let mean = rates.reduce(0, +) / Double(rates.count)
                    let sd =
                        rates.count > 1 ? (rates.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(rates.count - 1)).squareRoot() : 0
                    print(
                        "| \(name) | \(sizeText) | \(params) | CPU | \(threadCount) | \(b) | "
                            + "\(String(format: "%.2f ± %.2f", mean, sd)) | \(String(format: "%.2f", mean / Double(b))) |")
                }
                print(
                    "\nkernels: \(KernelBuild.description); \(cacheType) cache; "
                        + "batched steps: -p \(prompt) prompt per sequence, -n \(n) tokens each")
                return
            }
            let session = InferenceSession(model: lm, contextLength: depth + max(prompt, n) + 1, kvCacheType: cacheType)
            // The session at `depth`: the depth tokens kept from the last run when its caches
            // still hold them (a sliding-window ring may not), else evaluated again. Untimed.
            func atDepth() throws {
                if depth > 0, session.position >= depth, session.truncate(to: depth) == depth { return }
                session.reset()
                if depth > 0 { try session.evaluate(depthTokens) }
            }
            let suffix = depth > 0 ? " @ d\(depth)" : ""
            print("| model | size | params | backend | threads | test | t/s |")
            print("| --- | ---: | ---: | --- | ---: | ---: | ---: |")
            func row(_ test: String, _ rates: [Double]) {
                let mean = rates.reduce(0, +) / Double(rates.count)
                let sd = rates.count > 1 ? (rates.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(rates.count - 1)).squareRoot() : 0
                print("| \(name) | \(sizeText) | \(params) | CPU | \(threadCount) | \(test) | \(String(format: "%.2f ± %.2f", mean, sd)) |")
            }
            if prompt > 0 {
                var rates: [Double] = []
                for rep in 0...repetitions {
                    try atDepth()
                    let t0 = DispatchTime.now().uptimeNanoseconds
                    try session.evaluate(Array(tokens[0..<prompt]))
                    let dt = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
                    if rep > 0 { rates.append(Double(prompt) / dt) }
                }
                row("pp\(prompt)" + suffix, rates)
            }
            if n > 0 {
                var rates: [Double] = []
                for rep in 0...repetitions {
                    try atDepth()
                    let t0 = DispatchTime.now().uptimeNanoseconds
                    for i in 0..<n { try session.evaluate([tokens[i]]) }
                    let dt = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
                    if rep > 0 { rates.append(Double(n) / dt) }
                }
                row("tg\(n)" + suffix, rates)
                let ceiling = MemoryBandwidth.measureRead(pool: lm.pool)
                print("\n" + Bench.decodeTraffic(lm, tokensPerSecond: rates.reduce(0, +) / Double(rates.count), readCeiling: ceiling))
            }
            print("\nkernels: \(KernelBuild.description); \(cacheType) cache; OpenBLAS for prefill")
        }
    }

    /// Aggregate generation speeds (tokens of all sequences per second) of `sequences`
    /// sequences that each prefill `prompt` tokens (in steps of one sequence's chunk) and
    /// then generate `generate` tokens together: one warm-up run, then `repetitions`.
    static func parallelRates(
        _ lm: TransformerModel, sequences b: Int, prompt: Int, generate: Int, tokens: [Int], repetitions: Int,
        cacheType: KVCacheType = .f32
    ) throws -> [Double] {
        let chunk = 512
        let batch = BatchedSession(
            model: lm, slots: b, contextLength: prompt + generate + 1, maxStepTokens: max(chunk, b), kvCacheType: cacheType)
        var rates: [Double] = []
        for rep in 0...repetitions {
            let sequences = try (0..<b).map { _ in try batch.open() }
            for (s, sequence) in sequences.enumerated() {
                // Each sequence its own prompt: the fixed ids rotated by the sequence.
                let ids = (0..<prompt).map { tokens[($0 + 7 * s) % tokens.count] }
                var start = 0
                while start < prompt {
                    let end = min(prompt, start + chunk)
                    try batch.step([.init(sequence, Array(ids[start..<end]))])
                    start = end
                }
            }
            let t0 = DispatchTime.now().uptimeNanoseconds
            for i in 0..<generate {
                try batch.step(sequences.enumerated().map { s, sequence in .init(sequence, [tokens[(i + 7 * s) % tokens.count]]) })
            }
            let dt = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
            if rep > 0 { rates.append(Double(b * generate) / dt) }
            for sequence in sequences { try batch.close(sequence) }
        }
        return rates
    }

    /// "Q4_0" for a file whose large matrices are all one type, else the file type number.
    static func typeLabel(_ lm: TransformerModel) -> String {
        let big = lm.file.tensors.filter {
            $0.shape.count == 2 && $0.shape[0] % 32 == 0 && !$0.name.hasPrefix("token_embd") && $0.name != "output.weight"
        }
        let types = Set(big.map(\.type))
        if types.count == 1 { return types.first!.name.uppercased() }
        return "mixed"
    }

    /// "weights read per decoded token: ...": the bytes of weights one decoded token reads
    /// (`TransformerModel.weightBytesPerToken`: a mixture-of-experts layer counts only the
    /// router and the experts a token is routed to), the bandwidth at `tokensPerSecond`,
    /// and what share that is of `readCeiling` (bytes/s, `MemoryBandwidth.measureRead` on
    /// the model's threads): the distance to the memory roof.
    static func decodeTraffic(_ lm: TransformerModel, tokensPerSecond: Double, readCeiling: Double) -> String {
        let bytes = lm.weightBytesPerToken
        let stored = lm.file.tensors.reduce(0) { $0 + $1.byteCount }
        let rate = Double(bytes) * tokensPerSecond
        return "weights read per decoded token: \(formatBytes(bytes)) of \(formatBytes(stored)) stored; "
            + String(format: "at %.2f t/s that is %.2f GB/s, ", tokensPerSecond, rate / 1e9)
            + String(
                format: "%.0f%% of the memory read ceiling measured now on %d threads (%.2f GB/s)", 100 * rate / readCeiling,
                lm.pool.threads, readCeiling / 1e9)
    }
}
