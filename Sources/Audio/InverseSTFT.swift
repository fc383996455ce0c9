import Foundation

/// The inverse short-time Fourier transform with "same" padding, as Vocos and LiquidAI's
/// audio detokenizer (liquid-audio's `ISTFT(1280, 320, 1280, padding="same")`) compute it:
///
/// ```
/// frame_t = irfft(X_t, N) · w                         X_t: N/2 + 1 bins; irfft scaled by 1/N
/// w[k]    = 0.5 - 0.5 cos(2 pi k / N)                 the periodic Hann window
/// y[i]    = sum_t frame_t[i - t H]                    overlap-add, hop H: (T - 1) H + N samples
/// e[i]    = sum_t w[i - t H]^2                        the window envelope, the same way
/// out     = (y / e)[P ..< P + T H]                    P = (N - H) / 2 dropped at each end
/// ```
///
/// `T` rows give `T H` samples (1920 per frame of LFM2.5-Audio: 6 rows of 320 at 24 kHz).
///
/// Streaming. Rows can be given as they come (`append`), each call returning the samples
/// that are final: sample `i` of `y` is final once every row whose window covers it has been
/// added, that is after row `floor(i / H)`. After `t` rows, the output up to `t H - P` is out
/// (`P` samples are held back, and the first `P` of `y` are dropped); `finish()` returns the
/// rest, whose envelope has no later rows. Each row is added, and each sample divided by its
/// envelope (summed over its rows in order), by the same arithmetic however the rows are
/// cut into calls, so the pieces concatenated are the one-call result (`synthesize`) bit for
/// bit.
///
/// Cost per row: one inverse real FFT (`InverseRealFFT`) and `N + H` multiply-adds.
public struct InverseSTFT: Sendable {
    /// The transform length `N` (and window length).
    public let fftSize: Int
    /// The hop `H` between rows, in samples.
    public let hopLength: Int
    /// Bins per row, `N/2 + 1`.
    public var binCount: Int { fftSize / 2 + 1 }
    /// Samples dropped at each end, `(N - H) / 2`.
    public var padding: Int { (fftSize - hopLength) / 2 }
    /// Rows added since the stream started (or since the last `finish()`).
    public private(set) var rowCount = 0

    let fft: InverseRealFFT
    /// The periodic Hann window and its square.
    let window: [Float]
    let windowSquared: [Float]
    /// The overlap-added frames at positions `rowCount H ..< rowCount H + N` of `y`: the part
    /// later rows still add to (its last `H` values are 0 between calls).
    private var pending: [Float]
    /// One row's inverse FFT.
    private var frame: [Float]
    private var workspace: InverseRealFFT.Workspace

    /// The transform of `fftSize` points with hop `hopLength` (default: LFM2.5-Audio's 1280
    /// and 320), or nil unless `fftSize` is an even length `InverseRealFFT` takes and
    /// `hopLength` is 1 to `fftSize - 1` with `fftSize - hopLength` even (below `fftSize`,
    /// every kept sample has a window value above 0: its envelope is positive).
    public init?(fftSize: Int = 1280, hopLength: Int = 320) {
        guard let fft = InverseRealFFT(size: fftSize), hopLength >= 1, hopLength < fftSize, (fftSize - hopLength) % 2 == 0 else {
            return nil
        }
        self.fft = fft
        self.fftSize = fftSize
        self.hopLength = hopLength
        window = (0..<fftSize).map { Float(0.5 - 0.5 * cos(2 * Double.pi * Double($0) / Double(fftSize))) }
        windowSquared = window.map { $0 * $0 }
        pending = [Float](repeating: 0, count: fftSize)
        frame = [Float](repeating: 0, count: fftSize)
        workspace = InverseRealFFT.Workspace(size: fftSize)
    }

    /// The whole signal of the rows `real + i imaginary` (`binCount` bins per row, row-major;
    /// `rows H` samples): a stream of its own, its rows appended at once, then finished.
    public func synthesize(real: [Float], imaginary: [Float]) -> [Float] {
        var stream = self
        stream.reset()
        var out = stream.append(real: real, imaginary: imaginary)
        out += stream.finish()
        return out
    }

    /// Adds the rows `real + i imaginary` (`binCount` bins per row, row-major) and returns
    /// the samples that became final.
    public mutating func append(real: [Float], imaginary: [Float]) -> [Float] {
        precondition(real.count == imaginary.count && real.count % binCount == 0, "whole rows of \(binCount) bins")
        var out: [Float] = []
        out.reserveCapacity(real.count / binCount * hopLength)
        real.withUnsafeBufferPointer { re in
            imaginary.withUnsafeBufferPointer { im in
                append(real: re.baseAddress!, imaginary: im.baseAddress!, rows: real.count / binCount, into: &out)
            }
        }
        return out
    }

    /// Adds `rows` rows of `binCount` bins at `real`, `imaginary` (row-major) and appends the
    /// samples that became final to `samples` (`H` per row, fewer for the first rows).
    public mutating func append(real: UnsafePointer<Float>, imaginary: UnsafePointer<Float>, rows: Int, into samples: inout [Float]) {
        let n = fftSize, hop = hopLength, bins = binCount, pad = padding
        for row in 0..<rows {
            frame.withUnsafeMutableBufferPointer { frame in
                fft.transform(real: real + row * bins, imaginary: imaginary + row * bins, into: frame.baseAddress!, workspace: &workspace)
            }
            // y += frame · w at positions t H ..< t H + N (t = rowCount).
            for k in 0..<n { pending[k] += frame[k] * window[k] }
            // Positions t H ..< (t + 1) H are final: no later row reaches them.
            let start = rowCount * hop
            rowCount += 1
            for k in 0..<hop where start + k >= pad {
                samples.append(pending[k] / envelope(at: start + k))
            }
            // Shift the window by one hop (forward: the regions overlap).
            for k in 0..<(n - hop) { pending[k] = pending[k + hop] }
            for k in (n - hop)..<n { pending[k] = 0 }
        }
    }

    /// The samples still held back (`min(P, rows H)` of them), after which the stream is
    /// empty again, ready for another signal.
    public mutating func finish() -> [Float] {
        let hop = hopLength, pad = padding, start = rowCount * hop
        var out: [Float] = []
        // Positions t H ..< t H + P of y (t = rowCount), the kept ones: from P on.
        for k in 0..<pad where start + k >= pad {
            out.append(pending[k] / envelope(at: start + k))
        }
        reset()
        return out
    }

    /// Forgets every row: the stream starts a new signal.
    public mutating func reset() {
        rowCount = 0
        for k in pending.indices { pending[k] = 0 }
    }

    /// `e[i] = sum_t w[i - t H]^2` over the rows added so far that cover position `i` of
    /// `y`, summed in row order.
    private func envelope(at i: Int) -> Float {
        let hop = hopLength, n = fftSize
        // Rows t with t H <= i < t H + N, t < rowCount.
        let first = i < n ? 0 : (i - n) / hop + 1, last = min(rowCount - 1, i / hop)
        var sum: Float = 0
        var t = first
        while t <= last {
            sum += windowSquared[i - t * hop]
            t += 1
        }
        return sum
    }
}
