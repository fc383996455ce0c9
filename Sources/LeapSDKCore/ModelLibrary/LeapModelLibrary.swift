import Foundation
import LeapJSON

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension Leap {
    /// The LEAP SDK v0.10 entry point: `Leap.shared.load(model:quantization:options:progress:)`
    /// loads a model by name from LiquidAI's model library (see `LeapModelLibrary`), and
    /// `Leap.shared.load(url:options:)` a local file as `Leap.load(url:options:)` does.
    public static var shared: LeapModelLibrary { LeapModelLibrary.shared }
}

/// Where v0.10's `cacheOptions` point. leap-ref reads `path` as the folder where the model
/// library keeps this load's files (instead of `LEAP_REF_CACHE`'s); `maxEntries` is
/// accepted and unused.
public struct LiquidCacheOptions: Sendable, Equatable {
    /// The cache folder.
    public var path: String
    /// Accepted for v0.10's sake; leap-ref does not evict.
    public var maxEntries: Int?

    /// A cache in `path`.
    public init(path: String, maxEntries: Int? = nil) {
        self.path = path
        self.maxEntries = maxEntries
    }

    /// A cache in `path` (v0.10's `.enabled(path:)`).
    public static func enabled(path: String) -> LiquidCacheOptions { LiquidCacheOptions(path: path) }
}

/// Options of a load by name (`Leap.shared.load(model:quantization:options:progress:)`),
/// LEAP SDK v0.10's type. The model's files come from its manifest; these say how to run it.
public struct LiquidInferenceEngineManifestOptions: Sendable {
    /// The folder the files are cached in (default nil: the library's, `LEAP_REF_CACHE`).
    public var cacheOptions: LiquidCacheOptions?
    /// Threads for the matrix kernels (`LiquidInferenceEngineOptions.cpuThreads`).
    public var cpuThreads: Int?
    /// Context window in tokens (`LiquidInferenceEngineOptions.contextSize`).
    public var contextSize: Int?
    /// Layers to offload to a GPU. Accepted and ignored: leap-ref runs on the CPU only.
    public var nGpuLayers: Int?
    /// Whether the audio decoder runs on a GPU. Accepted and ignored (CPU only).
    public var audioDecoderUseGpu: Bool
    /// A chat template over the manifest's `chat_template` and the GGUF's.
    public var chatTemplate: String?
    /// v0.10's engine-specific JSON. Accepted and ignored.
    public var extras: String?
    /// leap-ref's other load options (cache precision, seed, parallel sequences, media
    /// limits); the fields above and the manifest's files and defaults are written over it.
    public var engineOptions: LiquidInferenceEngineOptions

    /// Options with the given fields; every argument has a default.
    public init(
        cacheOptions: LiquidCacheOptions? = nil, cpuThreads: Int? = nil, contextSize: Int? = nil, nGpuLayers: Int? = nil,
        audioDecoderUseGpu: Bool = false, chatTemplate: String? = nil, extras: String? = nil,
        engineOptions: LiquidInferenceEngineOptions = LiquidInferenceEngineOptions()
    ) {
        self.cacheOptions = cacheOptions
        self.cpuThreads = cpuThreads
        self.contextSize = contextSize
        self.nGpuLayers = nGpuLayers
        self.audioDecoderUseGpu = audioDecoderUseGpu
        self.chatTemplate = chatTemplate
        self.extras = extras
        self.engineOptions = engineOptions
    }
}

/// A model's files in the cache, as the model library resolved them.
public struct ModelLibraryFiles: Sendable {
    /// The name the model was asked for (or the manifest's file name, for a manifest URL).
    public var model: String
    /// The quantization asked for (or nil, for a manifest URL).
    public var quantization: String?
    /// The manifest.
    public var manifest: LeapManifest
    /// Where the manifest came from; its relative file references resolve against it.
    public var manifestURL: URL
    /// The model's cache folder.
    public var directory: URL
    /// The GGUF model.
    public var modelPath: String
    /// The `mmproj` file (vision tower or audio encoder), if the manifest has one.
    public var multimodalProjectorPath: String?
    /// The vocoder (`audio_decoder`), if the manifest has one.
    public var audioDecoderPath: String?
    /// The audio detokenizer (`audio_tokenizer`), if the manifest has one.
    public var audioTokenizerPath: String?
    /// How many files this call downloaded (0: all came from the cache).
    public var downloadedFiles: Int

