import ArgumentParser
import Foundation
import GGUF
import Kernels
import Models

/// `leap-ref quantize`: re-encodes a GGUF's weight matrices as another ggml type.
struct Quantize: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Re-encode a GGUF's weight matrices as another type.",
        discussion: """
            Every 2-D tensor whose row length is a multiple of 32 is dequantized and encoded as \
            --type; every other tensor (norms, odd shapes) is written as F32. Metadata is copied \
            in order with general.file_type updated. Deterministic, and for the types it shares \
            with gguf-py's reference quantizers the output is byte-identical to \
            requant_gguf.py's (see docs/quantization.md).
            """
    )

    @Argument(help: "Input GGUF file.")
    var input: String

    @Argument(help: "Output GGUF file.")
    var output: String

    @Option(help: "Target type: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0 or q5_1.")
    var type: String

    func run() async throws {
        try await runReportingErrors {
            guard let target = GGMLType(name: type), Requantizer.targets.contains(target) else {
                throw CLIError("unsupported --type '\(type)'; use one of \(Requantizer.targets.map(\.name).joined(separator: ", "))")
            }
            guard input != output else { throw CLIError("the output must be another file than the input") }
            let file = try GGUFFile(path: input)
            let writer = try Requantizer.requantize(file, to: target)
            try writer.write(to: output)
            let out = try GGUFFile(path: output)
            FileHandle.standardError.write(Data("wrote \(output): \(out.tensors.count) tensors, \(formatBytes(out.fileSize))\n".utf8))
        }
    }
}
