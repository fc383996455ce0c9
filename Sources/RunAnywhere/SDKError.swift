import Foundation
import LeapSDKCore

/// An error of the RunAnywhere API: what kind (`code`) and a message saying what went
/// wrong and what to do.
public struct SDKError: Error, Sendable, Equatable, CustomStringConvertible, LocalizedError {
    /// The kinds of failure.
    public enum Code: String, Sendable, Equatable, CaseIterable {
        /// No model is loaded: call `RunAnywhere.loadModel(modelId:)` (or `loadModel(path:)`) first.
        case notInitialized
        /// An argument is invalid (a negative limit, an ambiguous model id, ...).
        case invalidInput
        /// No model in the local cache matches the id, or the file does not exist.
        case modelNotFound
        /// The model file exists but could not be loaded.
        case modelLoadFailed
        /// Generation failed in the engine.
        case processingFailed
        /// An operation took longer than allowed.
        case timeout
        /// The task was cancelled.
        case cancelled
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }
    public var errorDescription: String? { message }

    /// A LEAP engine error as an SDK error.
    static func from(_ error: Error) -> SDKError {
        switch error {
        case let error as SDKError: return error
        case let error as LeapError:
            switch error {
            case .modelLoadingFailure(let m): return SDKError(.modelLoadFailed, m)
            case .modelUnloaded: return SDKError(.notInitialized, error.description)
            default: return SDKError(.processingFailed, error.description)
            }
        case is CancellationError: return SDKError(.cancelled, "the generation was cancelled")
        default: return SDKError(.processingFailed, String(describing: error))
        }
    }
}
