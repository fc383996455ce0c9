import ArgumentParser
import Foundation
import GGUF
import Kernels
import LeapJSON
import Models

/// `leap-ref inspect`: what a GGUF file holds.
struct Inspect: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a GGUF file's architecture, hyper-parameters, tokenizer, chat template and tensor table.",
        discussion: """
            An mmproj file (general.architecture clip) is also loaded as leap-ref's media encoder: \
            its projector type, the encoder (vision or audio), the encoder's shape (image size, \
            patch size, layers, width, mel bins, ...), its tensor count and the width of the \
            language model it fits; the JSON report gains a "projector" object with those fields. \
            A speech model's vocoder-*.gguf (the depthformer and the audio-code embeddings) is \
            loaded as leap-ref's SpeechVocoder and its tokenizer-*.gguf (the audio detokenizer) \
            described from its keys: their shapes and what they fit, in a "speech" object.
            """
    )

    @Argument(help: "The GGUF file (default: the model installed by scripts/setup.sh).")
    var model: String?

    @Flag(help: "Print one JSON object {version, metadata, tensors} instead of text.")
    var json = false

    func run() async throws {
        try await runReportingErrors {
            let path = try ModelCache.resolve(model)
            let file = try GGUFFile(path: path)
            if json {
                writeOut(
                    Inspect.jsonReport(file, path: path).serialized(JSONFormat(itemSeparator: ", ", keySeparator: ": ", indent: 1)) + "\n")
            } else {
                writeOut(Inspect.textReport(file, path: path))
            }
        }
    }

    /// Arrays longer than this are summarized as `{"type", "count"}` in JSON output.
    static let arraySummaryThreshold = 16

    static func jsonReport(_ file: GGUFFile, path: String = "") -> JSONValue {
        var metadata = JSONObject()
        for (key, value) in file.metadata.pairs { metadata[key] = jsonValue(value) }
        let tensors: [JSONValue] = file.tensors.map { t in
            .object(
                JSONObject([
                    ("name", .string(t.name)),
                    ("type", .string(t.type.name)),
                    ("shape", .array(t.shape.map { .integer($0) })),
                    ("offset", .integer(file.dataOffset + t.offset)),
                    ("bytes", .integer(t.byteCount))
                ]))
        }
        var out = JSONObject([
            ("version", .integer(Int(file.version))),
            ("metadata", .object(metadata)),
            ("tensors", .array(tensors))
        ])
        if let projector = projectorSummary(file, path: path) {
            out["projector"] = .object(JSONObject(projector.map { ($0.key, $0.value) }))
        }
        if let speech = speechSummary(file, path: path) {
            out["speech"] = .object(JSONObject(speech.fields.map { ($0.key, $0.value) }))
        }
        return .object(out)
    }

    /// What leap-ref makes of an mmproj file (nil for any other GGUF file): the fields of
    /// the JSON report's "projector" object, in order, each with the label the text report
    /// prints. A file the loader refuses has `error` (why) among them.
    static func projectorSummary(_ file: GGUFFile, path: String) -> [(key: String, label: String, value: JSONValue)]? {
        guard (try? file.metadata.string("general.architecture")) == "clip" else { return nil }
        var out: [(key: String, label: String, value: JSONValue)] = []
        func add(_ key: String, _ label: String, _ value: JSONValue) { out.append((key, label, value)) }
        let type = try? MediaEncoder.type(of: file, path: path)
        add("projector_type", "projector type", type.map { .string($0) } ?? .null)
        add("tensor_count", "tensors", .integer(file.tensors.count))
        let projector: MediaEncoder
        do {
            projector = try MediaEncoder.load(file: file, path: path, pool: ThreadPool(threads: 1))
        } catch {
            add("error", "cannot be loaded", .string(error.description))
            return out
        }
        switch projector {
        case .vision(let encoder):
            let h = encoder.hyperparameters, p = encoder.preprocessing
            add("encoder", "encoder", "vision")
            add("model", "model", "LFM2-VL: SigLIP2 NaFlex tower, pixel unshuffle, MLP projector")
            add("image_size", "image size", .integer(h.imageSize))
            add("patch_size", "patch size", .integer(h.patchSize))
            add("layers", "layers", .integer(h.layerCount))
            add("width", "width", .integer(h.width))
            add("heads", "attention heads", .integer(h.headCount))
            add("feed_forward_length", "feed-forward width", .integer(h.feedForwardLength))
            add("merge_factor", "pixel unshuffle", .integer(h.mergeFactor))
            add("projector_hidden_width", "projector hidden width", .integer(h.projectorHiddenWidth))
            add("min_image_tokens", "fewest image tokens", .integer(p.minImageTokens))
            add("max_image_tokens", "most image tokens", .integer(p.maxImageTokens))
            add("image_mean", "image mean", .array(h.imageMean.map { Logits.shortest($0) }))
            add("image_std", "image std", .array(h.imageStd.map { Logits.shortest($0) }))
        case .audio(let encoder):
            let h = encoder.hyperparameters
            add("encoder", "encoder", "audio")
            add("model", "model", "LFM2-Audio: FastConformer encoder and MLP adapter")
            add("mel_bins", "mel bins", .integer(h.melBins))
            add("layers", "layers", .integer(h.layerCount))
            add("width", "width", .integer(h.width))
            add("heads", "attention heads", .integer(h.headCount))
            add("feed_forward_length", "feed-forward width", .integer(h.feedForwardLength))
            add("subsampling_channels", "subsampling channels", .integer(h.subsamplingChannels))
            add("convolution_kernel", "convolution kernel", .integer(h.convolutionKernelLength))
            add("max_mel_frames", "most mel frames", .integer(encoder.maximumFrameCount))
        }
        add("weights", "weights", .string(Set(projector.encoder.file.tensors.map(\.type.name)).sorted().joined(separator: ", ")))
        add("output_width", "output width", .integer(projector.outputWidth))
        return out
    }

    /// What leap-ref makes of a speech model's companion file (nil for any other GGUF
    /// file): a vocoder (`depthformer_n_layer`), loaded as `SpeechVocoder`, or an audio
    /// detokenizer (an LFM2 file with `lfm2.embedding_length_out`), described from its keys.
    /// The section's title and the JSON report's "speech" fields, in order.
    static func speechSummary(_ file: GGUFFile, path: String) -> (
        title: String, fields: [(key: String, label: String, value: JSONValue)]
    )? {
        let m = file.metadata
        var out: [(key: String, label: String, value: JSONValue)] = []
        func add(_ key: String, _ label: String, _ value: JSONValue) { out.append((key, label, value)) }
        if m.contains("depthformer_n_layer") {
            add("kind", "kind", "vocoder")
            add("model", "model", "LFM2.5-Audio: depthformer (one frame of 8 audio codes from a hidden state) and audio-code embeddings")
            let vocoder: SpeechVocoder
            do {
                vocoder = try SpeechVocoder(file: file, path: path, pool: ThreadPool(threads: 1))
            } catch {
                add("error", "cannot be loaded", .string(error.description))
                return ("speech vocoder (vocoder-*.gguf)", out)
            }
            let shape = vocoder.shape
            add("layers", "depthformer layers", .integer(shape.layers))
            add("width", "depthformer width", .integer(shape.width))
            add("heads", "attention heads", .string("\(shape.heads) query, \(shape.kvHeads) key/value (head size \(shape.headDim))"))
            add("feed_forward_length", "feed-forward width", .integer(shape.feedForwardWidth))
            add(
                "codebooks", "codebooks",
                .string("\(AudioFrame.codebookCount) x \(AudioFrame.codesPerCodebook) codes (2048 ends the audio)"))
            add("language_model_width", "language model width", .integer(shape.languageModelWidth))
            add("detokenizer_width", "detokenizer width", .integer(shape.detokenizerWidth))
            add("frame_bytes", "bytes read a frame", .integer(vocoder.depthformerFrameByteCount))
            return ("speech vocoder (vocoder-*.gguf)", out)
        }
        let outputKey = "lfm2.embedding_length_out"
        guard (try? m.string("general.architecture")) == "lfm2", let outputWidth = m[outputKey]?.intValue else { return nil }
        add("kind", "kind", "audio detokenizer")
        add("model", "model", "LFM2.5-Audio: LFM2 blocks over audio codes as an embedding model, then an inverse STFT")
        var layerKinds: [String] = []
        if case .array(let values)? = m["lfm2.attention.head_count_kv"] {
            layerKinds = (values.intValues ?? []).map { $0 > 0 ? "attention" : "conv" }
        }
        add(
            "layers", "layers", .string(layerKinds.isEmpty ? "\(m["lfm2.block_count"]?.intValue ?? 0)" : layerKinds.joined(separator: ", "))
        )
        add("width", "width", .integer(m["lfm2.embedding_length"]?.intValue ?? 0))
        add("sliding_window", "sliding window", .integer(m["lfm2.attention.sliding_window"]?.intValue ?? 0))
        add("output_width", "output width", .integer(outputWidth))
        add(
            "waveform", "waveform",
            .string(
                "\(AudioDetokenizer.sampleRate) Hz, \(AudioDetokenizer.samplesPerFrame) samples a frame "
                    + "(\(AudioDetokenizer.rowsPerFrame) rows, \(AudioDetokenizer.fftSize)-point inverse STFT, hop \(AudioDetokenizer.hopLength))"
            ))
        return ("audio detokenizer (tokenizer-*.gguf)", out)
    }

    /// The projector section of the text report.
    static func projectorText(_ summary: [(key: String, label: String, value: JSONValue)]) -> String {
        var out = "\nmultimodal projector (mmproj):\n"
        for (key, label, value) in summary {
            let text: String
            switch value {
            case .string(let s): text = s
            case .null: text = "(none)"
            default: text = value.serialized(.python)
            }
            out += "  \((label + ":").padding(toLength: 24, withPad: " ", startingAt: 0))\(text)"
            if key == "output_width" { out += " (fits a language model whose embedding width, <arch>.embedding_length, is \(text))" }
            if key == "max_mel_frames", let n = value.intValue { out += String(format: " (about %.0f s of audio)", Double(n) / 100) }
            out += "\n"
        }
        return out
    }

    static func jsonValue(_ value: GGUFValue) -> JSONValue {
        switch value {
        case .bool(let b): return .bool(b)
        case .string(let s): return .string(s)
        case .float32(let f): return .double(Double(f))
        case .float64(let d): return .double(d)
        case .uint64(let u): return Int(exactly: u).map { .integer($0) } ?? .double(Double(u))
        case .array(let a):
            if a.count > arraySummaryThreshold {
                return .object(JSONObject([("type", .string(a.elementType.description)), ("count", .integer(a.count))]))
            }
            return .array((0..<a.count).map { jsonValue(a[$0]) })
        default: return value.intValue.map { .integer($0) } ?? .null
        }
    }

    static func textReport(_ file: GGUFFile, path: String) -> String {
        let m = file.metadata
        var out = ""
        let arch = (try? m.string("general.architecture")) ?? "(none)"
        out += "file:          \(path)\n"
        out += "GGUF version:  \(file.version), \(m.count) metadata keys, \(file.tensors.count) tensors, \(formatBytes(file.fileSize))\n"
        if let name = try? m.string("general.name") { out += "name:          \(name)\n" }
        out += "architecture:  \(arch)\n"
        let params = file.tensors.reduce(0) { $0 + $1.elementCount }
        out += "parameters:    \(params) (\(String(format: "%.1f", Double(params) / 1e6)) M)\n"
        if let ft = m["general.file_type"]?.intValue { out += "file type:     \(ft)\n" }
        if let projector = projectorSummary(file, path: path) { out += projectorText(projector) }
        if let speech = speechSummary(file, path: path) {
            out += "\n\(speech.title):\n"
            for (_, label, value) in speech.fields {
                let text = value.stringValue ?? value.serialized(.python)
                out += "  \((label + ":").padding(toLength: 24, withPad: " ", startingAt: 0))\(text)\n"
            }
        }

        out += "\nhyper-parameters:\n"
        for (key, value) in m.pairs where key.hasPrefix(arch + ".") {
            out += "  \(String(key.dropFirst(arch.count + 1)).padding(toLength: 34, withPad: " ", startingAt: 0)) \(describe(value))\n"
        }

        out += "\ntokenizer:\n"
        if let model = try? m.string("tokenizer.ggml.model") { out += "  model:        \(model)\n" }
        if let pre = try? m.string("tokenizer.ggml.pre") { out += "  pre:          \(pre)\n" }
        if let tokens = try? m.array("tokenizer.ggml.tokens") { out += "  vocabulary:   \(tokens.count) tokens\n" }
        if let merges = try? m.array("tokenizer.ggml.merges") { out += "  merges:       \(merges.count)\n" }
        let tokenList = try? m.stringArray("tokenizer.ggml.tokens")
        for (label, key) in [
            ("bos", "bos_token_id"), ("eos", "eos_token_id"), ("eot", "eot_token_id"),
            ("unknown", "unknown_token_id"), ("padding", "padding_token_id")
        ] {
            if let id = m["tokenizer.ggml.\(key)"]?.intValue {
                let piece = tokenList.flatMap { id >= 0 && id < $0.count ? $0[id] : nil } ?? "?"
                out += "  \(label):".padding(toLength: 16, withPad: " ", startingAt: 0) + "\(id) \(piece.debugDescription)\n"
            }
        }
        if let addBOS = try? m.bool("tokenizer.ggml.add_bos_token") { out += "  add_bos:      \(addBOS)\n" }
        if let template = try? m.string("tokenizer.chat_template") {
            out += "  chat template: present (\(template.utf8.count) bytes)\n"
        } else {
            out += "  chat template: absent\n"
        }

        out += "\ntensors (shape in ggml order: row length first; offset = byte offset in the file):\n"
        let nameWidth = max(28, file.tensors.map { $0.name.count }.max() ?? 0)
        out +=
            "  " + "name".padding(toLength: nameWidth, withPad: " ", startingAt: 0)
            + "  type     " + "shape".padding(toLength: 20, withPad: " ", startingAt: 0) + "       bytes      offset\n"
        for t in file.tensors {
            let shape = t.shape.map(String.init).joined(separator: " x ")
            out +=
                "  " + t.name.padding(toLength: nameWidth, withPad: " ", startingAt: 0)
                + "  " + t.type.name.padding(toLength: 7, withPad: " ", startingAt: 0)
                + "  " + shape.padding(toLength: 20, withPad: " ", startingAt: 0)
                + String(format: " %11d %11d", t.byteCount, file.dataOffset + t.offset) + "\n"
        }
        var byType: [String: (count: Int, bytes: Int)] = [:]
        for t in file.tensors {
            byType[t.type.name, default: (0, 0)].count += 1
            byType[t.type.name]!.bytes += t.byteCount
        }
        out +=
            "\n"
            + byType.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value.count) tensors, \(formatBytes($0.value.bytes))" }.joined(
                separator: "; ") + "\n"
        return out
    }

    static func describe(_ value: GGUFValue) -> String {
        switch value {
        case .string(let s): return s.debugDescription
        case .float32(let f): return "\(f)"
        case .float64(let d): return "\(d)"
        case .bool(let b): return "\(b)"
        case .array(let a):
            if a.count <= 16 { return "[" + (0..<a.count).map { describe(a[$0]) }.joined(separator: ", ") + "]" }
            return "[\(a.count) x \(a.elementType)]"
        default: return value.intValue.map(String.init) ?? "?"
        }
    }
}

func formatBytes(_ n: Int) -> String {
    if n >= 1 << 30 { return String(format: "%.2f GiB", Double(n) / Double(1 << 30)) }
    if n >= 1 << 20 { return String(format: "%.2f MiB", Double(n) / Double(1 << 20)) }
    if n >= 1 << 10 { return String(format: "%.1f KiB", Double(n) / Double(1 << 10)) }
    return "\(n) B"
}
