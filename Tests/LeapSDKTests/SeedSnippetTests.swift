// The Swift code samples of the LEAP SDK documents (the SDK's seed documents 000 and 001,
// function calling; 002, ModelRunner / Conversation / GenerationOptions; 003, chat
// messages and audio), each compiled as written and run against the random-weights test
// model Tests/Fixtures/models/lfm2-tiny.gguf. Seed 002's `setResponseFormat(type:)` sample
// is in SeedSnippetGeneratableTests.swift; seed 004 (RunAnywhere) in
// Tests/RunAnywhereTests/SeedSnippets.swift.
//
// Each test loads the model with
// `Leap.load(url: URL(fileURLWithPath: path), options: seedTestModelOptions)` (the one line
// an app writes differently: a small context bounds unlimited generations, and a default
// seed makes the run reproducible), defines the app-side names a sample uses
// (`conversation`, `user`, `options`, `handleFunctionCalls`, `audioRenderer`, `updateUI`,
// `handleResponse`, `audioPlayer`, ...) as small local helpers that record what the
// sample did, and then checks the recording: lfm2-tiny's text is gibberish, but the API's
// behaviour (events, history, stop, cancel) is checkable. Where a sample calls `print`, a
// local `print` captures the text.
//
// Samples that update the UI run in `@MainActor` tests, as app code does, with plain
// helpers (`updateUI(with:)` is an ordinary main-actor function, not `@Sendable`): the
// SDK's callbacks are main-actor closures, so the samples compile unchanged under Swift 6.
//
// Declarations the seeds list (`public struct ...`, `public protocol ...`) are not
// statements; the `...Declarations` tests use each declared member with its declared type.
// Where leap-ref's type differs, the test says so and uses both (see docs/leap-sdk.md,
// "Differences from Liquid's SDK").
//
// Left out:
// - Kotlin samples (seeds 001 and 002 show Kotlin next to Swift): not Swift.
// - Seed 003 "Recording Audio on iOS" (`AVAudioRecorder`, `AVFormatIDKey`,
//   `kAudioFormatLinearPCM`, ...): needs AVFoundation, an Apple-only framework.
//
// Lines changed in a sample:
// - Seed 003 "Creating Audio Content from WAV Files": `Bundle.main` is the app's bundle;
//   in a test it is stood in for by a local `Bundle` whose `main.url(forResource:withExtension:)`
//   finds a WAV file the test wrote (the sample's text is unchanged).
// - Seed 003 "Creating Audio Content from Raw PCM Samples": `import AVFoundation` is
//   dropped (unused by the sample, and not available on Linux) and the `...` placeholder
//   in the sample array literal is replaced by concrete samples.
// - Samples whose loop body is only a comment get one added line recording the response
//   (marked `(test: record)`), since an unused loop variable draws a warning.

import Foundation
import TestSupport
import Testing

@testable import LeapSDK
@testable import LeapSDKCore

// MARK: - Helpers

/// A thread-safe list of things a sample produced.
final class SnippetRecorder<Element>: @unchecked Sendable {
    private let storage = Locked<[Element]>([])
    func append(_ element: Element) { storage.withLock { $0.append(element) } }
    var items: [Element] { storage.withLock { $0 } }
}

/// The path of the test model.
let seedTestModelPath = TestFixtures.path("models/lfm2-tiny.gguf")

/// A 192-token context: several samples generate without `maxOutputTokens`, and
/// random weights rarely end a turn, so the context bounds their run time. The samples
/// set no `rngSeed`; the default seed makes their runs reproducible.
let seedTestModelOptions = LiquidInferenceEngineOptions(contextSize: 192, defaultRNGSeed: 2002)

/// Stands in for an app's audio output in the seed 002 streaming snippet.
final class SnippetAudioRenderer: @unchecked Sendable {
    let enqueued = SnippetRecorder<(samples: [Float], sampleRate: Int)>()
    func enqueue(_ samples: [Float], sampleRate: Int) { enqueued.append((samples, sampleRate)) }
}

/// Stands in for an app's audio player in the seed 003 audio-output snippet.
final class SnippetAudioPlayer: @unchecked Sendable {
    let enqueued = SnippetRecorder<(samples: [Float], sampleRate: Int)>()
    func enqueue(samples: [Float], sampleRate: Int) { enqueued.append((samples, sampleRate)) }
}

/// The roles and texts of messages, for comparing histories (`ChatMessage` is not
/// `Equatable`: function-call arguments are `Any?`).
func roleTexts(_ messages: [ChatMessage]) -> [String] {
    messages.map { "\($0.role.rawValue): \($0.textContent)" }
}

// Seed 000, "Function Definition" (the comprehensive example), verbatim as a function body.
private func seed000ComprehensiveFunction() -> LeapFunction {
    LeapFunction(
        name: "get_weather",
        description: "Query the weather of cities",
        parameters: [
            LeapFunctionParameter(
                name: "cities",
                type: LeapFunctionParameterType.array(
                    ArrayType(itemType: .string(StringType()))
                ),
                description: "Names of the cities to query weather for"
            ),
            LeapFunctionParameter(
                name: "unit",
                type: LeapFunctionParameterType.string(
                    StringType(enumValues: ["celsius", "fahrenheit"])),
                description: "Temperature unit (celsius or fahrenheit)"
            )
        ]
    )
}

