import GGUF

/// Why a model could not be loaded or run. Each message names the key, tensor or limit
/// involved and says what to do.
public enum ModelError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `general.architecture` names an architecture leap-ref does not implement.
    case unsupportedArchitecture(String, supported: [String])
    /// A hyper-parameter has a value the architecture cannot use.
    case invalidHyperParameter(key: String, value: String, reason: String)
    /// A tensor has another shape than the hyper-parameters imply.
    case tensorShapeMismatch(name: String, expected: [Int], found: [Int])
    /// A tensor's element type has no kernel.
    case unsupportedTensorType(name: String, type: GGMLType)
    /// The file itself is malformed or lacks a key or tensor.
    case file(GGUFError)
    /// A batch would run past the context window.
    case contextOverflow(position: Int, tokens: Int, contextLength: Int)
    /// A token id is outside the vocabulary.
    case invalidToken(id: Int, vocabularySize: Int)
    /// A forward call was given no tokens, or more than one batch can hold.
    case invalidBatch(count: Int, maximum: Int)
    /// Every slot of a `BatchedSession` holds an open sequence.
    case noFreeSlot(slots: Int)
    /// A `BatchedSession.Sequence` that was closed (or belongs to another session).
    case unknownSequence(slot: Int)
    /// A step named the same sequence twice.
    case repeatedSequence(slot: Int)
    /// Embeddings given as input are not whole rows of the model's width, or hold a
    /// value that is not finite.
    case invalidEmbeddings(values: Int, width: Int)

    public var description: String {
        switch self {
        case .unsupportedArchitecture(let arch, let supported):
            return "unsupported architecture '\(arch)'; leap-ref runs \(supported.joined(separator: ", "))."
        case .invalidHyperParameter(let key, let value, let reason):
            return "invalid hyper-parameter \(key) = \(value): \(reason)."
        case .tensorShapeMismatch(let name, let expected, let found):
            return "tensor '\(name)' has shape \(found), expected \(expected) from the hyper-parameters; the file is inconsistent."
        case .unsupportedTensorType(let name, let type):
            return
                "tensor '\(name)' is stored as \(type), which leap-ref has no kernel for; re-quantize the model (e.g. leap-ref quantize --type q8_0)."
        case .file(let e):
            return e.description
        case .contextOverflow(let position, let tokens, let contextLength):
            return
                "\(tokens) tokens at position \(position) exceed the context length \(contextLength); shorten the prompt or raise the context length."
        case .invalidToken(let id, let vocabularySize):
            return "token id \(id) is outside the vocabulary (0..<\(vocabularySize))."
        case .invalidBatch(let count, let maximum):
            return "a forward batch must hold 1 to \(maximum) tokens, got \(count)."
        case .noFreeSlot(let slots):
            return "all \(slots) slots hold an open sequence; close one or create the session with more slots."
        case .unknownSequence(let slot):
            return "the sequence in slot \(slot) is closed (or belongs to another session)."
        case .repeatedSequence(let slot):
            return "a step names the sequence in slot \(slot) more than once; give each sequence its tokens in one input."
        case .invalidEmbeddings(let values, let width):
            return
                "\(values) embedding values given as input rows of width \(width): an input needs whole rows of finite values (or tokens, not both)."
        }
    }
}

extension GGUFMetadata {
    /// Like `int(_:)` but wraps the error for model loading.
    func modelInt(_ key: String) throws(ModelError) -> Int {
        do { return try int(key) } catch { throw .file(error) }
    }
    func modelFloat(_ key: String) throws(ModelError) -> Float {
        do { return try float(key) } catch { throw .file(error) }
    }
    func modelOptionalInt(_ key: String) throws(ModelError) -> Int? {
        contains(key) ? try modelInt(key) : nil
    }
    func modelOptionalFloat(_ key: String) throws(ModelError) -> Float? {
        contains(key) ? try modelFloat(key) : nil
    }
}
