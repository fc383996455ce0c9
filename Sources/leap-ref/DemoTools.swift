import ArgumentParser
import Foundation
import LeapSDKCore
import RunAnywhere

/// The tool sets `leap-ref chat --tools` offers.
enum ChatTools: String, ExpressibleByArgument, CaseIterable {
    /// RunAnywhere's `DemoTools`: calculate, get_current_time, get_weather.
    case demo

    /// A tool-calling session with these tools, generating with `runner`.
    func makeSession(runner: ModelRunner) async throws -> ToolCallingSession {
        let session = ToolCallingSession(modelRunner: runner)
        switch self {
        case .demo: await DemoTools.register(on: session)
        }
        return session
    }
}

extension ChatSession {
    /// The most tool calls per chat message.
    static let maxToolCallsPerMessage = 5

    /// Answers `text` with RunAnywhere's tool loop: the reply streams, each call is printed
    /// with its result (`[tool] get_weather(city: "Paris") -> {...}`), results go back to
    /// the model, and it continues. Returns the conversation to continue with.
    func replyWithTools(to message: ChatMessage, session: ToolCallingSession) async throws -> Conversation {
        let interactive = self.interactive
        let toolOptions = ToolCallingOptions(
            maxToolCalls: Self.maxToolCallsPerMessage,
            maxTokens: options.maxOutputTokens ?? 512)
        do {
            let (_, next) = try await session.respond(
                to: message, in: conversation, options: toolOptions,
                generationOptions: options,
                onEvent: { event in
                    switch event {
                    case .text(let piece): writeOut(piece)
                    case .toolCall: break
                    case .toolResult(let call, let result):
                        let line = "[tool] \(call) -> \(result.messageText)"
                        writeOut(interactive ? "\n\u{1B}[2m\(line)\u{1B}[0m\n" : "\n\(line)\n")
                    }
                })
            writeOut("\n")
            return next
        } catch let error as SDKError {
            writeOut("\n")
            FileHandle.standardError.write(Data("[error: \(error.message)]\n".utf8))
            return conversation
        }
    }
}
