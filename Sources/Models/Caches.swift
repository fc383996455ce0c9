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

/// The attention keys and values of every attention layer, preallocated. Layout per layer
/// and head: `[row][headDim]` contiguous, so that the keys of consecutive positions form a
/// row-major matrix that attention reads with SIMD or BLAS.
///
/// A layer that attends to every earlier position (`LayerCache.keysAndValues`) holds the
/// whole context: row `p` is position `p`. A sliding-window layer
/// (`LayerCache.windowedKeysAndValues`, Gemma 3's local layers) needs only the latest
/// `window` positions, and holds them in a ring of `window - 1 + maxRows` slots: what the
/// first query of a pass of `maxRows` tokens still sees, plus the pass itself. Position `p`
/// lives in slot `p mod ringLength` and is written twice, at rows `slot` and
/// `slot + ringLength`, so that any `ringLength` consecutive positions are consecutive rows
/// (from row `first mod ringLength`), which is how the attention kernels read them. Such a
/// layer holds `2 · ringLength` rows however long the context. But until it wraps, a ring
/// touches two rows a position where the whole context touches one, so a layer takes the
/// ring only where `2 · ringLength` is at most half the context (`usesRing`); otherwise
/// it holds the whole context, like the other layers (the same results, bit for bit).
///
/// Writing position `p` in a ring overwrites position `p - ringLength`: which prefixes of
/// a sequence can still be resumed is `canResume(at:highWater:)`.
final class KVCache: @unchecked Sendable {
    // Safety: owned by one sequence, used by one forward pass at a time.
    let type: KVCacheType
    let contextLength: Int
    /// Per model layer: base of the keys / values (nil for a layer without attention).
    private(set) var keys: [UnsafeMutableRawPointer?]
    private(set) var values: [UnsafeMutableRawPointer?]
    /// Per model layer: its key/value heads and head width (0 without attention), the rows
    /// each head holds, its sliding window (nil: every position) and ring length (nil: row
    /// `p` is position `p`).
    let kvHeads: [Int]
    let headDims: [Int]
    let rowsHeld: [Int]
    let windows: [Int?]
    let ringLengths: [Int?]

    /// Caches for sequences of up to `contextLength` positions, evaluated in passes of at
    /// most `maxRows` tokens.
    init(layers: [LayerCache], contextLength: Int, maxRows: Int, type: KVCacheType) {
        self.type = type
        self.contextLength = contextLength
        var heads: [Int] = [], dims: [Int] = [], held: [Int] = [], windows: [Int?] = [], rings: [Int?] = []
        for kind in layers {
            var layer: (heads: Int, dim: Int, rows: Int, window: Int?, ring: Int?) = (0, 0, 0, nil, nil)
            switch kind {
            case .keysAndValues(let kv, let hd):
                layer = (kv, hd, contextLength, nil, nil)
            case .windowedKeysAndValues(let kv, let hd, let window):
                let ring = window - 1 + maxRows
                layer =
                    Self.usesRing(ring, contextLength: contextLength)
                    ? (kv, hd, 2 * ring, window, ring) : (kv, hd, contextLength, window, nil)
            case .convolutionInputs:
                break
            }
            heads.append(layer.heads)
            dims.append(layer.dim)
            held.append(layer.rows)
            windows.append(layer.window)
            rings.append(layer.ring)
        }
        func allocate(_ layer: Int) -> UnsafeMutableRawPointer? {
            heads[layer] == 0 ? nil : .allocate(byteCount: heads[layer] * held[layer] * dims[layer] * type.bytesPerValue, alignment: 64)
        }
        keys = layers.indices.map(allocate)
        values = layers.indices.map(allocate)
        kvHeads = heads
        headDims = dims
        rowsHeld = held
        self.windows = windows
        ringLengths = rings
    }

    /// Whether a sliding-window layer holds a ring of `ringLength` positions (`2 · ringLength`
    /// rows) rather than the whole context: where the ring is at most half the context's
    /// rows. A ring's pages fill twice as fast as the context's until it wraps, so a ring
    /// of nearly the context's size (Gemma 3's window of 512 and passes of 512 tokens give
    /// 2,046 rows, against 2,048 positions) would only double the memory a shorter
    /// sequence touches; at half the context it saves at least as much as it costs.
    static func usesRing(_ ringLength: Int, contextLength: Int) -> Bool { 4 * ringLength <= contextLength }

    @inline(__always)
    private func base(_ of: [UnsafeMutableRawPointer?], layer: Int, head: Int) -> UnsafeMutableRawPointer {
        of[layer]! + head * rowsHeld[layer] * headDims[layer] * type.bytesPerValue
    }

    /// The row of `position` in `layer` (the first of its two rows in a ring).
    @inline(__always)
    private func row(layer: Int, position: Int) -> Int {
        guard let ring = ringLengths[layer] else { return position }
        return position % ring
    }

