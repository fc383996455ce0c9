import Foundation

// LEAP SDK v0.10's Swift spelling, beside the seeds'.
//
// Liquid's v0.10 Swift SDK is generated from Kotlin by SKIE: `ChatMessage` is a class with a
// nested `Role` enum and secondary initializers, `ChatMessageContent` is a sealed class that
// Swift code switches over with `onEnum(of:)` (`case .text(let t)`: `t.text`;
// `case .audio(let a)`: `a.data.toData()`), Kotlin arrays reach Swift as `KotlinFloatArray` /
// `KotlinByteArray` that code converts with `toFloatArray()` / `toData()`, and the payload of
// `MessageResponse.Complete` is named `MessageResponseComplete`. leap-ref keeps the seeds'
// native types (a struct, enums, `[Float]`, `Data`) and adds these names over them, so code
// written for either SDK compiles. See docs/leap-sdk.md, "Coming from LEAP SDK v0.10".

// MARK: - ChatMessage

extension ChatMessage {
    /// v0.10's name of the message role (`ChatMessage.Role`, a Kotlin enum nested in the
    /// class): the same type as `ChatMessageRole`, so `.user`, `.system`, `.assistant` and
    /// `.tool` work with either name.
    public typealias Role = ChatMessageRole

    /// A message with one content part: v0.10's secondary initializer
    /// `ChatMessage(role:content:)` taking a single `ChatMessageContent`, the same as
    /// `ChatMessage(role: role, content: [content])`.
    ///
    ///     let content = ChatMessageContent.fromFloatSamples(samples, sampleRate: 16000)
    ///     let message = ChatMessage(role: .user, content: content)
    public init(role: ChatMessageRole, content: ChatMessageContent) {
        self.init(role: role, content: [content])
    }
}

/// v0.10's free-function spelling of `ChatMessage(role:content:)` with an array of parts
/// (SKIE's name for the Kotlin constructor taking a list, which some v0.10 example code
/// calls): the same as `ChatMessage(role: role, content: content)`.
// swift-format-ignore: AlwaysUseLowerCamelCase
public func ChatMessage_withArray(role: ChatMessageRole, content: [ChatMessageContent]) -> ChatMessage {
    ChatMessage(role: role, content: content)
}

// MARK: - MessageResponse payloads

/// The payload of a finished generation under v0.10's name (Kotlin's
/// `MessageResponse.Complete`, exported to Swift as `MessageResponseComplete`): the
/// assembled message (`fullMessage`), `finishReason` and `stats`. The same type as
/// `MessageCompletion`, which `onEnum(of: response)` gives in its `.complete` case.
public typealias MessageResponseComplete = MessageCompletion

/// v0.10's name of the `.chunk` payload of `onEnum(of: response)` (its `text`).
public typealias MessageResponseChunk = MessageResponse.Chunk

/// v0.10's name of the `.reasoningChunk` payload of `onEnum(of: response)` (its `reasoning`).
public typealias MessageResponseReasoningChunk = MessageResponse.ReasoningChunk

/// v0.10's name of the `.functionCalls` payload of `onEnum(of: response)` (its `functionCalls`).
public typealias MessageResponseFunctionCalls = MessageResponse.FunctionCalls

/// v0.10's name of the `.audioSample` payload of `onEnum(of: response)` (its `samples` and
/// `sampleRate`).
public typealias MessageResponseAudioSample = MessageResponse.AudioSample

extension MessageResponse {
    /// The `.complete` payload under its Kotlin nested name (`MessageResponse.Complete`);
    /// the same type as `MessageCompletion` and `MessageResponseComplete`.
    public typealias Complete = MessageCompletion
}

// MARK: - Error messages

extension LeapError: LocalizedError {
    /// The error's `description`, so that `error.localizedDescription`, which v0.10's
    /// examples show to the user ("Failed to load model: \(error.localizedDescription)"),
    /// says what went wrong instead of Foundation's "The operation could not be completed".
    public var errorDescription: String? { description }
}

// MARK: - ChatMessageContent's sealed-class view

extension ChatMessageContent {
    /// A text part as v0.10's `onEnum(of:)` presents it (Kotlin's `ChatMessageContent.Text`).
    public struct Text: Sendable, Equatable {
        /// The text.
        public let text: String

        /// A text payload.
        public init(text: String) { self.text = text }
    }

