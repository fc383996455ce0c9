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
///
/// Every layer holds every position of the window (`LayerCache.keysAndValues`). A layer
/// kind that holds only a sliding window (a ring of `window` rows, Gemma 3's local
/// layers) would be a second case of `LayerCache` sized and addressed here.
final class KVCache: @unchecked Sendable {
    // Safety: owned by one sequence, used by one forward pass at a time.
    let type: KVCacheType
    let contextLength: Int
    /// Per model layer: base of the keys / values (nil for a layer without attention), and
    /// the layer's heads and head width.
    private(set) var keys: [UnsafeMutableRawPointer?]
    private(set) var values: [UnsafeMutableRawPointer?]
    let kvHeads: [Int]
    let headDims: [Int]

    init(layers: [LayerCache], contextLength: Int, type: KVCacheType) {
        self.type = type
        self.contextLength = contextLength
        var keys: [UnsafeMutableRawPointer?] = []
        var values: [UnsafeMutableRawPointer?] = []
        var heads: [Int] = [], dims: [Int] = []
        for kind in layers {
            if case .keysAndValues(let kv, let hd) = kind {
                let bytes = kv * contextLength * hd * type.bytesPerValue
                keys.append(.allocate(byteCount: bytes, alignment: 64))
                values.append(.allocate(byteCount: bytes, alignment: 64))
                heads.append(kv)
                dims.append(hd)
            } else {
                keys.append(nil)
                values.append(nil)
                heads.append(0)
                dims.append(0)
            }
        }
        self.keys = keys
        self.values = values
        self.kvHeads = heads
        self.headDims = dims
    }

    @inline(__always)
    private func base(_ of: [UnsafeMutableRawPointer?], layer: Int, head: Int) -> UnsafeMutableRawPointer {
        of[layer]! + head * contextLength * headDims[layer] * type.bytesPerValue
    }

    /// Writes one position's key and value of `head` (from F32).
    @inline(__always)
    func store(layer: Int, head: Int, position: Int, key: UnsafePointer<Float>, value: UnsafePointer<Float>) {
        let headDim = headDims[layer]
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
            GGMLType.f16.dequantizeRow(b, into: scratch, count: count * headDims[layer])
            return UnsafePointer(scratch)
        }
    }

    /// Bytes held by the cache.
    var byteCount: Int { zip(kvHeads, headDims).reduce(0) { $0 + 2 * $1.0 * contextLength * $1.1 * type.bytesPerValue } }

    deinit {
        for p in keys { p?.deallocate() }
        for p in values { p?.deallocate() }
    }
}

/// The inputs of every causal-convolution layer, by position: row `p` of a layer holds
/// what the convolution reads for token `p` (LFM2: `B ⊙ x`, `d` floats). The convolution
/// at position `p` reads rows `p-L+1 ... p` (rows before 0 are zero), so the state after
/// any prefix of the sequence is still there, and truncating the sequence is as cheap as
/// for the attention cache. Pages are touched only as positions are written.
final class ConvCache: @unchecked Sendable {
    // Safety: owned by one sequence, used by one forward pass at a time.
    let contextLength: Int
    /// Per model layer: its rows (nil for a layer without convolution) and their width.
    private(set) var inputs: [UnsafeMutablePointer<Float>?]
    let widths: [Int]

    init(layers: [LayerCache], contextLength: Int) {
        self.contextLength = contextLength
        widths = layers.map { if case .convolutionInputs(let w) = $0 { return w } else { return 0 } }
        inputs = widths.map { $0 > 0 ? UnsafeMutablePointer<Float>.allocate(capacity: contextLength * $0) : nil }
    }

    /// Row `position` of `layer` (its width in floats).
    @inline(__always)
    func row(layer: Int, position: Int) -> UnsafeMutablePointer<Float> {
        inputs[layer]! + position * widths[layer]
    }

    /// Bytes held by the cache.
    var byteCount: Int { zip(inputs, widths).reduce(0) { $0 + ($1.0 == nil ? 0 : contextLength * $1.1 * 4) } }

    deinit { for p in inputs { p?.deallocate() } }
}

/// The state of one sequence: its caches and how many tokens they hold.
final class SequenceState: @unchecked Sendable {
    // Safety: used by one forward pass at a time (its owner serializes them).
    let kv: KVCache
    let conv: ConvCache
    /// Tokens in the caches; the next token is evaluated at this position.
    var position = 0

    init(model: TransformerModel, contextLength: Int, kvCacheType: KVCacheType) {
        let layers = model.weights.layers.map(\.cache)
        kv = KVCache(layers: layers, contextLength: contextLength, type: kvCacheType)
        conv = ConvCache(layers: layers, contextLength: contextLength)
    }

    /// Bytes held by the caches.
    var byteCount: Int { kv.byteCount + conv.byteCount }
}
