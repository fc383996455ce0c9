import GGUF
import Kernels
import Models
import Quantization
import TestSupport
import Testing

/// SmolLM2 in the K-quant mixtures: byte for byte what llama-quantize writes from the same
/// F32 file, and a Q4_K_M that runs through the engine close to the F32 model.
@Suite(.serialized) struct KQuantModelTests {
    static var f32Path: String { TestFixtures.modelCache + "/SmolLM2-135M-Instruct.F32.gguf" }

    /// sha256 of `llama-quantize [--pure] SmolLM2-135M-Instruct.F32.gguf OUT TYPE` (llama.cpp
    /// from llama-cpp-python 0.3.36's sources, no importance matrix).
    static let llamaQuantizeOutputs: [(String, String)] = [
        ("q4_k_m", "dc0f3a02e821146247a0af6895adf9872124f368682cb110cb9ed09ff2a9f9f1"),
        ("q5_k_m", "8170c7ef444692b3b2fe63459c326def0358807ef9be6e3cb020efb86a71015e"),
        ("q6_k", "a969ae2086dd4945a7c61594bf72b2bcc3b7df8571c92aed8f213918673a7f80"),
        ("q4_k", "304d64fda00952e8236375e9d46bb21b7c9602b7138ffd2bc8e5d2ee32ca1fdc"),
        ("q5_k", "5c114ace0dfc7eb930a021188bae224532e9420e5ae9588e78da82951f5b10f8")
    ]

    @Test(arguments: llamaQuantizeOutputs.map(\.0))
    func smolLM2IsByteIdenticalToLlamaQuantize(_ name: String) throws {
        let file = try GGUFFile(path: try TestFixtures.require(Self.f32Path))
        let scheme = try #require(QuantizationScheme(name: name))
        let image = try Requantizer.requantize(file, to: scheme, pool: ThreadPool(threads: 2)).serialize()
        #expect(SHA256.hex(image) == Self.llamaQuantizeOutputs.first { $0.0 == name }!.1)
    }

    /// Prompt tokens (SmolLM2's tokenizer): "The capital of France is Paris. ..." style text.
    static let tokens = [504, 3575, 282, 4649, 314, 7042, 30, 198, 198, 504, 1797, 1918, 553, 253, 2155, 28, 1069, 30]

    /// Mean over positions of mean |logit − F32 logit| over the F32 model's 10 best ids,
    /// and the positions (with an F32 top-2 margin above 1) whose top-1 differs.
    static func distance(_ logits: [[Float]], from reference: [[Float]]) -> (mean: Float, topMismatches: [Int]) {
        var total: Float = 0
        var mismatches: [Int] = []
        for (p, (row, ref)) in zip(logits, reference).enumerated() {
            let best = ref.indices.sorted { ref[$0] > ref[$1] }.prefix(10)
            total += best.map { abs(row[$0] - ref[$0]) }.reduce(0, +) / 10
            let margin = ref[best[best.startIndex]] - ref[best[best.startIndex + 1]]
            if margin > 1, row.indices.max(by: { row[$0] < row[$1] }) != best.first { mismatches.append(p) }
        }
        return (total / Float(logits.count), mismatches)
    }

    /// A SmolLM2 Q4_K_M made here (Q4_K and Q6_K feed-forward-down matrices, Q5_0 and Q8_0
    /// elsewhere) runs through the engine (integer prefill where the build has it) with
    /// logits close to the F32 model's: the same top-1 wherever F32's top-2 margin exceeds
    /// 1, a mean distance over F32's top-10 logits below 1 (measured: 0.72), and less than
    /// half the distance of the all-Q4_0 re-encoding of the same model (measured: 2.42,
    /// with 4 top-1 changes).
    @Test func smolLM2Q4KMRunsCloseToF32() throws {
        let f32File = try GGUFFile(path: try TestFixtures.require(Self.f32Path))
        let image = try Requantizer.requantize(f32File, to: .llamaQuantize(.q4_K_M, pure: false), pool: ThreadPool(threads: 2))
            .serialize()
        let q4KM = try GGUFFile(bytes: image)
        let types = Set(q4KM.tensors.map(\.type))
        #expect(types == [.f32, .q4_K, .q6_K, .q5_0, .q8_0])

        func logits(_ file: GGUFFile) throws -> [[Float]] {
            let session = InferenceSession(model: try TransformerModel(file: file, threads: 2), contextLength: 64)
            return try session.evaluateAllLogits(Self.tokens)
        }
        let reference = try logits(f32File)
        let ours = Self.distance(try logits(q4KM), from: reference)
        let q4_0 = Self.distance(
            try logits(GGUFFile(path: try TestFixtures.require(TestFixtures.modelCache + "/SmolLM2-135M-Instruct.Q4_0.gguf"))),
            from: reference)
        #expect(ours.topMismatches.isEmpty, "top-1 differs from F32 at positions \(ours.topMismatches)")
        #expect(ours.mean < 1, "Q4_K_M: mean distance \(ours.mean) from F32")
        #expect(ours.mean < 0.5 * q4_0.mean, "Q4_K_M \(ours.mean) vs Q4_0 \(q4_0.mean) from F32")
    }
}
