import Foundation
import GGUF
import TestSupport
import Testing

@testable import LeapSDKCore
@testable import RunAnywhere

/// The tool loop on a model whose chat template speaks Hermes-style calls: lfm2-tiny with
/// Qwen3's template (Tests/Fixtures/chat-templates/Qwen-Qwen3-0.6B.jinja) in place of its
/// own. The loop must pick the Hermes syntax from the model, generate the call under the
/// Hermes grammar, parse it with `HermesFunctionCallParser`, run the tool, and feed the
/// result back in the template's `<tool_response>` form.
@Suite("Tool loop (Hermes template)", .serialized)
struct HermesToolLoopTests {
    /// Writes lfm2-tiny with Qwen3's chat template to a temporary file.
    static func writeHermesModel() throws -> URL {
        let file = try GGUFFile(path: TestFixtures.path("models/lfm2-tiny.gguf"))
        var writer = GGUFWriter(copyingMetadataOf: file)
        for tensor in file.tensors {
            try writer.addTensor(name: tensor.name, type: tensor.type, shape: tensor.shape, data: Array(file.data(for: tensor)))
        }
        let template = try String(contentsOfFile: TestFixtures.path("chat-templates/Qwen-Qwen3-0.6B.jinja"), encoding: .utf8)
        writer.metadata.set("tokenizer.chat_template", .string(template))
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("lfm2-tiny-hermes-\(UUID().uuidString).gguf")
        try writer.write(to: url.path)
        return url
    }

    /// Forwards to another runner and records what passes through the `ModelRunner` protocol.
    final class RecordingRunner: ModelRunner, @unchecked Sendable {
        let inner: ModelRunner
        let requests = Locked<[GenerationRequest]>([])
        let completions = Locked<[MessageCompletion]>([])
        init(_ inner: ModelRunner) { self.inner = inner }

        var modelId: String { inner.modelId }
        var functionCallParser: any LeapFunctionCallParserProtocol { inner.functionCallParser }
        func unload() async { await inner.unload() }
        func generate(
            _ request: GenerationRequest, onResponse: @escaping @Sendable (MessageResponse) -> Void,
            onError: @escaping @Sendable (LeapError) -> Void
        ) -> GenerationHandler {
            requests.withLock { $0.append(request) }
            return inner.generate(
                request,
                onResponse: { [completions] response in
                    if case .complete(let completion) = response { completions.withLock { $0.append(completion) } }
                    onResponse(response)
                }, onError: onError)
        }
    }

    @Test func theLoopCallsToolsInTheModelsHermesSyntax() async throws {
        let url = try Self.writeHermesModel()
        defer { try? FileManager.default.removeItem(at: url) }
        let loaded = try await Leap.load(url: url, options: LiquidInferenceEngineOptions(contextSize: 1024, defaultRNGSeed: 11))
        let engineRunner = try #require(loaded as? LiquidInferenceEngineRunner)
        // The template decides, although the vocabulary also has LFM2's call tokens.
        #expect(engineRunner.functionCallFormat == .hermes)
        #expect(engineRunner.loaded.singleTokenID("<|tool_call_start|>") != nil)

        let runner = RecordingRunner(loaded)
        let session = ToolCallingSession(modelRunner: runner)
        let (result, log) = try await ModelToolLoopTests.askWithAForcedCall(session, maxToolCalls: 1)

        // Every round generated and parsed with the Hermes parser (the loop's options carry
        // the LFM parser by default), whatever the caller's options said.
        let requests = runner.requests.withLock { $0 }
        #expect(requests.count == 2)
        #expect(requests.allSatisfy { $0.options.functionCallParser is HermesFunctionCallParser })
        // The forced first reply is a call the Hermes parser read: the model wrote a
        // `<tool_call>` block (the grammar of the Hermes syntax), not LFM2's markers.
        let firstReply = try #require(runner.completions.withLock { $0 }.first?.message)
        let call = try #require(firstReply.functionCalls?.first)
        #expect(call.name == "get_weather")
        let city = try #require(log.all.first?["city"]?.stringValue, "the tool did not run")
        #expect(["Paris", "Rome", "Lima"].contains(city))
        #expect(result.toolResults.first?.success == true)

        // The second round's prompt renders the call back as Hermes JSON and the result as
        // Qwen3's <tool_response>.
        let secondPrompt = try engineRunner.loaded.prompts.render(
            messages: requests[1].messages, tools: requests[1].functions.map(\.toolJSON), callFormat: HermesFunctionCallParser(),
            enableThinking: nil)
        // The model may add the optional `days`.
        let days = call.arguments["days"].map { ", \"days\": \($0)" } ?? ""
        #expect(
            secondPrompt.contains(
                "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"\(city)\"\(days)}}\n</tool_call>"))
        #expect(secondPrompt.contains("<tool_response>\n{\"city\":\"\(city)\",\"temperature\":18}\n</tool_response>"))
        #expect(secondPrompt.contains("<tools>\n{\"name\": \"get_weather\""))
        #expect(!secondPrompt.contains("<|tool_call_start|>"))
    }

    /// LFM2's own template keeps LFM2's syntax.
    @Test func lfm2sTemplateKeepsTheLFMSyntax() async throws {
        let runner = try await Leap.load(path: TestFixtures.path("models/lfm2-tiny.gguf"))
        #expect((runner as? LiquidInferenceEngineRunner)?.functionCallFormat == .lfm)
        #expect(runner.functionCallParser is LFMFunctionCallParser)
    }
}
