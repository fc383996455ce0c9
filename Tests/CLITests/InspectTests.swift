import GGUF
import LeapJSON
import TestSupport
import Testing

@testable import leap_ref

/// `leap-ref inspect`'s reports, built from the same functions the command prints.
@Suite struct InspectTests {
    @Test func jsonReportHasVersionMetadataAndTensors() throws {
        let file = try GGUFFile(path: TestFixtures.path("models/lfm2-tiny.gguf"))
        let report = Inspect.jsonReport(file)
        #expect(report.objectValue?.keys == ["version", "metadata", "tensors"])
        #expect(report["version"] == .integer(3))
        let metadata = try #require(report["metadata"]?.objectValue)
        #expect(metadata.keys == file.metadata.keys)
        #expect(metadata["general.architecture"] == .string("lfm2"))
        // Arrays longer than 16 elements are summarized; short ones are listed.
        #expect(metadata["tokenizer.ggml.tokens"] == .object(JSONObject([("type", "string"), ("count", .integer(49161))])))
        #expect(metadata["lfm2.attention.head_count_kv"] == .array([0, 0, 2, 0, 2, 0]))
        let tensors = try #require(report["tensors"]?.arrayValue)
        #expect(tensors.count == file.tensors.count)
        let first = try #require(tensors.first?.objectValue)
        #expect(first.keys == ["name", "type", "shape", "offset", "bytes"])
        #expect(first["name"] == .string("token_embd.weight"))
        #expect(first["type"] == .string("q8_0"))
        #expect(first["shape"] == .array([128, 49161]))
        #expect(first["offset"] == .integer(file.dataOffset))
        #expect(first["bytes"] == .integer(128 / 32 * 34 * 49161))
        // The whole report is valid JSON that parses back to itself.
        #expect(try JSONValue.parse(report.serialized(.python)) == report)
    }

    /// A speech model's companions: the vocoder loaded and described by its shape, the
    /// detokenizer by its keys; a vocoder missing a tensor says why it cannot be loaded;
    /// other files have no speech section.
    @Test func speechCompanionsAreDescribed() throws {
        let vocoderPath = TestFixtures.path("models/vocoder-lfm2-audio-tiny.gguf")
        let vocoder = try #require(Inspect.jsonReport(try GGUFFile(path: vocoderPath), path: vocoderPath)["speech"]?.objectValue)
        #expect(vocoder["kind"] == .string("vocoder"))
        #expect(vocoder["layers"] == .integer(2) && vocoder["width"] == .integer(128) && vocoder["feed_forward_length"] == .integer(512))
        #expect(vocoder["language_model_width"] == .integer(128) && vocoder["detokenizer_width"] == .integer(64))
        let text = Inspect.textReport(try GGUFFile(path: vocoderPath), path: vocoderPath)
        #expect(text.contains("speech vocoder (vocoder-*.gguf):") && text.contains("32 query, 8 key/value (head size 4)"))

        let tokenizerPath = TestFixtures.path("models/tokenizer-lfm2-audio-tiny.gguf")
        let tokenizer = try #require(Inspect.jsonReport(try GGUFFile(path: tokenizerPath), path: tokenizerPath)["speech"]?.objectValue)
        #expect(tokenizer["kind"] == .string("audio detokenizer"))
        #expect(tokenizer["layers"] == .string("conv, attention, conv") && tokenizer["width"] == .integer(64))
        #expect(tokenizer["sliding_window"] == .integer(30) && tokenizer["output_width"] == .integer(1282))

        // The vocoder without one of its tensors.
        let source = try GGUFFile(path: vocoderPath)
        var w = GGUFWriter(copyingMetadataOf: source)
        for t in source.tensors where t.name != "depth_linear.bias" {
            try w.addTensor(name: t.name, type: t.type, shape: t.shape, data: Array(source.data(for: t)))
        }
        let broken = try GGUFFile(bytes: try w.serialize())
        let refused = try #require(Inspect.jsonReport(broken, path: "vocoder-broken.gguf")["speech"]?.objectValue)
        #expect(refused["error"]?.stringValue?.contains("depth_linear.bias") == true)

        #expect(Inspect.jsonReport(try GGUFFile(path: TestFixtures.path("models/lfm2-tiny.gguf")))["speech"] == nil)
    }

    @Test func textReportOfSmolLM2ListsAll272Tensors() throws {
        let path = try TestFixtures.require(TestFixtures.smolLM2Q4_1)
        let text = Inspect.textReport(try GGUFFile(path: path), path: path)
        #expect(text.contains("architecture:  llama"))
        #expect(text.contains("272 tensors"))
        #expect(text.contains("chat template: present"))
        #expect(text.contains("block_count                        30"))
        let tensorLines = text.split(separator: "\n").filter {
            $0.hasPrefix("  blk.") || $0.hasPrefix("  token_embd") || $0.hasPrefix("  output")
        }
        #expect(tensorLines.count == 272)
    }
}
