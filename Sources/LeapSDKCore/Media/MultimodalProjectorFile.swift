import Foundation

/// The files that go with a model, found beside it as LEAP's GGUF loader expects them:
/// its media encoder (`mmproj-*.gguf`, vision or audio in) and, for a speech-capable model
/// (LFM2.5-Audio), its audio-code decoder (`vocoder-*.gguf`: the depthformer and the code
/// embeddings) and audio detokenizer (`tokenizer-*.gguf`: codes to waveform).
public enum CompanionFile: String, Sendable, CaseIterable {
    case mmproj
    case vocoder
    case audioTokenizer = "tokenizer"

    /// The file-name prefix of this kind (`mmproj-`, `vocoder-`, `tokenizer-`).
    public var prefix: String { rawValue + "-" }

    /// The file of this kind beside `modelPath` that goes with it, or nil:
    ///
    /// - `<prefix><model name>.gguf` when it exists;
    /// - else the candidate whose name (after the prefix) shares the longest start with the
    ///   model's name, case ignored, when that start is at least 4 characters and no other
    ///   candidate shares as much (`mmproj-LFM2-VL-450M-F16.gguf` beside
    ///   `LFM2-VL-450M-Q8_0.gguf`);
    /// - else the only candidate of the folder, if the folder holds just one model besides
    ///   the companion files.
    ///
    /// A folder of several models and several candidates that match none gives nil: pass
    /// the path in the options to choose.
    public func companion(of modelPath: String) -> String? {
        let url = URL(fileURLWithPath: modelPath)
        let folder = url.deletingLastPathComponent()
        let stem = url.deletingPathExtension().lastPathComponent
        let prefix = self.prefix
        guard !Self.allCases.contains(where: { stem.lowercased().hasPrefix($0.prefix) }),
            let names = try? FileManager.default.contentsOfDirectory(atPath: folder.path)
        else { return nil }
        let ggufs = names.filter { $0.lowercased().hasSuffix(".gguf") }
        let candidates = ggufs.filter { $0.lowercased().hasPrefix(prefix) }.sorted()
        guard !candidates.isEmpty else { return nil }
        if let exact = candidates.first(where: { $0 == "\(prefix)\(stem).gguf" }) { return folder.appendingPathComponent(exact).path }
        func shared(_ name: String) -> Int {
            let a = Array(name.dropFirst(prefix.count).lowercased()), b = Array(stem.lowercased())
            var n = 0
            while n < min(a.count, b.count), a[n] == b[n] { n += 1 }
            return n
        }
        let scores = candidates.map(shared)
        if let best = scores.max(), best >= 4, scores.filter({ $0 == best }).count == 1 {
            return folder.appendingPathComponent(candidates[scores.firstIndex(of: best)!]).path
        }
        let models = ggufs.filter { name in !Self.allCases.contains { name.lowercased().hasPrefix($0.prefix) } }.count
        if candidates.count == 1, models == 1 { return folder.appendingPathComponent(candidates[0]).path }
        return nil
    }
}

/// Finding a model's mmproj file: `CompanionFile.mmproj.companion(of:)`.
public enum MultimodalProjectorFile {
    /// The `mmproj-*.gguf` beside `modelPath` that goes with it, or nil (the rules of
    /// `CompanionFile.companion(of:)`).
    public static func companion(of modelPath: String) -> String? {
        CompanionFile.mmproj.companion(of: modelPath)
    }
}
