import GGUF
import Kernels
import Models

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// LFM2-VL's vision encoder written out plainly, the oracle `SigLIP2VisionEncoder` is
/// tested against: Double arithmetic, plain loops over rows (no BLAS, no SIMD kernels, no
/// threads), every tensor dequantized once with the scalar reference dequantizers, the conv
/// patch embedding as the convolution itself, the position table resized with the 2-D
/// antialiased bilinear formula, GELU as `0.5 x (1 + tanh(...))`. It reads the keys and
/// tensors itself (`ReferenceProjectorFile`), apart from the encoder's loader
/// (docs/media-encoders.md reads it step by step).
///
/// ```swift
/// let reference = try ReferenceSigLIP2VisionEncoder(file: mmproj, path: path)
/// let embeddings = try reference.encode(pixels: slice, width: 512, height: 512)   // [tokens · D]
/// ```
public struct ReferenceSigLIP2VisionEncoder: Sendable {
    let path: String
    let d: Int, heads: Int, layers: Int, ff: Int, patch: Int, merge: Int, side: Int
    let eps: Double, hidden: Int, outputs: Int
    /// Every tensor the encoder reads, dequantized, by name.
    let tensors: [String: [Double]]

    /// Reads `clip.vision.*` and every tensor of an `lfm2` mmproj file.
    public init(file: GGUFFile, path: String) throws(ProjectorError) {
        let f = try ReferenceProjectorFile(file: file, path: path, projectorType: "lfm2")
        self.path = path
        let p = "clip.vision."
        (d, heads, layers, outputs, eps) = try f.encoderShape(p)
        ff = try f.int(p + "feed_forward_length")
        patch = try f.int(p + "patch_size")
        merge = try f.int(p + "projector.scale_factor")
        side = try f.int(p + "image_size") / patch
        guard merge <= 64 else {
            throw .invalidValue(path: path, key: p + "projector.scale_factor", value: "\(merge)", reason: "must be at most 64")
        }
        let merged = d * merge * merge
        hidden = try f.count("mm.1.weight") / merged

        // Every tensor, with the element count the keys imply.
        var expected: [(String, Int)] = [
            ("v.patch_embd.weight", d * 3 * patch * patch), ("v.patch_embd.bias", d), ("v.position_embd.weight", side * side * d)
        ]
        for l in 0..<layers {
            let b = "v.blk.\(l)."
            for (name, outs, ins) in [
                ("ln1", d, 1), ("attn_q", d, d), ("attn_k", d, d), ("attn_v", d, d), ("attn_out", d, d), ("ln2", d, 1),
                ("ffn_up", ff, d), ("ffn_down", d, ff)
            ] {
                expected += [(b + name + ".weight", outs * ins), (b + name + ".bias", outs)]
            }
        }
        expected += [("v.post_ln.weight", d), ("v.post_ln.bias", d)]
        if file.tensor(named: "mm.input_norm.weight") != nil {
            expected += [("mm.input_norm.weight", merged), ("mm.input_norm.bias", merged)]
        }
        expected += [("mm.1.weight", merged * hidden), ("mm.1.bias", hidden), ("mm.2.weight", hidden * outputs), ("mm.2.bias", outputs)]
        var tensors: [String: [Double]] = [:]
        for (name, count) in expected { tensors[name] = try f.tensor(name, count: count) }
        self.tensors = tensors
    }

