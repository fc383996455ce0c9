// The kernels only the FastConformer audio encoder (Rekesh et al., 2023) needs: the
// convolutions of the x8 subsampling (a 3x3 stride-2 convolution of the one-channel log-mel
// image through im2col and OpenBLAS, depthwise 3x3 stride-2 convolutions, pointwise
// convolutions) and the Conformer convolution module's GLU, depthwise convolution over
// time and folded batch norm. The row kernels it shares with the vision encoder (LayerNorm,
// GELU, SiLU, bias rows, the weight products) are EncoderKernels.swift; Transformer-XL's
// relative-position attention is RelativeAttention.swift. Each kernel is checked against a
// plain scalar loop in Tests/KernelsTests/ConformerKernelsTests.swift.
//
// Layouts: images are channel-major planes, `[channel][row][column]`, as ggml stores a
// `[W, H, C]` tensor; sequences are row-major `[time][width]`.

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The convolutions of the FastConformer audio encoder.
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
            EncoderKernels.sigmoidProduct(x + t * 2 * width, gate: x + t * 2 * width + width, into: out + t * width, count: width)
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
            EncoderKernels.sigmoidProduct(y, gate: y, into: y, count: width)
        }
    }
}
