import Foundation
import TestSupport
import Testing

@testable import GGUF
@testable import Quantization

/// llama-quantize's tensor-type mixture (LlamaQuantizeRules.swift), checked against a file
/// llama-quantize made: the tensor table of the published Gemma 3 270M Q4_K_M (names,
/// shapes and the types llama-quantize chose, in its order), kept as a fixture.
@Suite struct LlamaQuantizeRulesTests {
    struct Table: Decodable {
        let metadata: [String: FixtureValue]
        let tensors: [[FixtureValue]]
    }

    /// A JSON scalar or array of the fixture.
    enum FixtureValue: Decodable {
        case int(Int)
        case string(String)
        case array([Int])
        init(from decoder: Decoder) throws {
            let c = try decoder.singleValueContainer()
            if let i = try? c.decode(Int.self) {
                self = .int(i)
            } else if let a = try? c.decode([Int].self) {
                self = .array(a)
            } else {
                self = .string(try c.decode(String.self))
            }
        }
    }

    /// The Gemma table: metadata, and tensors as llama-quantize wrote them.
    static func gemma() throws -> (GGUFMetadata, [GGUFTensorInfo]) {
        let data = try Data(contentsOf: URL(fileURLWithPath: TestFixtures.path("quantization/gemma-3-270m-q4_k_m.tensors.json")))
        let table = try JSONDecoder().decode(Table.self, from: data)
        var metadata = GGUFMetadata()
        for (key, value) in table.metadata.sorted(by: { $0.key < $1.key }) {
            switch value {
            case .int(let i): metadata.set(key, .uint32(UInt32(i)))
            case .string(let s): metadata.set(key, .string(s))
            case .array: break
            }
        }
        let tensors = table.tensors.map { row -> GGUFTensorInfo in
            guard case .string(let name) = row[0], case .array(let shape) = row[1], case .string(let type) = row[2] else {
                fatalError("bad fixture row \(row)")
            }
            return GGUFTensorInfo(name: name, type: GGMLType(name: type)!, shape: shape, offset: 0, byteCount: 0)
        }
        return (metadata, tensors)
    }

    /// Our rules pick, for every tensor of Gemma 3 270M, the type llama-quantize picked
    /// (Q4_K, Q6_K, Q5_0 and Q8_0 tensors: more bits for attn_v and ffn_down in the first
    /// and last layers and every third, fallbacks for rows of 640, the tied embedding as
    /// the output head), starting from an all-F32 model.
    @Test func gemmaQ4KMMixtureMatchesLlamaQuantize() throws {
        let (metadata, stored) = try Self.gemma()
        let f32 = stored.map { GGUFTensorInfo(name: $0.name, type: .f32, shape: $0.shape, offset: 0, byteCount: 0) }
        var rules = try LlamaQuantizeRules(metadata: metadata, tensors: f32, fileType: .q4_K_M, pure: false)
        var counts: [GGMLType: Int] = [:]
        for (input, expected) in zip(LlamaQuantizeRules.order(f32), stored) {
            #expect(input.name == expected.name)
            let type = try rules.targetType(for: input)
            #expect(type == expected.type, "\(input.name): \(type), llama-quantize chose \(expected.type)")
            counts[type, default: 0] += 1
        }
        #expect(counts[.q4_K, default: 0] > 0 && counts[.q6_K, default: 0] > 0 && counts[.q5_0, default: 0] > 0)
    }

    /// llama-quantize's order: tensors outside the layers first, then layer by layer (by
    /// number, not by text: blk.2 before blk.10), by name within a layer.
    @Test func orderIsByLayerThenName() throws {
        let (_, stored) = try Self.gemma()
        // Reversed, and interleaved from both ends: no order of the input survives.
        let reversed = Array(stored.reversed())
        let interleaved = (0..<stored.count).map { $0 % 2 == 0 ? stored[$0 / 2] : stored[stored.count - 1 - $0 / 2] }
        #expect(LlamaQuantizeRules.order(reversed).map(\.name) == stored.map(\.name))
        #expect(LlamaQuantizeRules.order(interleaved).map(\.name) == stored.map(\.name))
        #expect(stored.map(\.name).firstIndex(of: "blk.2.attn_k.weight")! < stored.map(\.name).firstIndex(of: "blk.10.attn_k.weight")!)
    }

    /// `use_more_bits` for 30 layers (SmolLM2) and 18 (Gemma 3 270M).
    @Test func moreBitsLayers() {
        #expect((0..<30).filter { LlamaQuantizeRules.useMoreBits($0, of: 30) } == [0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 26, 27, 28, 29])
        #expect((0..<18).filter { LlamaQuantizeRules.useMoreBits($0, of: 18) } == [0, 1, 4, 7, 10, 13, 15, 16, 17])
    }

    /// K-quants fall back to 32-value types for rows that are not whole super-blocks, and to
    /// F16 when even 32 does not divide them.
    @Test func fallbacks() {
        #expect(LlamaQuantizeRules.fallback(.q4_K, rowLength: 576) == .q5_0)
        #expect(LlamaQuantizeRules.fallback(.q5_K, rowLength: 576) == .q5_1)
        #expect(LlamaQuantizeRules.fallback(.q6_K, rowLength: 640) == .q8_0)
        #expect(LlamaQuantizeRules.fallback(.q6_K, rowLength: 1536) == .q6_K)
        #expect(LlamaQuantizeRules.fallback(.q4_K, rowLength: 100) == .f16)
    }

    /// `--type` names.
    @Test func schemeNames() {
        #expect(QuantizationScheme(name: "q4_k_m") == .llamaQuantize(.q4_K_M, pure: false))
        #expect(QuantizationScheme(name: "Q6_K") == .llamaQuantize(.q6_K, pure: false))
        #expect(QuantizationScheme(name: "q5_k") == .llamaQuantize(.q5_K_M, pure: true))
        #expect(QuantizationScheme(name: "q8_0") == .uniform(.q8_0))
        #expect(QuantizationScheme(name: "q2_k") == nil && QuantizationScheme(name: "iq4_nl") == nil)
        #expect(QuantizationScheme.names.allSatisfy { QuantizationScheme(name: $0) != nil })
    }
}
