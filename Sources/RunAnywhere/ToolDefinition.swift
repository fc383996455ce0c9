import LeapSDKCore

/// The type of a tool parameter, as the model sees it in the tool's JSON Schema.
public indirect enum ToolParameterType: Sendable, Equatable, Hashable {
    case string
    case number
    case integer
    case boolean
    /// A list whose elements have the given type.
    case array(ToolParameterType)

    /// The LEAP parameter type (JSON Schema) of this type.
    public var leapType: LeapFunctionParameterType {
        switch self {
        case .string: return .string(StringType())
        case .number: return .number(NumberType())
        case .integer: return .integer(IntegerType())
        case .boolean: return .boolean(BooleanType())
        case .array(let element): return .array(ArrayType(itemType: element.leapType))
        }
    }
}

/// One parameter of a tool: its name, type, what it means, and whether the model must pass it.
public struct ToolParameter: Sendable, Equatable {
    public let name: String
    public let type: ToolParameterType
    public let description: String
    /// Whether the model must pass this parameter (default `true`).
    public let required: Bool
    /// For `.string` parameters: the only values allowed (nil: any string).
    public let enumValues: [String]?

    public init(
        name: String, type: ToolParameterType, description: String, required: Bool = true,
        enumValues: [String]? = nil
    ) {
        self.name = name
        self.type = type
        self.description = description
        self.required = required
        self.enumValues = enumValues
    }

    /// The LEAP form: `required` becomes `optional: !required`, enum values are kept for strings.
    public var leapParameter: LeapFunctionParameter {
        var leapType = type.leapType
        if type == .string, let enumValues { leapType = .string(StringType(enumValues: enumValues)) }
        return LeapFunctionParameter(name: name, type: leapType, description: description, optional: !required)
    }
}

/// A tool the model may call: its name, what it does (the model chooses tools by this
/// text, so be specific), and its parameters.
public struct ToolDefinition: Sendable, Equatable {
    public let name: String
    public let description: String
    public let parameters: [ToolParameter]

    public init(name: String, description: String, parameters: [ToolParameter]) {
        self.name = name
        self.description = description
        self.parameters = parameters
    }

    /// The tool as a LEAP function, registered on the conversation the loop generates with.
    public var leapFunction: LeapFunction {
        LeapFunction(name: name, description: description, parameters: parameters.map(\.leapParameter))
    }
}

/// A tool call the model made: the tool's name and its arguments.
public struct ToolCall: Sendable, Equatable, CustomStringConvertible {
    public let toolName: String
    public let arguments: [String: ToolValue]

    public init(toolName: String, arguments: [String: ToolValue]) {
        self.toolName = toolName
        self.arguments = arguments
    }

    /// The call converted from the model's parsed call (integers become numbers).
    public init(_ call: LeapFunctionCall) {
        self.init(toolName: call.name, arguments: ToolValue.dictionary(call.argumentsJSON))
    }

    /// E.g. `get_weather(city: "Paris", unit: "celsius")`, arguments in name order.
    public var description: String {
        let arguments = self.arguments.keys.sorted().map { "\($0): \(self.arguments[$0]!.jsonString)" }
        return "\(toolName)(\(arguments.joined(separator: ", ")))"
    }
}

/// What running one tool call produced: a result dictionary, or an error message.
public struct ToolResult: Sendable, Equatable, CustomStringConvertible {
    /// The tool that was called.
    public let toolName: String
    /// Whether the handler ran and returned a result.
    public let success: Bool
    /// The handler's result, on success.
    public let result: [String: ToolValue]?
    /// Why the call failed: the handler threw or timed out, the tool is unknown, or the
    /// call limit was reached.
    public let error: String?

    public init(toolName: String, success: Bool, result: [String: ToolValue]?, error: String?) {
        self.toolName = toolName
        self.success = success
        self.result = result
        self.error = error
    }

    /// A successful result.
    public static func succeeded(_ toolName: String, _ result: [String: ToolValue]) -> ToolResult {
        ToolResult(toolName: toolName, success: true, result: result, error: nil)
    }