// Seed 001, "Example: array + enum parameters" (Swift), verbatim as a function body.
private func seed001ArrayEnumFunction() -> LeapFunction {
    LeapFunction(
        name: "get_weather",
        functionDescription: "Query the weather of cities",
        parameters: [
            LeapFunctionParameter(
                name: "cities",
                type: LeapFunctionParameterType.LeapArr(
                    itemType: LeapFunctionParameterType.LeapStr(enumValues: nil, description: nil),
                    description: nil
                ),
                parameterDescription: "Names of the cities to query weather for",
                optional: false
            ),
            LeapFunctionParameter(
                name: "unit",
                type: LeapFunctionParameterType.LeapStr(
                    enumValues: ["celsius", "fahrenheit"],
                    description: nil
                ),
                parameterDescription: "Temperature unit",
                optional: false
            )
        ]
    )
}

/// The `get_weather` function both seeds register, spelled out field by field.
let expectedGetWeather = LeapFunction(
    name: "get_weather", description: "Query the weather of a city",
    parameters: [
        LeapFunctionParameter(
            name: "city", type: .string(StringType(enumValues: nil, description: nil)),
            description: "The city to query weather for", optional: false),
        LeapFunctionParameter(
            name: "unit", type: .string(StringType(enumValues: ["celsius", "fahrenheit"], description: nil)),
            description: "Temperature unit (celsius or fahrenheit)", optional: false)
    ])

// MARK: - Seed 000: function calling (native Swift spelling)

@Suite(.serialized) struct SeedSnippet000FunctionCalling {
    @Test func registerFunctionsToConversations() async throws {
        let path = seedTestModelPath
        let modelRunner = try await Leap.load(url: URL(fileURLWithPath: path), options: seedTestModelOptions)
        let conversation = modelRunner.createConversation(systemPrompt: "You are a helpful assistant.")

        // Seed 000, "Register functions to conversations".
        conversation.registerFunction(
            LeapFunction(
                name: "get_weather",
                description: "Query the weather of a city",
                parameters: [
                    LeapFunctionParameter(
                        name: "city",
                        type: LeapFunctionParameterType.string(StringType()),
                        description: "The city to query weather for"
                    ),
                    LeapFunctionParameter(
                        name: "unit",
                        type: LeapFunctionParameterType.string(
                            StringType(enumValues: ["celsius", "fahrenheit"])),
                        description: "Temperature unit (celsius or fahrenheit)"
                    )
                ]
            )
        )

        #expect(conversation.functions == [expectedGetWeather])
        // The registered function reaches the prompt: it is longer than without it.
        let runner = try #require(modelRunner as? LiquidInferenceEngineRunner)
        let messages = conversation.history + [ChatMessage(role: .user, textContent: "hi")]
        let withTools = try runner.getPromptTokensSize(messages: messages, functions: conversation.functions)
        #expect(withTools > (try runner.getPromptTokensSize(messages: messages)))
    }

    @Test func handleFunctionCallingResponse() async throws {
        let path = seedTestModelPath
        let modelRunner = try await Leap.load(url: URL(fileURLWithPath: path), options: seedTestModelOptions)
        let conversation = modelRunner.createConversation(systemPrompt: "You are a helpful assistant.")
        conversation.registerFunction(expectedGetWeather)
        let printed = SnippetRecorder<String>()
        func print(_ items: Any..., separator: String = " ", terminator: String = "\n") {
            printed.append(items.map { "\($0)" }.joined(separator: separator) + terminator)
        }

        // Seed 000, "Handle Function Calling Response".
        let userMessage = ChatMessage(role: .user, content: [.text("What's the weather in NYC?")])

        for try await response in conversation.generateResponse(
            message: userMessage
        ) {
            switch response {
            case .functionCall(let calls):
                for call in calls {
                    // process function call here
                    print("Function call: \(call.name), \(call.arguments)")
                }
            case .audioSample:
                break  // Optional: route audio output elsewhere
            default:
                // process other responses
                break
            }
        }

        // The stream finished: the user message and the reply are in the history, and what
        // the snippet printed is exactly the calls of the reply.
        let history = conversation.history
        #expect(roleTexts(Array(history.prefix(2))) == ["system: You are a helpful assistant.", "user: What's the weather in NYC?"])
        #expect(history.count == 3)
        let reply = try #require(history.last)
        #expect(reply.role == .assistant)
        #expect(printed.items == (reply.functionCalls ?? []).map { "Function call: \($0.name), \($0.arguments)\n" })
        #expect(!conversation.isGenerating)
    }

    @Test func comprehensiveFunctionDefinition() throws {
        let function = seed000ComprehensiveFunction()
        #expect(function.parameters.map(\.name) == ["cities", "unit"])
        #expect(function.parameters.allSatisfy { !$0.optional })
        #expect(
            function.parametersSchema.serialized(.compact) == """
                {"type":"object","properties":{"cities":{"type":"array","items":{"type":"string"},\
                "description":"Names of the cities to query weather for"},"unit":{"type":"string","enum":["celsius","fahrenheit"],\
                "description":"Temperature unit (celsius or fahrenheit)"}},"required":["cities","unit"]}
                """)
    }

    @Test func functionCallParser() async throws {
        let path = seedTestModelPath
        let modelRunner = try await Leap.load(url: URL(fileURLWithPath: path), options: seedTestModelOptions)
        let conversation = modelRunner.createConversation(systemPrompt: nil)
        conversation.registerFunction(expectedGetWeather)
        let userMessage = ChatMessage(role: .user, content: [.text("What's the weather in NYC?")])
        let responses = SnippetRecorder<MessageResponse>()

        // Seed 000, "Function Call Parser" (plus one line recording the responses: the loop
        // variable is otherwise unused, which Swift warns about).
        var options = GenerationOptions()
        options.functionCallParser = HermesFunctionCallParser()
        for try await response in conversation.generateResponse(
            message: userMessage,
            generationOptions: options
        ) {
            // process message response here
            responses.append(response)  // (test: record)
        }

        #expect(options.functionCallParser is HermesFunctionCallParser)
        guard case .complete(let completion)? = responses.items.last else {
            Issue.record("the stream did not end with .complete")
            return
        }
        #expect(completion.stats?.completionTokens ?? 0 > 0)
        #expect(conversation.history.count == 2)
        #expect(conversation.history.last?.role == .assistant)
    }
}

