// LEAP SDK v0.10's Swift spelling (issue 44, item 1), tested with LiquidAI's own v0.10
// example code: the platform-neutral parts of the apps of Liquid4All/LeapSDK-Examples (their
// stores and view models), compiled as written and run against the tiny fixture models.
//
// Sources, copied as they stand in that repository:
// - iOS/LeapAudioDemo/LeapAudioDemo/AudioDemoStore.swift (21f7eff): `AudioDemoMessage` and
//   `AudioDemoStore` (`ChatMessage.Role` in a stored property, `ChatMessage(role:textContent:)`,
//   `ChatMessage(role:content:)` with one part, `fromFloatSamples(_:sampleRate:)`,
//   `onEnum(of:)` over responses and content, `toData()`, `toFloatArray()`,
//   `MessageResponseComplete`).
// - iOS/LeapChatExample/LeapChatExample/ChatStore.swift, its v0.10.0 revision (stored id
//   9249937126): `ChatMessage_withArray`, exhaustive `onEnum(of:)` switches over a response
//   and over a content part.
// - iOS/LeapSloganExample/LeapSloganExample/SloganStore.swift (21f7eff) and
//   SloganGeneratable.swift (V010SloganGeneratable.swift, which imports LeapSDKMacros alone).
// - iOS/RecipeGenerator/RecipeGenerator/Models/Recipe.swift (1e6ec50): `@Generatable` and
//   `@Guide` under `import LeapSDK`.
//
// Apple-only classes the stores use are stubbed below with the members the stores call
// (`AudioPlaybackManager`, `AudioRecorder`: AVFoundation; `Color`: SwiftUI; `UIImage`,
// `ChatMessageContent.fromUIImage`: UIKit), recording what the store did. Code is
// re-indented to the package's style; its text is otherwise as written, except for these
// lines, each marked `(test)` where it stands:
// - `any Conversation` is read as `Conversation` (a class in leap-ref, a protocol in v0.10;
//   `any ModelRunner` is unchanged: a protocol in both).
// - `import LeapModelDownloader`, `AVFoundation`, `SwiftUI`, `PhotosUI`: not imported (the
//   stubs stand in; `Foundation` and `LeapSDK` are imported for the file).
// - `Leap.shared.load(model:quantization:options:progress:)` is called as written; during a
//   test `Leap.shared` asks a model library on 127.0.0.1 (`V010Library`) that serves LEAP
//   manifests naming the tiny fixtures under the examples' model names. The one line
//   changed around it is `cachePath`: a temporary folder, not the user's caches folder.
//   The audio demo's call gets one argument more, `engineOptions:` with a fixed seed
//   (`V010Library.seeded` says why).
// - v0.10's streams are non-throwing (SKIE), so v0.10 code writes `for await` and handles a
//   failure as the in-band `onEnum` case `.error(let err)`. leap-ref's streams throw
//   `LeapError` (the seeds' `for try await`), and `onEnum(of: response)` has no `.error`
//   case (the seeds switch over it exhaustively without one): `for await` becomes
//   `for try await` inside `do`, and the `.error` branch's body moves to the `catch`, with
//   `err.message` read as `error.localizedDescription`.
// - SloganStore's `let options = GenerationOptions()` is `var` (a struct in leap-ref, a class
//   in v0.10) and `SloganResponse.jsonSchema()` (a String in v0.10) is
//   `try JSONSchemaGenerator.getJSONSchema(for: SloganResponse.self)`.
// - ChatStore's `loadImageFrom(item:)` (PhotosUI) is left out.
// - SloganStore's `generationTask` is `private(set)` instead of `private`, for the test to
//   await it.
// AudioDemoStore's `default:` in `finishReasonDescription(_:)` stays as written: leap-ref's
// `GenerationFinishReason` has two cases, so it draws a "default will never be executed"
// warning.

import Foundation
import LeapJSON
import LeapSDK
import LeapSDKMacros
import Observation
import TestSupport
import Testing

// MARK: - The fixtures and stubs

/// LEAP's model library on 127.0.0.1, for the examples' own
/// `Leap.shared.load(model:quantization:options:progress:)`: the `model-manifest` endpoint,
/// a schema-1.0.0 manifest for each name the examples load, and the tiny fixtures as the
/// manifests' files. While a test runs, `Leap.shared` asks this server and the examples'
/// cache folder is a temporary one.
final class V010Library: @unchecked Sendable {
    /// The names the examples load, their inference types and files (fixtures under
    /// Tests/Fixtures/models, by `load_time_parameters` key).
    static let bundles: [String: (type: String, files: [String: String])] = [
        "LFM2.5-Audio-1.5B/Q4_0": (
            "llama.cpp/lfm2-audio-v1",
            [
                "model": "lfm2-audio-tiny.gguf", "multimodal_projector": "mmproj-lfm2-audio-tiny.gguf",
                "audio_decoder": "vocoder-lfm2-audio-tiny.gguf", "audio_tokenizer": "tokenizer-lfm2-audio-tiny.gguf"
            ]
        ),
        "LFM2-VL-450M/Q8_0": (
            "llama.cpp/image-to-text", ["model": "lfm2-vl-tiny.gguf", "multimodal_projector": "mmproj-lfm2-vl-tiny.gguf"]
        ),
        "LFM2.5-1.2B-Instruct/Q4_0": ("llama.cpp/text-to-text", ["model": "lfm2-tiny.gguf"])
    ]

    /// A fixed seed for the audio demo's replies (its one added argument): with random
    /// weights, some seeds make the depthformer choose the end-of-audio code in a codebook
    /// other than the first, which the detokenizer refuses (a speech-engine failure, not
    /// v0.10's spelling); this seed's replies are whole.
    static let seeded = LiquidInferenceEngineOptions(defaultRNGSeed: 2010)

