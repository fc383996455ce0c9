/// Why loading a model by name failed (`Leap.shared.load(model:quantization:…)`,
/// `LeapModelLibrary`, `leap-ref pull`). Each case names the model and, where one is at
/// fault, the file; its description says what to do.
public enum ModelLibraryError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The library has no manifest for this name and quantization (the `model-manifest`
    /// endpoint refused it).
    case unknownModel(model: String, quantization: String, status: Int)
    /// A file the manifest names (or the manifest itself) is not on the server (HTTP 404 or 410).
    case fileNotFound(model: String, file: String, url: String)
    /// The server answered a request for a file with another error status.
    case httpStatus(model: String, file: String, url: String, status: Int)
    /// A file's sha256 is not the one stated (the server's ETag) or recorded at its first
    /// download. A downloaded file is deleted, never put in place; a cached one is deleted
    /// and downloaded again before this is reported.
    case checksumMismatch(model: String, file: String, expected: String, actual: String)
    /// The server could not be reached (connection refused, unknown host, offline, timed
    /// out), or the connection kept breaking after the download's retries.
    case networkUnavailable(model: String, file: String, url: String, reason: String)
    /// The disk is full (or the quota is reached) while writing `path`.
    case diskFull(model: String, file: String, path: String)
    /// Another file-system error while writing the cache (permissions, a missing folder).
    case fileSystem(model: String, file: String, path: String, reason: String)
    /// The manifest names a runtime leap-ref does not have.
    case unsupportedInferenceType(model: String, type: String)
    /// The manifest (or the endpoint's answer) cannot be read.
    case invalidManifest(model: String, reason: String)
    /// The load's task was cancelled while downloading; a partial file stays in the cache
    /// and the next load resumes it.
    case cancelled(model: String)

    /// The model the error is about.
    public var model: String {
        switch self {
        case .unknownModel(let m, _, _), .fileNotFound(let m, _, _), .httpStatus(let m, _, _, _),
            .checksumMismatch(let m, _, _, _), .networkUnavailable(let m, _, _, _), .diskFull(let m, _, _),
            .fileSystem(let m, _, _, _), .unsupportedInferenceType(let m, _), .invalidManifest(let m, _), .cancelled(let m):
            return m
        }
    }

    /// The file the error is about (nil: the model as a whole).
    public var file: String? {
        switch self {
        case .fileNotFound(_, let f, _), .httpStatus(_, let f, _, _), .checksumMismatch(_, let f, _, _),
            .networkUnavailable(_, let f, _, _), .diskFull(_, let f, _), .fileSystem(_, let f, _, _):
            return f
        case .unknownModel, .unsupportedInferenceType, .invalidManifest, .cancelled: return nil
        }
    }

    /// What went wrong, naming the model and the file, and what to do.
    public var description: String {
        switch self {
        case .unknownModel(let m, let q, let status):
            return "the model library has no \(m) at quantization \(q) (HTTP \(status)); check the name and the quantization"
        case .fileNotFound(let m, let f, let url):
            return "\(m): \(f) is not on the server (\(url) answers 404); the library's manifest names a missing file"
        case .httpStatus(let m, let f, let url, let status):
            return "\(m): downloading \(f) from \(url) failed with HTTP \(status)"
        case .checksumMismatch(let m, let f, let expected, let actual):
            return "\(m): \(f) has sha256 \(actual), not \(expected); the file was removed, load again to download it anew"
        case .networkUnavailable(let m, let f, let url, let reason):
            return "\(m): cannot download \(f) from \(url) (\(reason)); check the network, or the cache (LEAP_REF_CACHE) for offline use"
        case .diskFull(let m, let f, let path):
            return "\(m): the disk is full writing \(f) to \(path); free space or set LEAP_REF_CACHE to another disk"
        case .fileSystem(let m, let f, let path, let reason):
            return "\(m): cannot write \(f) to \(path): \(reason)"
        case .unsupportedInferenceType(let m, let type):
            return "\(m): the manifest's inference_type \(type) is not one leap-ref runs "
                + "(llama.cpp/text-to-text, llama.cpp/image-to-text, llama.cpp/lfm2-audio-v1)"
        case .invalidManifest(let m, let reason):
            return "\(m): the manifest cannot be read: \(reason)"
        case .cancelled(let m):
            return "\(m): the download was cancelled; a later load resumes it"
        }
    }
}
