import Foundation
import LeapSDKCore
import TestSupport
import Testing

@testable import RunAnywhere

/// The tool loop on the real engine with lfm2-tiny (random weights, LFM2 chat template
/// with tools). The first reply is forced to call a tool (`FunctionCallMode.required`).
@Suite("Tool loop (lfm2-tiny)", .serialized)
struct ModelToolLoopTests {
    static let tinyPath = TestFixtures.path("models/lfm2-tiny.gguf")
    /// The city is an enum here: lfm2-tiny's random weights would not close a free string
    /// within a few tokens, and the call must be complete to be parsed.
    static let weather = ToolDefinition(
        name: "get_weather", description: "Get current weather for a city",
        parameters: [
            ToolParameter(
                name: "city", type: .string, description: "City name", required: true,
                enumValues: ["Paris", "Rome", "Lima"]),
            ToolParameter(name: "days", type: .integer, description: "Forecast days", required: false)
        ])

    func loadedSession() async throws -> ToolCallingSession {
        let session = ToolCallingSession()
        try await session.loadModel(path: try TestFixtures.require(Self.tinyPath))
        return session
    }

    /// Registers `weather` (it answers 18 degrees, logging its arguments), forces the first
    /// reply to call a tool, and asks for the weather in Paris.
    static func askWithAForcedCall(_ session: ToolCallingSession, maxToolCalls: Int) async throws
        -> (result: ToolCallingResult, log: CallLog)
    {
        let log = CallLog()
        await session.registerTool(weather) { args -> [String: ToolValue] in
            log.record(args)
            return ["city": args["city"] ?? .null, "temperature": 18]
        }
        await session.setFirstRoundCallMode(.required)
        let result = try await session.generateWithTools(
            prompt: "What's the weather in Paris?",
            options: ToolCallingOptions(maxToolCalls: maxToolCalls, temperature: 0, maxTokens: 120, rngSeed: 7))
        return (result, log)
    }

    @Test func forcedCallRunsTheHandlerAndFeedsTheResultBack() async throws {
        let session = try await loadedSession()
        let (result, log) = try await Self.askWithAForcedCall(session, maxToolCalls: 2)
        let arguments = try #require(log.all.first, "the forced first reply did not call the tool")
        #expect(arguments["city"]?.stringValue != nil)
        #expect(log.all.count <= 2)
        #expect(result.toolCalls.first?.toolName == "get_weather")
        #expect(result.toolCalls.first?.arguments == arguments)
        let first = try #require(result.toolResults.first)
        #expect(first.success)

        let history = try #require(await session.lastConversation).history
        #expect(history.first?.role == .user)
        #expect(history[1].role == .assistant)
        #expect(history[1].functionCalls?.first?.name == "get_weather")
        #expect(history[2].role == .tool)
        #expect(history[2].textContent == first.messageText)
        #expect(history.last?.role == .assistant)
        #expect(history.filter { $0.role == .tool }.count == result.toolResults.count)
    }

    @Test func throwingHandlerResultReachesTheConversation() async throws {
        let session = try await loadedSession()
        await session.registerTool(Self.weather) { _ async throws -> [String: ToolValue] in throw HandlerFailure() }
        await session.setFirstRoundCallMode(.required)
        let result = try await session.generateWithTools(
            prompt: "Weather in Rome?", options: ToolCallingOptions(maxToolCalls: 1, temperature: 0, maxTokens: 120))
        #expect(result.toolResults.first?.error == "tool 'get_weather' failed: the weather service is down")
        let history = try #require(await session.lastConversation).history
        #expect(history.contains { $0.role == .tool && $0.textContent.contains("the weather service is down") })
        // maxToolCalls 1: the final reply had calls forbidden.
        #expect(result.toolResults.filter(\.success).isEmpty)
    }

    @Test func withoutToolsItIsAPlainReply() async throws {
        let session = try await loadedSession()
        let result = try await session.generateWithTools(
            prompt: "Hello", options: ToolCallingOptions(temperature: 0, maxTokens: 12))
        #expect(result.toolCalls.isEmpty)
        let history = try #require(await session.lastConversation).history
        #expect(history.map(\.role) == [.user, .assistant])
        #expect(history[1].textContent.trimmingCharacters(in: .whitespacesAndNewlines) == result.text)
    }