    /// An image part as v0.10's `onEnum(of:)` presents it (Kotlin's `ChatMessageContent.Image`).
    public struct Image: Sendable, Equatable {
        /// The JPEG bytes (v0.10's `jpegByteArray`; `toData()` gives them as `Data`, as it
        /// does for a `KotlinByteArray`).
        public let jpegByteArray: Data

        /// An image payload.
        public init(jpegByteArray: Data) { self.jpegByteArray = jpegByteArray }
    }

    /// An audio part as v0.10's `onEnum(of:)` presents it (Kotlin's `ChatMessageContent.Audio`).
    public struct Audio: Sendable, Equatable {
        /// The WAV bytes (v0.10's `data`; `toData()` gives them as `Data`, as it does for a
        /// `KotlinByteArray`).
        public let data: Data

        /// An audio payload.
        public init(data: Data) { self.data = data }
    }

    /// The cases of a `ChatMessageContent` as SKIE's `onEnum(of:)` presents the Kotlin sealed
    /// class: one case per subclass, each carrying that subclass's fields.
    public enum Sealed: Sendable, Equatable {
        /// A text part: `t.text`.
        case text(Text)
        /// An image part: `i.jpegByteArray`.
        case image(Image)
        /// An audio part: `a.data`.
        case audio(Audio)
    }

    /// This part in the Kotlin-bridged shape (see `onEnum(of:)`).
    public var sealed: Sealed {
        switch self {
        case .text(let text): return .text(Text(text: text))
        case .image(let jpeg): return .image(Image(jpegByteArray: jpeg))
        case .audio(let wav): return .audio(Audio(data: wav))
        }
    }
}

/// The Kotlin-bridged (SKIE) way to switch over a `ChatMessageContent`, as LEAP SDK v0.10
/// code writes it:
///
///     let text = completion.fullMessage.content.compactMap { content -> String? in
///         if case .text(let t) = onEnum(of: content) { return t.text }
///         return nil
///     }.joined()
///     if case .audio(let a) = onEnum(of: content) { play(a.data.toData()) }
///
/// Native Swift code can switch over `ChatMessageContent` directly instead.
public func onEnum(of content: ChatMessageContent) -> ChatMessageContent.Sealed {
    content.sealed
}

// MARK: - Bridged-array conversions

// In v0.10, Kotlin's `FloatArray` and `ByteArray` reach Swift as `KotlinFloatArray` and
// `KotlinByteArray`, and code converts them: `audioSample.samples.toFloatArray()`,
// `audioContent.data.toData()`. leap-ref's fields are `[Float]` and `Data` already; these
// conversions return them unchanged, so code written either way compiles. They are
// disfavoured, so an app's own extension of the same name wins over them.

extension Array where Element == Float {
    /// The samples themselves: v0.10's `KotlinFloatArray.toFloatArray()`, for code that
    /// converts `MessageResponse.AudioSample.samples` (already `[Float]` in leap-ref).
    @_disfavoredOverload
    public func toFloatArray() -> [Float] { self }
}

extension Data {
    /// The bytes themselves: v0.10's `KotlinByteArray.toData()`, for code that converts
    /// `ChatMessageContent.Audio.data` or `.Image.jpegByteArray` (already `Data` in leap-ref).
    @_disfavoredOverload
    public func toData() -> Data { self }
}

/// v0.10's array helpers (Kotlin's `ArrayConversions.kt`, exported to Swift as
/// `ArrayConversionsKt`), which example code uses to move audio between a float array and
/// bytes: the floats' bytes in the host's order (little-endian on every platform leap-ref
/// runs on), four bytes a sample.
public enum ArrayConversionsKt {
    /// The bytes of `array`, four a sample (v0.10's `floatArrayToNSData(array:)`).
    public static func floatArrayToNSData(array: [Float]) -> Data {
        array.withUnsafeBytes { Data($0) }
    }

    /// The floats whose bytes `data` holds, four bytes a sample (v0.10's
    /// `nsDataToFloatArray(data:)`); bytes after the last whole sample are left out.
    public static func nsDataToFloatArray(data: Data) -> [Float] {
        let count = data.count / MemoryLayout<Float>.size
        guard count > 0 else { return [] }
        return [Float](unsafeUninitializedCapacity: count) { buffer, initialized in
            data.withUnsafeBytes { bytes in
                UnsafeMutableRawBufferPointer(buffer).copyMemory(
                    from: UnsafeRawBufferPointer(rebasing: bytes.prefix(count * MemoryLayout<Float>.size)))
            }
            initialized = count
        }
    }
}
