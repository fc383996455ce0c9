import Foundation
import LeapJSON
import LeapSDKCore
import Testing

@testable import RunAnywhere

@Suite("Arithmetic evaluator")
struct ArithmeticExpressionTests {
    @Test(arguments: [
        ("2 + 3 * 4", 14.0), ("(2 + 3) * 4", 20), ("10 - 4 - 3", 3), ("100 / 10 / 5", 2), ("7 % 3", 1),
        ("-7 % 3", -1), ("2 ^ 3 ^ 2", 512), ("-2 ^ 2", -4), ("(-2) ^ 2", 4), ("2 ^ -1", 0.5), ("--3", 3),
        ("-(4 - 6)", 2), ("+5", 5), ("1.5 * 4", 6), (".5 + .25", 0.75), ("47.50 * 0.15", 7.125),
        ("  ( ( 1 ) )  ", 1), ("2*3+4*5", 26), ("2 + 3 * 4 ^ 2 / 8", 8), ("9 ^ 0.5", 3), ("0 ^ 0", 1),
        ("1 ^ 99999999999", 1), ("(-1) ^ 1000001", -1), ("10 ^ -400", 0)
    ])
    func evaluates(expression: String, expected: Double) throws {
        #expect(try ArithmeticExpression.evaluate(expression) == expected)
    }

    @Test(arguments: [
        ("", "the expression is empty"), ("   ", "the expression is empty"),
        ("1 / 0", "division by zero"), ("5 % (3 - 3)", "remainder by zero"), ("0 ^ -1", "division by zero"),
        ("10 ^ 400", "too large"), ("2 ^ 99999999999", "too large"), ("9 ^ 9 ^ 9", "too large"),
        ("(-8) ^ 0.5", "not a real number"), ("2 +", "ends too early"), ("(1 + 2", "missing ')'"),
        ("1 + 2)", "unexpected ')'"), ("2 ** 3", "expected a number"), ("abc", "expected a number"),
        ("1.", "decimal point"), ("3 4", "unexpected '4'"), ("$47.50", "expected a number"),
        ("__import__('os')", "expected a number"), ("1e5", "unexpected 'e'")
    ])
    func rejects(expression: String, message: String) {
        #expect {
            _ = try ArithmeticExpression.evaluate(expression)
        } throws: { error in
            (error as? ArithmeticError)?.message.contains(message) == true
        }
    }

    @Test func errorsSayWhere() {
        #expect(throws: ArithmeticError("unexpected ')'", at: 5)) { try ArithmeticExpression.evaluate("1 + 2)") }
        #expect(ArithmeticError("unexpected ')'", at: 5).description == "unexpected ')' (at character 6)")
    }

    @Test func nestingIsLimited() throws {
        let ok =
            String(repeating: "(", count: ArithmeticExpression.maxDepth) + "1"
            + String(repeating: ")", count: ArithmeticExpression.maxDepth)
        #expect(try ArithmeticExpression.evaluate(ok) == 1)
        let deep = String(repeating: "(", count: 400) + "1" + String(repeating: ")", count: 400)
        #expect { _ = try ArithmeticExpression.evaluate(deep) } throws: { error in
            (error as? ArithmeticError)?.message.contains("nested more than") == true
        }
        let signs = String(repeating: "-", count: 900) + "1"
        #expect { _ = try ArithmeticExpression.evaluate(signs) } throws: { error in
            (error as? ArithmeticError)?.message.contains("nested more than") == true
        }
        let powers = Array(repeating: "1", count: 400).joined(separator: "^")
        #expect { _ = try ArithmeticExpression.evaluate(powers) } throws: { error in
            (error as? ArithmeticError)?.message.contains("nested more than") == true
        }
    }

    @Test func longInputIsRejected() {
        let long = Array(repeating: "1", count: 600).joined(separator: "+")
        #expect { _ = try ArithmeticExpression.evaluate(long) } throws: { error in
            (error as? ArithmeticError)?.message.contains("the limit is 1000") == true
        }
    }
}

