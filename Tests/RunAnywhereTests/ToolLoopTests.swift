import Foundation
import LeapJSON
import LeapSDKCore
import TestSupport
import Testing

@testable import RunAnywhere

/// A scripted model: each round returns the next scripted reply and records what it was given.
final class ScriptedGenerator: ToolRoundGenerator, @unchecked Sendable {
    struct Request {
        var messages: [ChatMessage]
        var functionNames: [String]
        var options: GenerationOptions
    }

    private let lock = NSLock()
    private var script: [ToolRound]
    private var recorded: [Request] = []

    init(_ script: [ToolRound]) { self.script = script }

    var requests: [Request] { lock.withLock { recorded } }

    func generateRound(
        appending messages: [ChatMessage], functions: [LeapFunction], options: GenerationOptions,
        onText: @escaping @Sendable (String) -> Void
    ) async throws -> ToolRound {
        let reply: ToolRound = lock.withLock {
            recorded.append(Request(messages: messages, functionNames: functions.map(\.name), options: options))
            return script.isEmpty ? ToolRound(text: "final answer", calls: []) : script.removeFirst()
        }
        onText(reply.text)
        return reply
    }
}

/// Counts handler invocations and remembers their arguments.
final class CallLog: @unchecked Sendable {
    private let lock = NSLock()
    private var calls: [[String: ToolValue]] = []
    func record(_ arguments: [String: ToolValue]) { lock.withLock { calls.append(arguments) } }
    var all: [[String: ToolValue]] { lock.withLock { calls } }
}

struct HandlerFailure: Error, CustomStringConvertible {
    var description: String { "the weather service is down" }
}

let weatherDefinition = ToolDefinition(
    name: "get_weather", description: "Get current weather for a city",
    parameters: [
        ToolParameter(name: "city", type: .string, description: "City name", required: true),
        ToolParameter(name: "days", type: .integer, description: "Forecast days", required: false)
    ])

func call(_ name: String, _ arguments: [String: Any?] = [:]) -> LeapFunctionCall {
    LeapFunctionCall(name: name, arguments: arguments)
}

@Suite("Tool loop (scripted model)")
struct ToolLoopTests {
    @Test func executesCallsAndFeedsResultsBack() async throws {
        let session = ToolCallingSession()
        let log = CallLog()
        await session.registerTool(weatherDefinition) { args -> [String: ToolValue] in
            log.record(args)
            return ["city": args["city"] ?? .null, "temperature": .number(21.5)]
        }
        let generator = ScriptedGenerator([
            ToolRound(text: "", calls: [call("get_weather", ["city": "Paris", "days": 3])]),
            ToolRound(text: " It is 21.5 degrees in Paris. ", calls: [])
        ])
        let result = try await session.run(
            ChatMessage(role: .user, textContent: "weather?"), generator: generator,
            options: ToolCallingOptions(), generationOptions: nil, onEvent: { _ in })
        #expect(result.text == "It is 21.5 degrees in Paris.")
        #expect(result.toolCalls == [ToolCall(toolName: "get_weather", arguments: ["city": "Paris", "days": 3])])
        #expect(result.toolResults == [.succeeded("get_weather", ["city": "Paris", "temperature": 21.5])])
        #expect(log.all == [["city": .string("Paris"), "days": .number(3)]])

        let requests = generator.requests
        #expect(requests.count == 2)
        #expect(requests[0].messages.map(\.role) == [.user])
        #expect(requests[0].functionNames == ["get_weather"])
        #expect(requests[1].messages.map(\.role) == [.tool])
        #expect(requests[1].messages[0].textContent == #"{"city":"Paris","temperature":21.5}"#)
        #expect(requests[0].options.functionCallMode == .auto)
        #expect(requests[1].options.functionCallMode == .auto)
    }

