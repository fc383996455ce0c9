// Seed 004's snippets, as written (the SwiftUI view left out; the view model keeps
// `@Observable` from the Observation module and is `@MainActor`, as a SwiftUI view model
// is, since Swift 6 requires it for the `[weak self]` capture in a `@Sendable` handler).
// Compiling this file is the test that the API matches the seed; `runBasicUsage()` runs one.
import Foundation
import Observation
import RunAnywhere

/// "Basic Usage".
func seedBasicUsage() async throws -> ToolCallingResult {
    // 1. Clear any previously registered tools
    await RunAnywhere.clearTools()

    // 2. Define and register a tool
    let weatherTool = ToolDefinition(
        name: "get_weather",
        description: "Get current weather for a city",
        parameters: [
            ToolParameter(name: "city", type: .string, description: "City name", required: true)
        ]
    )

    await RunAnywhere.registerTool(weatherTool) { args -> [String: ToolValue] in
        let city = args["city"]?.stringValue ?? "Unknown"
        return [
            "temperature": .number(72.0),
            "condition": .string("sunny"),
            "city": .string(city)
        ]
    }

    // 3. Generate with tools
    let options = ToolCallingOptions(
        maxToolCalls: 3,
        autoExecute: true,
        temperature: 0.7,
        maxTokens: 512
    )

    let result = try await RunAnywhere.generateWithTools(
        prompt: "What's the weather in San Francisco?",
        options: options
    )

    print(result.text)  // "The weather in San Francisco is 72°F and sunny."
    print(result.toolCalls)  // [ToolCall(toolName: "get_weather", ...)]
    print(result.toolResults)  // [ToolResult(success: true, ...)]
    return result
}

/// "Register Tools" and "Ensure LLM is Loaded".
func seedSetup() async throws {
    await RunAnywhere.clearTools()

    let tool = ToolDefinition(
        name: "tool_name",
        description: "What this tool does",
        parameters: [
            ToolParameter(name: "param1", type: .string, description: "First parameter", required: true),
            ToolParameter(name: "param2", type: .number, description: "Optional parameter", required: false)
        ]
    )

    await RunAnywhere.registerTool(tool) { args -> [String: ToolValue] in
        let value = args["param1"]?.stringValue ?? ""
        return ["result": .string("Processed: \(value)")]
    }

    try await RunAnywhere.loadModel(modelId: "llama-3.2-1b-instruct-q4")
}

/// "Examples": weather, calculator, current time, and the multi-tool flow (whose
/// `{ /* handler */ }` placeholders are filled with the handlers defined above them).
func seedExamples() async throws {
    let weatherTool = ToolDefinition(
        name: "get_weather",
        description: "Get current weather for a city including temperature and conditions",
        parameters: [
            ToolParameter(name: "city", type: .string, description: "City name", required: true)
        ]
    )

    let weatherHandler: @Sendable ([String: ToolValue]) async -> [String: ToolValue] = { args -> [String: ToolValue] in
        let city = args["city"]?.stringValue ?? "Unknown"

        // In production, call a real weather API here
        let conditions: [String: (Double, String)] = [
            "san francisco": (62.0, "foggy"),
            "new york": (45.0, "cloudy"),
            "miami": (82.0, "sunny")
        ]

        let key = city.lowercased()
        let (temp, condition) = conditions[key] ?? (70.0, "clear")

        return [
            "temperature": .number(temp),
            "condition": .string(condition),
            "city": .string(city)
        ]
    }
    await RunAnywhere.registerTool(weatherTool, handler: weatherHandler)

    let calcTool = ToolDefinition(
        name: "calculate",
        description: "Evaluate a mathematical expression and return the numeric result",
        parameters: [
            ToolParameter(name: "expression", type: .string, description: "Math expression (e.g. '2 + 3 * 4')", required: true)
        ]
    )

    // NSExpression does not exist in swift-corelibs-foundation: on Linux the seed's
    // handler uses the library's safe evaluator instead.
    let calcHandler: @Sendable ([String: ToolValue]) async -> [String: ToolValue] = { args -> [String: ToolValue] in
        let expr = args["expression"]?.stringValue ?? "0"
        #if canImport(Darwin)
        let expression = NSExpression(format: expr)
        if let result = expression.expressionValue(with: nil, context: nil) as? NSNumber {
            return ["result": .number(result.doubleValue)]
        }
        #else
        if let result = try? ArithmeticExpression.evaluate(expr) {
            return ["result": .number(result)]
        }
        #endif
        return ["error": .string("Could not evaluate expression")]
    }
    await RunAnywhere.registerTool(calcTool, handler: calcHandler)

    let timeTool = ToolDefinition(
        name: "get_current_time",
        description: "Get the current date and time",
        parameters: []
    )

    let timeHandler: @Sendable ([String: ToolValue]) async -> [String: ToolValue] = { _ -> [String: ToolValue] in
        let formatter = DateFormatter()
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss zzz"
        return [
            "datetime": .string(formatter.string(from: Date())),
            "timestamp": .number(Date().timeIntervalSince1970)
        ]
    }
    await RunAnywhere.registerTool(timeTool, handler: timeHandler)

    // Multi-Tool Chat Flow
    await RunAnywhere.clearTools()

    // Register weather, calculator, and time tools (as defined above)
    await RunAnywhere.registerTool(weatherTool) { await weatherHandler($0) }
    await RunAnywhere.registerTool(calcTool) { await calcHandler($0) }
    await RunAnywhere.registerTool(timeTool) { await timeHandler($0) }

    let options = ToolCallingOptions(
        maxToolCalls: 5,
        autoExecute: true,
        temperature: 0.7,
        maxTokens: 512
    )

    let result = try await RunAnywhere.generateWithTools(
        prompt: "What's the weather in Miami? Also, what's 15% tip on a $47.50 bill?",
        options: options
    )

    // The LLM will call get_weather AND calculate, then compose a final answer
    print(result.text)
    print("Tools called: \(result.toolCalls.map(\.toolName))")
}

