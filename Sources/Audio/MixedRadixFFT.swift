import Foundation

/// The discrete Fourier transform of `N` complex values, for any `N` whose prime factors are
/// 2, 3 and 5 (`RealFFT` takes powers of two only; speech output needs 1280 = 2^8 x 5):
///
/// ```
/// forward:  X[k] = sum_n x[n] e^(-2 pi i k n / N)
/// inverse:  x[n] = sum_k X[k] e^(+2 pi i k n / N)          (unscaled: N x the inverse DFT)
/// ```
///
/// Stockham's self-sorting form of the decimation-in-frequency FFT, in `Float`: a stage of
/// radix `p` splits each of `s` transforms of length `n = p m` into `p` of length `m`,
///
/// ```
/// y[k + s (p q + r)] = w_n^(q r) sum_j x[k + s (q + m j)] w_p^(j r)     q < m, k < s, r < p
/// ```
///
/// (`w_n = e^(-2 pi i / n)`), reading one buffer and writing the other, so that the bins
/// come out in natural order with no permutation. Radix 4 is taken while 4 divides what
/// is left, then 2, 3 and 5; the butterflies of 2 and 4 are written out (their
/// multiplications by `-i` are swaps), those of 3 and 5 are the `p x p` DFT. Every twiddle is
/// `cos` and `sin` of an exact fraction of a turn (`q r mod n` first) in `Double`, rounded
/// to `Float` once, when the transform is made.
///
/// Cost: `N/p` butterflies per stage, each `p - 1` twiddle multiplications and the radix's
/// own DFT. 640 points (radices 4, 4, 4, 2, 5) take 5 passes over the data: about 5.6k
/// complex multiplications (3.8k of them in the radix-5 pass, a plain 5 x 5 DFT) and 7k
/// complex additions.
public struct ComplexFFT: Sendable {
    /// The number of values `N` a transform takes.
    public let size: Int

    /// One stage: its radix `p`, the length `n` of the transforms it splits and the stride
    /// `s`, and its twiddles `w_n^(q r)` for `q < n/p`, `r < p` (at `q p + r`).
    struct Stage: Sendable {
        let radix: Int
        let length: Int
        let stride: Int
        let cosines: [Float]
        let sines: [Float]
    }

    let stages: [Stage]
    /// `cos` and `sin` of `2 pi j r / p` for the odd radices, `[p][p]` (row `j`, column `r`).
    let radixCosines: [Int: [Float]]
    let radixSines: [Int: [Float]]

    /// A transform of `size` values, or nil unless `size` is 1 to 2^24 with no prime factor
    /// other than 2, 3 and 5.
    public init?(size: Int) {
        guard size >= 1, size <= 1 << 24 else { return nil }
        var radices: [Int] = [], rest = size
        while rest % 4 == 0 {
            radices.append(4)
            rest /= 4
        }
        for p in [2, 3, 5] {
            while rest % p == 0 {
                radices.append(p)
                rest /= p
            }
        }
        guard rest == 1 else { return nil }
        self.size = size
        var stages: [Stage] = [], n = size, s = 1
        for p in radices {
            let m = n / p
            var cosines = [Float](repeating: 0, count: n), sines = [Float](repeating: 0, count: n)
            for q in 0..<m {
                for r in 0..<p {
                    let angle = 2 * Double.pi * Double(q * r % n) / Double(n)
                    cosines[q * p + r] = Float(cos(angle))
                    sines[q * p + r] = Float(sin(angle))
                }
            }
            stages.append(Stage(radix: p, length: n, stride: s, cosines: cosines, sines: sines))
            n = m
            s *= p
        }
        self.stages = stages
        var radixCosines: [Int: [Float]] = [:], radixSines: [Int: [Float]] = [:]
        for p in Set(radices) where p % 2 == 1 {
            radixCosines[p] = (0..<(p * p)).map { Float(cos(2 * Double.pi * Double($0 / p * ($0 % p) % p) / Double(p))) }
            radixSines[p] = (0..<(p * p)).map { Float(sin(2 * Double.pi * Double($0 / p * ($0 % p) % p) / Double(p))) }
        }
        self.radixCosines = radixCosines
        self.radixSines = radixSines
    }