    @Test func optionsReachGenerationOptions() async throws {
        let session = ToolCallingSession()
        await session.registerTool(weatherDefinition) { _ in [:] }
        let generator = ScriptedGenerator([])
        _ = try await session.run(
            ChatMessage(role: .user, textContent: "hi"), generator: generator,
            options: ToolCallingOptions(temperature: 0.25, maxTokens: 77, rngSeed: 9),
            generationOptions: nil, onEvent: { _ in })
        let options = try #require(generator.requests.first?.options)
        #expect(options.temperature == 0.25)
        #expect(options.maxOutputTokens == 77)
        #expect(options.rngSeed == 9)
    }

    @Test func firstRoundHookForcesCallsOnlyOnTheFirstRound() async throws {
        let session = ToolCallingSession()
        await session.registerTool(weatherDefinition) { _ in ["ok": true] }
        await session.setFirstRoundCallMode(.required)
        let generator = ScriptedGenerator([ToolRound(text: "", calls: [call("get_weather", ["city": "Oslo"])])])
        _ = try await session.run(
            ChatMessage(role: .user, textContent: "hi"), generator: generator,
            options: ToolCallingOptions(), generationOptions: nil, onEvent: { _ in })
        #expect(generator.requests.map(\.options.functionCallMode) == [.required, .auto])
    }

    @Test func throwingHandlerBecomesFailedResult() async throws {
        let session = ToolCallingSession()
        await session.registerTool(weatherDefinition) { _ async throws -> [String: ToolValue] in throw HandlerFailure() }
        let generator = ScriptedGenerator([ToolRound(text: "", calls: [call("get_weather", ["city": "Rome"])])])
        let result = try await session.run(
            ChatMessage(role: .user, textContent: "hi"), generator: generator,
            options: ToolCallingOptions(), generationOptions: nil, onEvent: { _ in })
        let failure = try #require(result.toolResults.first)
        #expect(!failure.success)
        #expect(failure.result == nil)
        #expect(failure.error == "tool 'get_weather' failed: the weather service is down")
        let fedBack = generator.requests[1].messages[0]
        #expect(fedBack.role == .tool)
        #expect(fedBack.textContent == #"{"error":"tool 'get_weather' failed: the weather service is down"}"#)
        #expect(result.text == "final answer")
    }

    @Test func slowHandlerTimesOut() async throws {
        let session = ToolCallingSession()
        let gate = Gate()
        let handlerReturned = Locked(false)
        await session.registerTool(weatherDefinition) { _ -> [String: ToolValue] in
            // Waits for the gate, ignoring cancellation: the loop must not wait for it.
            await gate.wait()
            handlerReturned.withLock { $0 = true }
            return ["late": true]
        }
        defer { gate.open() }
        let generator = ScriptedGenerator([ToolRound(text: "", calls: [call("get_weather", ["city": "Lima"])])])
        let result = try await session.run(
            ChatMessage(role: .user, textContent: "hi"), generator: generator,
            options: ToolCallingOptions(toolTimeout: .milliseconds(100)),
            generationOptions: nil, onEvent: { _ in })
        // The loop returned while the handler was still blocked.
        #expect(!handlerReturned.withLock { $0 })
        #expect(result.toolResults == [.failed("get_weather", "tool 'get_weather' timed out after 0.1 s")])
        #expect(generator.requests[1].messages[0].textContent.contains("timed out"))
    }

    @Test func unknownToolIsReportedToTheModel() async throws {
        let session = ToolCallingSession()
        await session.registerTool(weatherDefinition) { _ in [:] }
        let generator = ScriptedGenerator([ToolRound(text: "", calls: [call("launch_rocket", ["target": "moon"])])])
        let result = try await session.run(
            ChatMessage(role: .user, textContent: "hi"), generator: generator,
            options: ToolCallingOptions(), generationOptions: nil, onEvent: { _ in })
        #expect(result.toolCalls.map(\.toolName) == ["launch_rocket"])
        #expect(result.toolResults == [.failed("launch_rocket", "unknown tool 'launch_rocket'; the available tools are: get_weather")])
        #expect(generator.requests[1].messages[0].textContent.contains("unknown tool 'launch_rocket'"))
    }

