import Foundation
import LeapJSON

/// One model at one quantization as LiquidAI's LEAP model library describes it: the
/// per-quantization JSON file of a LeapBundles repository (schema 1.0.0), the file that
/// LiquidAI's `leap-bundle download` fetches and the LEAP SDK v0.10 loads by name.
///
/// ```json
/// {
///   "inference_type": "llama.cpp/lfm2-audio-v1",
///   "schema_version": "1.0.0",
///   "load_time_parameters": {
///     "model": "https://…/LFM2.5-Audio-1.5B-Q4_0.gguf",
///     "multimodal_projector": "https://…/mmproj-LFM2.5-Audio-1.5B-Q4_0.gguf",
///     "audio_decoder": "https://…/vocoder-LFM2.5-Audio-1.5B-Q4_0.gguf",
///     "audio_tokenizer": "https://…/tokenizer-LFM2.5-Audio-1.5B-Q4_0.gguf"
///   },
///   "generation_time_parameters": { "number_of_decoding_threads": 4 }
/// }
/// ```
///
/// File references are absolute URLs, or paths relative to the manifest's own URL
/// (`"../LFM2-350M-Q4_0.gguf"`). Fields leap-ref does not read are kept in `json`, not
/// refused; an `inference_type` it cannot run is an error
/// (`ModelLibraryError.unsupportedInferenceType`).
public struct LeapManifest: Sendable, Equatable {
    /// The runtimes a manifest can name; leap-ref runs the three llama.cpp ones.
    public enum InferenceType: String, Sendable, Equatable, CaseIterable {
        /// A text model (LFM2, LFM2.5).
        case textToText = "llama.cpp/text-to-text"
        /// A vision-language model: `multimodal_projector` is its vision tower.
        case imageToText = "llama.cpp/image-to-text"
        /// LFM2-Audio: `multimodal_projector` is its audio encoder, `audio_decoder` and
        /// `audio_tokenizer` turn audio codes into a waveform.
        case lfm2AudioV1 = "llama.cpp/lfm2-audio-v1"
    }

    /// `schema_version` (LiquidAI's manifests say "1.0.0"); nil when absent.
    public var schemaVersion: String?
    /// `inference_type`.
    public var inferenceType: InferenceType
    /// `load_time_parameters.model`: the GGUF file, as written in the manifest.
    public var model: String
    /// `load_time_parameters.multimodal_projector`: the `mmproj` file (vision tower or
    /// audio encoder).
    public var multimodalProjector: String?
    /// `load_time_parameters.audio_decoder`: the vocoder (LFM2-Audio's depthformer).
    public var audioDecoder: String?
    /// `load_time_parameters.audio_tokenizer`: the audio detokenizer (codes to waveform).
    public var audioTokenizer: String?
    /// `load_time_parameters.chat_template`: a chat template that replaces the GGUF's.
    public var chatTemplate: String?
    /// `generation_time_parameters.sampling_parameters`: temperature, min_p, top_p, top_k
    /// and repetition_penalty, the model's sampling defaults (over the GGUF's
    /// `general.sampling.*`; a request's own settings still win).
    public var sampling: SamplingOverrides
    /// `generation_time_parameters.number_of_decoding_threads` (audio models). Read and
    /// kept; leap-ref's audio decoder shares the language model's threads
    /// (`LiquidInferenceEngineOptions.cpuThreads`), so it changes nothing.
    public var numberOfDecodingThreads: Int?
    /// The whole document as it was read, unknown fields included.
    public var json: JSONValue

    /// The file references of `load_time_parameters`, by their manifest key.
    public var files: [(key: String, reference: String)] {
        [
            ("model", model), ("multimodal_projector", multimodalProjector), ("audio_decoder", audioDecoder),
            ("audio_tokenizer", audioTokenizer)
        ].compactMap { key, value in value.map { (key, $0) } }
    }

    /// Reads a manifest's text; `modelName` names the model in errors.
    ///
    /// - Throws: `ModelLibraryError.invalidManifest` when the text is not a JSON object or
    ///   lacks `inference_type` or `load_time_parameters.model`, or a field has the wrong
    ///   type; `ModelLibraryError.unsupportedInferenceType` for a runtime leap-ref lacks.
    public init(text: String, modelName: String) throws(ModelLibraryError) {
        let json: JSONValue
        do {
            json = try JSONValue.parse(text)
        } catch {
            throw .invalidManifest(model: modelName, reason: "not JSON: \(error)")
        }
        try self.init(json: json, modelName: modelName)
    }

