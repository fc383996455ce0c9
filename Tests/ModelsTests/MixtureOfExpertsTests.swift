import Foundation
import GGUF
import TestSupport
import Testing

@testable import Models

/// LFM2-MoE's router and the expert-sparse engine: which experts a token gets and with
/// what weight, that the experts no token chose are never multiplied, and what a decoded
/// token reads.
@Suite struct MixtureOfExpertsTests {
    static let path = TestFixtures.path("models/lfm2moe-tiny.gguf")

    static func sigmoid(_ x: Float) -> Float { 1 / (1 + exp(-x)) }

    /// Layer 2's block (8 experts, 2 used) with another bias, normalization and scale.
    static func block(bias: [Float], used: Int = 2, normalizes: Bool = true, scale: Float = 1) throws -> MixtureOfExperts {
        let model = try TransformerModel(path: path)
        let moe = try #require(model.weights.layers[2].mixtureOfExperts)
        return MixtureOfExperts(
            router: moe.router, selectionBias: bias, gate: moe.gate, up: moe.up, down: moe.down, used: used,
            normalizesWeights: normalizes, weightScale: scale)
    }

    static func route(_ moe: MixtureOfExperts, _ logits: [Float]) -> (experts: [Int], weights: [Float]) {
        var r = logits
        var experts = [Int](repeating: -1, count: moe.used), weights = [Float](repeating: .nan, count: moe.used)
        moe.route(&r, experts: &experts, weights: &weights)
        return (experts, weights)
    }

    @Test func theBiasPicksTheSigmoidsWeigh() throws {
        let logits: [Float] = [0, 2, -1, 1, 0, 0, 3, -2]
        // Without a bias: the two largest router outputs (6, then 1).
        let plain = Self.route(try Self.block(bias: [Float](repeating: 0, count: 8)), logits)
        #expect(plain.experts == [6, 1])
        // A bias of +5 on expert 2 and -5 on expert 6: expert 2 (σ(-1) + 5) first, then 1;
        // the weights are the unbiased sigmoids σ(-1) and σ(2), normalized to sum 1.
        let biased = try Self.block(bias: [0, 0, 5, 0, 0, 0, -5, 0])
        let (experts, weights) = Self.route(biased, logits)
        #expect(experts == [2, 1])
        let p2 = Self.sigmoid(-1), p1 = Self.sigmoid(2)
        #expect(abs(weights[0] - p2 / (p2 + p1)) < 1e-6 && abs(weights[1] - p1 / (p2 + p1)) < 1e-6)
        #expect(abs(weights[0] + weights[1] - 1) < 1e-6)
        // Not normalized: the sigmoids themselves; a scale multiplies the normalized weights.
        let raw = Self.route(try Self.block(bias: [0, 0, 5, 0, 0, 0, -5, 0], normalizes: false), logits)
        #expect(raw.experts == [2, 1] && abs(raw.weights[0] - p2) < 1e-6 && abs(raw.weights[1] - p1) < 1e-6)
        let scaled = Self.route(try Self.block(bias: [0, 0, 5, 0, 0, 0, -5, 0], scale: 2.5), logits)
        #expect(abs(scaled.weights[0] - 2.5 * weights[0]) < 1e-6 && abs(scaled.weights[1] - 2.5 * weights[1]) < 1e-6)
    }

    @Test func tiesGoToTheLowerExpertAndEveryExpertAtMostOnce() throws {
        let moe = try Self.block(bias: [Float](repeating: 0, count: 8), used: 4)
        let (experts, weights) = Self.route(moe, [1, 0, 1, 0, 1, 0, 0, 1])
        #expect(experts == [0, 2, 4, 7])
        #expect(weights.allSatisfy { abs($0 - 0.25) < 1e-6 })
        // All equal: the first k.
        #expect(Self.route(moe, [Float](repeating: 0.5, count: 8)).experts == [0, 1, 2, 3])
        // A router gone to NaN still names k distinct experts (and weighs them NaN): no crash.
        let broken = Self.route(moe, [Float](repeating: .nan, count: 8))
        #expect(Set(broken.experts).count == 4 && broken.experts.allSatisfy { (0..<8).contains($0) })
    }

