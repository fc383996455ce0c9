import Kernels

/// The buffers and threads of one encoding of `tokens` audio tokens: every activation the
/// encoder's blocks write, allocated once per call (so concurrent calls share nothing but
/// the read-only weights), and the operations the blocks call (products, adds, norms).
final class AudioEncoderPass {
    let pool: ThreadPool
    let tokens: Int

    /// The residual stream `[T][d]`.
    let x: Rows
    /// A normalized copy of `x` (a block's module input) `[T][d]`.
    let normed: UnsafeMutablePointer<Float>
    /// A module's output before it is added to `x` `[T][d]`.
    let mixed: UnsafeMutablePointer<Float>
    /// Feed-forward hidden rows, the convolution module's `[T][2d]`, the adapter's.
    let hidden: UnsafeMutablePointer<Float>
    let q: UnsafeMutablePointer<Float>
    let k: UnsafeMutablePointer<Float>
    let v: UnsafeMutablePointer<Float>
    /// The attention heads' concatenated outputs `[T][d]` (the GLU output in the
    /// convolution module).
    let attended: Rows
    /// The sinusoid table of the relative distances `[2T-1][table width]`, shared by the blocks.
    let sinusoids: Rows
    /// `linear_pos` of the table `[2T-1][d]`.
    let positions: UnsafeMutablePointer<Float>
    /// The subsampling's image and channel planes, and its im2col matrix.
    let planes: UnsafeMutablePointer<Float>
    let planesB: UnsafeMutablePointer<Float>
    let im2col: UnsafeMutablePointer<Float>

    private var allocations: [UnsafeMutablePointer<Float>] = []

    init(encoder: AudioEncoder, frames: Int) {
        let hp = encoder.hyperparameters
        pool = encoder.pool
        let T = AudioEncoder.tokenCount(frames: frames), d = hp.width
        tokens = T
        let C = hp.subsamplingChannels, F = hp.melBins
        let T1 = ConformerKernels.stride2Length(frames), F1 = ConformerKernels.stride2Length(F)
        let T2 = ConformerKernels.stride2Length(T1), F2 = ConformerKernels.stride2Length(F1)
        var owned: [UnsafeMutablePointer<Float>] = []
        func buffer(_ count: Int) -> UnsafeMutablePointer<Float> {
            let p = UnsafeMutablePointer<Float>.allocate(capacity: max(1, count))
            owned.append(p)
            return p
        }
        x = Rows(base: buffer(T * d), count: T, width: d)
        normed = buffer(T * d)
        mixed = buffer(T * d)
        hidden = buffer(T * max(hp.feedForwardLength, 2 * d, hp.projectionDim))
        q = buffer(T * d)
        k = buffer(T * d)
        v = buffer(T * d)
        attended = Rows(base: buffer(T * d), count: T, width: d)
        let sinusoidTable = RelativePositionAttention.sinusoids(tokens: T, width: hp.positionTableWidth)
        sinusoids = Rows(base: buffer(sinusoidTable.count), count: 2 * T - 1, width: hp.positionTableWidth)
        sinusoids.base.update(from: sinusoidTable, count: sinusoidTable.count)
        positions = buffer((2 * T - 1) * d)
        planesB = buffer(C * T1 * F1)
        planes = buffer(max(frames * F, C * T2 * F2))
        im2col = buffer(ConformerKernels.convolution3x3Stride2ScratchCount(height: frames, width: F))
        allocations = owned
    }

    deinit {
        for p in allocations { p.deallocate() }
    }

    /// `y = x Wᵀ + b` for every row of `x`: OpenBLAS over blocks of weight rows dequantized
    /// by the pool's threads (`WeightMatrix.matmulByRowBlocks`), then the bias.
    func linear(_ l: EncoderLinear, _ x: Rows, into y: UnsafeMutablePointer<Float>) -> Rows {
        precondition(x.width == l.cols, "\(l.name): rows of \(x.width) for \(l.cols) columns")
        l.matrix.matmulByRowBlocks(x.base, count: x.count, into: y, pool: pool)
        let out = Rows(base: y, count: x.count, width: l.rows)
        if let bias = l.bias {
            bias.withUnsafeBufferPointer { b in
                inParallel(rows: out.count) { rows in
                    ConformerKernels.addBiasRows(out[rows.lowerBound], rows: rows.count, width: out.width, bias: b.baseAddress!)
                }
            }
        }
        return out
    }

    /// `x += y`.
    func add(_ y: Rows, to x: Rows) {
        inParallel(rows: x.count) { rows in
            Elementwise.add(y[rows.lowerBound], into: x[rows.lowerBound], count: rows.count * x.width)
        }
    }

    /// `x += factor · y`.
    func add(_ y: Rows, scaledBy factor: Float, to x: Rows) {
        inParallel(rows: x.count) { rows in
            Elementwise.axpy(factor, y[rows.lowerBound], x[rows.lowerBound], count: rows.count * x.width)
        }
    }

    /// Runs `body` over the rows `0..<n`, split over the pool when there are several.
    func inParallel(rows n: Int, _ body: (Range<Int>) -> Void) {
        if n > 1 { pool.parallelFor(count: n, minChunk: 4, body) } else { body(0..<n) }
    }
}