    /// The embeddings of one preprocessed slice (`width · height · 3` floats, row-major,
    /// RGB interleaved, normalized): `(width / (p·s)) · (height / (p·s))` rows of
    /// `projection_dim`.
    public func encode(pixels: [Float], width: Int, height: Int) throws(ProjectorError) -> [Float] {
        let align = patch * merge
        guard width >= align, height >= align, width % align == 0, height % align == 0, pixels.count == width * height * 3 else {
            throw .invalidInput("a slice of \(width)x\(height) with \(pixels.count) values (sides multiples of \(align))")
        }
        let gw = width / patch, gh = height / patch
        // x = Conv2d(pixels; kernel p, stride p) + b, the kernel w[o][c][ky][kx]; patch (px, py) is row py·gw + px
        let kernel = tensors["v.patch_embd.weight"]!, kernelBias = tensors["v.patch_embd.bias"]!
        var x = (0..<(gw * gh)).map { i in
            let px = i % gw, py = i / gw
            return (0..<d).map { o in
                var acc = kernelBias[o]
                for c in 0..<3 {
                    for ky in 0..<patch {
                        for kx in 0..<patch {
                            let pixel = pixels[((py * patch + ky) * width + px * patch + kx) * 3 + c]
                            acc += kernel[((o * 3 + c) * patch + ky) * patch + kx] * Double(pixel)
                        }
                    }
                }
                return acc
            }
        }
        // x += the position table resized to gw x gh
        let table = tensors["v.position_embd.weight"]!
        let wx = Self.filter(from: side, to: gw), wy = Self.filter(from: side, to: gh)
        for i in x.indices {
            let X = i % gw, Y = i / gw
            for c in 0..<d {
                var acc = 0.0
                for y in 0..<side where wy[Y][y] > 0 {
                    for xs in 0..<side where wx[X][xs] > 0 { acc += wy[Y][y] * wx[X][xs] * table[(y * side + xs) * d + c] }
                }
                x[i][c] += acc
            }
        }
        // The blocks: h = x + Attention(LN₁(x)); x = h + MLP(LN₂(h))
        for l in 0..<layers {
            let b = "v.blk.\(l)."
            x = ReferenceMath.add(x, attention(layerNorm(x, b + "ln1", eps: eps), prefix: b))
            let up = linear(layerNorm(x, b + "ln2", eps: eps), b + "ffn_up").map { $0.map(ReferenceMath.geluTanh) }
            x = ReferenceMath.add(x, linear(up, b + "ffn_down"))
        }
        x = layerNorm(x, "v.post_ln", eps: eps)
        // Pixel unshuffle: token (Y, X) = patches (sY + i, sX + j), i then j
        let tw = gw / merge, th = gh / merge
        var t: [[Double]] = []
        for Y in 0..<th {
            for X in 0..<tw {
                var token: [Double] = []
                for i in 0..<merge {
                    for j in 0..<merge { token += x[(merge * Y + i) * gw + merge * X + j] }
                }
                t.append(token)
            }
        }
        // E = mm₂ GELU(mm₁ LN(T))
        if tensors["mm.input_norm.weight"] != nil { t = layerNorm(t, "mm.input_norm", eps: 1e-5) }
        let projected = linear(linear(t, "mm.1").map { $0.map(ReferenceMath.geluTanh) }, "mm.2")
        return projected.flatMap { $0.map(Float.init) }
    }

    // MARK: - The pieces

    func layerNorm(_ x: [[Double]], _ name: String, eps: Double) -> [[Double]] {
        ReferenceMath.layerNorm(x, tensors[name + ".weight"]!, tensors[name + ".bias"]!, eps: eps)
    }

    func linear(_ x: [[Double]], _ name: String) -> [[Double]] {
        let b = tensors[name + ".bias"]!
        return ReferenceMath.linear(x, tensors[name + ".weight"]!, b, outputs: b.count)
    }

    /// Multi-head attention over the rows, every row seeing every row, then `attn_out`.
    func attention(_ x: [[Double]], prefix b: String) -> [[Double]] {
        let hd = d / heads, n = x.count
        let q = linear(x, b + "attn_q"), k = linear(x, b + "attn_k"), v = linear(x, b + "attn_v")
        var out = [[Double]](repeating: [Double](repeating: 0, count: d), count: n)
        for h in 0..<heads {
            let cols = (h * hd)..<((h + 1) * hd)
            for i in 0..<n {
                let p = ReferenceMath.softmax((0..<n).map { j in cols.reduce(0.0) { $0 + q[i][$1] * k[j][$1] } / Double(hd).squareRoot() })
                for c in cols { out[i][c] = (0..<n).reduce(0.0) { $0 + p[$1] * v[$1][c] } }
            }
        }
        return linear(out, b + "attn_out")
    }

    /// `weights[o][i]`: how much input sample `i` weighs in output sample `o` when `input`
    /// samples are resized to `output` with the antialiased bilinear (triangle) filter:
    /// centre `c = (o + 0.5) · input / output`, support `max(1, input / output)`, weights
    /// `max(0, 1 - |i + 0.5 - c| / support)` normalized to sum 1.
    static func filter(from input: Int, to output: Int) -> [[Double]] {
        let scale = Double(input) / Double(output), support = max(1, scale)
        return (0..<output).map { o in
            let center = (Double(o) + 0.5) * scale
            let w = (0..<input).map { i in max(0, 1 - abs(Double(i) + 0.5 - center) / support) }
            let total = w.reduce(0, +)
            return w.map { $0 / total }
        }
    }
}
