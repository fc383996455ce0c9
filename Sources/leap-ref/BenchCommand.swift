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
            model, only the experts it is routed to) and the memory bandwidth that rate implies. \
            Token ids are fixed pseudo-random ids; each test runs once to warm up, then -r times.
            """
    )

    @Option(help: "The GGUF model (default: the model installed by scripts/setup.sh).")
    var model: String?

    @Option(name: .shortAndLong, help: "Prompt length for the pp test (0 to skip).")
    var prompt = 512

    @Option(name: .shortAndLong, help: "Tokens to generate for the tg test (0 to skip).")
    var n = 128

    @Option(name: .shortAndLong, help: "Threads (default: all cores).")
    var threads: Int?

    @Option(name: .shortAndLong, help: "Repetitions of each test.")
    var repetitions = 3

    func run() async throws {
        try await runReportingErrors {
            guard prompt >= 0, n >= 0, repetitions >= 1 else { throw CLIError("-p and -n must be >= 0 and -r >= 1") }
            let path = try ModelCache.resolve(model)
            let threadCount = max(1, threads ?? ThreadPool.defaultThreads)
            BLAS.setThreads(threadCount)
            let lm = try TransformerModel(path: path, threads: threadCount)
            let hp = lm.hyperparameters
            let session = InferenceSession(model: lm, contextLength: max(prompt, n) + 1)
            var rng = SplitMix64(seed: 42)
            let tokens = (0..<max(prompt, n)).map { _ in Int(rng.next() % UInt64(hp.vocabularySize)) }

            let sizeText = formatBytes(lm.file.fileSize).replacingOccurrences(of: " ", with: " ")
            let params = String(format: "%.2f M", Double(lm.parameterCount) / 1e6)
            let name = "\(hp.architecture) \(Bench.typeLabel(lm))"
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
                    session.reset()
                    let t0 = DispatchTime.now().uptimeNanoseconds
                    try session.evaluate(Array(tokens[0..<prompt]))
                    let dt = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
                    if rep > 0 { rates.append(Double(prompt) / dt) }
                }
                row("pp\(prompt)", rates)
            }
            if n > 0 {
                var rates: [Double] = []
                for rep in 0...repetitions {
                    session.reset()
                    let t0 = DispatchTime.now().uptimeNanoseconds
                    for i in 0..<n { try session.evaluate([tokens[i]]) }
                    let dt = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
                    if rep > 0 { rates.append(Double(n) / dt) }
                }
                row("tg\(n)", rates)
                print("\n" + Bench.decodeTraffic(lm, tokensPerSecond: rates.reduce(0, +) / Double(rates.count)))
            }
            print("\nkernels: \(KernelBuild.description); OpenBLAS for prefill")
        }
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
    /// router and the experts a token is routed to), and the bandwidth at `tokensPerSecond`.
    static func decodeTraffic(_ lm: TransformerModel, tokensPerSecond: Double) -> String {
        let bytes = lm.weightBytesPerToken
        let stored = lm.file.tensors.reduce(0) { $0 + $1.byteCount }
        return "weights read per decoded token: \(formatBytes(bytes)) of \(formatBytes(stored)) stored; "
            + String(format: "at %.2f t/s that is %.2f GB/s", tokensPerSecond, Double(bytes) * tokensPerSecond / 1e9)
    }
}