extension SeedSnippet000FunctionCalling {
    @Test func declarations() {
        // `public enum MessageResponse { case functionCall([LeapFunctionCall]) ... }`
        let response = MessageResponse.functionCall([LeapFunctionCall(name: "f", arguments: [:])])
        guard case .functionCall(let calls) = response else {
            Issue.record("not a function call")
            return
        }
        #expect(calls.map(\.name) == ["f"])
        // `public struct LeapFunction: Equatable` / `LeapFunctionParameter: Equatable` with
        // their fields, `LeapFunctionParameterType: Codable, Equatable` with its cases.
        let function = seed000ComprehensiveFunction()
        let (name, description, parameters): (String, String, [LeapFunctionParameter]) =
            (function.name, function.description, function.parameters)
        #expect(name == "get_weather" && description == "Query the weather of cities" && parameters.count == 2)
        let parameter = parameters[1]
        let fields: (String, LeapFunctionParameterType, String, Bool) = (
            parameter.name, parameter.type, parameter.description, parameter.optional
        )
        #expect(fields.0 == "unit" && fields.1 == .string(StringType(enumValues: ["celsius", "fahrenheit"])) && !fields.3)
        let all: [LeapFunctionParameterType] = [
            .string(StringType()), .number(NumberType(enumValues: [1.5])), .integer(IntegerType(enumValues: [1])),
            .boolean(BooleanType()), .array(ArrayType(itemType: .null(NullType()))),
            .object(ObjectType(properties: ["a": .boolean(BooleanType())], required: ["a"])), .null(NullType())
        ]
        let decoded = try? JSONDecoder().decode([LeapFunctionParameterType].self, from: JSONEncoder().encode(all))
        #expect(decoded == all)
        #expect(function == seed000ComprehensiveFunction())
    }
}

// MARK: - Seed 001: function calling (Kotlin-bridged spelling)

@Suite(.serialized) struct SeedSnippet001FunctionCallingBridged {
    @Test func registerFunctionsOnTheConversation() async throws {
        let path = seedTestModelPath
        let modelRunner = try await Leap.load(url: URL(fileURLWithPath: path), options: seedTestModelOptions)
        let conversation = modelRunner.createConversation(systemPrompt: "You are a helpful assistant.")

        // Seed 001, "Register functions on the conversation" (Swift).
        conversation.registerFunction(
            function: LeapFunction(
                name: "get_weather",
                functionDescription: "Query the weather of a city",
                parameters: [
                    LeapFunctionParameter(
                        name: "city",
                        type: LeapFunctionParameterType.LeapStr(enumValues: nil, description: nil),
                        parameterDescription: "The city to query weather for",
                        optional: false
                    ),
                    LeapFunctionParameter(
                        name: "unit",
                        type: LeapFunctionParameterType.LeapStr(
                            enumValues: ["celsius", "fahrenheit"],
                            description: nil
                        ),
                        parameterDescription: "Temperature unit (celsius or fahrenheit)",
                        optional: false
                    )
                ]
            )
        )

        // The bridged spelling builds the same function as the native one of seed 000.
        #expect(conversation.functions == [expectedGetWeather])
    }

    @Test func handleTheResponseWithOnEnum() async throws {
        let path = seedTestModelPath
        let modelRunner = try await Leap.load(url: URL(fileURLWithPath: path), options: seedTestModelOptions)
        let conversation = modelRunner.createConversation(systemPrompt: "You are a helpful assistant.")
        conversation.registerFunction(expectedGetWeather)
        let printed = SnippetRecorder<String>()
        func print(_ items: Any..., separator: String = " ", terminator: String = "\n") {
            printed.append(items.map { "\($0)" }.joined(separator: separator) + terminator)
        }

        // Seed 001, "Handle the response" (Swift).
        let userMessage = ChatMessage(role: .user, textContent: "What's the weather in NYC?")
        for try await response in conversation.generateResponse(message: userMessage) {
            switch onEnum(of: response) {
            case .functionCalls(let payload):
                for call in payload.functionCalls {
                    print("Function call: \(call.name) \(call.arguments)")
                    // dispatch to your tool implementation
                }
            case .chunk, .reasoningChunk, .audioSample, .complete:
                break
            }
        }

        let history = conversation.history
        #expect(history.count == 3)
        let reply = try #require(history.last)
        #expect(reply.role == .assistant)
        #expect(printed.items == (reply.functionCalls ?? []).map { "Function call: \($0.name) \($0.arguments)\n" })
    }