@Suite("Demo tools")
struct DemoToolsTests {
    @Test func calculatorReturnsResultOrToolError() throws {
        #expect(try DemoTools.calculate(["expression": "2 + 3 * 4"]) == ["expression": "2 + 3 * 4", "result": 14])
        #expect(throws: DemoTools.ToolError("cannot evaluate '1/0': division by zero (at character 3)")) {
            try DemoTools.calculate(["expression": "1/0"])
        }
        #expect(throws: DemoTools.ToolError("the argument 'expression' (a string) is required")) {
            try DemoTools.calculate(["expression": 5])
        }
    }

    @Test func weatherIsDeterministicAndValidated() throws {
        let paris = try DemoTools.weatherReport(["city": "Paris"])
        var shouted = try DemoTools.weatherReport(["city": "  PARIS "])
        #expect(shouted["city"] == "PARIS")
        shouted["city"] = "Paris"
        #expect(shouted == paris)
        #expect(paris["city"] == "Paris")
        #expect(paris["unit"] == "celsius")
        #expect(paris["simulated"] == true)
        let celsius = try #require(paris["temperature"]?.numberValue)
        #expect((-5...35).contains(celsius))
        let fahrenheit = try DemoTools.weatherReport(["city": "Paris", "unit": "fahrenheit"])
        #expect(fahrenheit["temperature"]?.numberValue == (celsius * 9 / 5 + 32).rounded())
        // The line docs/function-calling.md shows.
        let call = ToolCall(toolName: "get_weather", arguments: ["city": "Paris", "unit": "fahrenheit"])
        #expect(
            "\(call) -> \(ToolResult.succeeded("get_weather", fahrenheit).messageText)"
                == #"get_weather(city: "Paris", unit: "fahrenheit") -> {"city":"Paris","condition":"snow","humidity":80,"simulated":true,"temperature":28,"unit":"fahrenheit"}"#
        )
        // Different cities are not all the same.
        let temperatures = Set(
            try ["Paris", "Tokyo", "Lima", "Oslo", "Cairo", "Quito"].map {
                try DemoTools.weatherReport(["city": .string($0)])["temperature"]!
            })
        #expect(temperatures.count > 1)
        #expect(throws: DemoTools.ToolError.self) { try DemoTools.weatherReport([:]) }
        #expect(throws: DemoTools.ToolError.self) { try DemoTools.weatherReport(["city": "  "]) }
        #expect(throws: DemoTools.ToolError("unknown unit 'kelvin'; use 'celsius' or 'fahrenheit'")) {
            try DemoTools.weatherReport(["city": "Paris", "unit": "kelvin"])
        }
    }

    @Test func currentTimeFormatsTheGivenInstant() throws {
        let instant = Date(timeIntervalSince1970: 1_700_000_000)
        let utc = try #require(TimeZone(secondsFromGMT: 0))
        let result = DemoTools.currentTimeResult(now: instant, timeZone: utc)
        #expect(result["datetime"] == "2023-11-14T22:13:20Z")
        #expect(result["timestamp"] == 1_700_000_000)
        #expect(result["timezone"] == .string(utc.identifier))
        let tokyo = try #require(TimeZone(identifier: "Asia/Tokyo"))
        #expect(DemoTools.currentTimeResult(now: instant, timeZone: tokyo)["datetime"] == "2023-11-15T07:13:20+09:00")
    }

    @Test func definitionsBecomeLeapFunctions() throws {
        let function = DemoTools.weather.leapFunction
        #expect(function.name == "get_weather")
        #expect(function.parameters.map(\.name) == ["city", "unit"])
        #expect(function.parameters.map(\.optional) == [false, true])
        #expect(function.parameters[1].type == .string(StringType(enumValues: ["celsius", "fahrenheit"])))
        let types: [ToolParameterType] = [.string, .number, .integer, .boolean, .array(.number)]
        #expect(
            types.map(\.leapType) == [
                .string(StringType()), .number(NumberType()), .integer(IntegerType()),
                .boolean(BooleanType()), .array(ArrayType(itemType: .number(NumberType())))
            ])
    }

    @Test func registerAddsAllThree() async {
        let session = ToolCallingSession()
        await DemoTools.register(on: session)
        #expect(await session.registeredTools.map(\.name) == ["calculate", "get_current_time", "get_weather"])
    }
}

@Suite("Tool values, results and errors")
struct ToolValueTests {
    @Test func accessors() {
        let value: ToolValue = ["s": "x", "n": 2.5, "i": 3, "b": true, "a": [1, "y"], "z": .null]
        let object = value.objectValue!
        #expect(object["s"]?.stringValue == "x")
        #expect(object["n"]?.numberValue == 2.5)
        #expect(object["n"]?.intValue == nil)
        #expect(object["i"]?.intValue == 3)
        #expect(object["b"]?.boolValue == true)
        #expect(object["a"]?.arrayValue == [.number(1), .string("y")])
        #expect(object["z"]?.isNull == true)
        #expect(object["s"]?.numberValue == nil)
        #expect(value.jsonString == #"{"a":[1,"y"],"b":true,"i":3,"n":2.5,"s":"x","z":null}"#)
    }

