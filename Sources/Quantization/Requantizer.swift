import GGUF
import Kernels

/// Re-encodes a model's weights in other ggml types (`leap-ref quantize`).
///
/// Two layouts, chosen by the ``QuantizationScheme``:
///
/// - ``QuantizationScheme/uniform(_:)`` follows gguf-py's re-encoding (`requant_gguf.py`)
///   so that, for the types both can produce, the output file is byte-identical:
///   `general.architecture` first, then the other metadata in file order with
///   `general.file_type` set to the target's llama.cpp file type; every 2-D tensor whose
///   row length is a multiple of 32 is dequantized to F32 and encoded as the target; every
///   other tensor is written as F32.
/// - ``QuantizationScheme/llamaQuantize(_:pure:)`` follows llama-quantize (without an
///   importance matrix): the metadata in file order with `general.quantization_version`
///   and `general.file_type` moved to the end, the tensors in llama-quantize's order
///   (``LlamaQuantizeRules/order(_:)``), each either copied unchanged (norms, tensors
///   already in their target type) or dequantized to F32 and encoded in the type
///   ``LlamaQuantizeRules`` picks. Where every tensor is F32 in the input, the output is
///   byte-identical to llama-quantize's (docs/kernels.md, "Quantizers").
///
/// Dequantization uses the reference kernels (plain multiply-adds, as numpy and ggml's
/// scalar code compute them) and quantization the reference quantizers, so the output does
/// not depend on the build or on the number of threads.
public enum Requantizer {
    /// Builds the re-encoded file; rows are encoded in parallel on `pool` when given.
    public static func requantize(
        _ file: GGUFFile, to scheme: QuantizationScheme, pool: ThreadPool? = nil
    ) throws(QuantizationError) -> GGUFWriter {
        switch scheme {
        case .uniform(let type): return try uniform(file, type, fileType: scheme.fileType, pool: pool)
        case .llamaQuantize(let fileType, let pure): return try llamaQuantize(file, fileType, pure: pure, pool: pool)
        }
    }

    private static func uniform(_ file: GGUFFile, _ target: GGMLType, fileType: UInt32, pool: ThreadPool?) throws(QuantizationError)
        -> GGUFWriter
    {
        var writer = GGUFWriter()
        writer.alignment = file.alignment
        if let arch = file.metadata["general.architecture"] { writer.metadata.set("general.architecture", arch) }
        for (key, value) in file.metadata.pairs where key != "general.architecture" && key != "general.alignment" {
            writer.metadata.set(key, key == "general.file_type" ? .uint32(fileType) : value)
        }
        if !writer.metadata.contains("general.file_type") { writer.metadata.set("general.file_type", .uint32(fileType)) }

        for t in file.tensors {
            let encodeAs: GGMLType = (t.shape.count == 2 && t.rowLength % 32 == 0) ? target : .f32
            let data = try encode(file, t, as: encodeAs, pool: pool)
            do { try writer.addTensor(name: t.name, type: encodeAs, shape: t.shape, data: data) } catch { throw .file(error) }
        }
        return writer
    }

    private static func llamaQuantize(_ file: GGUFFile, _ fileType: LlamaFileType, pure: Bool, pool: ThreadPool?)
        throws(QuantizationError) -> GGUFWriter
    {
        var writer = GGUFWriter()
        writer.alignment = file.alignment
        for (key, value) in file.metadata.pairs where !key.hasPrefix("split.") {
            writer.metadata.set(key, value)
        }
        // llama-quantize sets these two last; setting a key there moves it to the end.
        for (key, value) in [("general.quantization_version", UInt32(2)), ("general.file_type", fileType.rawValue)] {
            writer.metadata.remove(key)
            writer.metadata.set(key, .uint32(value))
        }
        var rules = try LlamaQuantizeRules(metadata: file.metadata, tensors: file.tensors, fileType: fileType, pure: pure)
        for t in LlamaQuantizeRules.order(file.tensors) {
            let type = try rules.targetType(for: t)
            let data: [UInt8]
            if type == t.type {
                data = Array(file.data(for: t))
            } else {
                data = try encode(file, t, as: type, pool: pool)
            }
            // ggml writes a tensor's dimensions without trailing 1s.
            var shape = t.shape
            while shape.count > 1, shape.last == 1 { shape.removeLast() }
            do { try writer.addTensor(name: t.name, type: type, shape: shape, data: data) } catch { throw .file(error) }
        }
        return writer
    }

    /// The rows of tensor `t` dequantized with the reference kernels and encoded as `type`.
    private static func encode(_ file: GGUFFile, _ t: GGUFTensorInfo, as type: GGMLType, pool: ThreadPool?) throws(QuantizationError)
        -> [UInt8]
    {
        guard t.type.hasKernels else { throw .unsupportedTensorType(name: t.name, type: t.type) }
        let cols = t.rowLength, rows = t.rowCount
        guard let inRowBytes = t.type.rowBytes(count: cols), let outRowBytes = type.rowBytes(count: cols) else {
            preconditionFailure("encode: \(t.name) rows of \(cols) are not whole \(t.type) and \(type) blocks")
        }
        let source = file.data(for: t)
        var out = [UInt8](repeating: 0, count: outRowBytes * rows)
        if out.isEmpty { return out }
        out.withUnsafeMutableBytes { o in
            let dst = o.baseAddress!, src = source.baseAddress!, inType = t.type
            let body: (Range<Int>) -> Void = { range in
                withUnsafeTemporaryAllocation(of: Float.self, capacity: cols) { floats in
                    for r in range {
                        inType.dequantizeRowReference(src + r * inRowBytes, into: floats.baseAddress!, count: cols)
                        type.quantizeRow(floats.baseAddress!, into: dst + r * outRowBytes, count: cols)
                    }
                }
            }
            if let pool, pool.threads > 1 {
                pool.parallelFor(count: rows, minChunk: 8, body)
            } else {
                body(0..<rows)
            }
        }
        return out
    }
}