    /// A failed result.
    public static func failed(_ toolName: String, _ error: String) -> ToolResult {
        ToolResult(toolName: toolName, success: false, result: nil, error: error)
    }

    /// What the model is told: the result's JSON text, or `{"error":"..."}`.
    public var messageText: String {
        if success, let result { return ToolValue.object(result).jsonString }
        return ToolValue.object(["error": .string(error ?? "the tool failed")]).jsonString
    }

    public var description: String { messageText }
}

/// Settings of one `generateWithTools` call.
public struct ToolCallingOptions: Sendable, Equatable {
    /// The documented default handler timeout: 30 seconds.
    public static let defaultToolTimeout: Duration = .seconds(30)

    /// Most tool calls executed per generation, over all rounds (default 5). When it is
    /// reached the model answers with calls forbidden; 0 forbids calls altogether.
    public var maxToolCalls: Int
    /// Run the calls and feed the results back (default `true`); `false` returns after the
    /// first reply with its calls unexecuted.
    public var autoExecute: Bool
    /// Sampling temperature (default 0.7); 0 is greedy.
    public var temperature: Double
    /// Most tokens per model reply (default 512).
    public var maxTokens: Int
    /// Seed of the random draw, for reproducible runs (default: none).
    public var rngSeed: UInt64?
    /// How long a handler may run before its call fails with a timeout (default 30 s).
    public var toolTimeout: Duration

    public init(
        maxToolCalls: Int = 5, autoExecute: Bool = true, temperature: Double = 0.7, maxTokens: Int = 512,
        rngSeed: UInt64? = nil, toolTimeout: Duration = ToolCallingOptions.defaultToolTimeout
    ) {
        self.maxToolCalls = maxToolCalls
        self.autoExecute = autoExecute
        self.temperature = temperature
        self.maxTokens = maxTokens
        self.rngSeed = rngSeed
        self.toolTimeout = toolTimeout
    }

    /// Throws `SDKError` `.invalidInput` for a negative limit, a non-positive token count,
    /// a negative or non-finite temperature, or a non-positive timeout.
    func validate() throws(SDKError) {
        guard maxToolCalls >= 0 else {
            throw SDKError(.invalidInput, "maxToolCalls is \(maxToolCalls); it must be 0 or more")
        }
        guard maxTokens > 0 else { throw SDKError(.invalidInput, "maxTokens is \(maxTokens); it must be at least 1") }
        guard temperature.isFinite, temperature >= 0 else {
            throw SDKError(.invalidInput, "temperature is \(temperature); it must be a finite number >= 0")
        }
        guard toolTimeout > .zero else { throw SDKError(.invalidInput, "toolTimeout is \(toolTimeout); it must be positive") }
    }

    /// The generation options of one model reply.
    var generationOptions: GenerationOptions {
        GenerationOptions(temperature: Float(temperature), rngSeed: rngSeed, maxOutputTokens: maxTokens)
    }
}

/// What `generateWithTools` returns.
public struct ToolCallingResult: Sendable, Equatable {
    /// The model's final reply text.
    public let text: String
    /// Every call the model made, in order. With `autoExecute`, `toolResults[i]` is the
    /// result of `toolCalls[i]`.
    public let toolCalls: [ToolCall]
    /// The results of the calls (empty when `autoExecute` is false).
    public let toolResults: [ToolResult]

    public init(text: String, toolCalls: [ToolCall], toolResults: [ToolResult]) {
        self.text = text
        self.toolCalls = toolCalls
        self.toolResults = toolResults
    }
}

/// What the tool loop reports while it runs (for live display, e.g. the CLI chat).
public enum ToolLoopEvent: Sendable {
    /// A piece of the model's reply text.
    case text(String)
    /// The model called a tool; the handler is about to run.
    case toolCall(ToolCall)
    /// A call finished (successfully or not).
    case toolResult(ToolCall, ToolResult)
}
