import GGUF
import Kernels

// The layers both media encoders are made of besides their own: an affine map applied to
// rows (its weights held as the file stores them or converted to F32 at load) and a
// LayerNorm, loaded through `ProjectorFileReader` and run on the encoder's pool with the
// kernels of EncoderKernels.swift. Layers take and return `Rows` (the activations of an
// encode, in its workspace's buffers), as the decoder's blocks do.

/// An affine map `y = W x + b` (`W` of `outputs x inputs`, `b` optional) applied to rows:
/// `Y = X Wᵀ + b`. The product is `WeightMatrix.matmulByRowBlocks`: the pool's threads
/// each dequantize a block of weight rows into a small tile and multiply it with OpenBLAS,
/// so every weight is read once per call and no F32 copy of the matrix is needed.
struct EncoderLinear: Sendable {
    /// The weight tensor's name (for preconditions).
    let name: String
    let weight: WeightMatrix
    let bias: [Float]?
    /// The F32 copy `weight` views, when the weights were converted at load.
    let converted: FloatBuffer?

    /// `base.weight` (ggml shape `[inputs, outputs]`, or `shape` for a kernel stored with
    /// more dimensions; any type with kernels) and, when `bias`, the vector `base.bias`.
    /// With `.float32` storage a matrix of another type is dequantized once into an F32 copy
    /// and the file's pages of it leave resident memory.
    init(
        _ r: ProjectorFileReader, _ base: String, outputs: Int, inputs: Int, shape: [Int]? = nil, bias: Bool = true,
        storage: MediaEncoder.WeightStorage
    ) throws(ProjectorError) {
        let name = base + ".weight"
        let t = try r.tensor(name, shape: shape ?? [inputs, outputs], accepted: GGMLType.kernelTypes)
        let stored: WeightMatrix
        do {
            stored = try WeightMatrix(type: t.type, rows: outputs, cols: inputs, data: r.file.data(for: t).baseAddress!)
        } catch {
            throw .tensorType(path: r.path, name: name, type: t.type, accepted: GGMLType.kernelTypes)
        }
        if storage == .float32 && t.type != .f32 {
            let copy = FloatBuffer(count: outputs * inputs)
            stored.dequantize(rows: 0..<outputs, into: copy.pointer)
            // An F32 view of a buffer of the right size cannot fail to describe.
            weight = (try? WeightMatrix(type: .f32, rows: outputs, cols: inputs, data: copy.pointer)) ?? stored
            converted = copy
            r.file.releaseResidentPages(of: t)
        } else {
            weight = stored
            converted = nil
        }
        self.bias = bias ? try r.vector(base + ".bias", count: outputs) : nil
        self.name = name
    }

    var outputs: Int { weight.rows }
    var inputs: Int { weight.cols }

    /// `Y = X Wᵀ + b` for the rows `x` into `y`; returns the rows written. With a bias, the
    /// bias is written into `y` first and the product adds to it (no pass of OpenBLAS's
    /// clearing `y` and none adding the bias afterwards).
    /// `tiles`: the product's scratch (`WeightMatrix.encoderTilesCount`), or nil for one per call.
    func callAsFunction(
        _ x: Rows, into y: UnsafeMutablePointer<Float>, _ pool: ThreadPool, tiles: UnsafeMutablePointer<Float>? = nil
    ) -> Rows {
        precondition(x.width == inputs, "\(name): rows of \(x.width) for \(inputs) columns")
        if let bias {
            bias.withUnsafeBufferPointer {
                EncoderKernels.fillRows($0.baseAddress!, into: y, rows: x.count, width: outputs, stride: outputs, pool: pool)
            }
            WeightMatrix.matmulByRowBlocks(
                [weight], x.base, count: x.count, into: y, stride: outputs, accumulate: true, tiles: tiles, pool: pool)
        } else {
            weight.matmulByRowBlocks(x.base, count: x.count, into: y, pool: pool)
        }
        return Rows(base: y, count: x.count, width: outputs)
    }

    /// `Y += X Wᵀ + b` for the rows `x`, added to the rows `y` (a residual stream): the bias
    /// is added to `y`, then the product adds into it.
    func accumulate(_ x: Rows, into y: UnsafeMutablePointer<Float>, _ pool: ThreadPool, tiles: UnsafeMutablePointer<Float>? = nil) {
        precondition(x.width == inputs, "\(name): rows of \(x.width) for \(inputs) columns")
        bias?.withUnsafeBufferPointer { EncoderKernels.addBias($0.baseAddress!, to: y, rows: x.count, width: outputs, pool: pool) }
        WeightMatrix.matmulByRowBlocks(
            [weight], x.base, count: x.count, into: y, stride: outputs, accumulate: true, tiles: tiles, pool: pool)
    }
}