    @Test func appendToolResultAndContinue() async throws {
        let path = seedTestModelPath
        let modelRunner = try await Leap.load(url: URL(fileURLWithPath: path), options: seedTestModelOptions)
        let conversation = modelRunner.createConversation(systemPrompt: "You are a helpful assistant.")
        for try await _ in conversation.generateResponse(
            userTextMessage: "What's the weather in NYC?",
            generationOptions: GenerationOptions(maxOutputTokens: 3))
        {}
        #expect(conversation.history.count == 3)

        // Seed 001, "Append the tool's output" (Swift).
        let toolMessage = ChatMessage(
            role: .tool,
            textContent: #"{"temperature":72,"conditions":"sunny"}"#
        )
        let updatedHistory = conversation.history + [toolMessage]
        let nextConversation = conversation.modelRunner.createConversationFromHistory(history: updatedHistory)
        // Continue generation against `nextConversation`.

        #expect(
            roleTexts(nextConversation.history) == roleTexts(conversation.history)
                + [#"tool: {"temperature":72,"conditions":"sunny"}"#])
        #expect(nextConversation.modelRunner === modelRunner)
        // "Then call generateResponse(...) on the new conversation": the tool message renders
        // with the model's template and the reply is appended.
        for try await _ in nextConversation.generateResponse(
            message: ChatMessage(role: .user, textContent: "And tomorrow?"),
            generationOptions: GenerationOptions(maxOutputTokens: 3))
        {}
        #expect(nextConversation.history.count == 6)
        #expect(nextConversation.history[3].role == .tool)
        #expect(conversation.history.count == 3)
    }

    @Test func arrayAndEnumParameters() {
        let function = seed001ArrayEnumFunction()
        var expected = seed000ComprehensiveFunction()
        expected.parameters[1].description = "Temperature unit"
        #expect(function == expected)
    }

    @Test func functionCallParser() async throws {
        let path = seedTestModelPath
        let modelRunner = try await Leap.load(url: URL(fileURLWithPath: path), options: seedTestModelOptions)
        let conversation = modelRunner.createConversation(systemPrompt: nil)
        let userMessage = ChatMessage(role: .user, textContent: "What's the weather in NYC?")
        let chunks = SnippetRecorder<MessageResponse>()

        // Seed 001, "Function call parser" (Swift), plus one line recording the responses.
        var options = GenerationOptions()
        options.functionCallParser = HermesFunctionCallParser()
        for try await response in conversation.generateResponse(
            message: userMessage,
            generationOptions: options
        ) {
            // ...
            chunks.append(response)  // (test: record)
        }

        guard case .complete(let completion)? = chunks.items.last else {
            Issue.record("the stream did not end with .complete")
            return
        }
        #expect(completion.stats?.completionTokens ?? 0 > 0)
        #expect(conversation.history.count == 2)
    }

    @Test func parameterTypeConstructors() {
        // Seed 001, "Parameter types" (Swift): each direct constructor, with the argument
        // types the seed lists (the bridged `[NSNumber]` and `[KotlinInt]` included).
        let str: ([String]?, String?) -> LeapFunctionParameterType = LeapFunctionParameterType.LeapStr(enumValues:description:)
        let num: ([NSNumber]?, String?) -> LeapFunctionParameterType = LeapFunctionParameterType.LeapNum(enumValues:description:)
        let int: ([KotlinInt]?, String?) -> LeapFunctionParameterType = LeapFunctionParameterType.LeapInt(enumValues:description:)
        let bool: (String?) -> LeapFunctionParameterType = LeapFunctionParameterType.LeapBool(description:)
        let arr: (LeapFunctionParameterType, String?) -> LeapFunctionParameterType =
            LeapFunctionParameterType.LeapArr(itemType:description:)
        let obj: ([String: LeapFunctionParameterType], [String], String?) -> LeapFunctionParameterType =
            LeapFunctionParameterType.LeapObj(properties:required:description:)
        let null: () -> LeapFunctionParameterType = LeapFunctionParameterType.LeapNull

        #expect(str(["a"], "d") == .string(StringType(enumValues: ["a"], description: "d")))
        #expect(num([NSNumber(value: 1.5), NSNumber(value: 2)], nil) == .number(NumberType(enumValues: [1.5, 2])))
        #expect(int([KotlinInt(int: 1), KotlinInt(value: 2), 3], nil) == .integer(IntegerType(enumValues: [1, 2, 3])))
        #expect(bool("b") == .boolean(BooleanType(description: "b")))
        #expect(arr(null(), nil) == .array(ArrayType(itemType: .null(NullType()))))
        #expect(obj(["x": bool(nil)], ["x"], nil) == .object(ObjectType(properties: ["x": .boolean(BooleanType())], required: ["x"])))
        #expect(null() == .null(NullType()))

        // The same calls spelled as an app writes them: Swift literals pick the native
        // overloads, bridged values the bridged ones, and `nil` is not ambiguous.
        #expect(LeapFunctionParameterType.LeapNum(enumValues: [1.5], description: nil) == .number(NumberType(enumValues: [1.5])))
        #expect(LeapFunctionParameterType.LeapNum(enumValues: nil, description: nil) == .number(NumberType()))
        #expect(LeapFunctionParameterType.LeapInt(enumValues: [1, 2], description: nil) == .integer(IntegerType(enumValues: [1, 2])))
        #expect(LeapFunctionParameterType.LeapInt(enumValues: nil, description: "n") == .integer(IntegerType(description: "n")))
        let kotlinInts: [KotlinInt] = [4, 5]
        #expect(LeapFunctionParameterType.LeapInt(enumValues: kotlinInts, description: nil) == .integer(IntegerType(enumValues: [4, 5])))
    }

    /// "SKIE generates an onEnum(of:)-compatible enum view" of `LeapFunctionParameterType`.
    @Test func onEnumOverParameterTypes() {
        func summary(_ type: LeapFunctionParameterType) -> String {
            switch onEnum(of: type) {
            case .leapStr(let s): return "str \(s.enumValues ?? [])"
            case .leapNum(let n): return "num \(n.enumValues ?? [])"
            case .leapInt(let i): return "int \(i.enumValues ?? [])"
            case .leapBool(let b): return "bool \(b.description ?? "")"
            case .leapArr(let a): return "arr of " + summary(a.itemType)
            case .leapObj(let o): return "obj \(o.properties.keys.sorted()) required \(o.required)"
            case .leapNull: return "null"
            }
        }
        #expect(summary(.LeapStr(enumValues: ["a", "b"], description: nil)) == #"str ["a", "b"]"#)
        #expect(summary(.LeapNum(enumValues: [NSNumber(value: 0.5)], description: nil)) == "num [0.5]")
        #expect(summary(.LeapInt(enumValues: [KotlinInt(int: 7)], description: nil)) == "int [7]")
        #expect(summary(.LeapBool(description: "flag")) == "bool flag")
        #expect(summary(.LeapArr(itemType: .LeapNull(), description: nil)) == "arr of null")
        #expect(
            summary(.LeapObj(properties: ["y": .LeapNull(), "x": .LeapNull()], required: ["x"], description: nil))
                == #"obj ["x", "y"] required ["x"]"#)
    }

    @Test func declarations() {
        // Seed 001, "LeapFunctionCall" (Swift): `arguments` is `[String: Any]`. Seed 000
        // declares `[String: Any?]` for the native spelling; both bindings compile.
        let call = LeapFunctionCall(name: "get_weather", arguments: ["city": "NYC", "days": 2, "unit": nil])
        let name: String = call.name
        let bridged: [String: Any] = call.arguments
        let native: [String: Any?] = call.arguments
        #expect(name == "get_weather")
        #expect(bridged["city"] as? String == "NYC")
        #expect(native["days"] as? Int == 2)
        #expect(bridged["unit"] is NSNull, "null arrives as NSNull, as through the ObjC bridge")
        // Seed 001, "LeapFunction" (Swift): the bridged initializers and renamed properties.
        var function = LeapFunction(name: "f", functionDescription: "d", parameters: [])
        function.functionDescription = "e"
        let functionDescription: String = function.functionDescription
        var parameter = LeapFunctionParameter(name: "p", type: .LeapBool(description: nil), parameterDescription: "q", optional: false)
        parameter.parameterDescription = "r"
        let parameterDescription: String = parameter.parameterDescription
        let optional: Bool = parameter.optional
        #expect(functionDescription == "e" && function.description == "e")
        #expect(parameterDescription == "r" && !optional)
    }
}

// MARK: - Seed 002: ModelRunner, Conversation, MessageResponse, GenerationOptions

@Suite(.serialized) struct SeedSnippet002ModelRunnerConversation {
    @Test func lowLevelGenerationAPIStop() async throws {
        let path = seedTestModelPath
        let modelRunner = try await Leap.load(url: URL(fileURLWithPath: path), options: seedTestModelOptions)
        let runner = modelRunner
        let conversation = runner.createConversationFromHistory(history: [
            ChatMessage(role: .system, textContent: "You are a helpful assistant."),
            ChatMessage(role: .user, textContent: "Tell me a long story.")
        ])
        let before = roleTexts(conversation.history)
        let options = GenerationOptions(temperature: 0.7)

        // Seed 002, "Low-level generation API" (Swift).
        let handler = runner.generateResponse(
            conversation: conversation,
            generationOptions: options,
            onResponseCallback: { message in
                // Handle MessageResponse values here
            },
            onErrorCallback: { error in
                // Handle LeapError
            }
        )
        // Stop generation early if needed
        handler.stop()

        // Without stop() the generation would run to the end of the context and append its
        // reply; stopped, it ends and leaves the history as it was.
        try await within(300, "the stopped generation to end") { await conversation.waitUntilIdle() }
        #expect(roleTexts(conversation.history) == before)
    }