/// "Error Handling".
func seedErrorHandling(prompt: String, options: ToolCallingOptions) async {
    do {
        let result = try await RunAnywhere.generateWithTools(
            prompt: prompt,
            options: options
        )

        // Check individual tool results for failures
        for toolResult in result.toolResults {
            if !toolResult.success {
                print("Tool failed: \(toolResult.error ?? "Unknown error")")
            }
        }
    } catch let error as SDKError {
        switch error.code {
        case .notInitialized:
            print("Load an LLM model before using tool calling")
        case .processingFailed:
            print("Generation failed: \(error.message)")
        default:
            print("Tool calling error: \(error)")
        }
    } catch {
        print("Unexpected error: \(error)")
    }
}

/// "Best Practices": validating arguments.
func seedBestPractices(tool: ToolDefinition) async {
    await RunAnywhere.registerTool(tool) { args -> [String: ToolValue] in
        guard let city = args["city"]?.stringValue, !city.isEmpty else {
            return ["error": .string("City parameter is required")]
        }
        // ...
        return ["city": .string(city)]
    }
}

/// "Complete SwiftUI Example": the view model.
@MainActor
@Observable
class ToolCallingViewModel {
    var prompt = ""
    var response = ""
    var toolLog: [String] = []
    var isProcessing = false

    func setup() async {
        await RunAnywhere.clearTools()

        let weatherTool = ToolDefinition(
            name: "get_weather",
            description: "Get current weather for a city",
            parameters: [
                ToolParameter(name: "city", type: .string, description: "City name", required: true)
            ]
        )

        await RunAnywhere.registerTool(weatherTool) { [weak self] args -> [String: ToolValue] in
            let city = args["city"]?.stringValue ?? "Unknown"
            await MainActor.run {
                self?.toolLog.append("🔧 get_weather(city: \"\(city)\")")
            }
            return [
                "temperature": .number(72.0),
                "condition": .string("sunny"),
                "city": .string(city)
            ]
        }
    }

    func send() async {
        guard !prompt.isEmpty else { return }

        isProcessing = true
        response = ""
        toolLog = []

        do {
            let options = ToolCallingOptions(
                maxToolCalls: 3,
                autoExecute: true,
                temperature: 0.7,
                maxTokens: 512
            )

            let result = try await RunAnywhere.generateWithTools(
                prompt: prompt,
                options: options
            )

            response = result.text

            for toolResult in result.toolResults {
                let status = toolResult.success ? "✅" : "❌"
                toolLog.append("\(status) Result: \(toolResult.result ?? [:])")
            }
        } catch {
            response = "Error: \(error.localizedDescription)"
        }

        isProcessing = false
    }
}