    /// Writes one position's key and value of `head` (from F32).
    @inline(__always)
    func store(layer: Int, head: Int, position: Int, key: UnsafePointer<Float>, value: UnsafePointer<Float>) {
        let headDim = headDims[layer], rowBytes = headDim * type.bytesPerValue
        let k = base(keys, layer: layer, head: head), v = base(values, layer: layer, head: head)
        let row = row(layer: layer, position: position)
        write(key, to: k + row * rowBytes, count: headDim)
        write(value, to: v + row * rowBytes, count: headDim)
        if let ring = ringLengths[layer] {
            write(key, to: k + (row + ring) * rowBytes, count: headDim)
            write(value, to: v + (row + ring) * rowBytes, count: headDim)
        }
    }

    @inline(__always)
    private func write(_ x: UnsafePointer<Float>, to row: UnsafeMutableRawPointer, count: Int) {
        switch type {
        case .f32: row.assumingMemoryBound(to: Float.self).update(from: x, count: count)
        case .f16: GGMLType.f16.quantizeRow(x, into: row, count: count)
        }
    }

    /// The keys (or values) of positions `first ..< first + count` of `head` where they are
    /// stored (rows of `headDim` values of the cache's type). In a ring, the positions must
    /// be among the latest `ringLength` written.
    @inline(__always)
    func storedRows(keys wantKeys: Bool, layer: Int, head: Int, from first: Int, count: Int) -> UnsafeRawPointer {
        precondition(count <= (ringLengths[layer] ?? contextLength), "more positions than the layer holds")
        let offset = row(layer: layer, position: first) * headDims[layer] * type.bytesPerValue
        return UnsafeRawPointer(base(wantKeys ? keys : values, layer: layer, head: head) + offset)
    }

    /// The keys (or values) of positions `first ..< first + count` of `head` as F32 rows:
    /// the cache itself when it is F32, else converted into `scratch` (`count * headDim`
    /// floats). In a ring, the positions must be among the latest `ringLength` written.
    @inline(__always)
    func rows(
        keys wantKeys: Bool, layer: Int, head: Int, from first: Int, count: Int, scratch: UnsafeMutablePointer<Float>
    ) -> UnsafePointer<Float> {
        let stored = storedRows(keys: wantKeys, layer: layer, head: head, from: first, count: count)
        switch type {
        case .f32: return stored.assumingMemoryBound(to: Float.self)
        case .f16:
            GGMLType.f16.dequantizeRow(stored, into: scratch, count: count * headDims[layer])
            return UnsafePointer(scratch)
        }
    }

    /// Whether a sequence whose positions `0 ..< highWater` were written (since it was last
    /// emptied) can go on at `position` after forgetting the later ones: every ring still
    /// holds the positions a query at `position` sees. Positions `0 ..< highWater - ring`
    /// of a ring have been overwritten.
    func canResume(at position: Int, highWater: Int) -> Bool {
        for (window, ring) in zip(windows, ringLengths) {
            guard let window, let ring else { continue }
            if CausalAttention.firstVisible(position, window) < highWater - ring { return false }
        }
        return true
    }

    /// Bytes held by the cache.
    var byteCount: Int {
        (0..<kvHeads.count).reduce(0) { $0 + 2 * kvHeads[$1] * rowsHeld[$1] * headDims[$1] * type.bytesPerValue }
    }

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
    private(set) var position = 0
    /// One past the latest position written since the sequence was last emptied (at least
    /// `position`: truncation forgets tokens, it does not unwrite them).
    private(set) var highWater = 0

    /// Caches for `contextLength` tokens, filled in passes of at most `maxRows` tokens.
    init(model: TransformerModel, contextLength: Int, maxRows: Int, kvCacheType: KVCacheType) {
        let layers = model.weights.layers.map(\.cache)
        kv = KVCache(layers: layers, contextLength: contextLength, maxRows: maxRows, type: kvCacheType)
        conv = ConvCache(layers: layers, contextLength: contextLength)
    }

    /// Records that a pass evaluated `count` tokens at `position`.
    func advance(by count: Int) {
        position += count
        highWater = max(highWater, position)
    }

    /// Forgets every token.
    func reset() {
        position = 0
        highWater = 0
    }

    /// Forgets the tokens from `newPosition` on (clamped to `0...position`) and returns the
    /// position the sequence goes on from: `newPosition` when the caches still hold what
    /// it needs, which is always the case for attention over every position and for the
    /// convolution (they keep every position), and for a sliding-window layer's ring while
    /// the sequence has gone at most `maxRows` tokens past it; otherwise 0 (the
    /// sequence is emptied, and its tokens must be evaluated again).
    func truncate(to newPosition: Int) -> Int {
        let target = max(0, min(position, newPosition))
        if kv.canResume(at: target, highWater: highWater) {
            position = target
        } else {
            reset()
        }
        return position
    }

    /// Bytes held by the caches.
    var byteCount: Int { kv.byteCount + conv.byteCount }
}