    /// lfm2moe-tiny with expert 7 of every layer made unreachable (selection bias -100)
    /// and, when `poisoned`, its weights made NaN (every block's scale).
    static func unreachableExpert(poisoned: Bool) throws -> TransformerModel {
        let file = try GGUFFile(path: path)
        var writer = GGUFWriter(copyingMetadataOf: file)
        for t in file.tensors {
            var bytes = Array(file.data(for: t))
            if t.name.hasSuffix("exp_probs_b.bias") {
                withUnsafeBytes(of: Float(-100)) { bytes.replaceSubrange(28..<32, with: $0) }
            }
            if poisoned, t.name.contains("_exps.") {
                let expertBytes = t.type.rowBytes(count: t.shape[0])! * t.shape[1]
                for block in stride(from: 7 * expertBytes, to: 8 * expertBytes, by: t.type.typeSize) {
                    bytes[block] = 0x00  // fp16 NaN (0x7E00) as the block's scale
                    bytes[block + 1] = 0x7E
                }
            }
            try writer.addTensor(name: t.name, type: t.type, shape: t.shape, data: bytes)
        }
        return try TransformerModel(file: try GGUFFile(bytes: try writer.serialize()))
    }

    /// A prompt in one batch, then tokens one at a time: every row's logits.
    static func logits(_ model: TransformerModel) throws -> [[Float]] {
        let session = InferenceSession(model: model, contextLength: 32)
        var rows = try session.evaluateAllLogits([504, 3575, 282, 4649, 314, 7042, 30, 198, 504, 1797])
        for token in [553, 253, 2155, 28] {
            try session.evaluate([token])
            rows.append(Array(session.logits))
        }
        return rows
    }

    /// Prefill and decode multiply only the chosen experts: an expert no token can choose
    /// may hold NaN weights without changing a bit of the logits (a dense product masked
    /// by zero weights would turn them to NaN).
    @Test func expertsNoTokenChoosesAreNeverMultiplied() throws {
        let clean = try Self.logits(try Self.unreachableExpert(poisoned: false))
        let poisoned = try Self.logits(try Self.unreachableExpert(poisoned: true))
        #expect(clean.allSatisfy { $0.allSatisfy(\.isFinite) })
        #expect(clean.map { $0.map(\.bitPattern) } == poisoned.map { $0.map(\.bitPattern) })
    }

    /// The bytes a decoded token reads, counted from the file's tensor table: every 2-D
    /// matrix but the embedding, one embedding row, and `k` of the `E` experts of each
    /// 3-D expert tensor (norms, biases and convolution taps are small copies).
    @Test func weightBytesPerTokenCountOnlyTheChosenExperts() throws {
        let model = try TransformerModel(path: Self.path)
        let file = model.file
        let k = try file.metadata.int("lfm2moe.expert_used_count"), experts = try file.metadata.int("lfm2moe.expert_count")
        var expected = 0
        for t in file.tensors {
            let bytes = t.type.rowBytes(count: t.shape[0])! * t.rowCount
            if t.shape.count == 3 {
                expected += bytes / experts * k
            } else if t.name == "token_embd.weight" {
                expected += bytes / t.shape[1]
            } else if t.shape.count == 2 && !t.name.hasSuffix("shortconv.conv.weight") {
                expected += bytes
            }
        }
        #expect(model.weightBytesPerToken == expected)
        // 2 of 8 experts are read: three quarters of the expert bytes are not.
        let all = file.tensors.reduce(0) { $0 + $1.type.rowBytes(count: $1.shape[0])! * $1.rowCount }
        let expertBytes = file.tensors.filter { $0.shape.count == 3 }.reduce(0) { $0 + $1.type.rowBytes(count: $1.shape[0])! * $1.rowCount }
        #expect(model.weightBytesPerToken <= all - expertBytes * (experts - k) / experts)
    }
}
