import Foundation
import LeapJSON
import TestSupport
import Testing

@_spi(Tools) @testable import LeapSDKCore

/// libmtmd's goldens for images (LFM2-VL) and audio (LFM2-Audio), end to end through the
/// SDK's prompt path: the message's media part read by the model's mmproj file (found
/// beside the model), the chat template, the chunk layout, the encoder's embeddings, then
/// the language model's logits after the prompt and along llama.cpp's greedy tokens.
///
/// Rules (Tests/Fixtures/golden/MEDIA.md, copied with the fixtures): the chunks
/// equal; the embeddings within 2e-3 max |diff| of llama.cpp's (which rounds activations to
/// F16 before every F16 product); the language model as the text goldens: the same top-1
/// wherever llama.cpp's top-2 margin exceeds 0.5, following llama.cpp's greedy tokens.
@Suite(.serialized) struct MultimodalGoldenTests {
    static let visionCases = [
        "small-40x30.png", "medium-500x375.png", "medium-500x375.jpg", "tall-300x900.png", "big-640x600.png", "large-900x800.png"
    ]

    static func golden(_ path: String) throws -> JSONValue {
        try JSONValue.parse(String(decoding: try Data(contentsOf: URL(fileURLWithPath: TestFixtures.path(path))), as: UTF8.self))
    }

    @Test(arguments: visionCases)
    func visionGoldenHolds(_ image: String) async throws {
        let g = try Self.golden("golden/vl/lfm2-vl-tiny.\(image).json")
        let runner = try #require(
            try await Leap.load(path: TestFixtures.path("models/lfm2-vl-tiny.gguf"), options: .init(contextSize: 2048))
                as? LiquidInferenceEngineRunner)
        let data = try Data(contentsOf: URL(fileURLWithPath: TestFixtures.path("images/\(image)")))
        let message = ChatMessage(role: .user, content: [.image(data), .text("Describe this picture.")])
        let report = try PromptProbe(runner: runner).run(
            messages: [message], top: 10, greedy: 16, follow: g["greedy"]?.arrayValue?.compactMap(\.intValue))