    /// Reads a parsed manifest (see `init(text:modelName:)`).
    public init(json: JSONValue, modelName: String) throws(ModelLibraryError) {
        guard json.objectValue != nil else { throw .invalidManifest(model: modelName, reason: "the manifest is not a JSON object") }
        self.json = json
        schemaVersion = json["schema_version"]?.stringValue
        guard let type = json["inference_type"]?.stringValue else {
            throw .invalidManifest(model: modelName, reason: "it has no \"inference_type\" string")
        }
        guard let known = InferenceType(rawValue: type) else { throw .unsupportedInferenceType(model: modelName, type: type) }
        inferenceType = known
        guard let load = json["load_time_parameters"], load.objectValue != nil else {
            throw .invalidManifest(model: modelName, reason: "it has no \"load_time_parameters\" object")
        }
        func string(_ key: String) throws(ModelLibraryError) -> String? {
            guard let value = load[key], !value.isNull else { return nil }
            guard let s = value.stringValue, !s.isEmpty else {
                throw .invalidManifest(model: modelName, reason: "load_time_parameters.\(key) is not a non-empty string")
            }
            return s
        }
        guard let model = try string("model") else {
            throw .invalidManifest(model: modelName, reason: "it has no \"load_time_parameters.model\"")
        }
        self.model = model
        multimodalProjector = try string("multimodal_projector")
        audioDecoder = try string("audio_decoder")
        audioTokenizer = try string("audio_tokenizer")
        chatTemplate = try string("chat_template")
        let generation = json["generation_time_parameters"]
        var sampling = SamplingOverrides()
        if let p = generation?["sampling_parameters"], !p.isNull {
            guard p.objectValue != nil else {
                throw .invalidManifest(model: modelName, reason: "generation_time_parameters.sampling_parameters is not an object")
            }
            func number(_ key: String) throws(ModelLibraryError) -> Double? {
                guard let v = p[key], !v.isNull else { return nil }
                guard let d = v.doubleValue, d.isFinite else {
                    throw .invalidManifest(model: modelName, reason: "sampling_parameters.\(key) is not a number")
                }
                return d
            }
            sampling.temperature = try number("temperature").map { Float($0) }
            sampling.minP = try number("min_p").map { Float($0) }
            sampling.topP = try number("top_p").map { Float($0) }
            sampling.topK = try number("top_k").map { Int($0.rounded(.towardZero)) }
            sampling.repetitionPenalty = try number("repetition_penalty").map { Float($0) }
        }
        self.sampling = sampling
        numberOfDecodingThreads = generation?["number_of_decoding_threads"]?.intValue
    }

    /// Two manifests are equal when their documents are (every field read from `json`).
    public static func == (a: LeapManifest, b: LeapManifest) -> Bool { a.json == b.json }

    /// The absolute URL of a file reference: an `http(s)` or `file` URL as it is (a
    /// Hugging Face `/blob/` page URL turned into its `/resolve/` file URL, as
    /// `leap-bundle` does), else a path relative to `manifestURL`.
    public static func resolve(_ reference: String, against manifestURL: URL) -> URL? {
        if let url = URL(string: reference), let scheme = url.scheme?.lowercased(), ["http", "https", "file"].contains(scheme) {
            return huggingFaceFileURL(url)
        }
        return URL(string: reference, relativeTo: manifestURL)?.absoluteURL
    }

    /// A Hugging Face `https://huggingface.co/ORG/REPO/blob/REV/PATH` page URL as the
    /// `…/resolve/REV/PATH` URL of the file itself; any other URL unchanged.
    public static func huggingFaceFileURL(_ url: URL) -> URL {
        guard let host = url.host, host.hasSuffix("huggingface.co"),
            var parts = URLComponents(url: url, resolvingAgainstBaseURL: false)
        else { return url }
        var path = parts.percentEncodedPath.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard path.count >= 5, path[3] == "blob" else { return url }
        path[3] = "resolve"
        parts.percentEncodedPath = path.joined(separator: "/")
        return parts.url ?? url
    }
}