    /// Buffers for transforms without allocation.
    public struct Workspace: Sendable {
        var real: [Float]
        var imaginary: [Float]

        /// Room for transforms of `size` values.
        public init(size: Int) {
            real = [Float](repeating: 0, count: size)
            imaginary = [Float](repeating: 0, count: size)
        }
    }

    /// The DFT of `real + i imaginary` (`size` values each): the forward transform, or with
    /// `inverse` the unscaled inverse.
    public func transform(real: [Float], imaginary: [Float], inverse: Bool = false) -> (real: [Float], imaginary: [Float]) {
        precondition(real.count == size && imaginary.count == size, "a transform of \(size) values")
        var re = real, im = imaginary, workspace = Workspace(size: size)
        re.withUnsafeMutableBufferPointer { re in
            im.withUnsafeMutableBufferPointer { im in
                transform(real: re.baseAddress!, imaginary: im.baseAddress!, inverse: inverse, workspace: &workspace)
            }
        }
        return (re, im)
    }

    /// The DFT of the `size` values at `real`, `imaginary`, in place (`inverse`: the unscaled
    /// inverse), with `workspace` (of this size) as the other buffer of each stage.
    public func transform(
        real: UnsafeMutablePointer<Float>, imaginary: UnsafeMutablePointer<Float>, inverse: Bool, workspace: inout Workspace
    ) {
        precondition(workspace.real.count >= size && workspace.imaginary.count >= size, "a workspace of \(size) values")
        // The inverse is the forward transform with every twiddle conjugated: `sign` is
        // the sign of the sines (the imaginary parts of `e^(-2 pi i t)` are `-sin`).
        let sign: Float = inverse ? 1 : -1
        workspace.real.withUnsafeMutableBufferPointer { workReal in
            workspace.imaginary.withUnsafeMutableBufferPointer { workImaginary in
                var x = (real, imaginary), y = (workReal.baseAddress!, workImaginary.baseAddress!)
                for stage in stages {
                    self.stage(stage, from: x, to: y, sign: sign)
                    swap(&x, &y)
                }
                // After an odd number of stages the result is in the workspace.
                if x.0 != real {
                    real.update(from: x.0, count: size)
                    imaginary.update(from: x.1, count: size)
                }
            }
        }
    }