    /// The engine options that load these files: `options`' settings, the files, and the
    /// manifest's chat template and sampling defaults.
    public func engineOptions(_ options: LiquidInferenceEngineManifestOptions?) -> LiquidInferenceEngineOptions {
        var engine = options?.engineOptions ?? LiquidInferenceEngineOptions()
        if let v = options?.cpuThreads { engine.cpuThreads = v }
        if let v = options?.contextSize { engine.contextSize = v }
        engine.mmProjPath = multimodalProjectorPath ?? engine.mmProjPath
        engine.vocoderPath = audioDecoderPath ?? engine.vocoderPath
        engine.audioTokenizerPath = audioTokenizerPath ?? engine.audioTokenizerPath
        engine.chatTemplate = options?.chatTemplate ?? manifest.chatTemplate ?? engine.chatTemplate
        if manifest.sampling != SamplingOverrides() { engine.samplingDefaults = manifest.sampling }
        return engine
    }
}

/// LiquidAI's model library: a model name and a quantization resolve to a LEAP manifest
/// (schema 1.0.0, `LeapManifest`) through the library's `model-manifest` endpoint, and
/// the manifest's files are downloaded into a local cache, checked and loaded.
///
/// The exchange is `leap-bundle download NAME --quantization QUANT`'s:
///
/// 1. `GET {baseURL}/api/edge-sdk/model-manifest?model_name=NAME&quantization_method=QUANT`
///    answers `{"manifest_url": "https://huggingface.co/…/QUANT.json"}` (any other status:
///    `ModelLibraryError.unknownModel`);
/// 2. `GET` the manifest (a Hugging Face `/blob/` URL is read as its `/resolve/` URL);
/// 3. `GET` each file of its `load_time_parameters` (absolute URLs, or paths relative to
///    the manifest's URL).
///
/// The cache is `{cacheDirectory}/{NAME}/{QUANT}/`: `manifest.json` (and `manifest-url`),
/// the model under its file name, and its other files named as leap-ref finds them beside
/// a model: `mmproj-{model}.gguf`, `vocoder-{model}.gguf`, `tokenizer-{model}.gguf`. A
/// model whose manifest and files are cached loads without the network. Each file is
/// downloaded to `{file}.partial` (resumed with an HTTP Range request when the
/// connection breaks, here or in a later run), checked against the sha256 the server
/// states (an ETag or `X-Linked-Etag` of 64 hex digits, as Hugging Face sends), renamed
/// into place, and its sha256 recorded in `{file}.sha256`; a later load checks the cached
/// file against that record (and downloads a file that no longer matches again). A lock
/// file (`{file}.lock`) makes concurrent loads, in one process or several, download a
/// file once.
///
/// The calls that download block their thread until done (`pull`) or run on a
/// background thread (`fetch`, `load`) and stop when their task is cancelled
/// (`ModelLibraryError.cancelled`; the next load resumes the partial file).
public final class LeapModelLibrary: @unchecked Sendable {
    /// LiquidAI's library, `https://leap.liquid.ai`.
    public static let defaultBaseURL = URL(string: "https://leap.liquid.ai")!
    /// The endpoint's path under the base URL.
    public static let manifestEndpointPath = "api/edge-sdk/model-manifest"
    /// The library `Leap.shared` is: base URL and cache folder from the environment.
    public static let shared = LeapModelLibrary()

    /// `LEAP_REF_LIBRARY_URL`, else `defaultBaseURL`.
    public static var environmentBaseURL: URL {
        ProcessInfo.processInfo.environment["LEAP_REF_LIBRARY_URL"].flatMap { $0.isEmpty ? nil : URL(string: $0) }
            ?? defaultBaseURL
    }

