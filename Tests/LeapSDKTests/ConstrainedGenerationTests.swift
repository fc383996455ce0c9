import Foundation
import LeapJSON
import TestSupport
import Testing

@testable import LeapSDK
@testable import LeapSDKCore

/// Functions registered in the constrained-call tests, with an independent check of a
/// call's arguments against them.
enum TestFunctions {
    static let all: [LeapFunction] = [
        LeapFunction(
            name: "get_weather", description: "Query the weather of a city",
            parameters: [
                // An enum, not a free string: lfm2-tiny's random weights close a free string only
                // when they happen to pick a token with a quote, often hundreds of tokens later.
                LeapFunctionParameter(
                    name: "city", type: .string(StringType(enumValues: ["Paris", "Lima", "Oslo"])),
                    description: "The city"),
                LeapFunctionParameter(
                    name: "unit", type: .string(StringType(enumValues: ["celsius", "fahrenheit"])),
                    description: "Temperature unit", optional: true)
            ]),
        LeapFunction(
            name: "add", functionDescription: "Add two integers",
            parameters: [
                LeapFunctionParameter(name: "a", type: .LeapInt(), parameterDescription: "First", optional: false),
                LeapFunctionParameter(name: "b", type: .LeapInt(), parameterDescription: "Second", optional: false)
            ]),
        LeapFunction(
            name: "set_mode", description: "Set flags",
            parameters: [
                LeapFunctionParameter(name: "flags", type: .array(ArrayType(itemType: .boolean(BooleanType()))), description: "Flags"),
                LeapFunctionParameter(name: "mode", type: .string(StringType(enumValues: ["fast", "slow"])), description: "Mode"),
                LeapFunctionParameter(name: "ratio", type: .number(NumberType()), description: "Ratio", optional: true)
            ]),
        LeapFunction(name: "get_time", description: "The current time", parameters: [])
    ]

    /// Why `call` does not fit the registered functions, or nil if it does.
    static func problem(_ call: LeapFunctionCall) -> String? {
        guard let f = all.first(where: { $0.name == call.name }) else { return "unknown function \(call.name)" }
        for key in call.arguments.keys where !f.parameters.contains(where: { $0.name == key }) {
            return "unknown argument \(key)"
        }
        for p in f.parameters {
            guard let value = call.arguments[p.name] else {
                if p.optional { continue }
                return "missing \(p.name)"
            }
            if let why = typeProblem(value, p.type) { return "\(p.name): \(why)" }
        }
        return nil
    }

    static func typeProblem(_ value: Any?, _ type: LeapFunctionParameterType) -> String? {
        switch type {
        case .string(let t):
            guard let s = value as? String else { return "not a string: \(String(describing: value))" }
            if let e = t.enumValues, !e.contains(s) { return "\(s) not in \(e)" }
        case .integer:
            guard value is Int else { return "not an integer: \(String(describing: value))" }
        case .number:
            guard value is Int || value is Double else { return "not a number" }
        case .boolean:
            guard value is Bool else { return "not a boolean" }
        case .array(let a):
            guard let items = value as? [Any?] else { return "not an array" }
            for item in items { if let why = typeProblem(item, a.itemType) { return "item: \(why)" } }
        case .object, .null:
            return nil
        }
        return nil
    }
}