    @Test func respondContinuesAnExistingConversation() async throws {
        let session = try await loadedSession()
        await DemoTools.register(on: session)
        let runner = try #require(await session.modelRunner)
        let chat = runner.createConversation(systemPrompt: "You are terse.")
        let (result, next) = try await session.respond(
            to: ChatMessage(role: .user, textContent: "Hi"), in: chat,
            options: ToolCallingOptions(maxToolCalls: 0, temperature: 0, maxTokens: 8))
        #expect(result.toolCalls.isEmpty)
        #expect(next.history.map(\.role) == [.system, .user, .assistant])
        #expect(next.functions.map(\.name) == ["calculate", "get_current_time", "get_weather"])
    }

    @Test func loadModelResolvesAnIdInTheCache() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ra-models-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createSymbolicLink(
            atPath: directory.appendingPathComponent("LFM2-Tiny.Q8_0.gguf").path,
            withDestinationPath: try TestFixtures.require(Self.tinyPath))
        let session = ToolCallingSession(modelCache: LocalModelCache(directory: directory.path))
        #expect(await !session.isModelLoaded)
        try await session.loadModel(modelId: "lfm2-tiny")
        #expect(await session.isModelLoaded)
        try await session.loadModel(modelId: "LFM2-TINY.q8_0")
        do {
            try await session.loadModel(modelId: "llama-3.2-1b-instruct-q4")
            Issue.record("expected an error")
        } catch let error as SDKError {
            #expect(error.code == .modelNotFound)
            #expect(error.message.contains("available: LFM2-Tiny.Q8_0"))
        }
        await session.unloadModel()
        #expect(await !session.isModelLoaded)
    }

    @Test func missingOrBrokenFilesAreTypedErrors() async throws {
        let session = ToolCallingSession()
        await #expect(throws: SDKError(.modelNotFound, "no model file at /nonexistent/x.gguf")) {
            try await session.loadModel(path: "/nonexistent/x.gguf")
        }
        let broken = FileManager.default.temporaryDirectory.appendingPathComponent("ra-broken-\(UUID().uuidString).gguf")
        try Data("not a gguf".utf8).write(to: broken)
        defer { try? FileManager.default.removeItem(at: broken) }
        do {
            try await session.loadModel(path: broken.path)
            Issue.record("expected an error")
        } catch let error as SDKError {
            #expect(error.code == .modelLoadFailed)
        }
    }

    /// Seed 004's "Basic Usage" through the static API, on lfm2-tiny (loaded with a default
    /// seed: the sample samples at temperature 0.7 without one).
    @Test func seedBasicUsageRuns() async throws {
        let runner = try await Leap.load(path: Self.tinyPath, options: LiquidInferenceEngineOptions(defaultRNGSeed: 4))
        await RunAnywhere.shared.setModelRunner(runner)
        // The snippet as written; the first reply is made to call a tool (lfm2-tiny's random
        // weights would rarely choose to), so that the loop's whole path runs.
        await RunAnywhere.shared.setFirstRoundCallMode(.required)
        let result: ToolCallingResult
        do {
            result = try await seedBasicUsage()
        } catch {
            await RunAnywhere.shared.setFirstRoundCallMode(nil)
            throw error
        }
        await RunAnywhere.shared.setFirstRoundCallMode(nil)
        #expect(await RunAnywhere.registeredTools.map(\.name) == ["get_weather"])
        #expect(!result.toolCalls.isEmpty, "the forced first reply made no call")
        #expect(result.toolCalls.count == result.toolResults.count)
        #expect(result.toolCalls.allSatisfy { $0.toolName == "get_weather" })
        // Every call was executed, and got the handler's answer for the city the model named.
        for (call, toolResult) in zip(result.toolCalls, result.toolResults) {
            #expect(toolResult.success)
            #expect(toolResult.result?["city"] == (call.arguments["city"] ?? "Unknown"))
            #expect(toolResult.result?["temperature"] == 72)
        }
        await RunAnywhere.clearTools()
        #expect(await RunAnywhere.registeredTools.isEmpty)
        await RunAnywhere.unloadModel()
    }
}
