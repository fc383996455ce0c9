import Foundation
import GGUF
import Images
import LeapSDKCore
import Models

/// The two kinds of media an mmproj file encodes.
enum MediaKind: String, Sendable, Equatable {
    case image
    case audio

    /// The command-line flag (and chat command) that attaches this kind.
    var flag: String { self == .image ? "--image" : "--audio" }

    /// The kind of the projector types `MediaEncoder.load` runs, or nil.
    static func of(projectorType type: String) -> MediaKind? {
        if SigLIP2VisionEncoder.projectorTypes.contains(type) { return .image }
        if FastConformerEncoder.projectorTypes.contains(type) { return .audio }
        return nil
    }
}

/// Why the media flags (`--mmproj`, `--image`, `--audio`) or the chat's `/image` and
/// `/audio` cannot be used. Each case's `description` is the line the command prints.
enum MediaFlagError: Error, Equatable, CustomStringConvertible {
    /// Media asked of a model with no mmproj file: none given, none beside the model.
    case noProjector(model: String, kind: MediaKind)
    /// The mmproj file encodes the other kind of media.
    case wrongKind(projector: String, encodes: MediaKind, asked: MediaKind)
    /// A file named by a flag does not exist or cannot be read.
    case missingFile(flag: String, path: String)
    /// The `--audio` file is not a WAV file the engine reads.
    case notWAV(path: String, reason: String)
    /// The `--image` file is not a JPEG or PNG image the engine reads.
    case notAnImage(path: String, reason: String)
    /// An mmproj file the loader does not run (another projector type, not a projector).
    case badProjector(path: String, reason: String)
    /// Both `--image` and `--audio` (a model's mmproj file encodes one kind).
    case bothKinds

    var description: String {
        switch self {
        case .noProjector(let model, let kind):
            return
                "\(kind.flag) needs the model's media encoder, an mmproj file: pass --mmproj FILE (none was found beside \(model); a companion is named mmproj-<model>.gguf)"
        case .wrongKind(let projector, let encodes, let asked):
            return
                "the mmproj file \(projector) encodes \(encodes == .image ? "images" : "audio"), not \(asked == .image ? "images" : "audio"); use \(encodes.flag), or the mmproj file made for \(asked == .image ? "a vision" : "an audio") model"
        case .missingFile(let flag, let path):
            return "\(flag): the file '\(path)' does not exist or cannot be read"
        case .notWAV(let path, let reason):
            return "--audio: '\(path)' is not a WAV file leap-ref reads: \(reason)"
        case .notAnImage(let path, let reason):
            return "--image: '\(path)' is not an image leap-ref reads (JPEG or PNG): \(reason)"
        case .badProjector(let path, let reason):
            return "--mmproj: '\(path)' cannot be used: \(reason)"
        case .bothKinds:
            return "give --image or --audio, not both: a model's mmproj file encodes one kind of media"
        }
    }
}

/// An mmproj file found for a model, and the media it encodes.
struct ProjectorChoice: Equatable {
    let path: String
    let kind: MediaKind

    /// The mmproj file `flag` names, else the companion beside `model`
    /// (`MultimodalProjectorFile.companion`, as `Leap.load` finds it), or nil when there is
    /// neither. Reads only the file's metadata (its projector type).
    static func resolve(_ flag: String?, model: String) throws(MediaFlagError) -> ProjectorChoice? {
        guard let path = flag ?? MultimodalProjectorFile.companion(of: model) else { return nil }
        guard FileManager.default.isReadableFile(atPath: path) else { throw .missingFile(flag: "--mmproj", path: path) }
        let type: String
        do {
            type = try MediaEncoder.type(of: GGUFFile(path: path), path: path)
        } catch let error as ProjectorError {
            throw .badProjector(path: path, reason: error.description)
        } catch {
            throw .badProjector(path: path, reason: "\(error)")
        }
        guard let kind = MediaKind.of(projectorType: type) else {
            throw .badProjector(
                path: path,
                reason: "its projector type is '\(type)'; supported: \(MediaEncoder.supportedTypes.joined(separator: ", "))")
        }
        return ProjectorChoice(path: path, kind: kind)
    }

    /// Throws unless `choice` encodes `kind` (nil: the model has no mmproj file).
    static func require(_ choice: ProjectorChoice?, _ kind: MediaKind, model: String) throws(MediaFlagError) -> ProjectorChoice {
        guard let choice else { throw .noProjector(model: model, kind: kind) }
        guard choice.kind == kind else { throw .wrongKind(projector: choice.path, encodes: choice.kind, asked: kind) }
        return choice
    }
}

/// A media file read for a message: its bytes and what the command says about it.
struct MediaAttachment: Sendable {
    let kind: MediaKind
    let path: String
    let content: ChatMessageContent
    /// "image 640x480 (PNG)" or "audio 1.00 s (16000 Hz)".
    let summary: String

    /// Reads `path` as `kind`, checking its header (an image's size, a WAV file's format)
    /// as `ChatMessageContent.fromJPEGData` / `fromWAVData` do.
    static func read(_ path: String, as kind: MediaKind) throws(MediaFlagError) -> MediaAttachment {
        let expanded = (path as NSString).expandingTildeInPath
        guard let data = FileManager.default.contents(atPath: expanded) else { throw .missingFile(flag: kind.flag, path: path) }
        switch kind {
        case .image:
            let header: ImageHeader
            do {
                header = try ImageDecoder.header(of: [UInt8](data))
            } catch {
                throw .notAnImage(path: path, reason: error.description)
            }
            return MediaAttachment(
                kind: kind, path: path, content: .image(data), summary: "image \(header.width)x\(header.height) (\(header.format))")
        case .audio:
            let wav: WAVHeader
            do {
                wav = try WAVAudio.header(of: data)
            } catch {
                throw .notWAV(path: path, reason: error.description)
            }
            return MediaAttachment(
                kind: kind, path: path, content: .audio(data),
                summary: String(format: "audio %.2f s (%d Hz)", wav.duration, wav.sampleRate))
        }
    }
}
