import Audio
import Foundation
import Images
import Models
import Tokenizers

/// Bounds on the media a prompt may carry: what a decoder may allocate, so that a hostile
/// image or clip is refused before it is decoded. Configurable through
/// `LiquidInferenceEngineOptions.mediaLimits` (and `leap-ref serve --max-image-pixels`).
public struct MediaLimits: Sendable, Equatable {
    /// The most pixels an image may declare (width × height), checked from its header.
    public var maxImagePixels: Int
    /// The most bytes of an encoded image.
    public var maxImageBytes: Int
    /// The longest audio clip, in seconds of 16 kHz audio.
    public var maxAudioSeconds: Double

    /// 50 megapixels, 64 MiB of image data, 10 minutes of audio.
    public init(maxImagePixels: Int = 50_000_000, maxImageBytes: Int = 64 << 20, maxAudioSeconds: Double = 600) {
        self.maxImagePixels = maxImagePixels
        self.maxImageBytes = maxImageBytes
        self.maxAudioSeconds = maxAudioSeconds
    }
}

/// Turns a message's image and audio parts into prompt pieces for the model's media
/// encoder (its mmproj file): the image decoded and cut into slices as LFM2-VL's
/// preprocessing does, each slice between LFM2-VL's marker tokens; the audio decoded to
/// 16 kHz and turned into a log-mel spectrogram, one chunk with no markers around it (as
/// LFM2-Audio reads it). The encoders themselves run later, when a prompt needs the rows.
struct MediaReader: Sendable {
    let projector: MediaEncoder
    let tokenizer: Tokenizer
    let limits: MediaLimits

    /// The pieces of one media part.
    func pieces(_ content: ChatMessageContent) throws(ServingError) -> [PromptSequence.Piece] {
        switch content {
        case .text(let t): return [.tokens(tokenizer.encode(t, addSpecial: false, parseSpecial: true).map(Int.init))]
        case .image(let data): return try image(data)
        case .audio(let data): return try audio(data)
        }
    }

    /// The positions `content` will take in the prompt, read from its header alone (an
    /// image's size, a WAV file's rate and length; nothing is decoded), or nil when the header
    /// cannot tell (the part is then refused when it is read, with the reason). A prompt
    /// that cannot fit its context is refused from these counts before any image or clip in
    /// it is decoded: a request of many small files that decode to large images would
    /// otherwise cost a decode (seconds, hundreds of MB) for each.
    func positions(_ content: ChatMessageContent) -> Int? {
        switch content {
        case .text(let t): return tokenizer.encode(t, addSpecial: false, parseSpecial: true).count
        case .image(let data):
            guard case .vision(let encoder) = projector, data.count <= limits.maxImageBytes,
                let header = try? ImageDecoder.header(
                    of: [UInt8](data), limits: ImageLimits(maxPixels: limits.maxImagePixels, maxInputBytes: limits.maxImageBytes)),
                let preprocessor = try? LFM2VLImagePreprocessor(configuration: Self.configuration(encoder.preprocessing)),
                let layout = try? preprocessor.layout(width: header.width, height: header.height)
            else { return nil }
            // <|image_start|>, each slice (a tile's or the thumbnail's marker before it), <|image_end|>.
            return 2 + layout.slices.reduce(0) { $0 + $1.tokenCount + ($1.kind == .image ? 0 : 1) }
        case .audio(let data):
            guard case .audio(let encoder) = projector, let header = try? WAVAudio.header(of: data),
                header.duration <= limits.maxAudioSeconds
            else { return nil }
            let rate = WAVAudio.modelSampleRate
            let samples: Int
            if header.sampleRate == rate {
                samples = header.sampleCount
            } else {
                guard let resampler = try? LinearResampler(from: header.sampleRate, to: rate) else { return nil }
                samples = resampler.outputCount(forInputCount: header.sampleCount)
            }
            return try? encoder.tokenCount(frames: LogMelExtractor.frameCount(forSampleCount: samples))
        }
    }

    // MARK: Images