/// A small JSON Schema validator for the keywords these tests use, written independently
/// of the grammar compiler: type, properties, required, additionalProperties: false, enum,
/// items, minItems, maxItems, minimum, maximum, minLength, maxLength.
func schemaProblem(_ value: JSONValue, _ schema: JSONValue, path: String = "$") -> String? {
    if let e = schema["enum"]?.arrayValue, !e.contains(value) { return "\(path): not in enum" }
    if let type = schema["type"]?.stringValue {
        let ok: Bool
        switch (type, value) {
        case ("object", .object), ("array", .array), ("string", .string), ("boolean", .bool), ("null", .null),
            ("integer", .integer), ("number", .integer), ("number", .double):
            ok = true
        default: ok = false
        }
        if !ok { return "\(path): expected \(type), got \(value.serialized())" }
    }
    if case .object(let o) = value {
        for r in schema["required"]?.arrayValue ?? [] where o[r.stringValue!] == nil { return "\(path): missing \(r.stringValue!)" }
        let props = schema["properties"]?.objectValue ?? JSONObject()
        for (k, v) in o {
            if let ps = props[k] {
                if let why = schemaProblem(v, ps, path: path + "." + k) { return why }
            } else if schema["additionalProperties"] == .bool(false) {
                return "\(path): unexpected property \(k)"
            }
        }
    }
    if case .array(let a) = value {
        if let n = schema["minItems"]?.intValue, a.count < n { return "\(path): fewer than \(n) items" }
        if let n = schema["maxItems"]?.intValue, a.count > n { return "\(path): more than \(n) items" }
        if let items = schema["items"] {
            for (i, e) in a.enumerated() { if let why = schemaProblem(e, items, path: "\(path)[\(i)]") { return why } }
        }
    }
    if case .string(let s) = value {
        if let n = schema["minLength"]?.intValue, s.count < n { return "\(path): shorter than \(n)" }
        if let n = schema["maxLength"]?.intValue, s.count > n { return "\(path): longer than \(n)" }
    }
    if let d = value.doubleValue {
        if let m = schema["minimum"]?.doubleValue, d < m { return "\(path): below \(m)" }
        if let m = schema["maximum"]?.doubleValue, d > m { return "\(path): above \(m)" }
    }
    return nil
}

@Suite(.serialized) struct ConstrainedGenerationTests {
    static let schemas: [String] = [
        #"{"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 120}}, "required": ["name", "age"], "additionalProperties": false}"#,
        #"{"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 4}"#,
        #"{"type": "object", "properties": {"color": {"enum": ["red", "green", "blue"]}, "ok": {"type": "boolean"}}, "required": ["color"], "additionalProperties": false}"#,
        #"{"type": "integer", "minimum": -50, "maximum": 50}"#,
        #"{"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3}, "score": {"type": "number"}}, "required": ["tags", "score"], "additionalProperties": false}"#
    ]

    /// lfm2-tiny has random weights: whatever it "wants", every constrained output must parse
    /// and validate. 50 generations over 5 schemas.
    @Test func fiftyConstrainedGenerationsAllValidate() async throws {
        let runner = try await TinyModel.load()
        var failures: [String] = []
        for i in 0..<50 {
            let schemaText = Self.schemas[i % Self.schemas.count]
            let conversation = runner.createConversation(systemPrompt: nil)
            let options = GenerationOptions(
                temperature: 1.0, rngSeed: UInt64(i), maxOutputTokens: 400,
                jsonSchemaConstraint: schemaText)
            let c = try await collect(conversation.generateResponse(userTextMessage: "Reply in JSON.", generationOptions: options))
            let text = try #require(c.completion).message.textContent
            guard let value = try? JSONValue.parse(text) else {
                failures.append("\(i): not JSON: \(text)")
                continue
            }
            if let why = schemaProblem(value, try JSONValue.parse(schemaText)) { failures.append("\(i): \(why): \(text)") }
            #expect(c.completion?.finishReason == .stop)
        }
        #expect(failures.isEmpty, "\(failures)")
    }

    @Test func anInvalidSchemaIsATypedErrorAndTheConversationStaysUsable() async throws {
        let runner = try await TinyModel.load()
        let conversation = runner.createConversation(systemPrompt: nil)
        for bad in [#"{"type": "object", "properties": "#, #"{"type": "strin"}"#, #"{"type": "string", "pattern": "(?<=a)b"}"#] {
            do {
                _ = try await collect(
                    conversation.generateResponse(
                        userTextMessage: "Hi", generationOptions: GenerationOptions(jsonSchemaConstraint: bad)))
                Issue.record("schema \(bad) was accepted")
            } catch let error as LeapError {
                guard case .generationFailure(let message) = error else {
                    Issue.record("wrong error \(error)")
                    continue
                }
                #expect(message.contains("jsonSchemaConstraint"))
            }
        }
        #expect(conversation.history.isEmpty)
        let ok = try await collect(
            conversation.generateResponse(
                userTextMessage: "Hi", generationOptions: GenerationOptions(rngSeed: 1, maxOutputTokens: 3)))
        #expect(ok.completion != nil)
    }

