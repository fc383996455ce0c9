// The kernels of a FastConformer audio encoder (Rekesh et al., 2023) that a transformer
// language model does not need: the convolutions of the x8 subsampling (a 3x3 stride-2
// convolution of the one-channel log-mel image through im2col and OpenBLAS, depthwise 3x3
// stride-2 convolutions, pointwise convolutions), the Conformer convolution module's GLU
// and depthwise convolution over time, and the element-wise steps around them (LayerNorm,
// SiLU, erf GELU, bias rows). Transformer-XL's relative-position attention is in
// RelativeAttention.swift. Each kernel is checked against a plain scalar loop in
// Tests/KernelsTests/ConformerKernelsTests.swift.
//
// Layouts: images are channel-major planes, `[channel][row][column]`, as ggml stores a
// `[W, H, C]` tensor; sequences are row-major `[time][width]`.

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Convolutions and element-wise kernels of the FastConformer audio encoder.
public enum ConformerKernels {
    // MARK: - Subsampling convolutions

    /// The length a 3-wide convolution of stride 2 and padding 1 makes of `n`:
    /// `floor((n + 2 - 3) / 2) + 1 = floor((n + 1) / 2)` for `n ≥ 1`.
    @inlinable
    public static func stride2Length(_ n: Int) -> Int { (n + 1) / 2 }

    /// Floats of scratch ``convolution3x3Stride2(image:height:width:kernels:bias:channels:roundingToHalf:output:scratch:pool:)``
    /// needs: the im2col matrix of 9 rows of `stride2Length(height) * stride2Length(width)`.
    public static func convolution3x3Stride2ScratchCount(height: Int, width: Int) -> Int {
        9 * stride2Length(height) * stride2Length(width)
    }

    /// A 3x3 convolution of stride 2 and zero padding 1 of a one-channel image into
    /// `channels` planes, plus a bias per channel, then ReLU:
    ///
    /// ```
    /// out[c][i][j] = max(0, bias[c] + Σ_{a,b<3} kernels[c][a][b] · image[2i-1+a][2j-1+b])
    /// ```
    ///
    /// `image` is `height x width` row-major; `kernels` `channels x 3 x 3`; `output`
    /// `channels x H' x W'` with `H' = stride2Length(height)`, `W' = stride2Length(width)`.
    /// The patches are gathered into `scratch` (im2col: 9 rows of `H' W'`, see
    /// ``convolution3x3Stride2ScratchCount(height:width:)``) and multiplied with OpenBLAS
    /// (`[channels x 9] x [9 x H'W']`). With `roundingToHalf`, the image values and the
    /// kernels are rounded to IEEE half first, as ggml's `conv_2d` does (its im2col is F16,
    /// and the kernel is converted to F16 for the product).
    public static func convolution3x3Stride2(
        image: UnsafePointer<Float>, height: Int, width: Int,
        kernels: UnsafePointer<Float>, bias: UnsafePointer<Float>, channels: Int, roundingToHalf: Bool,
        output: UnsafeMutablePointer<Float>, scratch: UnsafeMutablePointer<Float>, pool: ThreadPool? = nil
    ) {
        let oh = stride2Length(height), ow = stride2Length(width), n = oh * ow
        guard n > 0, channels > 0 else { return }
        @inline(__always) func round(_ v: Float) -> Float {
            roundingToHalf ? FloatBits.halfToFloat(FloatBits.floatToHalf(v)) : v
        }
        // im2col: row a*3+b holds, for every output pixel, the input under tap (a, b).
        let gather: (Range<Int>) -> Void = { taps in
            for tap in taps {
                let a = tap / 3, b = tap % 3
                let row = scratch + tap * n
                for i in 0..<oh {
                    let y = 2 * i - 1 + a
                    let dst = row + i * ow
                    guard y >= 0, y < height else {
                        dst.update(repeating: 0, count: ow)
                        continue
                    }
                    let src = image + y * width
                    for j in 0..<ow {
                        let x = 2 * j - 1 + b
                        dst[j] = x >= 0 && x < width ? round(src[x]) : 0
                    }
                }
            }
        }
        if let pool { pool.parallelFor(count: 9, gather) } else { gather(0..<9) }
        let k = [Float](unsafeUninitializedCapacity: channels * 9) { buffer, count in
            for i in 0..<(channels * 9) { buffer[i] = round(kernels[i]) }
            count = channels * 9
        }
        pool?.sleepWorkers()
        k.withUnsafeBufferPointer { k in
            BLAS.sgemm(m: channels, n: n, k: 9, a: k.baseAddress!, lda: 9, b: scratch, ldb: n, c: output, ldc: n)
        }
        addChannelBias(output, bias: bias, channels: channels, pixels: n, relu: true, pool: pool)
    }

