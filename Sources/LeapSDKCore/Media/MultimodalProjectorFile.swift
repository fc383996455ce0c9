import Foundation

/// Finding a model's mmproj file: LEAP's GGUF loader expects the media encoder as a
/// sibling of the model, named `mmproj-*.gguf`.
public enum MultimodalProjectorFile {
    /// The `mmproj-*.gguf` beside `modelPath` that goes with it, or nil:
    ///
    /// - `mmproj-<model name>.gguf` when it exists;
    /// - else the candidate whose name (after `mmproj-`) shares the longest start with the
    ///   model's name, case ignored, when that start is at least 4 characters and no other
    ///   candidate shares as much (`mmproj-LFM2-VL-450M-F16.gguf` beside
    ///   `LFM2-VL-450M-Q8_0.gguf`);
    /// - else the only `mmproj-*.gguf` of the folder, if the folder holds just one model
    ///   besides it.
    ///
    /// A folder of several models and several mmproj files that match none is read as
    /// text only: pass `LiquidInferenceEngineOptions.mmProjPath` to choose.
    public static func companion(of modelPath: String) -> String? {
        let url = URL(fileURLWithPath: modelPath)
        let folder = url.deletingLastPathComponent()
        let stem = url.deletingPathExtension().lastPathComponent
        guard !stem.lowercased().hasPrefix("mmproj"),
            let names = try? FileManager.default.contentsOfDirectory(atPath: folder.path)
        else { return nil }
        let ggufs = names.filter { $0.lowercased().hasSuffix(".gguf") }
        let candidates = ggufs.filter { $0.lowercased().hasPrefix("mmproj-") }.sorted()
        guard !candidates.isEmpty else { return nil }
        if let exact = candidates.first(where: { $0 == "mmproj-\(stem).gguf" }) { return folder.appendingPathComponent(exact).path }
        func shared(_ name: String) -> Int {
            let a = Array(name.dropFirst("mmproj-".count).lowercased()), b = Array(stem.lowercased())
            var n = 0
            while n < min(a.count, b.count), a[n] == b[n] { n += 1 }
            return n
        }
        let scores = candidates.map(shared)
        if let best = scores.max(), best >= 4, scores.filter({ $0 == best }).count == 1 {
            return folder.appendingPathComponent(candidates[scores.firstIndex(of: best)!]).path
        }
        let models = ggufs.count - candidates.count
        if candidates.count == 1, models == 1 { return folder.appendingPathComponent(candidates[0]).path }
        return nil
    }
}
