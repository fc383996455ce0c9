import Foundation
import GGUF
import LeapSDKCore
import TestSupport
import Testing
import Tokenizers

@testable import leap_ref

/// The chat command's session logic on lfm2-tiny and lfm2moe-tiny (scripted input, as with
/// a pipe).
@Suite(.serialized) struct ChatTests {
    func session(_ model: String = "lfm2-tiny") async throws -> ChatSession {
        let runner = try await Leap.load(
            path: TestFixtures.path("models/\(model).gguf"),
            options: LiquidInferenceEngineOptions(contextSize: 256))
        return ChatSession(
            runner: runner, system: "Be brief.", interactive: false,
            options: GenerationOptions(temperature: 0.7, rngSeed: 3, maxOutputTokens: 6))
    }

    @Test func turnsAccumulateAndCommandsWork() async throws {
        var chat = try await session()
        #expect(try await chat.handle("Hello"))
        #expect(try await chat.handle("Again"))
        #expect(chat.conversation.history.map(\.role) == [.system, .user, .assistant, .user, .assistant])

        let file = FileManager.default.temporaryDirectory.appendingPathComponent("chat-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: file) }
        #expect(try await chat.handle("/save \(file.path)"))
        let saved = try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [[String: Any]]
        #expect(saved?.count == 5)
        #expect(saved?[1]["content"] as? String == "Hello")

        #expect(try await chat.handle("/reset"))
        #expect(chat.conversation.history.map(\.role) == [.system])
        #expect(try await chat.handle("/load \(file.path)"))
        #expect(chat.conversation.history.map(\.textContent) == (saved ?? []).map { $0["content"] as? String ?? "" })
        // A bad file leaves the conversation as it was.
        #expect(try await chat.handle("/load /nonexistent/file.json"))
        #expect(chat.conversation.history.count == 5)
        #expect(try await chat.handle("/unknown"))
        #expect(try await !chat.handle("/quit"))
    }

    /// An lfm2moe file chats through the same API, its prompt rendered by the LFM2 template
    /// it carries (ChatML after `<|startoftext|>`).
    @Test func lfm2moeChatsWithTheLFM2Template() async throws {
        var chat = try await session("lfm2moe-tiny")
        #expect(try await chat.handle("Hello"))
        #expect(try await chat.handle("Again"))
        let history = chat.conversation.history
        #expect(history.map(\.role) == [.system, .user, .assistant, .user, .assistant])
        #expect(history.allSatisfy { !$0.textContent.isEmpty })

        let runner = try #require(chat.runner as? LiquidInferenceEngineRunner)
        let tokenizer = try Tokenizer(gguf: try GGUFFile(path: TestFixtures.path("models/lfm2moe-tiny.gguf")))
        let chatML = "<|startoftext|><|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"
        let expected = tokenizer.encode(chatML, addSpecial: false, parseSpecial: true)
        #expect(expected.count > 10)
        #expect(try runner.getPromptTokensSize(messages: Array(history.prefix(2))) == expected.count)
    }

    @Test func statsLineIsOneJSONObjectWithTheStatsFields() throws {
        let line = ChatSession.statsJSON(
            GenerationStats(
                promptTokens: 71, completionTokens: 23, totalTokens: 94,
                tokenPerSecond: 51.25, cachedPromptTokens: 48))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["promptTokens"] as? Int == 71)
        #expect(object["cachedPromptTokens"] as? Int == 48)
        #expect(object["completionTokens"] as? Int == 23)
        #expect(object["totalTokens"] as? Int == 94)
        #expect((object["tokenPerSecond"] as? Double).map { abs($0 - 51.25) < 0.01 } == true)
        #expect(!line.contains("\n"))
    }
}