    /// An app's view model, as the sample's `Task` would live in one: main-actor state, no
    /// `@Sendable` anywhere.
    @MainActor @Test func streamingGeneration() async throws {
        let path = seedTestModelPath
        let modelRunner = try await Leap.load(url: URL(fileURLWithPath: path), options: seedTestModelOptions)
        let conversation = modelRunner.createConversation(systemPrompt: nil)
        var printed: [String] = []
        let (finished, finish) = AsyncStream<Void>.makeStream()
        func print(_ items: Any..., separator: String = " ", terminator: String = "\n") {
            let line = items.map { "\($0)" }.joined(separator: separator) + terminator
            printed.append(line)
            // The sample's last line, on either path.
            if line.hasPrefix("Prompt tokens:") || line.hasPrefix("Generation failed") { finish.finish() }
        }
        var handledCalls: [[LeapFunctionCall]] = []
        func handleFunctionCalls(_ calls: [LeapFunctionCall]) { handledCalls.append(calls) }
        let audioRenderer = SnippetAudioRenderer()

        // Seed 002, "Streaming Generation" (Swift).
        let user = ChatMessage(role: .user, content: [.text("Hello! What can you do?")])
        Task {
            do {
                for try await response in conversation.generateResponse(
                    message: user,
                    generationOptions: GenerationOptions(temperature: 0.7)
                ) {
                    switch response {
                    case .chunk(let delta):
                        print(delta, terminator: "")
                    case .reasoningChunk(let thought):
                        print("Reasoning:", thought)
                    case .functionCall(let calls):
                        handleFunctionCalls(calls)
                    case .audioSample(let samples, let sampleRate):
                        audioRenderer.enqueue(samples, sampleRate: sampleRate)
                    case .complete(let completion):
                        let text = completion.message.content.compactMap { item in
                            if case .text(let value) = item { return value }
                            return nil
                        }.joined()
                        print("\nComplete:", text)
                        if let stats = completion.stats {
                            print("Prompt tokens: \(stats.promptTokens), completions: \(stats.completionTokens)")
                        }
                    }
                }
            } catch {
                print("Generation failed: \(error)")
            }
        }

        try await within(600, "the sample's last line") { for await _ in finished {} }
        let output = printed.joined()
        let history = conversation.history
        #expect(history.count == 2)
        let reply = try #require(history.last)
        let promptTokens = try (modelRunner as! LiquidInferenceEngineRunner).getPromptTokensSize(messages: [user])
        // The text printed after "Complete:" is the reply appended to the history, and the
        // stats line carries the prompt size and at least one generated token.
        #expect(output.contains("\nComplete: \(reply.textContent)\nPrompt tokens: \(promptTokens), completions: "))
        let completions = output.components(separatedBy: "completions: ").last.flatMap { Int($0.dropLast()) }
        #expect((completions ?? 0) > 0)
        #expect(handledCalls.flatMap { $0 }.count == reply.functionCalls?.count ?? 0)
        #expect(audioRenderer.enqueued.items.isEmpty, "a text-only model emits no audio")
        #expect(!output.contains("Generation failed"))
    }

