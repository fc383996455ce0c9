import Foundation

/// Who wrote a message in a conversation.
public enum ChatMessageRole: String, Sendable, Codable, CaseIterable {
    case user
    case system
    case assistant
    /// The result of a function (tool) call, fed back to the model.
    case tool
}

/// One fragment of a message: text, an image (JPEG bytes) or audio (WAV bytes).
public enum ChatMessageContent: Sendable, Equatable {
    case text(String)
    /// JPEG-encoded image bytes.
    case image(Data)
    /// WAV-encoded audio bytes (see `fromWAVData` and `fromFloatSamples`).
    case audio(Data)
}

/// A message of a conversation: its role, ordered content fragments, the reasoning text
/// a thinking model produced, and the function calls an assistant message requested.
public struct ChatMessage: Sendable {
    public var role: ChatMessageRole
    public var content: [ChatMessageContent]
    /// Text the model produced between `<think>` and `</think>`, if any.
    public var reasoningContent: String?
    /// The function calls this (assistant) message requested.
    public var functionCalls: [LeapFunctionCall]?
    /// A spoken reply's steps, in the order the model made them (text tokens, audio
    /// frames' codes): in the next turn the model reads these in place of the message's
    /// text and audio, as liquid-audio's chat state feeds a reply back. Set on the
    /// `.complete` message of a spoken reply; nil otherwise. leap-ref's addition (not
    /// exported with the history).
    public var speechSteps: [SpeechStep]?

    /// A message made of content fragments.
    public init(
        role: ChatMessageRole, content: [ChatMessageContent], reasoningContent: String? = nil,
        functionCalls: [LeapFunctionCall]? = nil
    ) {
        self.role = role
        self.content = content
        self.reasoningContent = reasoningContent
        self.functionCalls = functionCalls
    }

    /// A text-only message (the Kotlin-bridged spelling of the LEAP SDK).
    public init(role: ChatMessageRole, textContent: String) {
        self.init(role: role, content: [.text(textContent)])
    }

    /// The concatenated text fragments of the message.
    public var textContent: String {
        content.compactMap { if case .text(let t) = $0 { return t } else { return nil } }.joined()
    }
}
