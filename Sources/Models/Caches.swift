/// The attention keys and values of every attention layer, preallocated for the context
/// window. Layout per layer and head: `[position][headDim]` contiguous, so that one head's
/// keys form a row-major matrix that attention reads with SIMD or BLAS.
final class KVCache: @unchecked Sendable {
    // Safety: owned by one InferenceSession, used by one forward pass at a time.
    let contextLength: Int
    let headDim: Int
    /// Per model layer: (kvHeads, base pointers) or nil for a convolution layer.
    private(set) var keys: [UnsafeMutablePointer<Float>?]
    private(set) var values: [UnsafeMutablePointer<Float>?]
    let kvHeads: [Int]

    init(layers: [LayerKind], contextLength: Int, headDim: Int) {
        self.contextLength = contextLength
        self.headDim = headDim
        var keys: [UnsafeMutablePointer<Float>?] = []
        var values: [UnsafeMutablePointer<Float>?] = []
        var heads: [Int] = []
        for kind in layers {
            if case .attention(let kv) = kind {
                let n = kv * contextLength * headDim
                let k = UnsafeMutablePointer<Float>.allocate(capacity: n)
                let v = UnsafeMutablePointer<Float>.allocate(capacity: n)
                keys.append(k)
                values.append(v)
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

    /// Start of the keys of `head` in `layer` (`contextLength x headDim` floats).
    @inline(__always)
    func keys(layer: Int, head: Int) -> UnsafeMutablePointer<Float> {
        keys[layer]! + head * contextLength * headDim
    }

    @inline(__always)
    func values(layer: Int, head: Int) -> UnsafeMutablePointer<Float> {
        values[layer]! + head * contextLength * headDim
    }

    /// Bytes held by the cache.
    var byteCount: Int { kvHeads.reduce(0) { $0 + 2 * $1 * contextLength * headDim * 4 } }

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
