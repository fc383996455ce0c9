import Foundation

// The Kotlin-bridged spelling of `MessageResponse`.
//
// Liquid's Swift SDK is generated from Kotlin by SKIE: `MessageResponse` is a Kotlin
// sealed interface whose subclasses (`Chunk`, `ReasoningChunk`, `FunctionCalls`,
// `AudioSample`, `Complete`) carry their fields, and Swift code switches over it with
// `switch onEnum(of: response) { case .functionCalls(let payload): payload.functionCalls ... }`.
// leap-ref's `MessageResponse` is a native Swift enum; `onEnum(of:)` gives code written for
// the bridged SDK the same shape, so it compiles unchanged.

extension MessageResponse {
    /// A piece of reply text (the bridged `MessageResponse.Chunk`).
    public struct Chunk: Sendable, Equatable {
        /// The text of this piece.
        public let text: String
        public init(text: String) { self.text = text }
    }

    /// A piece of reasoning text (the bridged `MessageResponse.ReasoningChunk`).
    public struct ReasoningChunk: Sendable, Equatable {
        /// The reasoning text of this piece.
        public let reasoning: String
        public init(reasoning: String) { self.reasoning = reasoning }
    }

    /// Function calls the model requested (the bridged `MessageResponse.FunctionCalls`).
    public struct FunctionCalls: Sendable {
        /// The calls, in the order the model wrote them.
        public let functionCalls: [LeapFunctionCall]
        public init(functionCalls: [LeapFunctionCall]) { self.functionCalls = functionCalls }
    }

    /// PCM audio from an audio-capable model (the bridged `MessageResponse.AudioSample`).
    public struct AudioSample: Sendable, Equatable {
        /// Float samples in [-1, 1].
        public let samples: [Float]
        /// Samples per second; constant within one generation.
        public let sampleRate: Int
        public init(samples: [Float], sampleRate: Int) {
            self.samples = samples
            self.sampleRate = sampleRate
        }
    }

    /// The cases of a `MessageResponse` as SKIE's `onEnum(of:)` presents a Kotlin sealed
    /// class: one case per subclass, each carrying that subclass's fields. The `.complete`
    /// payload is `MessageCompletion`, which has the bridged names `fullMessage`,
    /// `finishReason` and `stats`.
    public enum Sealed: Sendable {
        case chunk(Chunk)
        case reasoningChunk(ReasoningChunk)
        case functionCalls(FunctionCalls)
        case audioSample(AudioSample)
        case complete(MessageCompletion)
    }

    /// This response in the Kotlin-bridged shape (see `onEnum(of:)`).
    public var sealed: Sealed {
        switch self {
        case .chunk(let text): return .chunk(Chunk(text: text))
        case .reasoningChunk(let reasoning): return .reasoningChunk(ReasoningChunk(reasoning: reasoning))
        case .functionCall(let calls): return .functionCalls(FunctionCalls(functionCalls: calls))
        case .audioSample(let samples, let sampleRate): return .audioSample(AudioSample(samples: samples, sampleRate: sampleRate))
        case .complete(let completion): return .complete(completion)
        }
    }
}

/// The Kotlin-bridged (SKIE) way to switch over a `MessageResponse`:
///
///     switch onEnum(of: response) {
///     case .functionCalls(let payload):
///         for call in payload.functionCalls { ... }
///     case .chunk, .reasoningChunk, .audioSample, .complete:
///         break
///     }
///
/// Native Swift code can switch over `MessageResponse` directly instead.
public func onEnum(of response: MessageResponse) -> MessageResponse.Sealed {
    response.sealed
}

// MARK: - Parameter types

// Liquid's Swift SDK bridges `LeapFunctionParameterType` from a Kotlin sealed class: its
// constructors take the ObjC-bridged argument types (`[NSNumber]` for `LeapNum`'s enum
// values, `[KotlinInt]` for `LeapInt`'s), and `onEnum(of:)` switches over a parameter type.
// leap-ref's native types take Swift numbers; the overloads below accept the bridged ones.

/// A 32-bit integer boxed the way Kotlin/Native bridges `kotlin.Int` to Swift, for code
/// written against the bridged SDK (`LeapInt(enumValues: [KotlinInt(int: 1)])`). Integer
/// literals work too (`[1, 2] as [KotlinInt]`).
public struct KotlinInt: Sendable, Hashable, ExpressibleByIntegerLiteral, CustomStringConvertible {
    /// The value.
    public let int32Value: Int32

    /// Kotlin/Native's `KotlinInt(int:)`.
    public init(int value: Int32) { int32Value = value }
    /// Kotlin/Native's `KotlinInt(value:)`.
    public init(value: Int32) { int32Value = value }
    public init(integerLiteral value: Int32) { int32Value = value }

    /// The value as `Int`.
    public var intValue: Int { Int(int32Value) }
    public var description: String { String(int32Value) }
}

extension LeapFunctionParameterType {
    /// A number restricted to `enumValues`, given as the bridged SDK's `NSNumber`s.
    @_disfavoredOverload
    public static func LeapNum(enumValues: [NSNumber]?, description: String? = nil) -> LeapFunctionParameterType {
        .number(NumberType(enumValues: enumValues?.map(\.doubleValue), description: description))
    }

    /// An integer restricted to `enumValues`, given as the bridged SDK's `KotlinInt`s.
    @_disfavoredOverload
    public static func LeapInt(enumValues: [KotlinInt]?, description: String? = nil) -> LeapFunctionParameterType {
        .integer(IntegerType(enumValues: enumValues?.map(\.intValue), description: description))
    }

    /// The cases of a parameter type as SKIE's `onEnum(of:)` presents the Kotlin sealed
    /// class: one case per subclass (`LeapStr`, `LeapNum`, ...), lower-camel-cased, each
    /// carrying that subclass's fields (`enumValues`, `description`, `itemType`,
    /// `properties`, `required`).
    public enum Sealed: Sendable, Equatable {
        case leapStr(StringType)
        case leapNum(NumberType)
        case leapInt(IntegerType)
        case leapBool(BooleanType)
        case leapArr(ArrayType)
        case leapObj(ObjectType)
        case leapNull(NullType)
    }

    /// This type in the Kotlin-bridged shape (see `onEnum(of:)`).
    public var sealed: Sealed {
        switch self {
        case .string(let t): return .leapStr(t)
        case .number(let t): return .leapNum(t)
        case .integer(let t): return .leapInt(t)
        case .boolean(let t): return .leapBool(t)
        case .array(let t): return .leapArr(t)
        case .object(let t): return .leapObj(t)
        case .null(let t): return .leapNull(t)
        }
    }
}

/// The Kotlin-bridged (SKIE) way to switch over a `LeapFunctionParameterType`:
///
///     switch onEnum(of: parameter.type) {
///     case .leapStr(let s): print(s.enumValues ?? [])
///     case .leapArr(let a): print(a.itemType)
///     default: break
///     }
public func onEnum(of type: LeapFunctionParameterType) -> LeapFunctionParameterType.Sealed {
    type.sealed
}
