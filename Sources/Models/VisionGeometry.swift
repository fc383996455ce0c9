import Kernels

/// The geometry of LFM2-VL's vision encoder, what it does to the patch grid rather than to
/// each patch: the learned position table resized to a slice's grid (antialiased bilinear,
/// as torch's `interpolate` and ggml's `upscale`) and the pixel unshuffle that merges
/// `s x s` patches into one token. `PositionEmbedding` and `SigLIP2VisionEncoder` call it;
/// docs/media-encoders.md has worked examples.
public enum VisionGeometry {
    /// The taps of a 1-D antialiased bilinear resize from `input` to `output` samples, as
    /// torch's `interpolate(mode="bilinear", antialias=True, align_corners=False)` and
    /// ggml's `upscale` compute them (in Float): output `i` is centred at
    /// `c = (i + 0.5) · input / output` in input coordinates, and input `j` weighs
    /// `max(0, 1 - |j + 0.5 - c| / support)` with `support = max(1, input / output)`, the
    /// weights normalized to sum 1. Each entry: the first input index and the weights.
    public static func antialiasedBilinearTaps(from input: Int, to output: Int) -> [(first: Int, weights: [Float])] {
        precondition(input > 0 && output > 0)
        let sf = Float(output) / Float(input)
        let support = max(1, 1 / sf), invscale = 1 / support
        return (0..<output).map { i in
            let center = (Float(i) + 0.5) / sf
            let lo = max(Int(center - support + 0.5), 0), hi = min(Int(center + support + 0.5), input)
            var w = (lo..<max(lo, hi)).map { j in max(0, 1 - abs((Float(j) - center + 0.5) * invscale)) }
            let total = w.reduce(0, +)
            if total > 0 { w = w.map { $0 / total } }
            return (lo, w)
        }
    }

    /// The position table (`side x side` rows of `channels`, row-major: row `y·side + x`)
    /// resized to `gridWidth x gridHeight` rows with the antialiased bilinear filter (first
    /// along x, then along y). A table already of the grid's size is returned unchanged.
    public static func resizedPositionTable(
        _ table: [Float], side: Int, channels: Int, gridWidth: Int, gridHeight: Int
    ) -> [Float] {
        precondition(table.count == side * side * channels)
        var out = [Float](repeating: 0, count: gridWidth * gridHeight * channels)
        var scratch = [Float](repeating: 0, count: side * gridWidth * channels)
        table.withUnsafeBufferPointer { t in
            out.withUnsafeMutableBufferPointer { o in
                scratch.withUnsafeMutableBufferPointer { s in
                    resize(
                        t.baseAddress!, side: side, channels: channels, gridWidth: gridWidth, gridHeight: gridHeight,
                        scratch: s.baseAddress!, into: o.baseAddress!, pool: nil)
                }
            }
        }
        return out
    }

    /// ``resizedPositionTable(_:side:channels:gridWidth:gridHeight:)`` into `out`, with
    /// `scratch` of `side · gridWidth · channels` floats, split over `pool`.
    static func resize(
        _ table: UnsafePointer<Float>, side: Int, channels d: Int, gridWidth gw: Int, gridHeight gh: Int,
        scratch: UnsafeMutablePointer<Float>, into out: UnsafeMutablePointer<Float>, pool: ThreadPool?
    ) {
        if gw == side && gh == side {
            out.update(from: table, count: side * side * d)
            return
        }
        // Along x: scratch[y][X] = Σ_j tx[X]_j · table[y][first + j]; then along y:
        // out[Y][X] = Σ_j ty[Y]_j · scratch[first + j][X].
        resample(
            table, length: side, taps: antialiasedBilinearTaps(from: side, to: gw), outer: side, inner: 1, channels: d, into: scratch,
            pool: pool)
        resample(
            scratch, length: side, taps: antialiasedBilinearTaps(from: side, to: gh), outer: 1, inner: gw, channels: d, into: out,
            pool: pool)
    }

    /// One axis of a separable resize, over rows of `d` floats indexed `[a][i][b]`:
    /// `out[a][o][b] = Σ_j taps[o].weights[j] · source[a][taps[o].first + j][b]`, with
    /// `outer` values of `a`, `length` of `i` and `inner` of `b`. Split over `pool`.
    static func resample(
        _ source: UnsafePointer<Float>, length n: Int, taps: [(first: Int, weights: [Float])], outer: Int, inner: Int, channels d: Int,
        into out: UnsafeMutablePointer<Float>, pool: ThreadPool?
    ) {
        let m = taps.count
        EncoderKernels.parallel(outer * m, minChunk: 1, pool) { range in
            for index in range {
                let a = index / m, o = index % m
                for b in 0..<inner {
                    let row = out + ((a * m + o) * inner + b) * d
                    row.update(repeating: 0, count: d)
                    for (j, weight) in taps[o].weights.enumerated() where weight > 0 {
                        Elementwise.axpy(weight, source + ((a * n + taps[o].first + j) * inner + b) * d, row, count: d)
                    }
                }
            }
        }
    }

    /// Pixel unshuffle by `factor` `s` (LFM2-VL's "downsample"): the `gridWidth x gridHeight`
    /// patch rows of `channels` become `(gridWidth/s) x (gridHeight/s)` tokens of `s² ·
    /// channels`, token `(Y, X)` (row-major) the concatenation of patches `(sY + i, sX + j)`
    /// for `i` then `j` in `0..<s`: for `s` = 2, patches (2Y, 2X), (2Y, 2X+1), (2Y+1, 2X),
    /// (2Y+1, 2X+1). Both sides must be multiples of `s`.
    public static func pixelUnshuffle(_ x: [Float], gridWidth: Int, gridHeight: Int, channels: Int, factor: Int) -> [Float] {
        precondition(x.count == gridWidth * gridHeight * channels && gridWidth % factor == 0 && gridHeight % factor == 0)
        var out = [Float](repeating: 0, count: x.count)
        x.withUnsafeBufferPointer { xs in
            out.withUnsafeMutableBufferPointer { o in
                pixelUnshuffle(
                    xs.baseAddress!, gridWidth: gridWidth, gridHeight: gridHeight, channels: channels, factor: factor, into: o.baseAddress!)
            }
        }
        return out
    }

    /// ``pixelUnshuffle(_:gridWidth:gridHeight:channels:factor:)`` from `x` into `out`.
    static func pixelUnshuffle(
        _ x: UnsafePointer<Float>, gridWidth gw: Int, gridHeight gh: Int, channels d: Int, factor s: Int,
        into out: UnsafeMutablePointer<Float>
    ) {
        let tw = gw / s, th = gh / s
        for Y in 0..<th {
            for X in 0..<tw {
                var dst = out + (Y * tw + X) * s * s * d
                for i in 0..<s {
                    for j in 0..<s {
                        dst.update(from: x + ((s * Y + i) * gw + s * X + j) * d, count: d)
                        dst += d
                    }
                }
            }
        }
    }
}
