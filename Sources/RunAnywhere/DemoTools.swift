import Foundation

/// Built-in demo tools (used by `leap-ref chat --tools demo`): a safe calculator, the
/// current time, and a deterministic fake weather report.
public enum DemoTools {
    /// An error of a demo tool, shown to the model as `{"error": ...}`.
    public struct ToolError: Error, Sendable, Equatable, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    /// `calculate(expression)`: evaluates arithmetic with `ArithmeticExpression`.
    public static let calculator = ToolDefinition(
        name: "calculate",
        description: "Evaluate an arithmetic expression with + - * / % ^ and parentheses, and return the numeric result",
        parameters: [
            ToolParameter(name: "expression", type: .string, description: "Math expression (e.g. '2 + 3 * 4')", required: true)
        ])

    /// `get_current_time()`: the local date and time.
    public static let currentTime = ToolDefinition(
        name: "get_current_time", description: "Get the current date and time", parameters: [])

    /// `get_weather(city, unit?)`: a made-up but deterministic weather report.
    public static let weather = ToolDefinition(
        name: "get_weather",
        description: "Get the current weather for a city: temperature, conditions and humidity",
        parameters: [
            ToolParameter(name: "city", type: .string, description: "City name", required: true),
            ToolParameter(
                name: "unit", type: .string, description: "Temperature unit (default celsius)", required: false,
                enumValues: ["celsius", "fahrenheit"])
        ])

    /// The demo tools with their handlers.
    public static var all: [(definition: ToolDefinition, handler: ToolHandler)] {
        [
            (calculator, { try calculate($0) }),
            (currentTime, { _ in currentTimeResult(now: Date(), timeZone: .current) }),
            (weather, { try weatherReport($0) })
        ]
    }

    /// Registers the demo tools on `session`.
    public static func register(on session: ToolCallingSession) async {
        for tool in all { await session.registerTool(tool.definition, handler: tool.handler) }
    }

    /// The calculator's handler: `{"expression": ..., "result": ...}`.
    /// - Throws: `ToolError` for a missing expression or one that cannot be evaluated.
    public static func calculate(_ arguments: [String: ToolValue]) throws -> [String: ToolValue] {
        guard let expression = arguments["expression"]?.stringValue else {
            throw ToolError("the argument 'expression' (a string) is required")
        }
        do {
            return ["expression": .string(expression), "result": .number(try ArithmeticExpression.evaluate(expression))]
        } catch {
            throw ToolError("cannot evaluate '\(expression)': \(error)")
        }
    }

    /// The time tool's result for `now` in `timeZone`: `datetime` (ISO 8601 with offset),
    /// `timezone` (identifier), `timestamp` (Unix seconds).
    public static func currentTimeResult(now: Date, timeZone: TimeZone) -> [String: ToolValue] {
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = timeZone
        formatter.formatOptions = [.withInternetDateTime]
        return [
            "datetime": .string(formatter.string(from: now)),
            "timezone": .string(timeZone.identifier),
            "timestamp": .number(now.timeIntervalSince1970.rounded())
        ]
    }

    /// The fake weather for `city`: always the same for the same city (ignoring case and
    /// surrounding spaces), marked `"simulated": true`.
    /// - Throws: `ToolError` for a missing or empty city or an unknown unit.
    public static func weatherReport(_ arguments: [String: ToolValue]) throws -> [String: ToolValue] {
        guard let city = arguments["city"]?.stringValue?.trimmingWhitespace, !city.isEmpty else {
            throw ToolError("the argument 'city' (a non-empty string) is required")
        }
        let unit = arguments["unit"]?.stringValue?.lowercased() ?? "celsius"
        guard unit == "celsius" || unit == "fahrenheit" else {
            throw ToolError("unknown unit '\(unit)'; use 'celsius' or 'fahrenheit'")
        }
        // FNV-1a of the normalized name: stable across runs and platforms (unlike hashValue).
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in city.lowercased().utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        let conditions = ["sunny", "partly cloudy", "cloudy", "foggy", "light rain", "windy", "snow"]
        let celsius = Double(Int(hash % 41) - 5)  // -5 ... 35
        let condition = celsius < 2 ? "snow" : conditions[Int((hash >> 8) % UInt64(conditions.count - 1))]
        let temperature = unit == "celsius" ? celsius : (celsius * 9 / 5 + 32).rounded()
        return [
            "city": .string(city),
            "temperature": .number(temperature),
            "unit": .string(unit),
            "condition": .string(condition),
            "humidity": .number(Double(30 + (hash >> 16) % 61)),
            "simulated": .bool(true)
        ]
    }
}