    /// `updateUI(with:)` is what an app has: a main-actor method updating views.
    @MainActor @Test func callbackConvenienceStop() async throws {
        let path = seedTestModelPath
        let modelRunner = try await Leap.load(url: URL(fileURLWithPath: path), options: seedTestModelOptions)
        let conversation = modelRunner.createConversation(systemPrompt: "You are a helpful assistant.")
        let recorder = CallbackRecorder()
        func updateUI(with response: MessageResponse) { recorder.record(response) }
        let user = ChatMessage(role: .user, content: [.text("Hello! What can you do?")])

        // Seed 002, "Callback Convenience (Swift only)".
        let handler = conversation.generateResponse(message: user) { response in
            updateUI(with: response)
        }
        // Later
        handler?.stop()

        #expect(handler != nil)
        try await recorder.waitUntilDelivered(conversation)
        // A stopped generation still ends with .complete (on the main actor), and appends nothing.
        guard case .complete(let completion)? = recorder.responses.last else {
            Issue.record("the callback did not receive .complete: \(recorder.responses)")
            return
        }
        #expect(completion.finishReason == .stop)
        #expect(recorder.allOnMainQueue)
        #expect(roleTexts(conversation.history) == ["system: You are a helpful assistant."])
    }

    @MainActor @Test func callbackConvenienceWhileGenerating() async throws {
        let path = seedTestModelPath
        let modelRunner = try await Leap.load(url: URL(fileURLWithPath: path), options: seedTestModelOptions)
        let conversation = modelRunner.createConversation(systemPrompt: nil)
        let user = ChatMessage(role: .user, content: [.text("Hello! What can you do?")])
        let first = conversation.generateResponse(message: user) { _ in }
        // "If a generation is already running, the method returns nil and emits a .complete
        // message with finishReason == .stop via the callback."
        let second = CallbackRecorder()
        let refused = conversation.generateResponse(message: user) { second.record($0) }
        #expect(first != nil)
        #expect(refused == nil)
        first?.stop()
        try await second.waitUntilDelivered(conversation)
        guard case .complete(let completion)? = second.responses.first, second.responses.count == 1 else {
            Issue.record("expected exactly one .complete, got \(second.responses)")
            return
        }
        #expect(completion.finishReason == .stop)
    }

    @MainActor @Test func cancellationByTask() async throws {
        let path = seedTestModelPath
        let modelRunner = try await Leap.load(url: URL(fileURLWithPath: path), options: seedTestModelOptions)
        let conversation = modelRunner.createConversation(systemPrompt: nil)
        let handled = SnippetRecorder<MessageResponse>()
        func handleResponse(_ response: MessageResponse) { handled.append(response) }
        let user = ChatMessage(role: .user, content: [.text("Tell me a long story.")])

        // Seed 002, "Cancellation" (Swift).
        // Store the task
        let generationTask = Task {
            for try await response in conversation.generateResponse(message: user) {
                handleResponse(response)
            }
        }

        // Cancel later
        generationTask.cancel()

        _ = await generationTask.result
        try await within(300, "the cancelled generation to end") { await conversation.waitUntilIdle() }
        #expect(conversation.history.isEmpty, "a cancelled generation appends neither the message nor a partial reply")
        // The stream ended early: no .complete reached the consumer.
        #expect(!handled.items.contains { if case .complete = $0 { return true } else { return false } })
    }

