import Foundation
import LeapSDKCore

/// A tool-calling agent: a loaded model, the registered tools, and `generateWithTools`,
/// which runs the automatic tool loop. `RunAnywhere`'s static API uses one shared session;
/// create your own to keep separate tool sets (tests do, so that they can run in parallel).
public actor ToolCallingSession {
    /// The model the session generates with (nil until one is loaded).
    public private(set) var modelRunner: ModelRunner?
    /// The system message that starts each `generateWithTools` conversation.
    public var systemPrompt: String?
    /// Where `loadModel(modelId:)` looks for models.
    public let modelCache: LocalModelCache
    /// The conversation of the last `generateWithTools` (its history holds the prompt, each
    /// reply with its calls, and the `.tool` result messages).
    public private(set) var lastConversation: Conversation?

    private var tools: [RegisteredTool] = []
    /// The function-call mode of the first reply of each generation: nil (the model
    /// decides), `.required` (the first reply must call a registered tool: useful with small
    /// models that do not call on their own), or `.none`.
    public private(set) var firstRoundCallMode: FunctionCallMode?

    /// A session without a model; load one with `loadModel(modelId:)` or `loadModel(path:)`.
    public init(systemPrompt: String? = nil, modelCache: LocalModelCache = .standard) {
        self.systemPrompt = systemPrompt
        self.modelCache = modelCache
    }

    /// A session generating with an already loaded model.
    public init(modelRunner: ModelRunner, systemPrompt: String? = nil, modelCache: LocalModelCache = .standard) {
        self.modelRunner = modelRunner
        self.systemPrompt = systemPrompt
        self.modelCache = modelCache
    }

    // MARK: Model

    /// Loads the model `modelId` names in the model cache (see `LocalModelCache`), replacing
    /// the current one.
    /// - Throws: `SDKError` `.modelNotFound` (listing the available ids), `.invalidInput`
    ///   (ambiguous id), `.modelLoadFailed`.
    public func loadModel(modelId: String) async throws {
        try await loadModel(path: try modelCache.path(forModelId: modelId))
    }

    /// Loads the GGUF model at `path`, replacing the current one.
    /// - Throws: `SDKError` `.modelNotFound` when there is no file, `.modelLoadFailed`.
    public func loadModel(path: String) async throws {
        guard FileManager.default.fileExists(atPath: path) else {
            throw SDKError(.modelNotFound, "no model file at \(path)")
        }
        do {
            modelRunner = try await Leap.load(path: path)
        } catch {
            throw SDKError.from(error)
        }
    }

    /// Generates with `runner` from now on.
    public func setModelRunner(_ runner: ModelRunner?) { modelRunner = runner }

    /// Releases the model; generation fails with `.notInitialized` until another is loaded.
    public func unloadModel() async {
        let runner = modelRunner
        modelRunner = nil
        await runner?.unload()
    }

    /// Whether a model is loaded.
    public var isModelLoaded: Bool { modelRunner != nil }

    // MARK: Tools

    /// Registers a tool, replacing one with the same name. The handler receives the
    /// model's arguments and returns the result the model is shown.
    public func registerTool(
        _ definition: ToolDefinition,
        handler: @escaping @Sendable ([String: ToolValue]) async -> [String: ToolValue]
    ) {
        register(RegisteredTool(definition: definition, handler: { await handler($0) }))
    }

    /// Registers a tool whose handler may throw; an error becomes a failed `ToolResult`
    /// whose `error` is the error's description, and the model is shown `{"error": ...}`.
    public func registerTool(
        _ definition: ToolDefinition,
        handler: @escaping @Sendable ([String: ToolValue]) async throws -> [String: ToolValue]
    ) {
        register(RegisteredTool(definition: definition, handler: handler))
    }

    private func register(_ tool: RegisteredTool) {
        tools.removeAll { $0.definition.name == tool.definition.name }
        tools.append(tool)
    }

    /// Removes all registered tools.
    public func clearTools() { tools.removeAll() }

    /// The registered tools' definitions, in registration order.
    public var registeredTools: [ToolDefinition] { tools.map(\.definition) }

    /// Sets `firstRoundCallMode`.
    public func setFirstRoundCallMode(_ mode: FunctionCallMode?) { firstRoundCallMode = mode }

    // MARK: Generation

    /// Sends `prompt` in a new conversation with the registered tools and runs the tool
    /// loop: the model's calls are executed (each handler limited to
    /// `options.toolTimeout`), their results fed back as `.tool` messages, and the model
    /// asked again, until it answers without calls or `options.maxToolCalls` calls have
    /// run (then it answers with calls forbidden).
    ///
    /// - Parameter onEvent: receives the reply text as it streams, and each call and result.
    /// - Throws: `SDKError` `.notInitialized` without a model, `.invalidInput` for bad
    ///   options or an empty prompt, `.processingFailed` when generation fails.
    public func generateWithTools(
        prompt: String, options: ToolCallingOptions = ToolCallingOptions(),
        onEvent: @escaping @Sendable (ToolLoopEvent) -> Void = { _ in }
    )
        async throws -> ToolCallingResult
    {
        guard !prompt.trimmingWhitespace.isEmpty else { throw SDKError(.invalidInput, "the prompt is empty") }
        guard let runner = modelRunner else {
            throw SDKError(.notInitialized, "no model is loaded; call loadModel(modelId:) or loadModel(path:) first")
        }
        let generator = ConversationRoundGenerator(conversation: runner.createConversation(systemPrompt: systemPrompt))
        lastConversation = generator.conversation
        defer { lastConversation = generator.conversation }
        return try await run(
            ChatMessage(role: .user, content: [.text(prompt)]), generator: generator,
            options: options, generationOptions: nil, onEvent: onEvent)
    }

    /// Runs the tool loop on an existing conversation (e.g. a chat's), answering `message`
    /// with the registered tools. Returns the result and the conversation to continue
    /// with (a new one of the same runner when several tool results had to be added).
    ///
    /// - Parameter generationOptions: the sampling settings of each reply; nil builds them
    ///   from `options` (temperature, maxTokens, rngSeed). The call mode is set per reply.
    public func respond(
        to message: ChatMessage, in conversation: Conversation,
        options: ToolCallingOptions = ToolCallingOptions(), generationOptions: GenerationOptions? = nil,
        onEvent: @escaping @Sendable (ToolLoopEvent) -> Void = { _ in }
    )
        async throws -> (result: ToolCallingResult, conversation: Conversation)
    {
        let generator = ConversationRoundGenerator(conversation: conversation)
        let result = try await run(
            message, generator: generator, options: options,
            generationOptions: generationOptions, onEvent: onEvent)
        return (result, generator.conversation)
    }

    /// The loop with any round generator (tests pass a scripted one).
    func run(
        _ message: ChatMessage, generator: ToolRoundGenerator, options: ToolCallingOptions,
        generationOptions: GenerationOptions?, onEvent: @escaping @Sendable (ToolLoopEvent) -> Void
    )
        async throws(SDKError) -> ToolCallingResult
    {
        let loop = ToolLoop(
            tools: tools, options: options, generationOptions: generationOptions ?? options.generationOptions,
            firstRoundCallMode: firstRoundCallMode, onEvent: onEvent)
        return try await loop.run(message, with: generator)
    }
}