    /// A depthwise 3x3 convolution of stride 2 and zero padding 1 (each channel its own
    /// kernel), plus a bias per channel:
    ///
    /// ```
    /// out[c][i][j] = bias[c] + Σ_{a,b<3} kernels[c][a][b] · input[c][2i-1+a][2j-1+b]
    /// ```
    ///
    /// `input` is `channels x height x width`, `output` `channels x H' x W'` (the
    /// ``stride2Length(_:)`` of each side); channels are split over `pool`.
    public static func depthwiseConvolution3x3Stride2(
        input: UnsafePointer<Float>, channels: Int, height: Int, width: Int,
        kernels: UnsafePointer<Float>, bias: UnsafePointer<Float>,
        output: UnsafeMutablePointer<Float>, pool: ThreadPool? = nil
    ) {
        let oh = stride2Length(height), ow = stride2Length(width)
        let body: (Range<Int>) -> Void = { range in
            for c in range {
                let src = input + c * height * width, dst = output + c * oh * ow, w = kernels + 9 * c
                for i in 0..<oh {
                    let out = dst + i * ow
                    out.update(repeating: bias[c], count: ow)
                    for a in 0..<3 {
                        let y = 2 * i - 1 + a
                        guard y >= 0, y < height else { continue }
                        let row = src + y * width
                        let w0 = w[3 * a], w1 = w[3 * a + 1], w2 = w[3 * a + 2]
                        for j in 0..<ow {
                            // Column 2j is inside (j < ow); 2j-1 from j = 1, 2j+1 while < width.
                            let x = 2 * j
                            var s = w1 * row[x]
                            if x > 0 { s += w0 * row[x - 1] }
                            if x + 1 < width { s += w2 * row[x + 1] }
                            out[j] += s
                        }
                    }
                }
            }
        }
        if let pool { pool.parallelFor(count: channels, body) } else { body(0..<channels) }
    }

    /// A pointwise (1x1) convolution, plus a bias per output channel and optionally ReLU:
    /// `out[o][p] = bias[o] + Σ_i weights[o][i] · input[i][p]` over `pixels` positions, one
    /// OpenBLAS product (`[outChannels x inChannels] x [inChannels x pixels]`).
    public static func pointwiseConvolution(
        input: UnsafePointer<Float>, inChannels: Int, pixels: Int,
        weights: UnsafePointer<Float>, bias: UnsafePointer<Float>, outChannels: Int, relu: Bool,
        output: UnsafeMutablePointer<Float>, pool: ThreadPool? = nil
    ) {
        guard pixels > 0, outChannels > 0 else { return }
        pool?.sleepWorkers()
        BLAS.sgemm(
            m: outChannels, n: pixels, k: inChannels, a: weights, lda: inChannels, b: input, ldb: pixels, c: output, ldc: pixels)
        addChannelBias(output, bias: bias, channels: outChannels, pixels: pixels, relu: relu, pool: pool)
    }

    /// `x[c][p] += bias[c]` for `channels` planes of `pixels` values, then `max(0, ·)` when
    /// `relu`.
    public static func addChannelBias(
        _ x: UnsafeMutablePointer<Float>, bias: UnsafePointer<Float>, channels: Int, pixels: Int, relu: Bool,
        pool: ThreadPool? = nil
    ) {
        let body: (Range<Int>) -> Void = { range in
            for c in range {
                let plane = x + c * pixels, b = bias[c]
                if relu {
                    for p in 0..<pixels { plane[p] = max(0, plane[p] + b) }
                } else {
                    for p in 0..<pixels { plane[p] += b }
                }
            }
        }
        if let pool { pool.parallelFor(count: channels, body) } else { body(0..<channels) }
    }

    // MARK: - The convolution module