    /// With calls required, lfm2-tiny's first output is a call block; 100 generations all
    /// parse into calls of registered functions with valid arguments.
    @Test func hundredForcedCallsAllParseAndValidate() async throws {
        let runner = try await TinyModel.load(contextSize: 1024)
        var failures: [String] = []
        var names: Set<String> = []
        for i in 0..<100 {
            let conversation = runner.createConversation(systemPrompt: "You can call tools.")
            for f in TestFunctions.all { conversation.registerFunction(f) }
            var options = GenerationOptions(temperature: 1.0, rngSeed: UInt64(1000 + i), maxOutputTokens: 400)
            options.functionCallMode = .required
            // Like an app that only wants the calls: leave the loop at the first `.functionCall`,
            // which ends the generation (checked below).
            var calls: [LeapFunctionCall]?
            var text = ""
            for try await response in conversation.generateResponse(userTextMessage: "Do something.", generationOptions: options) {
                if case .functionCall(let c) = response {
                    calls = c
                    break
                }
                if case .chunk(let t) = response { text += t }
            }
            guard let calls, !calls.isEmpty else {
                failures.append("\(i): no calls; text \(text.debugDescription)")
                continue
            }
            for call in calls {
                names.insert(call.name)
                if let why = TestFunctions.problem(call) { failures.append("\(i): \(why) in \(call)") }
            }
            try await within(120, "the generation left at its first call to end") { await conversation.waitUntilIdle() }
            #expect(!conversation.isGenerating, "leaving the stream stops the generation")
            #expect(conversation.history.map(\.role) == [.system], "a stopped generation appends nothing")
        }
        #expect(failures.isEmpty, "\(failures.prefix(10))")
        #expect(names.count >= 3, "the random model should reach most functions: \(names)")
    }

    /// Hermes syntax, forced: the calls parse with the Hermes parser and validate.
    @Test func forcedHermesCallsParseAndValidate() async throws {
        let runner = try await TinyModel.load(contextSize: 1024)
        var failures: [String] = []
        for i in 0..<20 {
            let conversation = runner.createConversation(systemPrompt: nil)
            for f in TestFunctions.all { conversation.registerFunction(f) }
            var options = GenerationOptions(
                temperature: 1.0, rngSeed: UInt64(i), maxOutputTokens: 400,
                functionCallParser: HermesFunctionCallParser())
            options.functionCallMode = .required
            var calls: [LeapFunctionCall]?
            var text = ""
            for try await response in conversation.generateResponse(userTextMessage: "Go", generationOptions: options) {
                if case .functionCall(let c) = response {
                    calls = c
                    break
                }
                if case .chunk(let t) = response { text += t }
            }
            guard let calls, !calls.isEmpty else {
                failures.append("\(i): no calls: \(text.debugDescription)")
                continue
            }
            for call in calls { if let why = TestFunctions.problem(call) { failures.append("\(i): \(why)") } }
        }
        #expect(failures.isEmpty, "\(failures.prefix(10))")
    }

    /// With calls forbidden, the single-token start marker is never sampled, even when the
    /// model is pushed to call (calls were required in the previous turn of the history).
    @Test func forbiddenCallsNeverOpenACallBlock() async throws {
        let runner = try await TinyModel.load()
        let start = try #require(runner.loaded.singleTokenID("<|tool_call_start|>"))
        for i in 0..<10 {
            let conversation = runner.createConversation(systemPrompt: nil)
            for f in TestFunctions.all { conversation.registerFunction(f) }
            var options = GenerationOptions(temperature: 5.0, topP: 1, topK: 0, minP: 0, rngSeed: UInt64(i), maxOutputTokens: 60)
            options.functionCallMode = FunctionCallMode.none
            let c = try await collect(conversation.generateResponse(userTextMessage: "Call a tool", generationOptions: options))
            #expect(c.completion?.message.functionCalls == nil)
            #expect(!c.text.contains("<|tool_call_start|>"))
        }
        #expect(start > 0)
    }
}
