import Foundation

/// The discrete Fourier transform of a real signal whose length is a power of two, by the
/// radix-2 decimation-in-time FFT: `X[k] = sum_n x[n] e^(-2 pi i k n / N)`, unscaled, for the
/// `N/2 + 1` bins `k = 0 ... N/2` (the others are their complex conjugates).
///
/// The arithmetic is llama.cpp's (`fft` in libmtmd's mtmd-audio.cpp, used for the log-mel of
/// every audio model): `Float` throughout; the twiddle factors come from a table of
/// `sinf`/`cosf` of `2 pi j / N`; each butterfly computes
/// `out[k] = E[k] + w O[k]` and `out[k + N/2] = E[k] - w O[k]` as
/// `(E.re + w.re O.re) - w.im O.im`, `(E.im + w.re O.im) + w.im O.re`,
/// `(E.re - w.re O.re) + w.im O.im`, `(E.im - w.re O.im) - w.im O.re`, with `w.im = -sin`.
/// The transform is done in place after a bit-reversal permutation, which performs exactly
/// the butterflies of llama.cpp's recursion (even half, odd half, combine), so the spectrum
/// equals llama.cpp's bit for bit on the same platform maths library. A size of 512 costs
/// 9 x 256 butterflies.
public struct RealFFT: Sendable {
    /// The number of samples `N` a transform takes.
    public let size: Int
    /// The number of bins a transform returns, `N/2 + 1` (DC to Nyquist).
    public var binCount: Int { size / 2 + 1 }

    /// `cosf(2 pi j / N)` and `sinf(2 pi j / N)` for `j < N/2`, as llama.cpp tabulates them
    /// (the angle in `Double`, rounded to `Float`, then the `Float` functions).
    private let cosines: [Float]
    private let sines: [Float]
    /// `bitReversed[i]` is `i` with its log2(N) bits in reverse order.
    private let bitReversed: [Int]

    /// A transform of `size` samples, or nil unless `size` is a power of two from 2 to 2^20.
    public init?(size: Int) {
        guard size >= 2, size <= 1 << 20, size & (size - 1) == 0 else { return nil }
        self.size = size
        let angles = (0..<(size / 2)).map { Float(2 * Double.pi * Double($0) / Double(size)) }
        cosines = angles.map { cosf($0) }
        sines = angles.map { sinf($0) }
        let bits = size.trailingZeroBitCount
        bitReversed = (0..<size).map { index in
            var reversed = 0
            for bit in 0..<bits where index & (1 << bit) != 0 { reversed |= 1 << (bits - 1 - bit) }
            return reversed
        }
    }

    /// The bins `X[0] ... X[N/2]` of `signal`: its first `size` samples, zero-padded when it
    /// is shorter (as numpy's `rfft(signal, n=size)`).
    public func transform(_ signal: [Float]) -> (real: [Float], imaginary: [Float]) {
        var workspace = Workspace(size: size)
        var input = Array(signal.prefix(size))
        if input.count < size { input += [Float](repeating: 0, count: size - input.count) }
        input.withUnsafeBufferPointer { transform($0, into: &workspace) }
        return (Array(workspace.real[0..<binCount]), Array(workspace.imaginary[0..<binCount]))
    }

    /// The power spectrum `|X[k]|^2 = re^2 + im^2` (in `Float`, as llama.cpp) of `signal`
    /// (cropped or zero-padded to `size` samples), for `k = 0 ... N/2`.
    public func powerSpectrum(_ signal: [Float]) -> [Float] {
        let (real, imaginary) = transform(signal)
        return zip(real, imaginary).map { $0 * $0 + $1 * $1 }
    }

    /// Buffers for transforms without allocation: after `transform(_:into:)`, bins
    /// `0 ... N/2` of `real` and `imaginary` hold the spectrum.
    struct Workspace {
        var real: [Float]
        var imaginary: [Float]
        init(size: Int) {
            real = [Float](repeating: 0, count: size)
            imaginary = [Float](repeating: 0, count: size)
        }
    }

    /// The transform of `signal` (`size` samples) into `workspace`. Only the bins up to N/2
    /// are computed in the last stage; the rest of the buffers is scratch.
    /// - Precondition: `signal.count == size` (the callers are this module's own loops).
    func transform(_ signal: UnsafeBufferPointer<Float>, into workspace: inout Workspace) {
        precondition(signal.count == size && workspace.real.count == size && workspace.imaginary.count == size)
        let n = size
        workspace.real.withUnsafeMutableBufferPointer { re in
            workspace.imaginary.withUnsafeMutableBufferPointer { im in
                cosines.withUnsafeBufferPointer { cosines in
                    sines.withUnsafeBufferPointer { sines in
                        // The leaves of the recursion: one real sample each, imaginary part 0.
                        for i in 0..<n {
                            re[i] = signal[bitReversed[i]]
                            im[i] = 0
                        }
                        var span = 2
                        while span <= n {
                            let half = span / 2
                            let tableStep = n / span
                            let isLastStage = span == n
                            var start = 0
                            while start < n {
                                for k in 0..<half {
                                    let wr = cosines[k * tableStep]
                                    let wi = -sines[k * tableStep]
                                    let e = start + k
                                    let o = e + half
                                    let (er, ei, or, oi) = (re[e], im[e], re[o], im[o])
                                    re[e] = er + wr * or - wi * oi
                                    im[e] = ei + wr * oi + wi * or
                                    // The last stage's upper half are the conjugate bins,
                                    // except bin N/2 itself.
                                    if !isLastStage || k == 0 {
                                        re[o] = er - wr * or + wi * oi
                                        im[o] = ei - wr * oi - wi * or
                                    }
                                }
                                start += span
                            }
                            span *= 2
                        }
                    }
                }
            }
        }
    }
}
