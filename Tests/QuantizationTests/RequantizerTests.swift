import GGUF
import Models
import Quantization
import TestSupport
import Testing

/// `leap-ref quantize` must write, for SmolLM2, the very file gguf-py's reference
/// quantizers write (`tools/requant_gguf.py` of the shared fixtures): these are the sha256
/// of its outputs for each type (the q8_0, q4_0 and f32 ones are published with the golden
/// logits; f16 and q4_1 were computed with the same script).
@Suite struct RequantizerTests {
    static let expected: [(GGMLType, String)] = [
        (.q8_0, "0c1d3326cd9793cfb7296113c063dd5c24e2bd734b48ec1a3d01b7158eca9387"),
        (.q4_0, "dc51cbdc90dfb5c74a00a173bbc5ff4609f0df10a2a535040d484246c347da16"),
        (.f32, "f0089e79d6755eb5fbbf61cf4a16ba6bd79641f199875d1dc38cef994afdd0fd"),
        (.f16, "fea43f3ffef83a020894679eb91b2ab0127287d657a7313b47ba9c411dd4d47f"),
        (.q4_1, "42b682df08ad42cc02907bc95960bb0c516b785760005c449295be77ea2fed05")
    ]

    @Test(arguments: expected.map { $0.0 })
    func smolLM2ReencodingIsByteIdenticalToGGUFPy(_ type: GGMLType) throws {
        let file = try GGUFFile(path: try TestFixtures.require(TestFixtures.smolLM2Q4_1))
        let image = try Requantizer.requantize(file, to: .uniform(type)).serialize()
        #expect(SHA256.hex(image) == Self.expected.first { $0.0 == type }!.1)
    }

    @Test func sha256KnownAnswers() {
        #expect(SHA256.hex([UInt8]()) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hex(Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.hex([UInt8](repeating: 0x61, count: 1000)) == "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3")
    }

    @Test func newTypesRoundTripAndUpdateFileType() throws {
        let file = try GGUFFile(path: TestFixtures.path("models/lfm2-tiny.gguf"))
        for type in [GGMLType.bf16, .q5_0, .q5_1] {
            let out = try GGUFFile(bytes: try Requantizer.requantize(file, to: .uniform(type)).serialize())
            #expect(out.tensors.count == file.tensors.count)
            #expect(try out.metadata.int("general.file_type") == Int(QuantizationScheme.uniform(type).fileType))
            #expect(try out.requireTensor("blk.0.ffn_up.weight").type == type)
            #expect(try out.requireTensor("blk.0.attn_norm.weight").type == .f32)
            #expect(out.metadata.keys == file.metadata.keys)
            // And the model still runs.
            _ = try TransformerModel(file: out)
        }
    }
}