    @Test func maxToolCallsBoundsExecutionAndForbidsFurtherCalls() async throws {
        let session = ToolCallingSession()
        let log = CallLog()
        await session.registerTool(weatherDefinition) { args in
            log.record(args)
            return ["ok": true]
        }
        // The model keeps calling; two calls per reply.
        let calling = ToolRound(text: "", calls: [call("get_weather", ["city": "A"]), call("get_weather", ["city": "B"])])
        let generator = ScriptedGenerator([calling, calling, calling, calling])
        let result = try await session.run(
            ChatMessage(role: .user, textContent: "hi"), generator: generator,
            options: ToolCallingOptions(maxToolCalls: 3), generationOptions: nil,
            onEvent: { _ in })
        #expect(log.all.count == 3)
        #expect(result.toolCalls.count == 6)
        #expect(result.toolResults.map(\.success) == [true, true, true, false, false, false])
        #expect(result.toolResults[3].error == "not executed: the limit of 3 tool calls was reached")
        // Round 3 is the final answer, with calls forbidden; its (disobeyed) calls are not run.
        let modes = generator.requests.map(\.options.functionCallMode)
        #expect(modes == [.auto, .auto, FunctionCallMode.none])
        #expect(generator.requests[2].messages.count == 2)
        #expect(result.text == "")
    }

    @Test func zeroMaxToolCallsForbidsCalls() async throws {
        let session = ToolCallingSession()
        await session.registerTool(weatherDefinition) { _ in [:] }
        let generator = ScriptedGenerator([ToolRound(text: "plain", calls: [])])
        let result = try await session.run(
            ChatMessage(role: .user, textContent: "hi"), generator: generator,
            options: ToolCallingOptions(maxToolCalls: 0), generationOptions: nil,
            onEvent: { _ in })
        #expect(generator.requests.map(\.options.functionCallMode) == [FunctionCallMode.none])
        #expect(result.text == "plain")
    }

    @Test func autoExecuteFalseReturnsCallsUnexecuted() async throws {
        let session = ToolCallingSession()
        let log = CallLog()
        await session.registerTool(weatherDefinition) { args in
            log.record(args)
            return [:]
        }
        let generator = ScriptedGenerator([ToolRound(text: "calling", calls: [call("get_weather", ["city": "Kyiv"])])])
        let result = try await session.run(
            ChatMessage(role: .user, textContent: "hi"), generator: generator,
            options: ToolCallingOptions(autoExecute: false), generationOptions: nil,
            onEvent: { _ in })
        #expect(log.all.isEmpty)
        #expect(result.toolCalls == [ToolCall(toolName: "get_weather", arguments: ["city": "Kyiv"])])
        #expect(result.toolResults.isEmpty)
        #expect(result.text == "calling")
        #expect(generator.requests.count == 1)
    }

    @Test func clearToolsRemovesEverything() async throws {
        let session = ToolCallingSession()
        await session.registerTool(weatherDefinition) { _ in [:] }
        await session.registerTool(DemoTools.calculator) { _ in [:] }
        #expect(await session.registeredTools.map(\.name) == ["get_weather", "calculate"])
        await session.clearTools()
        #expect(await session.registeredTools.isEmpty)
        let generator = ScriptedGenerator([ToolRound(text: "", calls: [call("get_weather", ["city": "X"])])])
        let result = try await session.run(
            ChatMessage(role: .user, textContent: "hi"), generator: generator,
            options: ToolCallingOptions(), generationOptions: nil, onEvent: { _ in })
        // With no tools the model is offered none and calls are not executed.
        #expect(generator.requests.first?.functionNames == [])
        #expect(generator.requests.first?.options.functionCallMode == nil)
        #expect(result.toolResults == [.failed("get_weather", "not executed: no tools are registered")])
    }

