/// Everything that can be wrong with a GGUF file or with a metadata lookup. Each case
/// names the offending key, tensor or byte offset, and `description` says what to do.
public enum GGUFError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file could not be opened or mapped (missing, unreadable, a directory...).
    case cannotOpen(path: String, reason: String)
    /// The first four bytes are not `GGUF`.
    case badMagic(found: [UInt8])
    /// The file is a big-endian GGUF, which this reader does not support.
    case bigEndian
    /// The format version is not 2 or 3.
    case unsupportedVersion(UInt32)
    /// The file ends before a field that the header announces.
    case truncated(offset: Int, reading: String)
    /// A count or length is larger than the rest of the file could possibly hold.
    case countTooLarge(what: String, count: UInt64, offset: Int)
    /// A metadata value has a type id that GGUF does not define.
    case unknownValueType(key: String, raw: UInt32)
    /// Arrays nested deeper than the reader allows.
    case arrayNestingTooDeep(key: String)
    /// The same metadata key appears twice.
    case duplicateKey(String)
    /// The same tensor name appears twice.
    case duplicateTensor(String)
    /// A tensor declares more than 4 dimensions, or none.
    case badDimensionCount(tensor: String, count: UInt32)
    /// A tensor dimension is zero-or-negative when read as signed, or absurdly large.
    case badDimension(tensor: String, dimension: UInt64)
    /// A tensor's element type id is not a ggml type this reader knows.
    case unknownTensorType(tensor: String, raw: UInt32)
    /// A tensor's row length is not a whole number of its type's blocks.
    case rowNotBlockMultiple(tensor: String, rowLength: Int, type: GGMLType)
    /// The tensor's byte size does not fit in a machine integer.
    case sizeOverflow(tensor: String)
    /// The tensor's data lies (partly) outside the file.
    case tensorOutOfBounds(tensor: String, offset: UInt64, bytes: Int, dataSectionBytes: Int)
    /// The tensor's data offset is not a multiple of `general.alignment`.
    case misalignedTensor(tensor: String, offset: UInt64, alignment: Int)
    /// Two tensors' data regions overlap.
    case overlappingTensors(String, String)
    /// `general.alignment` is not a power of two between 1 and 65536, or not an integer.
    case badAlignment(String)
    /// A required metadata key is absent.
    case missingKey(String)
    /// A metadata key holds a value of another type than the caller needs.
    case typeMismatch(key: String, expected: String, found: String)
    /// A numeric metadata value does not fit the requested range.
    case valueOutOfRange(key: String, value: String)
    /// A tensor the caller needs is absent.
    case missingTensor(String)
    /// A file could not be written.
    case writeFailed(path: String, reason: String)
    /// The writer was given inconsistent input (a caller bug, reported rather than trapped).
    case invalidWriterInput(String)

    public var description: String {
        switch self {
        case .cannotOpen(let path, let reason):
            return "cannot open '\(path)': \(reason). Check the path and that the file is a readable GGUF model."
        case .badMagic(let found):
            let hex = found.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined(
                separator: " ")
            return
                "not a GGUF file: the first bytes are [\(hex)], expected 47 47 55 46 ('GGUF'). Is this a safetensors/PyTorch file? Convert it to GGUF first."
        case .bigEndian:
            return "big-endian GGUF files are not supported; use a little-endian conversion of the model."
        case .unsupportedVersion(let v):
            return "unsupported GGUF version \(v); leap-ref reads versions 2 and 3. Re-convert the model with a current gguf tool."
        case .truncated(let offset, let reading):
            return "the file is truncated: it ends at byte \(offset) while reading \(reading). Re-download the model."
        case .countTooLarge(let what, let count, let offset):
            return
                "truncated or corrupt file: \(what) is \(count) at byte \(offset), more than the rest of the file can hold. Re-download the model."
        case .unknownValueType(let key, let raw):
            return "corrupt file: metadata key '\(key)' has unknown value type \(raw)."
        case .arrayNestingTooDeep(let key):
            return "corrupt file: metadata key '\(key)' nests arrays too deeply."
        case .duplicateKey(let key):
            return "corrupt file: metadata key '\(key)' appears twice."
        case .duplicateTensor(let name):
            return "corrupt file: tensor '\(name)' appears twice."
        case .badDimensionCount(let tensor, let count):
            return "corrupt file: tensor '\(tensor)' has \(count) dimensions; GGUF allows 1 to 4."
        case .badDimension(let tensor, let dimension):
            return "corrupt file: tensor '\(tensor)' has an invalid dimension \(dimension)."
        case .unknownTensorType(let tensor, let raw):
            return
                "tensor '\(tensor)' has ggml type id \(raw), which leap-ref does not know. The file may be newer than this reader, or corrupt."
        case .rowNotBlockMultiple(let tensor, let rowLength, let type):
            return
                "corrupt file: tensor '\(tensor)' has rows of \(rowLength) values, not a multiple of \(type)'s block size \(type.blockSize)."
        case .sizeOverflow(let tensor):
            return "corrupt file: the size of tensor '\(tensor)' overflows."
        case .tensorOutOfBounds(let tensor, let offset, let bytes, let dataBytes):
            return
                "corrupt or truncated file: tensor '\(tensor)' needs \(bytes) bytes at data offset \(offset), but the data section has \(dataBytes) bytes. Re-download the model."
        case .misalignedTensor(let tensor, let offset, let alignment):
            return "corrupt file: tensor '\(tensor)' starts at data offset \(offset), not a multiple of the alignment \(alignment)."
        case .overlappingTensors(let a, let b):
            return "corrupt file: the data of tensors '\(a)' and '\(b)' overlap."
        case .badAlignment(let value):
            return "corrupt file: general.alignment is \(value); it must be a power of two from 1 to 65536."
        case .missingKey(let key):
            return "the model has no metadata key '\(key)'; it may be incomplete or made for another architecture."
        case .typeMismatch(let key, let expected, let found):
            return "metadata key '\(key)' holds \(found), expected \(expected)."
        case .valueOutOfRange(let key, let value):
            return "metadata key '\(key)' has the out-of-range value \(value)."
        case .missingTensor(let name):
            return "the model has no tensor '\(name)'; it may be incomplete or made for another architecture."
        case .writeFailed(let path, let reason):
            return "cannot write '\(path)': \(reason)."
        case .invalidWriterInput(let message):
            return "invalid GGUF writer input: \(message)."
        }
    }
}