    /// The cache folder the examples pass as `cacheOptions: .enabled(path:)` (theirs is
    /// the app's caches folder + "leap-cache").
    @MainActor static var cachePath = ""

    let server: LocalHTTPServer
    let cache: URL
    private let savedBaseURL: URL

    /// Starts the server and points `Leap.shared` and `cachePath` at it.
    @MainActor init() throws {
        cache = FileManager.default.temporaryDirectory.appendingPathComponent("leap-ref-v010-\(UUID().uuidString)")
        server = try LocalHTTPServer { request in
            let host = request.headers["host"] ?? "127.0.0.1"
            if request.path == "/api/edge-sdk/model-manifest" {
                let key = (request.query["model_name"] ?? "") + "/" + (request.query["quantization_method"] ?? "")
                guard Self.bundles[key] != nil else { return .status(404) }
                return .json(#"{"manifest_url": "http://\#(host)/bundles/\#(key).json"}"#)
            }
            if request.path.hasPrefix("/bundles/"), request.path.hasSuffix(".json") {
                let key = String(request.path.dropFirst("/bundles/".count).dropLast(".json".count))
                guard let bundle = Self.bundles[key] else { return .status(404) }
                let files = bundle.files.sorted { $0.key < $1.key }.map { #""\#($0.key)": "http://\#(host)/files/\#($0.value)""# }
                return .json(
                    #"{"inference_type": "\#(bundle.type)", "schema_version": "1.0.0", "load_time_parameters": {"#
                        + files.joined(separator: ", ") + "}}")
            }
            if request.path.hasPrefix("/files/"),
                let data = try? Data(contentsOf: URL(fileURLWithPath: TestFixtures.path("models/" + request.path.dropFirst(7))))
            {
                return .file(data, request: request, etag: nil)
            }
            return .status(404)
        }
        savedBaseURL = Leap.shared.baseURL
        Leap.shared.baseURL = server.baseURL
        Self.cachePath = cache.appendingPathComponent("leap-cache").path
    }

    /// Stops the server, restores `Leap.shared` and removes the cache.
    @MainActor func stop() {
        Leap.shared.baseURL = savedBaseURL
        server.stop()
        try? FileManager.default.removeItem(at: cache)
    }
}

/// Stands in for the audio demo's AVFoundation player: records what the store asked of it.
@MainActor final class AudioPlaybackManager {
    /// Every player made, in order (the store keeps its own private).
    static var made: [AudioPlaybackManager] = []
    var sessionPrepared = false
    var enqueued: [(samples: [Float], sampleRate: Int)] = []
    var played: [Data] = []
    var resets = 0

    init() { Self.made.append(self) }
    func prepareSession() { sessionPrepared = true }
    func enqueue(samples: [Float], sampleRate: Int) { enqueued.append((samples, sampleRate)) }
    func play(wavData: Data) { played.append(wavData) }
    func reset() { resets += 1 }
}

/// Stands in for the audio demo's AVFoundation recorder: `capture()` returns the samples the
/// test sets.
@MainActor final class AudioRecorder {
    static var made: [AudioRecorder] = []
    var recording = false
    var nextCapture: (samples: [Float], sampleRate: Int)?

    init() { Self.made.append(self) }
    func start() throws { recording = true }
    func stop() { recording = false }
    func cancel() { recording = false }
    func capture() -> (samples: [Float], sampleRate: Int)? { nextCapture }
}

/// Stands in for SwiftUI's `Color` (the colours SloganStore uses).
enum Color { case red, orange, green }

/// Stands in for UIKit's `UIImage`: JPEG bytes.
struct UIImage { let jpeg: Data }

extension ChatMessageContent {
    /// Stands in for leap-ref's UIKit-only `fromUIImage(_:compressionQuality:)`.
    static func fromUIImage(_ image: UIImage) throws -> ChatMessageContent { .image(image.jpeg) }
}

/// The chat example's bubble (a SwiftUI view in the app; here its data).
struct MessageBubble {
    let content: String
    let isUser: Bool
    var image: UIImage?
}

/// Waits on the main actor until `condition` holds.
@MainActor func waitUntil(_ seconds: Double, _ what: String, _ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while !condition() {
        guard ContinuousClock.now < deadline else { throw V010TimedOut(what: what) }
        try await Task.sleep(for: .milliseconds(20))
    }
}

struct V010TimedOut: Error, CustomStringConvertible {
    let what: String
    var description: String { "timed out waiting for \(what)" }
}

// MARK: - AudioDemoStore.swift (LeapAudioDemo)

struct AudioDemoMessage: Identifiable, Equatable {
    let id = UUID()
    let role: ChatMessage.Role
    let text: String
    let audioData: Data?

    var isUser: Bool { role == .user }

    static func == (lhs: AudioDemoMessage, rhs: AudioDemoMessage) -> Bool {
        lhs.id == rhs.id && lhs.role == rhs.role && lhs.text == rhs.text
    }
}

@Observable
@MainActor
final class AudioDemoStore {
    private static let modelName = "LFM2.5-Audio-1.5B"
    private static let quantization = "Q4_0"

    var inputText: String = ""
    var messages: [AudioDemoMessage] = []
    var status: String?
    var streamingText: String = ""
    var isModelLoading = false
    var isGenerating = false
    var isRecording = false

    private let playbackManager = AudioPlaybackManager()
    private let recorder = AudioRecorder()
    private var conversation: Conversation?  // (test) `(any Conversation)?`
    private var modelRunner: (any ModelRunner)?
    private var streamingTask: Task<Void, Never>?

    init() {
        playbackManager.prepareSession()
    }

    func setupModel() async {
        guard modelRunner == nil else { return }
        isModelLoading = true
        status = "Loading model..."

        do {
            status = "Downloading \(Self.modelName) model..."

            // Use manifest downloading for LFM2.5-Audio-1.5B (speech + text input/output)
            let cachePath = V010Library.cachePath  // (test) the app's caches folder + "leap-cache"
            try? FileManager.default.createDirectory(atPath: cachePath, withIntermediateDirectories: true)
            let runner = try await Leap.shared.load(
                model: Self.modelName,
                quantization: Self.quantization,
                options: LiquidInferenceEngineManifestOptions(
                    cacheOptions: .enabled(path: cachePath),
                    contextSize: 1024,
                    nGpuLayers: 0,
                    engineOptions: V010Library.seeded  // (test) see the file's header
                ),
                progress: { [weak self] progress, speed in
                    Task { @MainActor in
                        if progress < 1.0 {
                            self?.status = "Downloading: \(Int(progress * 100))%"
                        } else {
                            self?.status = "Loading model into memory..."
                        }
                    }
                }
            )

            modelRunner = runner
            conversation = Conversation(
                modelRunner: runner,
                history: [
                    ChatMessage(role: .system, textContent: "Respond with interleaved text and audio.")
                ])
            messages.append(
                AudioDemoMessage(
                    role: .assistant,
                    text: "Model loaded: \(Self.modelName) (\(Self.quantization))",
                    audioData: nil
                )
            )
            status = "Ready"
        } catch {
            status = "Failed to load model: \(error.localizedDescription)"
        }

        isModelLoading = false
    }

    func sendTextPrompt() {
        let trimmed = inputText.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else { return }
        inputText = ""
        let message = ChatMessage(role: .user, textContent: trimmed)
        appendUserMessage(text: trimmed, audioData: nil)
        streamResponse(for: message)
    }

    func toggleRecording() {
        if isRecording {
            recorder.stop()
            isRecording = false
            guard let capture = recorder.capture() else {
                status = "No audio captured."
                return
            }
            sendAudioPrompt(samples: capture.samples, sampleRate: capture.sampleRate)
        } else {
            do {
                try recorder.start()
                isRecording = true
                status = "Recording..."
            } catch {
                status = "Recording failed: \(error.localizedDescription)"
            }
        }
    }

    func cancelRecording() {
        recorder.cancel()
        isRecording = false
        status = "Recording cancelled."
    }

    func playAudio(_ data: Data) {
        playbackManager.play(wavData: data)
    }

    private func sendAudioPrompt(samples: [Float], sampleRate: Int) {
        guard !samples.isEmpty else {
            status = "Audio capture was empty."
            return
        }

        let content = ChatMessageContent.fromFloatSamples(samples, sampleRate: sampleRate)
        let chatMessage = ChatMessage(role: .user, content: content)

        var display = "Audio prompt (\(samples.count) samples @ \(sampleRate) Hz)"
        if samples.count < sampleRate / 4 {
            display = "Audio prompt (~\(samples.count) samples)"
        }

        let audioData: Data?
        if case .audio(let audioContent) = onEnum(of: content) {
            audioData = audioContent.data.toData()
        } else {
            audioData = nil
        }

        appendUserMessage(text: display, audioData: audioData)
        streamResponse(for: chatMessage)
    }

    private func appendUserMessage(text: String, audioData: Data?) {
        messages.append(AudioDemoMessage(role: .user, text: text, audioData: audioData))
    }

    private func streamResponse(for message: ChatMessage) {
        guard let conversation else {
            status = "Model not ready yet."
            return
        }

        playbackManager.reset()
        streamingTask?.cancel()
        streamingText = ""
        status = "Awaiting response..."
        isGenerating = true

        let stream = conversation.generateResponse(message: message)

        streamingTask = Task { [weak self] in
            guard let self else { return }
            do {  // (test) `for await` over v0.10's non-throwing flow
                for try await event in stream {
                    if Task.isCancelled { break }
                    await MainActor.run {
                        self.handle(event)
                    }
                }
            } catch {  // (test) the body of `handle(_:)`'s `case .error(let err):`
                isGenerating = false
                streamingText = ""
                status = "Generation failed: \(error.localizedDescription)"
            }
            await MainActor.run {
                self.streamingTask = nil
            }
        }
    }

    private func handle(_ event: MessageResponse) {  // (test) `any MessageResponse`
        switch onEnum(of: event) {
        case .chunk(let chunk):
            streamingText.append(chunk.text)
        case .reasoningChunk:
            status = "Thinking..."
        case .audioSample(let audioSample):
            playbackManager.enqueue(samples: audioSample.samples.toFloatArray(), sampleRate: Int(audioSample.sampleRate))
            status = "Streaming audio..."
        case .functionCalls(let fc):
            status = "Received function call: \(fc.functionCalls.count)"
        case .complete(let completion):
            finish(with: completion)
        // (test) `case .error(let err):` moved to streamResponse's `catch`
        }
    }

    private func finish(with completion: MessageResponseComplete) {
        let text = completion.fullMessage.content.compactMap { content -> String? in
            if case .text(let t) = onEnum(of: content) {
                return t.text
            }
            return nil
        }.joined()

        let audioData = completion.fullMessage.content.firstAudioData
        messages.append(
            AudioDemoMessage(
                role: .assistant,
                text: text.isEmpty ? "(audio response)" : text,
                audioData: audioData
            )
        )
        streamingText = ""
        isGenerating = false
        status =
            audioData != nil
            ? "Response complete with audio."
            : finishReasonDescription(completion.finishReason)

        if let audioData {
            playbackManager.play(wavData: audioData)
        }
    }

    private func finishReasonDescription(_ reason: GenerationFinishReason) -> String {
        switch reason {
        case .stop:
            return "Response complete."
        case .exceedContext:
            return "Context window exceeded."
        default:
            return "Response ended."
        }
    }
}

extension [ChatMessageContent] {
    fileprivate var firstAudioData: Data? {
        for content in self {
            if case .audio(let audioContent) = onEnum(of: content) {
                return audioContent.data.toData()
            }
        }
        return nil
    }
}

// MARK: - ChatStore.swift (LeapChatExample, v0.10.0)

@Observable
class ChatStore {
    var input: String = ""
    var messages: [MessageBubble] = []
    var isLoading = false
    var isModelLoading = true
    var currentAssistantMessage = ""
    var attachedImage: UIImage?

    var conversation: Conversation?  // (test) `(any Conversation)?`
    var modelRunner: (any ModelRunner)?

    @MainActor
    func setupModel() async {
        guard modelRunner == nil else { return }
        isModelLoading = true

        do {
            messages.append(
                MessageBubble(
                    content: "Initializing LeapSDK...",
                    isUser: false))

            messages.append(
                MessageBubble(
                    content: "Downloading LFM2-VL-450M model (compact vision support)...",
                    isUser: false))

            // Use manifest downloading for LFM2-VL-450M with Q8_0 (smaller model, faster download)
            // Reduced from default for mobile memory constraints
            let modelRunner = try await Leap.shared.load(
                model: "LFM2-VL-450M",
                quantization: "Q8_0",
                options: LiquidInferenceEngineManifestOptions(contextSize: 4096),
                progress: { [weak self] progress, speed in
                    Task { @MainActor in
                        if progress < 1.0 {
                            let progressPercent = Int(progress * 100)
                            self?.messages.append(
                                MessageBubble(
                                    content: "Downloading: \(progressPercent)%",
                                    isUser: false))
                        } else {
                            self?.messages.append(
                                MessageBubble(
                                    content: "Loading model into memory...",
                                    isUser: false))
                        }
                    }
                }
            )

            self.modelRunner = modelRunner
            conversation = Conversation(modelRunner: modelRunner, history: [])
            messages.append(
                MessageBubble(
                    content: "Model loaded successfully! You can start chatting.",
                    isUser: false))
        } catch {
            print("Error loading model: \(error)")
            let errorMessage = "Failed to load model: \(error.localizedDescription)"
            messages.append(MessageBubble(content: errorMessage, isUser: false))

            // Check if it's a LeapError
            if let leapError = error as? LeapError {
                print("LeapError details: \(leapError)")
                messages.append(
                    MessageBubble(content: "Error type: \(String(describing: leapError))", isUser: false))
            }
        }

        isModelLoading = false
    }

    @MainActor
    func send() async {
        guard conversation != nil else { return }

        let trimmed = input.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty || attachedImage != nil else { return }

        // Create message content array
        var messageContent: [ChatMessageContent] = []

        // Add image if present
        if let image = attachedImage {
            do {
                let imageContent = try ChatMessageContent.fromUIImage(image)
                messageContent.append(imageContent)
            } catch {
                print("Error converting image: \(error)")
                return
            }
        }

        // Add text if present
        if !trimmed.isEmpty {
            messageContent.append(ChatMessageContent.text(trimmed))
        }

        let userMessage = ChatMessage_withArray(role: .user, content: messageContent)

        // Create display content for the message bubble
        var displayContent = trimmed
        if attachedImage != nil {
            displayContent = displayContent.isEmpty ? "[Image]" : "[Image] \(displayContent)"
        }

        messages.append(MessageBubble(content: displayContent, isUser: true, image: attachedImage))
        input = ""
        attachedImage = nil
        isLoading = true
        currentAssistantMessage = ""

        let stream = conversation!.generateResponse(message: userMessage)
        do {
            for try await resp in stream {
                switch onEnum(of: resp) {
                case .reasoningChunk: break
                case .chunk(let chunk):
                    currentAssistantMessage.append(chunk.text)
                case .audioSample:
                    break
                case .complete(let completion):
                    let finalText = completion.fullMessage.content.compactMap { content -> String? in
                        switch onEnum(of: content) {
                        case .text(let textContent):
                            return textContent.text
                        case .audio, .image:
                            return nil
                        }
                    }.joined()
                    if !finalText.isEmpty {
                        currentAssistantMessage = finalText
                    }
                    if !currentAssistantMessage.isEmpty {
                        messages.append(MessageBubble(content: currentAssistantMessage, isUser: false))
                    }
                    currentAssistantMessage = ""
                    isLoading = false
                case .functionCalls:
                    break
                }
            }
        } catch {
            currentAssistantMessage = "Error: \(error.localizedDescription)"
            messages.append(MessageBubble(content: currentAssistantMessage, isUser: false))
            currentAssistantMessage = ""
            isLoading = false
        }
    }

    func removeAttachedImage() {
        attachedImage = nil
    }
}

// MARK: - SloganStore.swift (LeapSloganExample)

// System prompt and user prompt constants
private let SYSTEM_PROMPT =
    "You are a marketing expert. Suggest engaging and creative slogans based on a business description provided by the user."
private let USER_PROMPT_TEMPLATE = "Suggest slogans for this business: \"%@\""

@Observable
class SloganStore {
    var businessDescription: String = ""
    var generatedText: String = ""
    var isGenerating = false
    var isThinking = false
    var isModelLoading = false
    var modelLoaded = false
    var modelStatus: String = ""
    var modelStatusColor: Color = .red

    private var modelRunner: (any ModelRunner)?
    private var conversation: Conversation?  // (test) `(any Conversation)?`
    private(set) var generationTask: Task<Void, Never>?  // (test) `private`: the test awaits it

    @MainActor
    func loadModel() async {
        guard !modelLoaded else { return }
        isModelLoading = true
        generatedText = "Initiating AI model ...."
        modelStatus = "● Model: Loading..."
        modelStatusColor = .orange

        do {
            // Use manifest downloading for LFM2.5-1.2B-Instruct (best for instruction following)
            let cachePath = V010Library.cachePath  // (test) the app's caches folder + "leap-cache"
            try? FileManager.default.createDirectory(atPath: cachePath, withIntermediateDirectories: true)
            modelRunner = try await Leap.shared.load(
                model: "LFM2.5-1.2B-Instruct",
                quantization: "Q4_0",
                options: LiquidInferenceEngineManifestOptions(
                    cacheOptions: .enabled(path: cachePath)
                ),
                progress: { [weak self] progress, speed in
                    Task { @MainActor in
                        if progress < 1.0 {
                            self?.generatedText = "Downloading model: \(Int(progress * 100))%"
                            self?.modelStatus = "● Model: Downloading \(Int(progress * 100))%"
                        } else {
                            self?.generatedText = "Loading model into memory..."
                            self?.modelStatus = "● Model: Loading..."
                        }
                    }
                }
            )

            // Initialize conversation for regular generation
            guard let runner = modelRunner else {
                modelStatus = "● Model: Error"
                modelStatusColor = .red
                isModelLoading = false
                return
            }
            let systemMessage = ChatMessage(role: .system, textContent: SYSTEM_PROMPT)
            conversation = Conversation(
                modelRunner: runner,
                history: [systemMessage]
            )

            modelLoaded = true
            modelStatus = "● Model: Loaded ✓"
            modelStatusColor = .green
            generatedText = "Slogan generator ready! Time to create your brand's tagline! 🎯\n\n"
        } catch {
            print(error)
            generatedText =
                "Error loading slogan generator: \(error.localizedDescription)\n\nOops! An error happened."
            modelStatus = "● Model: Error"
            modelStatusColor = .red
        }

        isModelLoading = false
    }

    @MainActor
    func generateSlogans() async {
        // If already generating, stop the current generation
        if isGenerating {
            generationTask?.cancel()
            generationTask = nil
            isGenerating = false
            isThinking = false

            let currentText = generatedText
            if currentText.hasPrefix("Generating...")
                && currentText.trimmingCharacters(in: .whitespacesAndNewlines) == "Generating..."
            {
                generatedText =
                    "Slogan generation stopped. Try describing your business differently for new ideas."
            } else {
                generatedText.append("\n\n[Slogan generation stopped...]")
            }
            return
        }

        let topic = businessDescription.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !topic.isEmpty else {
            generatedText = "Describe your company and I'll create slogan suggestions."
            return
        }

        // Load model if not loaded
        if !modelLoaded {
            await loadModel()
            guard modelLoaded else { return }
        }

        isGenerating = true
        isThinking = false
        generatedText = "Generating...\n\n"

        generationTask = Task { @MainActor in
            guard let runner = modelRunner else {
                isGenerating = false
                isThinking = false
                generationTask = nil
                generatedText = "Model is not loaded."
                return
            }
            do {
                // Use constrained generation for structured output
                generatedText = "Generating structured slogans...\n\n"

                // Create conversation with constrained generation options
                let systemMessage = ChatMessage(role: .system, textContent: SYSTEM_PROMPT)
                let constrainedConversation = Conversation(
                    modelRunner: runner,
                    history: [systemMessage]
                )

                // Set up generation options with structured output
                var options = GenerationOptions()  // (test) `let`: a class in v0.10
                // (test) `SloganResponse.jsonSchema()`:
                options.jsonSchemaConstraint = try JSONSchemaGenerator.getJSONSchema(for: SloganResponse.self)

                let userMessage = ChatMessage(
                    role: .user,
                    textContent: String(format: USER_PROMPT_TEMPLATE, topic))

                // generateResponse(message:generationOptions:) returns a SkieSwiftFlow directly,
                // suitable for async iteration.
                let stream = constrainedConversation.generateResponse(
                    message: userMessage, generationOptions: options)

                var jsonResponse = ""
                for try await response in stream {  // (test) `for await`; a failure is thrown to the `catch` below
                    if Task.isCancelled { break }
                    switch onEnum(of: response) {
                    case .chunk(let chunk):
                        jsonResponse.append(chunk.text)
                    case .audioSample:
                        break
                    case .complete:
                        break
                    case .reasoningChunk:
                        break
                    case .functionCalls:
                        break
                    // (test) `case .error(let err): streamError = err.message`, and the `streamError`
                    // variable and check that throw it as an NSError, are left out: the stream throws
                    }
                }

                // Parse the JSON response
                let jsonData = Data(jsonResponse.utf8)
                let sloganResponse = try JSONDecoder().decode(SloganResponse.self, from: jsonData)

                // Format the structured output nicely
                var formattedOutput = ""
                formattedOutput += "🎯 **Short Slogan:**\n\(sloganResponse.shortSlogan)\n\n"
                formattedOutput += "📝 **Long Tagline:**\n\(sloganResponse.longTagline)\n\n"
                formattedOutput += "🎭 **Tone:** \(sloganResponse.tone)\n\n"
                formattedOutput += "👥 **Target Audience:** \(sloganResponse.targetAudience)\n\n"
                formattedOutput += "✨ **Key Benefits:**\n"
                for benefit in sloganResponse.keyBenefits {
                    formattedOutput += "  • \(benefit)\n"
                }

                generatedText = formattedOutput
                isGenerating = false
                isThinking = false
                generationTask = nil

            } catch {
                // Fallback to regular conversation if constrained generation fails
                print("Constrained generation failed: \(error)")
                print("Falling back to regular conversation...")

                // Reset conversation for each generation to avoid context length issues
                let systemMessage = ChatMessage(role: .system, textContent: SYSTEM_PROMPT)
                let fallbackConversation = Conversation(
                    modelRunner: runner,
                    history: [systemMessage]
                )
                conversation = fallbackConversation

                let prompt = String(format: USER_PROMPT_TEMPLATE, topic)
                let userMessage = ChatMessage(role: .user, textContent: prompt)

                let stream = fallbackConversation.generateResponse(message: userMessage)

                generatedText = "Generating (fallback mode)...\n\n"

                do {  // (test) `for await` over v0.10's non-throwing flow
                    for try await response in stream {
                        if Task.isCancelled { break }

                        switch onEnum(of: response) {
                        case .chunk(let chunk):
                            isThinking = false
                            if generatedText.hasPrefix("Generating (fallback mode)...") {
                                generatedText = chunk.text
                            } else {
                                generatedText.append(chunk.text)
                            }
                        case .audioSample:
                            break
                        case .complete:
                            isGenerating = false
                            isThinking = false
                            generationTask = nil
                        case .reasoningChunk:
                            if !isThinking {
                                isThinking = true
                            }
                        case .functionCalls:
                            break
                        }
                    }
                } catch {  // (test) the body of `case .error(let err):`
                    isGenerating = false
                    isThinking = false
                    generationTask = nil
                    generatedText.append("\n\n[Error: \(error.localizedDescription)]")
                }
            }
        }
    }

    deinit {
        generationTask?.cancel()
    }
}

// MARK: - Recipe.swift (RecipeGenerator)

@Generatable("A recipe for cooking great dishes")
struct Recipe: Codable {
    @Guide("Name of the dish")
    var name: String
    @Guide("Time to cook the dish in minutes")
    var cookingTime: Int
    @Guide("Whether the dish is vegetarian or not")
    var isVegetarian: Bool
    @Guide("Ingredients needed")
    var ingredients: [String]
    @Guide("Directions of cooking")
    var directions: [String]
}

// MARK: - The tests

/// The v0.10 names, one by one, without a model.
@Suite struct V010Spelling {
    @Test func roleIsTheSeedsRole() {
        let role: ChatMessage.Role = .tool
        #expect(role == ChatMessageRole.tool)
        #expect(ChatMessage.Role.allCases == ChatMessageRole.allCases)
        let message = ChatMessage(role: .user, textContent: "Hi")
        #expect(message.role == .user)
        #expect(message.content == [.text("Hi")])
    }

    @Test func singlePartAndArrayInitializers() {
        let one = ChatMessage(role: .assistant, content: ChatMessageContent.text("one part"))
        #expect(one.role == .assistant)
        #expect(one.content == [.text("one part")])
        #expect(one.reasoningContent == nil && one.functionCalls == nil)
        // The seeds' array initializer is still chosen for an array literal.
        let parts = ChatMessage(role: .user, content: [.text("a"), .audio(Data([1, 2]))])
        #expect(parts.content == [.text("a"), .audio(Data([1, 2]))])
        // v0.10's primary initializer, every argument given.
        let full = ChatMessage(role: .user, content: [.text("b")], reasoningContent: nil, functionCalls: nil)
        #expect(full.content == [.text("b")])
        let withArray = ChatMessage_withArray(role: .system, content: [.text("c"), .image(Data([0xFF, 0xD8]))])
        #expect(withArray.role == .system)
        #expect(withArray.content == [.text("c"), .image(Data([0xFF, 0xD8]))])
    }

    @Test func onEnumOverContentCarriesTheFields() {
        let jpeg = Data([0xFF, 0xD8, 0xFF, 0xD9])
        let wav = ChatMessageContent.fromFloatSamples([0.25, -0.5], sampleRate: 16000)
        var seen: [String] = []
        for content in [ChatMessageContent.text("hello"), .image(jpeg), wav] {
            switch onEnum(of: content) {
            case .text(let t): seen.append("text \(t.text)")
            case .image(let i): seen.append("image \(i.jpegByteArray.toData() == jpeg)")
            case .audio(let a):
                guard case .audio(let bytes) = wav else { return }
                seen.append("audio \(a.data.toData() == bytes)")
            }
        }
        #expect(seen == ["text hello", "image true", "audio true"])
        #expect(onEnum(of: .text("x")) == .text(ChatMessageContent.Text(text: "x")))
    }

    @Test func completionPayloadName() {
        let message = ChatMessage(role: .assistant, textContent: "done")
        let completion: MessageResponseComplete = MessageCompletion(message: message, finishReason: .exceedContext, stats: nil)
        guard case .complete(let payload) = onEnum(of: .complete(completion)) else {
            Issue.record("not .complete")
            return
        }
        let named: MessageResponse.Complete = payload
        #expect(named.fullMessage.textContent == "done")
        #expect(named.finishReason == .exceedContext)
        guard case .audioSample(let audio) = onEnum(of: .audioSample(samples: [0.5, -1], sampleRate: 24000)) else {
            Issue.record("not .audioSample")
            return
        }
        let sample: MessageResponseAudioSample = audio
        #expect(sample.samples.toFloatArray() == [0.5, -1])
        #expect(Int(sample.sampleRate) == 24000)
        let chunk: MessageResponseChunk = MessageResponse.Chunk(text: "t")
        #expect(chunk.text == "t")
    }

    @Test func bridgedArrayConversions() {
        let samples: [Float] = [1, -0.0, 0.5, -2.75, .greatestFiniteMagnitude]
        #expect(samples.toFloatArray() == samples)
        #expect(Data([9, 8, 7]).toData() == Data([9, 8, 7]))
        // Four little-endian bytes a sample: 1.0 is 0x3F800000.
        #expect(ArrayConversionsKt.floatArrayToNSData(array: [1]) == Data([0x00, 0x00, 0x80, 0x3F]))
        let bytes = ArrayConversionsKt.floatArrayToNSData(array: samples)
        #expect(bytes.count == 20)
        let back = ArrayConversionsKt.nsDataToFloatArray(data: bytes)
        #expect(back.map(\.bitPattern) == samples.map(\.bitPattern))
        // A trailing partial sample is left out; no whole sample is no sample.
        #expect(ArrayConversionsKt.nsDataToFloatArray(data: bytes + Data([1, 2])).map(\.bitPattern) == samples.map(\.bitPattern))
        #expect(ArrayConversionsKt.nsDataToFloatArray(data: Data([1, 2, 3])).isEmpty)
        #expect(ArrayConversionsKt.floatArrayToNSData(array: []).isEmpty)
    }

    @Test func floatSamplesDefaultToMono() throws {
        let samples: [Float] = [0, 0.25, -0.25, 1]
        let content = ChatMessageContent.fromFloatSamples(samples, sampleRate: 16000)
        #expect(content == ChatMessageContent.fromFloatSamples(samples, sampleRate: 16000, channelCount: 1))
        guard case .audio(let wav) = content else {
            Issue.record("not audio")
            return
        }
        let decoded = try WAVAudio(data: wav)  // multi-channel WAVs are refused here
        #expect(decoded.samples == samples)
        #expect(decoded.sampleRate == 16000)
    }

    /// `import LeapSDKMacros` alone (V010SloganGeneratable.swift) gives the macros, and the
    /// type is the same `GeneratableType` as under `import LeapSDK`.
    @Test func macrosThroughLeapSDKMacros() throws {
        let schema = try SloganResponse.jsonSchema()
        #expect(schema["description"]?.stringValue == "Generate creative marketing slogans for a business")
        let properties = try #require(schema["properties"]?.objectValue)
        #expect(properties.keys == ["businessName", "shortSlogan", "longTagline", "keyBenefits", "targetAudience", "tone"])
        #expect(properties["keyBenefits"]?["type"]?.stringValue == "array")
        #expect(properties["tone"]?["description"]?.stringValue == "Emotional tone of the slogan (e.g., professional, playful, inspiring)")
        #expect(schema["required"]?.arrayValue?.count == 6)
        let recipe = try Recipe.jsonSchema()
        let recipeProperties = try #require(recipe["properties"]?.objectValue)
        #expect(recipeProperties.keys == ["name", "cookingTime", "isVegetarian", "ingredients", "directions"])
        #expect(recipeProperties["cookingTime"]?["type"]?.stringValue == "integer")
        #expect(recipeProperties["isVegetarian"]?["description"]?.stringValue == "Whether the dish is vegetarian or not")
        var options = GenerationOptions()
        try options.setResponseFormat(type: Recipe.self)
        #expect(options.jsonSchemaConstraint == (try JSONSchemaGenerator.getJSONSchema(for: Recipe.self)))
    }
}

/// The example apps' stores, run against the tiny models.
@Suite(.serialized) @MainActor struct V010ExampleApps {
    /// The audio demo with the speech model: a text prompt gets a spoken reply, which the
    /// store streams to the player through `onEnum(of:)`'s `.audioSample` and
    /// `toFloatArray()`, and then a finished message built from `MessageResponseComplete`.
    @Test func audioDemoSpeaksATextPrompt() async throws {
        let library = try V010Library()
        defer { library.stop() }
        let store = AudioDemoStore()
        let player = try #require(AudioPlaybackManager.made.last)
        #expect(player.sessionPrepared)
        await store.setupModel()
        #expect(store.status == "Ready")
        #expect(store.messages.map(\.text) == ["Model loaded: LFM2.5-Audio-1.5B (Q4_0)"])
        #expect(store.messages.first?.isUser == false)
        // The model and its three companion files came from the library into the cache.
        let files = library.server.requests.filter { $0.path.hasPrefix("/files/") && $0.method == "GET" }.map(\.path)
        #expect(Set(files) == Set(V010Library.bundles["LFM2.5-Audio-1.5B/Q4_0"]!.files.values.map { "/files/" + $0 }))

        store.inputText = "  Hello! How are you today?\n"
        store.sendTextPrompt()
        #expect(store.inputText.isEmpty)
        #expect(store.isGenerating)
        try await waitUntil(300, "the spoken reply") { !store.isGenerating }

        try #require(store.messages.count == 3, "\(store.status ?? "nil")")
        let user = store.messages[1]
        #expect(user.role == .user && user.isUser && user.text == "Hello! How are you today?" && user.audioData == nil)
        let reply = store.messages[2]
        #expect(reply.role == .assistant)
        #expect(!reply.text.isEmpty)
        #expect(store.streamingText.isEmpty)
        // The reply spoke: 24 kHz samples reached the player as they came, and the finished
        // message's audio part (found with `onEnum(of: content)`, read with `toData()`) is
        // their WAV, which the store plays at the end.
        #expect(store.status == "Response complete with audio.", "\(store.status ?? "nil")")
        try checkSpokenReply(reply, player: player)
    }

    /// The streamed samples (`toFloatArray()`) are 24 kHz and finite, and the reply's WAV is
    /// exactly their concatenation, played once.
    func checkSpokenReply(_ reply: AudioDemoMessage, player: AudioPlaybackManager) throws {
        #expect(player.resets == 1)
        #expect(!player.enqueued.isEmpty)
        #expect(player.enqueued.allSatisfy { $0.sampleRate == 24000 && !$0.samples.isEmpty })
        let streamed = player.enqueued.flatMap(\.samples)
        #expect(streamed.allSatisfy { $0.isFinite })
        let wav = try #require(reply.audioData)
        let decoded = try WAVAudio(data: wav)
        #expect(decoded.sampleRate == 24000)
        #expect(decoded.samples == streamed)
        #expect(player.played == [wav])
    }

    /// The audio demo with the audio-in model: a recording goes in as
    /// `fromFloatSamples(_:sampleRate:)` (mono by default) in `ChatMessage(role:content:)`, and
    /// the user's message keeps its WAV through `onEnum(of:)` and `toData()`.
    @Test func audioDemoHearsARecording() async throws {
        let library = try V010Library()
        defer { library.stop() }
        let store = AudioDemoStore()
        let player = try #require(AudioPlaybackManager.made.last)
        let recorder = try #require(AudioRecorder.made.last)
        await store.setupModel()
        #expect(store.status == "Ready")

        let wav = try Data(contentsOf: URL(fileURLWithPath: TestFixtures.path("audio/lfm2-audio-chirp-1s-16k.wav")))
        let samples = try WAVAudio.decodeMono16kHz(wav)
        recorder.nextCapture = (samples, 16000)
        store.toggleRecording()
        #expect(store.isRecording && recorder.recording && store.status == "Recording...")
        store.toggleRecording()
        #expect(!store.isRecording && !recorder.recording)
        #expect(store.isGenerating)
        try await waitUntil(300, "the reply to the recording") { !store.isGenerating }

        try #require(store.messages.count == 3, "\(store.status ?? "nil")")
        let user = store.messages[1]
        #expect(user.role == .user)
        #expect(user.text == "Audio prompt (\(samples.count) samples @ 16000 Hz)")
        #expect(user.audioData == WAVAudio.encodeFloat32WAV(samples: samples, sampleRate: 16000, channelCount: 1))
        #expect(try WAVAudio(data: try #require(user.audioData)).samples == samples)
        // lfm2-audio-tiny speaks too (its speech files are beside it), and the system prompt
        // asks for interleaved text and audio.
        let reply = store.messages[2]
        #expect(reply.role == .assistant && !reply.text.isEmpty)
        #expect(store.status == "Response complete with audio.", "\(store.status ?? "nil")")
        try checkSpokenReply(reply, player: player)

        // An empty capture and a cancelled recording change nothing but the status.
        recorder.nextCapture = nil
        store.toggleRecording()
        store.toggleRecording()
        #expect(store.status == "No audio captured.")
        store.toggleRecording()
        store.cancelRecording()
        #expect(store.status == "Recording cancelled." && !store.isRecording)
        #expect(store.messages.count == 3)
    }

    /// The chat example (v0.10.0): `ChatMessage_withArray`, and exhaustive `onEnum(of:)`
    /// switches; the bubble it adds is the reply's text, read through `onEnum(of: content)`.
    @Test func chatStoreSendsAndShowsTheReply() async throws {
        let library = try V010Library()
        defer { library.stop() }
        let store = ChatStore()
        await store.setupModel()
        #expect(!store.isModelLoading)
        let conversation = try #require(store.conversation)
        #expect(
            store.messages.prefix(2).map(\.content) == [
                "Initializing LeapSDK...", "Downloading LFM2-VL-450M model (compact vision support)..."
            ])
        #expect(store.messages.contains { $0.content == "Model loaded successfully! You can start chatting." })
        // The progress closure's bubbles: percentages that never decrease, then the load.
        try await waitUntil(10, "the last progress bubble") { store.messages.contains { $0.content == "Loading model into memory..." } }
        let percentages = store.messages.compactMap { bubble -> Int? in
            guard bubble.content.hasPrefix("Downloading: ") else { return nil }
            return Int(bubble.content.dropFirst("Downloading: ".count).dropLast())
        }
        #expect(zip(percentages, percentages.dropFirst()).allSatisfy { $0 <= $1 } && percentages.allSatisfy { (0..<100).contains($0) })

        let before = store.messages.count
        store.input = "Hello there"
        await store.send()
        #expect(store.input.isEmpty && !store.isLoading)
        #expect(store.currentAssistantMessage.isEmpty)
        let history = conversation.history
        #expect(history.map(\.role) == [.user, .assistant])
        #expect(history.first?.content == [.text("Hello there")])
        let reply = try #require(history.last)
        #expect(store.messages[before].content == "Hello there" && store.messages[before].isUser)
        if reply.textContent.isEmpty {
            #expect(store.messages.count == before + 1)  // no bubble for an empty reply
        } else {
            #expect(store.messages.count == before + 2)
            #expect(store.messages[before + 1].content == reply.textContent && !store.messages[before + 1].isUser)
        }
    }

    /// The slogan example: `SloganResponse` (from `import LeapSDKMacros`) constrains the
    /// first generation; random weights rarely finish the JSON, so the store's own fallback
    /// (an unconstrained conversation) usually answers. Either way the store ends idle with
    /// text the model wrote.
    @Test func sloganStoreGenerates() async throws {
        let library = try V010Library()
        defer { library.stop() }
        let store = SloganStore()
        store.businessDescription = "   "
        await store.generateSlogans()
        #expect(store.generatedText == "Describe your company and I'll create slogan suggestions.")
        #expect(!store.modelLoaded)

        store.businessDescription = "A bakery that delivers bread by bicycle"
        await store.generateSlogans()  // loads the model first
        #expect(store.modelLoaded && store.modelStatus == "● Model: Loaded ✓" && store.modelStatusColor == .green)
        let task = try #require(store.generationTask)
        await task.value
        #expect(!store.isGenerating && !store.isThinking)
        #expect(store.generationTask == nil)
        let text = store.generatedText
        #expect(!text.hasPrefix("Generating"), "\(text)")
        #expect(!text.contains("[Error:"), "\(text)")
        #expect(!text.isEmpty)
    }
}