    @Test func registeringTheSameNameReplacesTheHandler() async throws {
        let session = ToolCallingSession()
        await session.registerTool(weatherDefinition) { _ in ["version": 1] }
        await session.registerTool(weatherDefinition) { _ in ["version": 2] }
        #expect(await session.registeredTools.count == 1)
        let generator = ScriptedGenerator([ToolRound(text: "", calls: [call("get_weather", ["city": "X"])])])
        let result = try await session.run(
            ChatMessage(role: .user, textContent: "hi"), generator: generator,
            options: ToolCallingOptions(), generationOptions: nil, onEvent: { _ in })
        #expect(result.toolResults.first?.result == ["version": 2])
    }

    @Test func eventsReportTextCallsAndResultsInOrder() async throws {
        let session = ToolCallingSession()
        await session.registerTool(weatherDefinition) { _ in ["t": 1] }
        let generator = ScriptedGenerator([
            ToolRound(text: "a", calls: [call("get_weather", ["city": "X"])]),
            ToolRound(text: "b", calls: [])
        ])
        let events = EventLog()
        _ = try await session.run(
            ChatMessage(role: .user, textContent: "hi"), generator: generator,
            options: ToolCallingOptions(), generationOptions: nil, onEvent: { events.add($0) })
        #expect(events.all == ["text a", "call get_weather(city: \"X\")", "result get_weather {\"t\":1}", "text b"])
    }

    @Test func invalidOptionsAreRejected() async throws {
        let session = ToolCallingSession()
        for options in [
            ToolCallingOptions(maxToolCalls: -1), ToolCallingOptions(maxTokens: 0),
            ToolCallingOptions(temperature: -1), ToolCallingOptions(temperature: .nan),
            ToolCallingOptions(toolTimeout: .zero)
        ] {
            await #expect(throws: SDKError.self) {
                _ = try await session.run(
                    ChatMessage(role: .user, textContent: "hi"), generator: ScriptedGenerator([]),
                    options: options, generationOptions: nil, onEvent: { _ in })
            }
        }
        do {
            _ = try await session.run(
                ChatMessage(role: .user, textContent: "hi"), generator: ScriptedGenerator([]),
                options: ToolCallingOptions(maxToolCalls: -1), generationOptions: nil, onEvent: { _ in })
            Issue.record("expected an error")
        } catch {
            #expect(error.code == .invalidInput)
        }
    }

    @Test func generationErrorsBecomeProcessingFailed() async throws {
        final class FailingGenerator: ToolRoundGenerator, @unchecked Sendable {
            func generateRound(
                appending messages: [ChatMessage], functions: [LeapFunction], options: GenerationOptions,
                onText: @escaping @Sendable (String) -> Void
            ) async throws -> ToolRound {
                throw LeapError.generationFailure("boom")
            }
        }
        let session = ToolCallingSession()
        do {
            _ = try await session.run(
                ChatMessage(role: .user, textContent: "hi"), generator: FailingGenerator(),
                options: ToolCallingOptions(), generationOptions: nil, onEvent: { _ in })
            Issue.record("expected an error")
        } catch {
            #expect(error.code == .processingFailed)
            #expect(error.message.contains("boom"))
        }
    }
}

/// An event a task can wait for; the wait ignores cancellation.
final class Gate: @unchecked Sendable {
    private let lock = NSLock()
    private var isOpen = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let openNow = lock.withLock {
                if !isOpen { waiters.append(continuation) }
                return isOpen
            }
            if openNow { continuation.resume() }
        }
    }

    func open() {
        let woken: [CheckedContinuation<Void, Never>] = lock.withLock {
            isOpen = true
            defer { waiters = [] }
            return waiters
        }
        for waiter in woken { waiter.resume() }
    }
}

final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var events: [String] = []
    func add(_ event: ToolLoopEvent) {
        let line: String
        switch event {
        case .text(let t): line = "text \(t)"
        case .toolCall(let c): line = "call \(c)"
        case .toolResult(let c, let r): line = "result \(c.toolName) \(r.messageText)"
        }
        lock.withLock { events.append(line) }
    }
    var all: [String] { lock.withLock { events } }
}
