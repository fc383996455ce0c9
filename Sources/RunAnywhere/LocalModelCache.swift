import Foundation

/// The local model cache (where scripts/setup.sh puts GGUF files) and the resolution of a
/// model id to a file in it.
///
/// An id matches a file whose name, without the `.gguf` extension, equals it ignoring case
/// (`SmolLM2-135M-Instruct.Q4_1`); failing that, the one file whose name starts with it
/// (`smollm2-135m-instruct` when only one quantization is installed).
public struct LocalModelCache: Sendable, Equatable {
    /// The directory holding the `.gguf` files.
    public let directory: String

    public init(directory: String) { self.directory = directory }

    /// `$LEAP_REF_CACHE/models`, default `~/.cache/leap-ref/models`.
    public static var standard: LocalModelCache {
        let root = ProcessInfo.processInfo.environment["LEAP_REF_CACHE"] ?? (NSHomeDirectory() + "/.cache/leap-ref")
        return LocalModelCache(directory: root + "/models")
    }

    /// The ids of the cached models (file names without `.gguf`), sorted.
    public func availableModelIds() -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.lowercased().hasSuffix(".gguf") }.map { String($0.dropLast(5)) }.sorted()
    }

    /// The path of the model `modelId` names.
    /// - Throws: `SDKError` `.invalidInput` for an empty or ambiguous id, `.modelNotFound`
    ///   (listing the available ids) when nothing matches.
    public func path(forModelId modelId: String) throws(SDKError) -> String {
        var wanted = modelId.trimmingWhitespace.lowercased()
        if wanted.hasSuffix(".gguf") { wanted.removeLast(5) }
        guard !wanted.isEmpty else { throw SDKError(.invalidInput, "the model id is empty") }
        let ids = availableModelIds()
        if let exact = ids.first(where: { $0.lowercased() == wanted }) { return file(exact) }
        let prefixed = ids.filter { $0.lowercased().hasPrefix(wanted) }
        if prefixed.count == 1 { return file(prefixed[0]) }
        if prefixed.count > 1 {
            throw SDKError(
                .invalidInput,
                "the model id '\(modelId)' matches several cached models: "
                    + prefixed.joined(separator: ", ") + "; use one of these ids")
        }
        let available = ids.isEmpty ? "none (run ./scripts/setup.sh to fetch the default model)" : ids.joined(separator: ", ")
        throw SDKError(.modelNotFound, "no model '\(modelId)' in the model cache \(directory); available: \(available)")
    }

    private func file(_ id: String) -> String {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        let name = names.first { $0.lowercased().hasSuffix(".gguf") && String($0.dropLast(5)) == id } ?? id + ".gguf"
        return directory + "/" + name
    }
}