    /// `$LEAP_REF_CACHE/library`, default `~/.cache/leap-ref/library`.
    public static var environmentCacheDirectory: URL {
        let env = ProcessInfo.processInfo.environment
        let root = env["LEAP_REF_CACHE"].flatMap { $0.isEmpty ? nil : $0 } ?? (NSHomeDirectory() + "/.cache/leap-ref")
        return URL(fileURLWithPath: root).appendingPathComponent("library")
    }

    /// `LEAP_REF_VERIFY_CACHE`: `0` turns off hashing cached files whose size and
    /// modification time are the recorded ones (default: hash them at every load).
    public static var environmentVerifiesCachedFiles: Bool { ProcessInfo.processInfo.environment["LEAP_REF_VERIFY_CACHE"] != "0" }

    private let lock = NSLock()
    private var base: URL
    private var cache: URL
    private var timeout: TimeInterval
    private var verifyCache = LeapModelLibrary.environmentVerifiesCachedFiles

    /// A library at `baseURL` (nil: `LEAP_REF_LIBRARY_URL`, else LiquidAI's) caching in
    /// `cacheDirectory` (nil: `$LEAP_REF_CACHE/library`, else `~/.cache/leap-ref/library`).
    /// `requestTimeout` is how long a request may wait for data, in seconds.
    public init(baseURL: URL? = nil, cacheDirectory: URL? = nil, requestTimeout: TimeInterval = 60) {
        base = baseURL ?? Self.environmentBaseURL
        cache = cacheDirectory ?? Self.environmentCacheDirectory
        timeout = requestTimeout
    }

    /// The library's base URL; the `model-manifest` endpoint is under it.
    public var baseURL: URL {
        get { lock.withLock { base } }
        set { lock.withLock { base = newValue } }
    }

    /// The cache folder.
    public var cacheDirectory: URL {
        get { lock.withLock { cache } }
        set { lock.withLock { cache = newValue } }
    }

    /// Whether every load hashes the cached files and compares them with the sha256
    /// recorded at their download (default true, unless `LEAP_REF_VERIFY_CACHE=0`; about 6 s
    /// for a 1 GB model). False: a file is hashed only when its size or modification time
    /// is not the recorded one.
    public var verifiesCachedFiles: Bool {
        get { lock.withLock { verifyCache } }
        set { lock.withLock { verifyCache = newValue } }
    }

    /// How long a request may wait for data, in seconds.
    public var requestTimeout: TimeInterval {
        get { lock.withLock { timeout } }
        set { lock.withLock { timeout = newValue } }
    }