    /// The gated linear unit with a sigmoid gate (Dauphin et al., 2017) over each of `rows`
    /// rows of `2 * width` values: `out[t][c] = x[t][c] · σ(x[t][width + c])`, into `rows x
    /// width` values (the first half gated by the second, as `torch.nn.GLU(dim=1)`).
    public static func sigmoidGLU(_ x: UnsafePointer<Float>, rows: Int, width: Int, into out: UnsafeMutablePointer<Float>) {
        for t in 0..<rows {
            let a = x + t * 2 * width, g = a + width, y = out + t * width
            var c = 0
            let ar = UnsafeRawPointer(a), gr = UnsafeRawPointer(g), yr = UnsafeMutableRawPointer(y)
            while c + 16 <= width {
                let av = ar.loadUnaligned(fromByteOffset: c * 4, as: SIMD16<Float>.self)
                let gv = gr.loadUnaligned(fromByteOffset: c * 4, as: SIMD16<Float>.self)
                yr.storeBytes(of: av / (1 + Elementwise.exp(-gv)), toByteOffset: c * 4, as: SIMD16<Float>.self)
                c += 16
            }
            while c < width {
                y[c] = a[c] / (1 + expf(-g[c]))
                c += 1
            }
        }
    }

    /// A depthwise convolution over time with zero padding `(K - 1) / 2` on each side (the
    /// Conformer convolution module's, kernel `K` odd), plus a bias per channel:
    ///
    /// ```
    /// out[t][c] = bias[c] + Σ_{k<K} kernel[c][k] · x[t + k - (K-1)/2][c]
    /// ```
    ///
    /// `x` and `out` are `rows x width` row-major (they must not overlap), `kernel` is
    /// `width x K`, as the GGUF stores `conv_dw` (`[K, width]` in ggml order).
    public static func depthwiseConvolutionOverTime(
        _ x: UnsafePointer<Float>, rows: Int, width: Int, kernel: UnsafePointer<Float>, kernelLength K: Int,
        bias: UnsafePointer<Float>, into out: UnsafeMutablePointer<Float>, pool: ThreadPool? = nil
    ) {
        // The kernel transposed to [K][width], so that each tap is a vector over channels.
        var taps = [Float](repeating: 0, count: K * width)
        for c in 0..<width {
            for k in 0..<K { taps[k * width + c] = kernel[c * K + k] }
        }
        let half = (K - 1) / 2
        taps.withUnsafeBufferPointer { taps in
            let body: (Range<Int>) -> Void = { range in
                for t in range {
                    let y = out + t * width
                    y.update(from: bias, count: width)
                    for k in 0..<K {
                        let src = t + k - half
                        guard src >= 0, src < rows else { continue }
                        multiplyAdd(taps.baseAddress! + k * width, x + src * width, into: y, count: width)
                    }
                }
            }
            if let pool { pool.parallelFor(count: rows, minChunk: 4, body) } else { body(0..<rows) }
        }
    }

    /// `y[i] += a[i] · b[i]`.
    @inlinable
    static func multiplyAdd(_ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>, into y: UnsafeMutablePointer<Float>, count n: Int) {
        var i = 0
        let ar = UnsafeRawPointer(a), br = UnsafeRawPointer(b), yr = UnsafeMutableRawPointer(y)
        while i + 16 <= n {
            var v = yr.loadUnaligned(fromByteOffset: i * 4, as: SIMD16<Float>.self)
            v.addProduct(
                ar.loadUnaligned(fromByteOffset: i * 4, as: SIMD16<Float>.self),
                br.loadUnaligned(fromByteOffset: i * 4, as: SIMD16<Float>.self))
            yr.storeBytes(of: v, toByteOffset: i * 4, as: SIMD16<Float>.self)
            i += 16
        }
        while i < n {
            y[i] += a[i] * b[i]
            i += 1
        }
    }

    /// The folded batch norm and the SiLU of the convolution module, in place over each of
    /// `rows` rows: `x[t][c] = SiLU(x[t][c] · scale[c] + shift[c])`.
    public static func scaleShiftSiLU(
        _ x: UnsafeMutablePointer<Float>, rows: Int, width: Int, scale: UnsafePointer<Float>, shift: UnsafePointer<Float>
    ) {
        for t in 0..<rows {
            let y = x + t * width
            for c in 0..<width { y[c] = y[c] * scale[c] + shift[c] }
            silu(y, count: width)
        }
    }

    /// `x[i] = x[i] · σ(x[i]) = x[i] / (1 + e^(-x[i]))` in place (SiLU, or swish).
    public static func silu(_ x: UnsafeMutablePointer<Float>, count n: Int) {
        var i = 0
        let xr = UnsafeMutableRawPointer(x)
        while i + 16 <= n {
            let v = xr.loadUnaligned(fromByteOffset: i * 4, as: SIMD16<Float>.self)
            xr.storeBytes(of: v / (1 + Elementwise.exp(-v)), toByteOffset: i * 4, as: SIMD16<Float>.self)
            i += 16
        }
        while i < n {
            x[i] = x[i] / (1 + expf(-x[i]))
            i += 1
        }
    }