    /// One Stockham stage from `x` to `y`.
    private func stage(
        _ stage: Stage, from x: (UnsafeMutablePointer<Float>, UnsafeMutablePointer<Float>),
        to y: (UnsafeMutablePointer<Float>, UnsafeMutablePointer<Float>), sign: Float
    ) {
        let p = stage.radix, n = stage.length, s = stage.stride, m = n / p
        let (xr, xi) = x, (yr, yi) = y
        stage.cosines.withUnsafeBufferPointer { wc in
            stage.sines.withUnsafeBufferPointer { ws in
                switch p {
                case 2:
                    for q in 0..<m {
                        let c1 = wc[q * 2 + 1], s1 = sign * ws[q * 2 + 1]
                        for k in 0..<s {
                            let i0 = k + s * q, i1 = i0 + s * m, o = k + s * 2 * q
                            let (ar, ai, br, bi) = (xr[i0], xi[i0], xr[i1], xi[i1])
                            yr[o] = ar + br
                            yi[o] = ai + bi
                            let (dr, di) = (ar - br, ai - bi)
                            yr[o + s] = dr * c1 - di * s1
                            yi[o + s] = dr * s1 + di * c1
                        }
                    }
                case 4:
                    for q in 0..<m {
                        let c1 = wc[q * 4 + 1], s1 = sign * ws[q * 4 + 1]
                        let c2 = wc[q * 4 + 2], s2 = sign * ws[q * 4 + 2]
                        let c3 = wc[q * 4 + 3], s3 = sign * ws[q * 4 + 3]
                        for k in 0..<s {
                            let i0 = k + s * q, o = k + s * 4 * q
                            let (ar, ai) = (xr[i0], xi[i0]), (br, bi) = (xr[i0 + s * m], xi[i0 + s * m])
                            let (cr, ci) = (xr[i0 + 2 * s * m], xi[i0 + 2 * s * m]), (dr, di) = (xr[i0 + 3 * s * m], xi[i0 + 3 * s * m])
                            // The 4-point DFT: w_4 = -i forward (+i inverse), so b w_4^r and
                            // d w_4^(3r) are b and d turned by quarter turns.
                            let (sr, si) = (ar + cr, ai + ci), (tr, ti) = (ar - cr, ai - ci)
                            let (ur, ui) = (br + dr, bi + di), (vr, vi) = (br - dr, bi - di)
                            // (b - d) times -i (forward) or +i (inverse): (v.im, -v.re) * -sign.
                            let (jr, ji) = (-sign * vi, sign * vr)
                            let (r1, i1) = (tr + jr, ti + ji), (r2, i2) = (sr - ur, si - ui), (r3, i3) = (tr - jr, ti - ji)
                            yr[o] = sr + ur
                            yi[o] = si + ui
                            yr[o + s] = r1 * c1 - i1 * s1
                            yi[o + s] = r1 * s1 + i1 * c1
                            yr[o + 2 * s] = r2 * c2 - i2 * s2
                            yi[o + 2 * s] = r2 * s2 + i2 * c2
                            yr[o + 3 * s] = r3 * c3 - i3 * s3
                            yi[o + 3 * s] = r3 * s3 + i3 * c3
                        }
                    }
                default:
                    let rc = radixCosines[p]!, rs = radixSines[p]!
                    for q in 0..<m {
                        for k in 0..<s {
                            let i0 = k + s * q, o = k + s * p * q
                            for r in 0..<p {
                                // b_r = sum_j a_j w_p^(j r), then times w_n^(q r).
                                var br: Float = 0, bi: Float = 0
                                for j in 0..<p {
                                    let c = rc[j * p + r], sn = sign * rs[j * p + r]
                                    let (ar, ai) = (xr[i0 + s * m * j], xi[i0 + s * m * j])
                                    br += ar * c - ai * sn
                                    bi += ar * sn + ai * c
                                }
                                let c = wc[q * p + r], sn = sign * ws[q * p + r]
                                yr[o + s * r] = br * c - bi * sn
                                yi[o + s * r] = br * sn + bi * c
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The inverse of the DFT of a real signal of even length `N` whose prime factors are 2, 3
/// and 5, from its `N/2 + 1` bins (numpy's and PyTorch's `irfft(X, n=N)`, scaled by `1/N`):
///
/// ```
/// x[n] = (1/N) (Re X[0] + (-1)^n Re X[N/2] + 2 sum_{k=1}^{N/2-1} Re(X[k] e^(2 pi i k n / N)))
/// ```
///
/// The imaginary parts of `X[0]` and `X[N/2]` are ignored, as those libraries ignore them.
///
/// Computed with one complex FFT of half the length: with `M = N/2`, the even and odd
/// samples are the inverse DFTs of `E[k] = (X[k] + conj X[M-k]) / 2` and
/// `O[k] = (X[k] - conj X[M-k]) e^(2 pi i k / N) / 2`, so
/// `z[m] = x[2m] + i x[2m+1]` is the inverse DFT of `E + i O` (`ComplexFFT` of M values).
/// Cost: `M` twiddled combinations and the M-point FFT. For N = 1280: the 640-point FFT
/// (5 passes, radices 4, 4, 4, 2, 5) and 640 combinations, about 6.2k complex
/// multiplications and 9.6k complex additions, where the direct sum takes 1280 x 639
/// multiply-adds of a complex bin by a twiddle (some 130 times more).
public struct InverseRealFFT: Sendable {
    /// The number of samples `N` a transform returns.
    public let size: Int
    /// The number of bins a transform takes, `N/2 + 1` (DC to Nyquist).
    public var binCount: Int { size / 2 + 1 }

    let half: ComplexFFT
    /// `cos` and `sin` of `2 pi k / N` for `k < N/2`.
    let cosines: [Float]
    let sines: [Float]

    /// A transform of `size` samples, or nil unless `size` is even, 2 to 2^24, with no prime
    /// factor other than 2, 3 and 5.
    public init?(size: Int) {
        guard size >= 2, size % 2 == 0, size <= 1 << 24, let half = ComplexFFT(size: size / 2) else { return nil }
        self.size = size
        self.half = half
        let angles = (0..<(size / 2)).map { 2 * Double.pi * Double($0) / Double(size) }
        cosines = angles.map { Float(cos($0)) }
        sines = angles.map { Float(sin($0)) }
    }

    /// Buffers for transforms without allocation.
    public struct Workspace: Sendable {
        var real: [Float]
        var imaginary: [Float]
        var fft: ComplexFFT.Workspace

        /// Room for transforms of `size` samples.
        public init(size: Int) {
            real = [Float](repeating: 0, count: size / 2)
            imaginary = [Float](repeating: 0, count: size / 2)
            fft = ComplexFFT.Workspace(size: size / 2)
        }
    }

    /// The `size` samples whose spectrum is `real + i imaginary` (`binCount` bins each).
    public func transform(real: [Float], imaginary: [Float]) -> [Float] {
        precondition(real.count == binCount && imaginary.count == binCount, "a spectrum of \(binCount) bins")
        var out = [Float](repeating: 0, count: size), workspace = Workspace(size: size)
        real.withUnsafeBufferPointer { re in
            imaginary.withUnsafeBufferPointer { im in
                out.withUnsafeMutableBufferPointer {
                    transform(real: re.baseAddress!, imaginary: im.baseAddress!, into: $0.baseAddress!, workspace: &workspace)
                }
            }
        }
        return out
    }

    /// The `size` samples whose spectrum is the `binCount` bins at `real`, `imaginary`, into
    /// `output`.
    public func transform(
        real: UnsafePointer<Float>, imaginary: UnsafePointer<Float>, into output: UnsafeMutablePointer<Float>,
        workspace: inout Workspace
    ) {
        let m = size / 2, scale = 1 / Float(size)
        workspace.real.withUnsafeMutableBufferPointer { zr in
            workspace.imaginary.withUnsafeMutableBufferPointer { zi in
                for k in 0..<m {
                    // a = X[k], b = conj X[M-k]; the imaginary parts of X[0] and X[M] dropped.
                    let ar = real[k], ai = k == 0 ? 0 : imaginary[k]
                    let br = real[m - k], bi = k == 0 ? 0 : -imaginary[m - k]
                    // Z = (a + b) + i (a - b) e^(i theta): 2 (E + i O).
                    let dr = ar - br, di = ai - bi, c = cosines[k], s = sines[k]
                    zr[k] = (ar + br) - (dr * s + di * c)
                    zi[k] = (ai + bi) + (dr * c - di * s)
                }
                half.transform(real: zr.baseAddress!, imaginary: zi.baseAddress!, inverse: true, workspace: &workspace.fft)
                // z / M = (x[2m] + i x[2m+1]) and Z was 2 (E + i O): the factor is 1/N.
                for j in 0..<m {
                    output[2 * j] = zr[j] * scale
                    output[2 * j + 1] = zi[j] * scale
                }
            }
        }
    }
}