    /// A name as one path component: letters, digits, `.`, `-` and `_` kept, anything else `_`.
    static func component(_ name: String) -> String {
        let kept = String(name.map { $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) ? $0 : "_" })
        return kept.isEmpty || kept == "." || kept == ".." ? "_" + kept : kept
    }

    /// The cache folder of a model at a quantization.
    public func directory(model: String, quantization: String, cacheDirectory: URL? = nil) -> URL {
        (cacheDirectory ?? self.cacheDirectory).appendingPathComponent(Self.component(model))
            .appendingPathComponent(Self.component(quantization))
    }

    /// Asks the library's endpoint for the manifest URL of a model at a quantization.
    /// Blocks the calling thread.
    public func manifestURL(model: String, quantization: String) throws(ModelLibraryError) -> URL {
        try manifestURL(model: model, quantization: quantization, cancel: nil)
    }

    func manifestURL(model: String, quantization: String, cancel: CancellationFlag?) throws(ModelLibraryError) -> URL {
        let endpoint = baseURL.appendingPathComponent(Self.manifestEndpointPath)
        guard var parts = URLComponents(url: endpoint, resolvingAgainstBaseURL: false) else {
            throw .invalidManifest(model: model, reason: "the library URL \(endpoint) is not a URL")
        }
        parts.queryItems = [URLQueryItem(name: "model_name", value: model), URLQueryItem(name: "quantization_method", value: quantization)]
        guard let url = parts.url else { throw .invalidManifest(model: model, reason: "the library URL \(endpoint) is not a URL") }
        let answer = try downloader(model, cancel).fetchSmall(url, file: "the manifest location")
        guard (200..<300).contains(answer.status) else {
            if answer.status >= 500 {
                throw .httpStatus(model: model, file: "the manifest location", url: url.absoluteString, status: answer.status)
            }
            throw .unknownModel(model: model, quantization: quantization, status: answer.status)
        }
        let text = String(decoding: answer.body, as: UTF8.self)
        guard let json = try? JSONValue.parse(text), let location = json["manifest_url"]?.stringValue,
            let manifest = URL(string: location), manifest.scheme != nil
        else {
            throw .invalidManifest(model: model, reason: "the library's answer has no \"manifest_url\": \(text.prefix(200))")
        }
        return LeapManifest.huggingFaceFileURL(manifest)
    }

    /// Puts a model's manifest and files in the cache (from the cache when they are there)
    /// and returns their paths. Blocks the calling thread (`fetch` does not).
    ///
    /// - Parameters:
    ///   - progress: the fraction of the bytes to download that arrived (0...1; 1 once
    ///     every file is in place, also when nothing was downloaded) and the speed in bytes
    ///     per second.
    ///   - cacheDirectory: a cache folder for this call (nil: the library's).
    /// - Throws: `ModelLibraryError`.
    public func pull(
        model: String, quantization: String, cacheDirectory: URL? = nil,
        progress: @escaping @Sendable (Double, Int64) -> Void = { _, _ in }
    ) throws(ModelLibraryError) -> ModelLibraryFiles {
        try pull(model: model, quantization: quantization, cacheDirectory: cacheDirectory, progress: progress, cancel: nil)
    }

    func pull(
        model: String, quantization: String, cacheDirectory: URL?, progress: @escaping @Sendable (Double, Int64) -> Void,
        cancel: CancellationFlag?
    ) throws(ModelLibraryError) -> ModelLibraryFiles {
        let folder = directory(model: model, quantization: quantization, cacheDirectory: cacheDirectory)
        let (manifest, manifestURL) = try manifest(
            in: folder, model: model, cancel: cancel,
            locate: { () throws(ModelLibraryError) -> URL in
                try self.manifestURL(model: model, quantization: quantization, cancel: cancel)
            })
        return try files(
            manifest, from: manifestURL, in: folder, model: model, quantization: quantization, progress: progress, cancel: cancel)
    }

    /// Puts the model of a manifest URL in the cache (`{cacheDirectory}/manifests/{URL}/`)
    /// and returns its files; see `pull(model:quantization:cacheDirectory:progress:)`.
    public func pull(
        manifestURL: URL, cacheDirectory: URL? = nil, progress: @escaping @Sendable (Double, Int64) -> Void = { _, _ in }
    ) throws(ModelLibraryError) -> ModelLibraryFiles {
        try pull(manifestURL: manifestURL, cacheDirectory: cacheDirectory, progress: progress, cancel: nil)
    }

    func pull(
        manifestURL: URL, cacheDirectory: URL?, progress: @escaping @Sendable (Double, Int64) -> Void, cancel: CancellationFlag?
    ) throws(ModelLibraryError) -> ModelLibraryFiles {
        let url = LeapManifest.huggingFaceFileURL(manifestURL)
        let name = url.deletingPathExtension().lastPathComponent
        let folder = (cacheDirectory ?? self.cacheDirectory).appendingPathComponent("manifests")
            .appendingPathComponent(Self.component((url.host ?? "") + url.path))
        let (manifest, resolved) = try manifest(
            in: folder, model: name, cancel: cancel, locate: { () throws(ModelLibraryError) -> URL in url })
        return try files(manifest, from: resolved, in: folder, model: name, quantization: nil, progress: progress, cancel: cancel)
    }

    /// `pull(model:quantization:cacheDirectory:progress:)` on a background thread.
    /// Cancelling the task stops the download within 0.1 s (`ModelLibraryError.cancelled`;
    /// the partial file stays, and the next load resumes it).
    public func fetch(
        model: String, quantization: String, cacheDirectory: URL? = nil,
        progress: @escaping @Sendable (Double, Int64) -> Void = { _, _ in }
    ) async throws -> ModelLibraryFiles {
        try await Self.cancellable { cancel in
            try self.pull(model: model, quantization: quantization, cacheDirectory: cacheDirectory, progress: progress, cancel: cancel)
        }
    }

    /// Loads a model by name and quantization (LEAP SDK v0.10's call): its manifest and
    /// files from the cache, else downloaded (see the type's documentation), then loaded as
    /// `Leap.load(url:options:)` loads a file, with the manifest's companion files, chat
    /// template and sampling defaults.
    ///
    /// - Parameters:
    ///   - model: the library's name for the model (`"LFM2.5-1.2B-Instruct"`).
    ///   - quantization: the quantization's name (`"Q4_0"`, `"Q8_0"`, `"F16"`).
    ///   - options: context size, threads, chat template, cache folder.
    ///   - progress: the download's fraction (0...1; 1 when the files are in place, before
    ///     the model is read into memory) and speed in bytes per second. It is called in
    ///     the caller's isolation (on the main actor when called from there), so it may
    ///     capture the caller's non-`Sendable` state, as v0.10's example stores do; reports
    ///     that arrive faster than it runs are coalesced to the latest.
    /// - Throws: `ModelLibraryError` for the library and the download,
    ///   `LeapError.modelLoadingFailure` for the files.
    nonisolated(nonsending) public func load(
        model: String, quantization: String, options: LiquidInferenceEngineManifestOptions? = nil,
        progress: @escaping (Double, Int64) -> Void = { _, _ in }
    ) async throws -> ModelRunner {
        let cache = options?.cacheOptions.map { URL(fileURLWithPath: $0.path) }
        // The download runs on a background thread and reports into a stream; the reports
        // reach `progress` here, in the caller's isolation.
        let (reports, reporter) = AsyncStream.makeStream(of: (Double, Int64).self, bufferingPolicy: .bufferingNewest(1))
        async let fetched = Self.finishing(reporter) {
            try await self.fetch(model: model, quantization: quantization, cacheDirectory: cache) { reporter.yield(($0, $1)) }
        }
        for await (fraction, speed) in reports { progress(fraction, speed) }
        let files = try await fetched
        return try await Leap.load(path: files.modelPath, options: files.engineOptions(options))
    }

    /// `body`'s result, `reporter` finished whatever the outcome.
    private static func finishing<T: Sendable>(
        _ reporter: AsyncStream<(Double, Int64)>.Continuation, _ body: @Sendable () async throws -> T
    ) async throws -> T {
        defer { reporter.finish() }
        return try await body()
    }

    /// Loads the model of a manifest URL (see `load(model:quantization:options:progress:)`).
    public func load(
        manifestURL: URL, options: LiquidInferenceEngineManifestOptions? = nil,
        progress: @escaping @Sendable (Double, Int64) -> Void = { _, _ in }
    ) async throws -> ModelRunner {
        let cache = options?.cacheOptions.map { URL(fileURLWithPath: $0.path) }
        let files = try await Self.cancellable { cancel in
            try self.pull(manifestURL: manifestURL, cacheDirectory: cache, progress: progress, cancel: cancel)
        }
        return try await Leap.load(path: files.modelPath, options: files.engineOptions(options))
    }

    /// Loads a local GGUF file: `Leap.load(url:options:progress:)`.
    public func load(
        url: URL, options: LiquidInferenceEngineOptions = LiquidInferenceEngineOptions(),
        progress: (@Sendable (Double) -> Void)? = nil
    ) async throws -> ModelRunner {
        try await Leap.load(url: url, options: options, progress: progress)
    }

    // MARK: - Internals

    private func downloader(_ model: String, _ cancel: CancellationFlag?) -> ModelFileDownloader {
        var downloader = ModelFileDownloader(model: model, timeout: requestTimeout)
        downloader.verifyCached = verifiesCachedFiles
        downloader.cancel = cancel
        return downloader
    }

    /// `body` on a background thread, its flag set when the calling task is cancelled.
    private static func cancellable<T: Sendable>(_ body: @escaping @Sendable (CancellationFlag) throws -> T) async throws -> T {
        let flag = CancellationFlag()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                DispatchQueue.global(qos: .userInitiated).async {
                    continuation.resume(with: Result { try body(flag) })
                }
            }
        } onCancel: {
            flag.cancel()
        }
    }

    /// The cached manifest of `folder`, else the one `locate` names, downloaded, read and
    /// saved there.
    private func manifest(
        in folder: URL, model: String, cancel: CancellationFlag?, locate: () throws(ModelLibraryError) -> URL
    ) throws(ModelLibraryError)
        -> (LeapManifest, URL)
    {
        let saved = folder.appendingPathComponent("manifest.json")
        let savedURL = folder.appendingPathComponent("manifest-url")
        if let text = try? String(contentsOf: saved, encoding: .utf8),
            let location = (try? String(contentsOf: savedURL, encoding: .utf8)).flatMap({
                URL(string: $0.trimmingCharacters(in: .whitespacesAndNewlines))
            })
        {
            return (try LeapManifest(text: text, modelName: model), location)
        }
        let url = try locate()
        let answer = try downloader(model, cancel).fetchSmall(url, file: "the manifest")
        switch answer.status {
        case 200..<300: break
        case 404, 410: throw .fileNotFound(model: model, file: "the manifest", url: url.absoluteString)
        default: throw .httpStatus(model: model, file: "the manifest", url: url.absoluteString, status: answer.status)
        }
        let text = String(decoding: answer.body, as: UTF8.self)
        let manifest = try LeapManifest(text: text, modelName: model)
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try Data((url.absoluteString + "\n").utf8).write(to: savedURL, options: .atomic)
            try Data(text.utf8).write(to: saved, options: .atomic)
        } catch {
            throw .fileSystem(model: model, file: "the manifest", path: saved.path, reason: "\(error)")
        }
        return (manifest, url)
    }

    /// The manifest's files in `folder`, from the cache or downloaded.
    private func files(
        _ manifest: LeapManifest, from manifestURL: URL, in folder: URL, model: String, quantization: String?,
        progress: @escaping @Sendable (Double, Int64) -> Void, cancel: CancellationFlag?
    ) throws(ModelLibraryError) -> ModelLibraryFiles {
        var plan: [(key: String, url: URL, path: String)] = []
        var modelStem = "model"
        for (key, reference) in manifest.files {
            guard let url = LeapManifest.resolve(reference, against: manifestURL) else {
                throw .invalidManifest(model: model, reason: "load_time_parameters.\(key) \"\(reference)\" is not a URL")
            }
            var name = Self.component(url.lastPathComponent.removingPercentEncoding ?? url.lastPathComponent)
            if key == "model" {
                if !name.lowercased().hasSuffix(".gguf") { name += ".gguf" }
                modelStem = String(name.dropLast(5))
            } else {
                let prefix = ["multimodal_projector": "mmproj-", "audio_decoder": "vocoder-", "audio_tokenizer": "tokenizer-"][key]!
                name = prefix + modelStem + ".gguf"
            }
            plan.append((key, url, folder.appendingPathComponent(name).path))
        }
        let meter = DownloadProgress(files: plan.count, callback: progress)
        let downloader = downloader(model, cancel)
        let missing = plan.indices.filter { !FileManager.default.fileExists(atPath: plan[$0].path) }
        if missing.count > 1 {
            for i in missing { meter.setTotal(i, downloader.size(of: plan[i].url)) }
        }
        var downloaded = 0
        for (i, item) in plan.enumerated() {
            let label = (item.path as NSString).lastPathComponent
            if try downloader.ensure(url: item.url, file: label, destination: item.path, index: i, progress: meter) { downloaded += 1 }
        }
        meter.finish()
        func path(_ key: String) -> String? { plan.first { $0.key == key }?.path }
        return ModelLibraryFiles(
            model: model, quantization: quantization, manifest: manifest, manifestURL: manifestURL, directory: folder,
            modelPath: path("model")!, multimodalProjectorPath: path("multimodal_projector"),
            audioDecoderPath: path("audio_decoder"), audioTokenizerPath: path("audio_tokenizer"), downloadedFiles: downloaded)
    }
}