    @Test func declarations() async throws {
        let path = seedTestModelPath
        let modelRunner = try await Leap.load(url: URL(fileURLWithPath: path), options: seedTestModelOptions)
        // ModelRunner
        let modelId: String = modelRunner.modelId
        #expect(!modelId.isEmpty)
        let conversation: Conversation = modelRunner.createConversation(systemPrompt: "s")
        let fromHistory: Conversation = modelRunner.createConversationFromHistory(history: conversation.history)
        #expect(fromHistory.history.count == 1)
        // Conversation
        let direct = Conversation(modelRunner: modelRunner, history: [])
        let _: ModelRunner = direct.modelRunner
        let _: [LeapFunction] = direct.functions
        let _: Bool = direct.isGenerating
        var completions: [MessageCompletion] = []
        for try await response in conversation.generateResponse(
            userTextMessage: "Hi", generationOptions: GenerationOptions(maxOutputTokens: 2))
        {
            if case .complete(let c) = response { completions.append(c) }
        }
        let completion = try #require(completions.first)
        // MessageCompletion, GenerationCompleteInfo, GenerationStats
        let info: GenerationCompleteInfo = completion.info
        #expect(info.finishReason == completion.finishReason)
        let stats = try #require(info.stats)
        let counts: (UInt64, UInt64, UInt64, Float) = (stats.promptTokens, stats.completionTokens, stats.totalTokens, stats.tokenPerSecond)
        #expect(counts.0 + counts.1 == counts.2)
        #expect(counts.1 == 2)
        // exportToJSON round-trips through ChatMessage(from:)
        let exported: [[String: Any]] = try conversation.exportToJSON()
        let reread = try exported.map { try ChatMessage(from: $0) }
        #expect(roleTexts(reread) == roleTexts(conversation.history))
        #expect(try ChatMessageContent(from: ["type": "text", "text": "x"]) == .text("x"))
        // GenerationOptions: every field, in the declared order; the parser defaults to LFM's.
        let all = GenerationOptions(
            temperature: 0.1, topP: 0.2, topK: 3, minP: 0.4, repetitionPenalty: 1.5, rngSeed: 6,
            enableThinking: true, maxOutputTokens: 8, sequenceLength: 9, cacheControl: .noCache,
            jsonSchemaConstraint: "{}", functionCallParser: nil)
        #expect(all.temperature == 0.1 && all.topP == 0.2 && all.topK == 3 && all.minP == 0.4)
        #expect(all.repetitionPenalty == 1.5 && all.rngSeed == 6 && all.enableThinking == true && all.maxOutputTokens == 8)
        #expect(
            all.sequenceLength == 9 && all.cacheControl == .noCache && all.jsonSchemaConstraint == "{}" && all.functionCallParser == nil)
        #expect(GenerationOptions().functionCallParser is LFMFunctionCallParser)
        #expect(GenerationOptions().temperature == nil && GenerationOptions().maxOutputTokens == nil)
        // ChatMessageRole
        #expect(ChatMessageRole.allCases.map(\.rawValue) == ["user", "system", "assistant", "tool"])
        // GenerationHandler is Sendable.
        func isSendable<T: Sendable>(_: T.Type) -> Bool { true }
        #expect(isSendable((any GenerationHandler).self))
        // "LiquidInferenceEngineRunner exposes ... getPromptTokensSize(messages:addBosToken:)".
        let engineRunner = try #require(modelRunner as? LiquidInferenceEngineRunner)
        let promptSize: Int = try engineRunner.getPromptTokensSize(messages: Array(conversation.history.prefix(2)), addBosToken: true)
        #expect(UInt64(promptSize) == stats.promptTokens)
        // The callbacks' declared types are `(MessageResponse) -> Void` and `(LeapError) -> Void`;
        // leap-ref's are main-actor closures of those types (see docs/leap-sdk.md).
        let onResponse: @MainActor (MessageResponse) -> Void = { _ in }
        let onError: @MainActor (LeapError) -> Void = { _ in }
        let stopped = modelRunner.generateResponse(
            conversation: fromHistory, generationOptions: nil, onResponseCallback: onResponse, onErrorCallback: onError)
        stopped.stop()
        try await within(300, "the stopped generation to end") { await fromHistory.waitUntilIdle() }
        // unload(): later generations fail with LeapError.modelUnloaded.
        await modelRunner.unload()
        await #expect(throws: LeapError.modelUnloaded) {
            for try await _ in conversation.generateResponse(userTextMessage: "Hi") {}
        }
    }
}

// MARK: - Seed 003: chat messages and audio

@Suite(.serialized) struct SeedSnippet003ChatMessageAudio {
    @Test func audioContentFromWAVFile() async throws {
        // The app bundle of the snippet: a directory holding audio.wav.
        let wavBytes = WAVAudio.encodeFloat32WAV(
            samples: (0..<16000).map { sin(Float($0) * 0.05) * 0.5 },
            sampleRate: 16000, channelCount: 1)
        try FileManager.default.createDirectory(at: SeedAppBundle.directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: SeedAppBundle.directory) }
        try wavBytes.write(to: SeedAppBundle.directory.appendingPathComponent("audio.wav"))
        enum Bundle { static var main: SeedAppBundle { SeedAppBundle() } }

        // Seed 003, "Creating Audio Content from WAV Files" (`import LeapSDK` is at the top of this file).
        // Load WAV file
        let wavURL = Bundle.main.url(forResource: "audio", withExtension: "wav")!
        let wavData = try Data(contentsOf: wavURL)