    @Test func jsonRoundTrip() throws {
        let json = try JSONValue.parse(#"{"city":"Paris","n":[1,2.5,{"deep":null}],"ok":false}"#)
        let value = ToolValue(json: json)
        #expect(value.jsonValue == json)
    }

    @Test func callArgumentsConvert() {
        let call = ToolCall(LeapFunctionCall(name: "f", arguments: ["n": 3, "s": "x", "l": [true, nil], "o": ["k": 1.5]]))
        #expect(call.toolName == "f")
        #expect(call.arguments == ["n": 3, "s": "x", "l": [true, .null], "o": ["k": 1.5]])
        #expect(call.description == #"f(l: [true,null], n: 3, o: {"k":1.5}, s: "x")"#)
    }

    @Test func resultMessageText() {
        #expect(ToolResult.succeeded("f", ["a": 1]).messageText == #"{"a":1}"#)
        #expect(ToolResult.failed("f", "bad \"input\"").messageText == #"{"error":"bad \"input\""}"#)
    }

    @Test func sdkErrorCodesAndMessages() {
        let error = SDKError(.modelNotFound, "no model 'x'")
        #expect(error.code == .modelNotFound)
        #expect(error.message == "no model 'x'")
        #expect(error.localizedDescription == "no model 'x'")
        #expect(SDKError.from(LeapError.modelLoadingFailure("bad file")).code == .modelLoadFailed)
        #expect(SDKError.from(LeapError.generationFailure("x")).code == .processingFailed)
        #expect(SDKError.from(LeapError.modelUnloaded).code == .notInitialized)
        #expect(SDKError.from(CancellationError()).code == .cancelled)
        #expect(
            Set(SDKError.Code.allCases).isSuperset(of: [
                .notInitialized, .processingFailed, .invalidInput,
                .modelNotFound, .timeout
            ]))
    }

    @Test func generateWithoutModelIsNotInitialized() async throws {
        let session = ToolCallingSession()
        do {
            _ = try await session.generateWithTools(prompt: "hi")
            Issue.record("expected an error")
        } catch let error as SDKError {
            #expect(error.code == .notInitialized)
        }
        do {
            _ = try await session.generateWithTools(prompt: "  ")
            Issue.record("expected an error")
        } catch let error as SDKError {
            #expect(error.code == .invalidInput)
        }
    }
}

@Suite("Model cache id resolution")
struct LocalModelCacheTests {
    /// A temporary cache with the given (empty) files.
    func cache(_ names: [String]) throws -> LocalModelCache {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ra-cache-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for name in names { try Data().write(to: directory.appendingPathComponent(name)) }
        return LocalModelCache(directory: directory.path)
    }

    @Test func resolvesExactIdsCaseInsensitively() throws {
        let cache = try cache(["SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct.Q8_0.gguf", "notes.txt"])
        #expect(cache.availableModelIds() == ["SmolLM2-135M-Instruct.Q4_1", "SmolLM2-135M-Instruct.Q8_0"])
        #expect(try cache.path(forModelId: "smollm2-135m-instruct.q4_1") == cache.directory + "/SmolLM2-135M-Instruct.Q4_1.gguf")
        #expect(try cache.path(forModelId: "SmolLM2-135M-Instruct.Q8_0.gguf") == cache.directory + "/SmolLM2-135M-Instruct.Q8_0.gguf")
    }

    @Test func uniquePrefixResolvesAmbiguousOneDoesNot() throws {
        let single = try cache(["SmolLM2-135M-Instruct.Q4_1.gguf", "lfm2-tiny.gguf"])
        #expect(try single.path(forModelId: "smollm2-135m-instruct") == single.directory + "/SmolLM2-135M-Instruct.Q4_1.gguf")
        let several = try cache(["SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct.Q8_0.gguf"])
        #expect(
            throws: SDKError(
                .invalidInput,
                "the model id 'smollm2' matches several cached models: "
                    + "SmolLM2-135M-Instruct.Q4_1, SmolLM2-135M-Instruct.Q8_0; use one of these ids")
        ) {
            try several.path(forModelId: "smollm2")
        }
    }

    @Test func unknownIdListsAvailableModels() throws {
        let cache = try cache(["lfm2-tiny.gguf"])
        #expect(
            throws: SDKError(
                .modelNotFound, "no model 'llama-3.2-1b-instruct-q4' in the model cache \(cache.directory); available: lfm2-tiny")
        ) {
            try cache.path(forModelId: "llama-3.2-1b-instruct-q4")
        }
        let empty = LocalModelCache(directory: cache.directory + "/missing")
        #expect { try empty.path(forModelId: "x") } throws: { error in
            (error as? SDKError)?.code == .modelNotFound && "\(error)".contains("scripts/setup.sh")
        }
        #expect(throws: SDKError(.invalidInput, "the model id is empty")) { try cache.path(forModelId: " ") }
    }
}