    /// LFM2-VL's layout of an image: `<|image_start|>` and `<|image_end|>` around its
    /// slices; a tiled image's tiles each after `<|img_row_R_col_C|>`, its thumbnail after
    /// `<|img_thumbnail|>`.
    private func image(_ data: Data) throws(ServingError) -> [PromptSequence.Piece] {
        guard case .vision(let encoder) = projector else {
            throw .unsupportedContent("this model's mmproj file encodes audio, not images; send audio or text")
        }
        guard data.count <= limits.maxImageBytes else {
            throw .unsupportedContent("the image has \(data.count) bytes, more than the limit of \(limits.maxImageBytes)")
        }
        let bytes = [UInt8](data)
        let decoded: RGBImage
        do {
            decoded = try ImageDecoder.decode(
                bytes, limits: ImageLimits(maxPixels: limits.maxImagePixels, maxInputBytes: limits.maxImageBytes))
        } catch {
            throw .unsupportedContent("the image cannot be read: \(error)")
        }
        let processed: PreprocessedImage
        do {
            processed = try LFM2VLImagePreprocessor(configuration: Self.configuration(encoder.preprocessing)).preprocess(decoded)
        } catch {
            throw .unsupportedContent("the image cannot be prepared for the vision encoder: \(error)")
        }
        let hash = ContentHash.of(bytes)
        var pieces: [PromptSequence.Piece] = [.tokens([try marker("<|image_start|>")])]
        for (index, slice) in processed.slices.enumerated() {
            switch slice.kind {
            case .image: break
            case .tile(let row, let column): pieces.append(.tokens([try marker("<|img_row_\(row)_col_\(column)|>")]))
            case .thumbnail: pieces.append(.tokens([try marker("<|img_thumbnail|>")]))
            }
            let chunk = MediaChunk(
                kind: "image", positions: slice.tokenCount, contentHash: ContentHash.of([UInt8(truncatingIfNeeded: index)], seed: hash)
            ) { () throws(ServingError) -> [Float] in
                do {
                    return try encoder.encode(pixels: slice.values, width: slice.width, height: slice.height)
                } catch {
                    throw .engineFailure("the vision encoder failed on an image slice: \(error)")
                }
            }
            pieces.append(.media(chunk))
        }
        pieces.append(.tokens([try marker("<|image_end|>")]))
        return pieces
    }

    /// The image preprocessing of an mmproj file's parameters.
    static func configuration(_ p: ImagePreprocessing) -> LFM2VLImagePreprocessor.Configuration {
        func rgb(_ v: [Float], _ fallback: Float) -> SIMD3<Float> {
            v.count == 3 ? SIMD3(v[0], v[1], v[2]) : SIMD3(repeating: fallback)
        }
        return LFM2VLImagePreprocessor.Configuration(
            patchSize: p.patchSize, mergeFactor: p.mergeFactor, minImageTokens: p.minImageTokens, maxImageTokens: p.maxImageTokens,
            imageMean: rgb(p.imageMean, 0.5), imageStd: rgb(p.imageStd, 0.5))
    }

    /// The id of one of LFM2-VL's image marker tokens.
    private func marker(_ text: String) throws(ServingError) -> Int {
        guard let id = tokenizer.tokenID(forText: text) else {
            throw .unsupportedContent(
                "the model's vocabulary has no \(text) token, which LFM2-VL's image layout needs; load the language model that goes with this mmproj file"
            )
        }
        return Int(id)
    }

    // MARK: Audio

    /// One chunk of the clip's encoder rows, where the part is in the message.
    private func audio(_ data: Data) throws(ServingError) -> [PromptSequence.Piece] {
        guard case .audio(let encoder) = projector else {
            throw .unsupportedContent("this model's mmproj file encodes images, not audio; send an image or text")
        }
        let samples: [Float]
        do {
            samples = try WAVAudio.decodeMono16kHz(data, maximumSeconds: limits.maxAudioSeconds)
        } catch {
            throw .unsupportedContent("the audio cannot be read: \(error)")
        }
        let maxSamples = Int(limits.maxAudioSeconds * 16000)
        let mel: LogMelSpectrogram
        do {
            mel = try LogMelExtractor(maximumSampleCount: maxSamples).spectrogram(of: samples)
        } catch {
            throw .unsupportedContent("the audio cannot be used: \(error)")
        }
        let frames = mel.frameCount
        guard frames <= encoder.maximumFrameCount else {
            throw .unsupportedContent(
                "the audio is \(String(format: "%.1f", Double(samples.count) / 16000)) s long, more than this audio encoder takes (\(encoder.maximumFrameCount) mel frames, about \(encoder.maximumFrameCount / 100) s)"
            )
        }
        let values = mel.values
        let positions: Int
        do { positions = try encoder.tokenCount(frames: frames) } catch { throw .unsupportedContent("the audio cannot be used: \(error)") }
        let chunk = MediaChunk(
            kind: "audio", positions: positions, contentHash: ContentHash.of(data)
        ) { () throws(ServingError) -> [Float] in
            do {
                return try encoder.encode(mel: values, frames: frames)
            } catch {
                throw .engineFailure("the audio encoder failed: \(error)")
            }
        }
        return [.media(chunk)]
    }
}