        // Chunks: text runs and the image slices, in order.
        let expected: [PromptProbe.Chunk] = try #require(g["prompt_tokens"]?.arrayValue).map { chunk in
            if let ids = chunk["text"]?.arrayValue { return .text(ids.compactMap(\.intValue)) }
            return .media(kind: "image", positions: chunk["image"]?.intValue ?? -1)
        }
        #expect(report.chunks == expected)
        #expect(report.chunks.map(\.positions).reduce(0, +) == g["n_prompt"]?.intValue)

        // Embeddings, every image chunk's rows in prompt order.
        let values = try #require(g["embeddings"]?["values"]?.arrayValue).flatMap { $0.arrayValue ?? [] }.compactMap(\.doubleValue)
        try Self.expectClose(report.embeddings, values, within: 2e-3, image)

        try Self.expectLogitRule(report, g, image)
    }

    static let audioCases = ["chirp-1s.transcribe", "chirp-1s.asr", "short-0.25s.transcribe", "tones-22k.transcribe"]
    static let clips = [
        "chirp-1s": "lfm2-audio-chirp-1s-16k.wav", "short-0.25s": "lfm2-audio-short-0.25s-16k.wav",
        // llama.cpp's own 16 kHz PCM of the 22.05 kHz clip (resamplers differ; the README).
        "tones-22k": "lfm2-audio-tones-22k-f32.miniaudio-16k.wav"
    ]

    /// The quantized language model (as shipped in the fixture) and the stored-weights F32
    /// one (`leap-ref quantize --type f32` of it, made by scripts/make-test-models.sh); the
    /// same mmproj file for both (its F16 weights are the F32 file's values; llama.cpp's F16
    /// im2col is reproduced either way).
    @Test(arguments: audioCases, [false, true])
    func audioGoldenHolds(_ name: String, _ storedWeights: Bool) async throws {
        let g = try Self.golden("golden/audio/lfm2-audio-tiny\(storedWeights ? "-f32" : "").\(name).json")
        let model =
            storedWeights
            ? try TestFixtures.require(TestFixtures.modelCache + "/lfm2-audio-tiny.F32.gguf")
            : TestFixtures.path("models/lfm2-audio-tiny.gguf")
        let options = LiquidInferenceEngineOptions(contextSize: 512, mmProjPath: TestFixtures.path("models/mmproj-lfm2-audio-tiny.gguf"))
        let runner = try #require(try await Leap.load(path: model, options: options) as? LiquidInferenceEngineRunner)
        let clip = try #require(Self.clips[String(name[..<(name.lastIndex(of: ".") ?? name.endIndex)])])
        let wav = try Data(contentsOf: URL(fileURLWithPath: TestFixtures.path("audio/\(clip)")))
        var messages: [ChatMessage] = []
        if let system = g["system"]?.stringValue { messages.append(ChatMessage(role: .system, content: [.text(system)])) }
        let user = try #require(g["user"]?.stringValue).replacingOccurrences(of: "<__media__>", with: "")
        messages.append(ChatMessage(role: .user, content: [.audio(wav)] + (user.isEmpty ? [] : [.text(user)])))
        let report = try PromptProbe(runner: runner).run(
            messages: messages, top: 10, greedy: 16, follow: g["greedy"]?.arrayValue?.compactMap(\.intValue))

        let expected: [PromptProbe.Chunk] = try #require(g["prompt_tokens"]?.arrayValue).map { chunk in
            if let ids = chunk["text"]?.arrayValue { return .text(ids.compactMap(\.intValue)) }
            return .media(kind: "audio", positions: chunk["audio"]?.intValue ?? -1)
        }
        #expect(report.chunks == expected)
        let values = try #require(g["embeddings"]?["data"]?.arrayValue).flatMap { $0.arrayValue ?? [] }.compactMap(\.doubleValue)
        // From our own log-mel: the stored-weights golden closely (llama.cpp computes it in
        // F32 with the F16 im2col we reproduce), the F16 one within llama.cpp's F16 rounding.
        try Self.expectClose(report.embeddings, values, within: storedWeights ? 1e-4 : 2e-3, name)
        try Self.expectLogitRule(report, g, name)
    }

    // MARK: Comparisons

    static func expectClose(_ ours: [Float], _ theirs: [Double], within bound: Double, _ label: String) throws {
        try #require(ours.count == theirs.count, "\(label): \(ours.count) embedding values, llama.cpp \(theirs.count)")
        var worst = 0.0, sum = 0.0
        for (a, b) in zip(ours, theirs) {
            let d = abs(Double(a) - b)
            worst = max(worst, d)
            sum += d
        }
        print("\(label): embeddings max |diff| \(worst), mean \(sum / Double(max(1, ours.count)))")
        #expect(worst <= bound, "\(label): embeddings differ by up to \(worst) (mean \(sum / Double(ours.count)))")
    }

    /// llama.cpp's rule for quantized models: the same top-1 wherever its top-2 margin
    /// exceeds 0.5, after the prompt and after each of its greedy tokens.
    static func expectLogitRule(_ report: PromptProbe.Report, _ g: JSONValue, _ label: String) throws {
        func check(_ ours: [(id: Int, logit: Float)], _ theirs: JSONValue?, _ at: String) {
            guard let rows = theirs?.arrayValue, rows.count >= 2,
                let id = rows[0].arrayValue?[0].intValue, let l0 = rows[0].arrayValue?[1].doubleValue,
                let l1 = rows[1].arrayValue?[1].doubleValue
            else {
                Issue.record("\(label): no golden top at \(at)")
                return
            }
            if l0 - l1 > 0.5 { #expect(ours.first?.id == id, "\(label) \(at): top-1 \(ours.first?.id ?? -1), llama.cpp \(id)") }
        }
        check(report.top, g["top"], "the prompt's end")
        let steps = try #require(g["greedy_top"]?.arrayValue)
        #expect(report.greedyTop.count == steps.count)
        for (i, (ours, theirs)) in zip(report.greedyTop, steps).enumerated() { check(ours, theirs, "greedy step \(i)") }
    }
}

extension PromptProbe.Chunk {
    var positions: Int {
        switch self {
        case .text(let ids): return ids.count
        case .media(_, let n): return n
        }
    }
}
