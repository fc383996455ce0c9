import GGUF
import Kernels

/// Re-encodes a model's weight matrices as another ggml type (`leap-ref quantize`).
///
/// The rules follow gguf-py's re-encoding (`requant_gguf.py`) so that, for the types both
/// can produce, the output file is byte-identical: `general.architecture` first, then the
/// other metadata in file order with `general.file_type` set to the target's llama.cpp
/// file type; every 2-D tensor whose row length is a multiple of 32 is dequantized to F32
/// and encoded as the target; every other tensor is written as F32.
public enum Requantizer {
    /// Types `requantize` can produce.
    public static let targets: [GGMLType] = [.f32, .f16, .bf16, .q8_0, .q4_0, .q4_1, .q5_0, .q5_1]

    /// llama.cpp's `llama_ftype` for a file whose matrices are all of `type`.
    public static func fileType(for type: GGMLType) -> UInt32 {
        switch type {
        case .f32: return 0
        case .f16: return 1
        case .q4_0: return 2
        case .q4_1: return 3
        case .q8_0: return 7
        case .q5_0: return 8
        case .q5_1: return 9
        case .bf16: return 32
        default: return 0
        }
    }

    /// Builds the re-encoded file.
    public static func requantize(_ file: GGUFFile, to target: GGMLType) throws(ModelError) -> GGUFWriter {
        guard targets.contains(target) else { throw .unsupportedTensorType(name: "(target)", type: target) }
        var writer = GGUFWriter()
        writer.alignment = file.alignment
        if let arch = file.metadata["general.architecture"] { writer.metadata.set("general.architecture", arch) }
        for (key, value) in file.metadata.pairs where key != "general.architecture" && key != "general.alignment" {
            writer.metadata.set(key, key == "general.file_type" ? .uint32(fileType(for: target)) : value)
        }
        if !writer.metadata.contains("general.file_type") { writer.metadata.set("general.file_type", .uint32(fileType(for: target))) }

        for t in file.tensors {
            guard t.type.hasKernels else { throw .unsupportedTensorType(name: t.name, type: t.type) }
            let cols = t.rowLength, rows = t.rowCount
            let encodeAs: GGMLType = (t.shape.count == 2 && cols % 32 == 0) ? target : .f32
            let src = file.data(for: t).baseAddress
            var floats = [Float](repeating: 0, count: cols)
            var out = [UInt8](repeating: 0, count: encodeAs.rowBytes(count: cols)! * rows)
            let inRowBytes = t.type.rowBytes(count: cols)!
            let outRowBytes = encodeAs.rowBytes(count: cols)!
            floats.withUnsafeMutableBufferPointer { f in
                out.withUnsafeMutableBytes { o in
                    for r in 0..<rows {
                        // The reference dequantizer: plain multiply-adds, as numpy computes them (no FMA).
                        t.type.dequantizeRowReference(src! + r * inRowBytes, into: f.baseAddress!, count: cols)
                        encodeAs.quantizeRow(f.baseAddress!, into: o.baseAddress! + r * outRowBytes, count: cols)
                    }
                }
            }
            do { try writer.addTensor(name: t.name, type: encodeAs, shape: t.shape, data: out) } catch { throw .file(error) }
        }
        return writer
    }
}
