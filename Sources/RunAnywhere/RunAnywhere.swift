import LeapSDKCore

/// The RunAnywhere-style tool-calling API: register tools, load a model, and
/// `generateWithTools`, which executes the model's calls and feeds the results back.
///
/// The static functions act on one process-wide `ToolCallingSession` (`RunAnywhere.shared`,
/// an actor); use your own sessions to keep separate models or tool sets.
public enum RunAnywhere {
    /// The session behind the static API.
    public static let shared = ToolCallingSession()

    /// Registers a tool and its handler (replacing a tool with the same name).
    public static func registerTool(
        _ definition: ToolDefinition,
        handler: @escaping @Sendable ([String: ToolValue]) async -> [String: ToolValue]
    ) async {
        await shared.registerTool(definition, handler: handler)
    }

    /// Registers a tool whose handler may throw (an error becomes a failed `ToolResult`).
    public static func registerTool(
        _ definition: ToolDefinition,
        handler: @escaping @Sendable ([String: ToolValue]) async throws -> [String: ToolValue]
    ) async {
        await shared.registerTool(definition, handler: handler)
    }

    /// Removes all registered tools.
    public static func clearTools() async {
        await shared.clearTools()
    }

    /// The registered tools' definitions.
    public static var registeredTools: [ToolDefinition] {
        get async { await shared.registeredTools }
    }

    /// Runs the automatic tool loop on `prompt`; see `ToolCallingSession.generateWithTools`.
    public static func generateWithTools(prompt: String, options: ToolCallingOptions = ToolCallingOptions())
        async throws -> ToolCallingResult
    {
        try await shared.generateWithTools(prompt: prompt, options: options)
    }

    /// Loads a model of the local model cache by id, e.g. `SmolLM2-135M-Instruct.Q4_1`
    /// (case-insensitive, without `.gguf`; a unique prefix also works).
    /// - Throws: `SDKError` `.modelNotFound` listing the available ids.
    public static func loadModel(modelId: String) async throws {
        try await shared.loadModel(modelId: modelId)
    }

    /// Loads the GGUF model at `path`.
    public static func loadModel(path: String) async throws {
        try await shared.loadModel(path: path)
    }

    /// Releases the loaded model.
    public static func unloadModel() async {
        await shared.unloadModel()
    }

    /// Whether a model is loaded.
    public static var isModelLoaded: Bool {
        get async { await shared.isModelLoaded }
    }
}