    // MARK: - Shared with the vision encoder
    //
    // LayerNorm, the erf GELU and the bias rows below are also needed by the SigLIP vision
    // encoder, whose kernels are written in parallel (EncoderKernels.swift); these are
    // internal-use duplicates to be merged with those.

    /// LayerNorm (Ba et al., 2016) of each of `rows` rows of `width` values, as ggml's
    /// `norm` followed by the weight and the bias:
    /// `y = (x - mean) / sqrt(var + eps) ⊙ weight + bias`, mean and (biased) variance
    /// summed in Double. `y` may equal `x`.
    public static func layerNorm(
        _ x: UnsafePointer<Float>, rows: Int, width: Int, weight: UnsafePointer<Float>, bias: UnsafePointer<Float>, eps: Float,
        into y: UnsafeMutablePointer<Float>
    ) {
        guard width > 0 else { return }
        for t in 0..<rows {
            let src = x + t * width, dst = y + t * width
            var sum: Double = 0
            for c in 0..<width { sum += Double(src[c]) }
            let mean = Float(sum / Double(width))
            var squares: Double = 0
            for c in 0..<width {
                let v = src[c] - mean
                squares += Double(v * v)
            }
            let scale = 1 / (Float(squares / Double(width)) + eps).squareRoot()
            for c in 0..<width { dst[c] = (src[c] - mean) * scale * weight[c] + bias[c] }
        }
    }

    /// GELU in its exact form (Hendrycks & Gimpel, 2016) in place:
    /// `x = 0.5 x (1 + erf(x / √2))`.
    public static func geluErf(_ x: UnsafeMutablePointer<Float>, count n: Int) {
        let invSqrt2: Float = 0.707_106_781_186_547_5
        for i in 0..<n {
            let v = x[i]
            x[i] = 0.5 * v * (1 + erff(v * invSqrt2))
        }
    }

    /// `x[t][c] += bias[c]` for each of `rows` rows of `width` values.
    public static func addBiasRows(_ x: UnsafeMutablePointer<Float>, rows: Int, width: Int, bias: UnsafePointer<Float>) {
        for t in 0..<rows { Elementwise.add(bias, into: x + t * width, count: width) }
    }
}

extension WeightMatrix {
    /// Rows of weights per block in ``matmulByRowBlocks(_:count:into:pool:)`` for rows of
    /// `cols` values: a block of about 256 KB of F32, so that it stays in cache between its
    /// dequantization and its product.
    public static func rowBlock(cols: Int) -> Int {
        max(16, min(256, (65536 / max(1, cols)) / 16 * 16))
    }

    /// `Y = X Wᵀ` for `count` rows of `x` (`count x cols`, row-major; `y` is `count x
    /// rows`), for a matrix used once per call (an encoder's): the weight rows are split in
    /// blocks of ``rowBlock(cols:)`` over `pool`, and each thread dequantizes a block into
    /// its own small tile and multiplies it with OpenBLAS on one thread, so the weights are
    /// read once, no whole-matrix copy is written, and the threads never hand the cores to
    /// OpenBLAS's and back. F32 weights go through one OpenBLAS product in place.
    public func matmulByRowBlocks(_ x: UnsafePointer<Float>, count: Int, into y: UnsafeMutablePointer<Float>, pool: ThreadPool? = nil) {
        precondition(count >= 0)
        if count == 0 || rows == 0 { return }
        if type == .f32 && Int(bitPattern: data) % MemoryLayout<Float>.alignment == 0 {
            matmul(x, count: count, into: y, pool: pool)
            return
        }
        let block = Self.rowBlock(cols: cols), blocks = (rows + block - 1) / block
        let parallel = (pool?.threads ?? 1) > 1 && blocks > 1
        BLAS.withOneThread(when: parallel) {
            let body: (Range<Int>) -> Void = { range in
                let tile = UnsafeMutablePointer<Float>.allocate(capacity: block * cols)
                defer { tile.deallocate() }
                for b in range {
                    let r0 = b * block, r1 = Swift.min(rows, r0 + block)
                    dequantize(rows: r0..<r1, into: tile)
                    BLAS.sgemm(transB: true, m: count, n: r1 - r0, k: cols, a: x, lda: cols, b: tile, ldb: cols, c: y + r0, ldc: rows)
                }
            }
            if parallel, let pool { pool.parallelFor(count: blocks, body) } else { body(0..<blocks) }
        }
    }
}
