import ArgumentParser
import Foundation
import GGUF
import Kernels
import Quantization

/// `leap-ref quantize`: re-encodes a GGUF's weight matrices as another ggml type.
struct Quantize: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Re-encode a GGUF's weight matrices as another type.",
        discussion: """
            f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1: every 2-D tensor whose row length \
            is a multiple of 32 is dequantized and encoded as --type, every other tensor \
            (norms, odd shapes) is written as F32, and metadata is copied in order with \
            general.file_type updated; byte-identical to gguf-py's requant_gguf.py. \
            q4_k_m, q5_k_m, q6_k: llama-quantize's tensor-type mixtures of the same names \
            (K-quants, with Q5_0/Q5_1/Q8_0 for rows that are not multiples of 256); q4_k, q5_k: \
            every matrix in that type (llama-quantize --pure). These follow llama-quantize's \
            file layout, and from an F32 input the output is byte-identical to its output \
            (see docs/kernels.md). Deterministic whatever the thread count.
            """
    )

    @Argument(help: "Input GGUF file.")
    var input: String

    @Argument(help: "Output GGUF file.")
    var output: String

    @Option(help: "Target: \(QuantizationScheme.names.joined(separator: ", ")).")
    var type: String

    @Option(name: .shortAndLong, help: "Threads (default: the cores granted to the process: its affinity mask and CPU quota).")
    var threads: Int?

    func run() async throws {
        try await runReportingErrors {
            guard let scheme = QuantizationScheme(name: type) else {
                throw CLIError("unsupported --type '\(type)'; use one of \(QuantizationScheme.names.joined(separator: ", "))")
            }
            guard input != output else { throw CLIError("the output must be another file than the input") }
            let file = try GGUFFile(path: input)
            let pool = ThreadPool(threads: max(1, threads ?? ThreadPool.defaultThreads))
            let writer = try Requantizer.requantize(file, to: scheme, pool: pool)
            try writer.write(to: output)
            let out = try GGUFFile(path: output)
            FileHandle.standardError.write(Data("wrote \(output): \(out.tensors.count) tensors, \(formatBytes(out.fileSize))\n".utf8))
        }
    }
}