        let message = ChatMessage(
            role: .user,
            content: [
                .text("What is being said in this audio?"),
                .audio(wavData)
            ]
        )

        #expect(message.content == [.text("What is being said in this audio?"), .audio(wavBytes)])
        #expect(try message.content[1].monoSamples16kHz().count == 16000)
        // lfm2-tiny is text-only: the audio part is rejected with a typed error, and the
        // conversation is left as it was.
        let path = seedTestModelPath
        let modelRunner = try await Leap.load(url: URL(fileURLWithPath: path), options: seedTestModelOptions)
        let conversation = modelRunner.createConversation(systemPrompt: nil)
        do {
            for try await _ in conversation.generateResponse(message: message) {}
            Issue.record("a text-only model accepted audio")
        } catch let error as LeapError {
            guard case .unsupportedContent(let text) = error else {
                Issue.record("expected unsupportedContent, got \(error)")
                return
            }
            #expect(text.contains("audio"))
        }
        #expect(conversation.history.isEmpty)
        #expect(!conversation.isGenerating)
    }

    @Test func audioContentFromRawPCMSamples() throws {
        // Seed 003, "Creating Audio Content from Raw PCM Samples", without `import AVFoundation`
        // and with the `...` of the sample list filled in.
        // Float samples normalized to -1.0 to 1.0
        let samples: [Float] = [0.1, 0.2, 0.15, -0.3, 0.05, -0.1]

        // Create WAV-encoded Data
        let audioContent = ChatMessageContent.fromFloatSamples(
            samples,
            sampleRate: 16000,
            channelCount: 1
        )

        let message = ChatMessage(
            role: .user,
            content: [
                .text("Transcribe this audio"),
                audioContent
            ]
        )

        #expect(message.content.first == .text("Transcribe this audio"))
        guard case .audio(let data) = message.content[1] else {
            Issue.record("the second part is not audio")
            return
        }
        #expect(try WAVAudio(data: data).samples == samples)
        #expect(try WAVAudio(data: data).sampleRate == 16000)
    }

    @Test func audioOutputFromModels() async throws {
        let path = seedTestModelPath
        let modelRunner = try await Leap.load(url: URL(fileURLWithPath: path), options: seedTestModelOptions)
        let conversation = modelRunner.createConversation(systemPrompt: nil)
        let userMessage = ChatMessage(role: .user, textContent: "Say hello.")
        let audioPlayer = SnippetAudioPlayer()

        // Seed 003, "Audio Output from Models".
        for try await response in conversation.generateResponse(message: userMessage) {
            switch response {
            case .audioSample(let samples, let sampleRate):
                // samples: [Float] (32-bit float PCM, normalized -1.0 to 1.0)
                // sampleRate: Int (typically 24000 Hz for audio generation models)
                // Accumulate samples or play immediately
                audioPlayer.enqueue(samples: samples, sampleRate: sampleRate)
            default:
                break
            }
        }

        #expect(audioPlayer.enqueued.items.isEmpty, "a text-only model emits no audio")
        #expect(conversation.history.count == 2)
        #expect(conversation.history.last?.role == .assistant)
    }
}

/// Stands in for `Bundle.main` in the seed 003 WAV-file snippet: resources are files in a
/// temporary directory.
struct SeedAppBundle {
    static let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("leap-ref-seed-003-\(ProcessInfo.processInfo.processIdentifier)")
    func url(forResource name: String, withExtension ext: String) -> URL? {
        let url = Self.directory.appendingPathComponent(name).appendingPathExtension(ext)
        return FileManager.default.fileExists(atPath: url.path) ? url : nil
    }
}

// MARK: - The Kotlin bridge that seed 001's `onEnum(of:)` snippet needs

@Suite struct SeedSnippetKotlinBridge {
    @Test func onEnumMapsEveryCase() {
        guard case .chunk(let chunk) = onEnum(of: .chunk("hi")) else {
            Issue.record("chunk")
            return
        }
        #expect(chunk.text == "hi")
        guard case .reasoningChunk(let thought) = onEnum(of: .reasoningChunk("hmm")) else {
            Issue.record("reasoning")
            return
        }
        #expect(thought.reasoning == "hmm")
        let call = LeapFunctionCall(name: "get_weather", arguments: ["city": "Paris", "days": 2])
        guard case .functionCalls(let payload) = onEnum(of: .functionCall([call, call])) else {
            Issue.record("calls")
            return
        }
        #expect(payload.functionCalls.map(\.name) == ["get_weather", "get_weather"])
        #expect(payload.functionCalls[0].arguments["city"] as? String == "Paris")
        guard case .audioSample(let audio) = onEnum(of: .audioSample(samples: [0.5, -0.5], sampleRate: 24000)) else {
            Issue.record("audio")
            return
        }
        #expect(audio == MessageResponse.AudioSample(samples: [0.5, -0.5], sampleRate: 24000))
        let completion = MessageCompletion(
            message: ChatMessage(role: .assistant, textContent: "done"), finishReason: .exceedContext,
            stats: GenerationStats(promptTokens: 3, completionTokens: 4, totalTokens: 7, tokenPerSecond: 1))
        guard case .complete(let complete) = onEnum(of: .complete(completion)) else {
            Issue.record("complete")
            return
        }
        #expect(complete.fullMessage.textContent == "done")
        #expect(complete.finishReason == .exceedContext)
        #expect(complete.stats?.totalTokens == 7)
    }
}