/// Affine maps of the same input rows computed as one product: `[Y_1 | Y_2 | ...] = X [W_1 |
/// W_2 | ...]ᵀ + [b_1 | b_2 | ...]`, each output row the parts' outputs side by side (a
/// block's queries, keys and values). The matrices stay where they are (in the mapped
/// file, or their F32 copies); only the blocks of the product span them
/// (`WeightMatrix.matmulByRowBlocks(_:_:count:into:stride:accumulate:pool:)`).
struct FusedEncoderLinear: Sendable {
    let parts: [EncoderLinear]
    let weights: [WeightMatrix]
    /// The parts' biases side by side (zeros for a part without one).
    let bias: [Float]
    let inputs: Int
    let outputs: Int

    init(_ parts: [EncoderLinear]) {
        precondition(!parts.isEmpty && parts.allSatisfy { $0.inputs == parts[0].inputs })
        self.parts = parts
        weights = parts.map(\.weight)
        bias = parts.flatMap { $0.bias ?? [Float](repeating: 0, count: $0.outputs) }
        inputs = parts[0].inputs
        outputs = parts.reduce(0) { $0 + $1.outputs }
    }

    /// The outputs of every part for the rows `x` into `y` (rows of ``outputs``); returns the
    /// rows written.
    func callAsFunction(
        _ x: Rows, into y: UnsafeMutablePointer<Float>, _ pool: ThreadPool, tiles: UnsafeMutablePointer<Float>? = nil
    ) -> Rows {
        precondition(x.width == inputs, "\(parts[0].name): rows of \(x.width) for \(inputs) columns")
        bias.withUnsafeBufferPointer {
            EncoderKernels.fillRows($0.baseAddress!, into: y, rows: x.count, width: outputs, stride: outputs, pool: pool)
        }
        WeightMatrix.matmulByRowBlocks(
            weights, x.base, count: x.count, into: y, stride: outputs, accumulate: true, tiles: tiles, pool: pool)
        return Rows(base: y, count: x.count, width: outputs)
    }
}

/// LayerNorm (Ba et al., 2016) over rows of `weight.count`:
/// `y = (x - μ) / sqrt(σ² + ε) ⊙ weight + bias` (`EncoderKernels.layerNorm`).
struct EncoderLayerNorm: Sendable {
    let weight: [Float]
    let bias: [Float]
    let epsilon: Float

    /// `base.weight` and `base.bias`, vectors of `width`.
    init(_ r: ProjectorFileReader, _ base: String, width: Int, epsilon: Float) throws(ProjectorError) {
        weight = try r.vector(base + ".weight", count: width)
        bias = try r.vector(base + ".bias", count: width)
        self.epsilon = epsilon
    }

    /// The norm of the rows `x` into `y` (which may be `x.base`); returns the rows written.
    @discardableResult
    func callAsFunction(_ x: Rows, into y: UnsafeMutablePointer<Float>, _ pool: ThreadPool) -> Rows {
        precondition(x.width == weight.count)
        weight.withUnsafeBufferPointer { w in
            bias.withUnsafeBufferPointer { b in
                EncoderKernels.layerNorm(
                    x.base, rows: x.count, width: w.count, weight: w.baseAddress!, bias: b.baseAddress!, eps: epsilon, into: y,
                    pool: pool)
            }
        }
        return Rows(base: y, count: x.count, width: x.width)
    }
}

/// Floats owned by the object's lifetime, 64-byte aligned: an F32 copy of a weight matrix
/// (written once at load, read-only afterwards), or one activation buffer of a workspace.
final class FloatBuffer: @unchecked Sendable {
    // @unchecked: the weights' copies are written while loading only; a workspace's
    // buffers belong to one encode.
    let pointer: UnsafeMutablePointer<Float>

    init(count: Int) {
        pointer = UnsafeMutableRawPointer.allocate(byteCount: max(1, count) * 4, alignment: 64)
            .bindMemory(to: Float.self, capacity: max(1, count))
    }

    deinit { pointer.deallocate() }
}

/// The activation buffers of one encode, allocated when the workspace is made and freed
/// with it (the workspace keeps ``buffers``).
struct FloatArena {
    private(set) var buffers: [FloatBuffer] = []

    /// A new buffer of `count` floats (uninitialized).
    mutating func allocate(_ count: Int) -> UnsafeMutablePointer<Float> {
        buffers.append(FloatBuffer(count: count))
        return buffers[buffers.count - 1].pointer
    }
}
