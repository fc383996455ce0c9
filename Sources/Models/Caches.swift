import GGUF
import Kernels

/// How the attention cache stores keys and values.
public enum KVCacheType: String, Sendable, CaseIterable {
    /// 4 bytes per value: exact.
    case f32
    /// 2 bytes per value (IEEE half, rounded as ggml rounds): half the memory, and the
    /// same rounding as llama.cpp's default cache.
    case f16

    var bytesPerValue: Int { self == .f32 ? 4 : 2 }
}

/// The attention keys and values of every attention layer, preallocated for the context
/// window. Layout per layer and head: `[position][headDim]` contiguous, so that one head's
/// keys form a row-major matrix that attention reads with SIMD or BLAS.
final class KVCache: @unchecked Sendable {
    // Safety: owned by one InferenceSession, used by one forward pass at a time.
    let type: KVCacheType
    let contextLength: Int
    let headDim: Int
    /// Per model layer: base of the keys / values, nil for a convolution layer.
    private(set) var keys: [UnsafeMutableRawPointer?]
    private(set) var values: [UnsafeMutableRawPointer?]
    let kvHeads: [Int]

    init(layers: [LayerKind], contextLength: Int, headDim: Int, type: KVCacheType) {
        self.type = type
        self.contextLength = contextLength
        self.headDim = headDim
        var keys: [UnsafeMutableRawPointer?] = []
        var values: [UnsafeMutableRawPointer?] = []
        var heads: [Int] = []
        for kind in layers {
            if case .attention(let kv) = kind {
                let bytes = kv * contextLength * headDim * type.bytesPerValue
                keys.append(.allocate(byteCount: bytes, alignment: 64))
                values.append(.allocate(byteCount: bytes, alignment: 64))
                heads.append(kv)
            } else {
                keys.append(nil)
                values.append(nil)
                heads.append(0)
            }
        }
        self.keys = keys
        self.values = values
        self.kvHeads = heads
    }

    @inline(__always)
    private func base(_ of: [UnsafeMutableRawPointer?], layer: Int, head: Int) -> UnsafeMutableRawPointer {
        of[layer]! + head * contextLength * headDim * type.bytesPerValue
    }

    /// Writes one position's key and value of `head` (from F32).
    @inline(__always)
    func store(layer: Int, head: Int, position: Int, key: UnsafePointer<Float>, value: UnsafePointer<Float>) {
        let offset = position * headDim * type.bytesPerValue
        let k = base(keys, layer: layer, head: head) + offset
        let v = base(values, layer: layer, head: head) + offset
        switch type {
        case .f32:
            k.assumingMemoryBound(to: Float.self).update(from: key, count: headDim)
            v.assumingMemoryBound(to: Float.self).update(from: value, count: headDim)
        case .f16:
            GGMLType.f16.quantizeRow(key, into: k, count: headDim)
            GGMLType.f16.quantizeRow(value, into: v, count: headDim)
        }
    }

    /// The keys (or values) of positions `0..<count` of `head` as F32 rows: the cache
    /// itself when it is F32, else converted into `scratch` (`count * headDim` floats).
    @inline(__always)
    func rows(keys wantKeys: Bool, layer: Int, head: Int, count: Int, scratch: UnsafeMutablePointer<Float>) -> UnsafePointer<Float> {
        let b = base(wantKeys ? keys : values, layer: layer, head: head)
        switch type {
        case .f32: return UnsafePointer(b.assumingMemoryBound(to: Float.self))
        case .f16:
            GGMLType.f16.dequantizeRow(b, into: scratch, count: count * headDim)
            return UnsafePointer(scratch)
        }
    }

    /// Bytes held by the cache.
    var byteCount: Int { kvHeads.reduce(0) { $0 + 2 * $1 * contextLength * headDim * type.bytesPerValue } }

    deinit {
        for p in keys { p?.deallocate() }
        for p in values { p?.deallocate() }
    }
}

/// The short-convolution inputs of every convolution layer, by position: row `p` holds
/// `B * x` of token `p` (`d` floats). The convolution at position `p` reads rows
/// `p-L+1 ... p` (rows before 0 are zero), so the state after any prefix of the sequence
/// is still there, and truncating the sequence is as cheap as for the attention cache.
/// Pages are touched only as positions are written.
final class ConvCache: @unchecked Sendable {
    // Safety: owned by one InferenceSession, used by one forward pass at a time.
    let width: Int  // d
    let contextLength: Int
    private(set) var inputs: [UnsafeMutablePointer<Float>?]

    init(layers: [LayerKind], width: Int, contextLength: Int) {
        self.width = width
        self.contextLength = contextLength
        inputs = layers.map { kind in
            kind == .shortConv ? UnsafeMutablePointer<Float>.allocate(capacity: contextLength * width) : nil
        }
    }

    /// Row `position` of `layer` (`d` floats).
    @inline(__always)
    func row(layer: Int, position: Int) -> UnsafeMutablePointer<Float> {
        inputs[layer]! + position * width
    }

    /// Bytes held by the cache.
    var byteCount: Int { inputs.reduce(0) { $0 + ($1 == nil ? 0 : contextLength * width * 4) } }

    deinit { for p in inputs { p?.deallocate() } }
}
