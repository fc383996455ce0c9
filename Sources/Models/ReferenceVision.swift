import GGUF
import Kernels

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// LFM2-VL's vision encoder written out plainly, the oracle `SigLIP2VisionEncoder` is
/// tested against: Double arithmetic, plain loops over arrays (no BLAS, no SIMD kernels,
/// no threads), every tensor dequantized once with the scalar reference dequantizer
/// (`GGMLType.dequantizeRowReference`), the conv patch embedding as the convolution
/// itself, the position table resized with the 2-D antialiased bilinear formula, GELU as
/// `0.5 x (1 + tanh(...))`. It reads the GGUF keys and tensors itself, apart from the
/// encoder's loader (docs/vision-encoder.md reads it step by step).
///
/// ```swift
/// let reference = try ReferenceVision(file: mmproj, path: path)
/// let embeddings = try reference.encode(pixels, width: 512, height: 512)   // [tokens · D]
/// ```
public struct ReferenceVision: Sendable {
    let path: String
    let d: Int, heads: Int, layers: Int, ff: Int, patch: Int, merge: Int, side: Int
    let eps: Double, hidden: Int, outputs: Int
    /// Every tensor the encoder reads, dequantized, by name.
    let tensors: [String: [Double]]

    /// Reads `clip.vision.*` and the tensors of an `lfm2` mmproj file.
    public init(file: GGUFFile, path: String) throws(ProjectorError) {
        self.path = path
        let m = file.metadata
        func int(_ key: String) throws(ProjectorError) -> Int {
            guard m.contains(key) else { throw .missingKey(path: path, key: key) }
            guard let v = m[key]?.intValue, (1...65_536).contains(v) else {
                throw .invalidValue(path: path, key: key, value: "\(m[key]!)", reason: "must be 1...65536")
            }
            return v
        }
        guard let arch = try? m.string("general.architecture"), arch == "clip" else {
            throw .notAProjector(path: path, architecture: (try? m.string("general.architecture")) ?? "?")
        }
        let type = (try? m.string("clip.projector_type")) ?? "?"
        guard type == "lfm2" else { throw .unsupportedProjectorType(path: path, type: type, expected: ["lfm2"]) }
        d = try int("clip.vision.embedding_length")
        heads = try int("clip.vision.attention.head_count")
        layers = try int("clip.vision.block_count")
        ff = try int("clip.vision.feed_forward_length")
        patch = try int("clip.vision.patch_size")
        merge = try int("clip.vision.projector.scale_factor")
        side = try int("clip.vision.image_size") / patch
        outputs = try int("clip.vision.projection_dim")
        guard merge <= 64 else {
            throw .invalidValue(path: path, key: "clip.vision.projector.scale_factor", value: "\(merge)", reason: "must be at most 64")
        }
        guard d % heads == 0 else {
            throw .invalidValue(path: path, key: "clip.vision.attention.head_count", value: "\(heads)", reason: "must divide \(d)")
        }
        guard let e = m["clip.vision.attention.layer_norm_epsilon"]?.doubleValue else {
            throw .missingKey(path: path, key: "clip.vision.attention.layer_norm_epsilon")
        }
        eps = Double(Float(e))
        guard let mm1 = file.tensor(named: "mm.1.weight") else { throw .missingTensor(path: path, name: "mm.1.weight") }
        hidden = mm1.shape.count == 2 && mm1.shape[1] <= 65_536 ? mm1.shape[1] : 0

        // Every tensor with the element count the keys imply.
        let merged = d * merge * merge
        var expected: [(String, Int)] = [
            ("v.patch_embd.weight", d * 3 * patch * patch), ("v.patch_embd.bias", d), ("v.position_embd.weight", side * side * d)
        ]
        for l in 0..<layers {
            let b = "v.blk.\(l)."
            for (name, outs, ins) in [
                ("ln1", d, 0), ("attn_q", d, d), ("attn_k", d, d), ("attn_v", d, d), ("attn_out", d, d), ("ln2", d, 0),
                ("ffn_up", ff, d), ("ffn_down", d, ff)
            ] {
                expected += [(b + name + ".weight", ins == 0 ? outs : outs * ins), (b + name + ".bias", outs)]
            }
        }
        expected += [("v.post_ln.weight", d), ("v.post_ln.bias", d)]
        if file.tensor(named: "mm.input_norm.weight") != nil {
            expected += [("mm.input_norm.weight", merged), ("mm.input_norm.bias", merged)]
        }
        expected += [("mm.1.weight", merged * hidden), ("mm.1.bias", hidden), ("mm.2.weight", hidden * outputs), ("mm.2.bias", outputs)]
        var tensors: [String: [Double]] = [:]
        for (name, count) in expected {
            guard let t = file.tensor(named: name) else { throw .missingTensor(path: path, name: name) }
            guard count > 0, t.elementCount == count else { throw .tensorShape(path: path, name: name, expected: [count], found: t.shape) }
            guard t.type.hasKernels else { throw .tensorType(path: path, name: name, type: t.type, accepted: GGMLType.kernelTypes) }
            var values = [Float](repeating: 0, count: count)
            let bytes = file.data(for: t).baseAddress!
            let rowBytes = t.type.rowBytes(count: t.rowLength)!
            values.withUnsafeMutableBufferPointer { v in
                for r in 0..<t.rowCount {
                    t.type.dequantizeRowReference(bytes + r * rowBytes, into: v.baseAddress! + r * t.rowLength, count: t.rowLength)
                }
            }
            tensors[name] = values.map(Double.init)
        }
        self.tensors = tensors
    }

    /// The embeddings of one preprocessed slice (`width · height · 3` floats, row-major,
    /// RGB interleaved, normalized): `(width / (p·s)) · (height / (p·s))` rows of
    /// `projection_dim`.
    public func encode(_ pixels: [Float], width: Int, height: Int) throws(ProjectorError) -> [Float] {
        let align = patch * merge
        guard width >= align, height >= align, width % align == 0, height % align == 0, pixels.count == width * height * 3 else {
            throw .invalidInput("a slice of \(width)x\(height) with \(pixels.count) values (sides multiples of \(align))")
        }
        let gw = width / patch, gh = height / patch, n = gw * gh
        // X = Conv2d(pixels; kernel p, stride p) + b, the kernel w[o][c][ky][kx]
        let kernel = tensors["v.patch_embd.weight"]!, kernelBias = tensors["v.patch_embd.bias"]!
        var x = [Double](repeating: 0, count: n * d)
        for py in 0..<gh {
            for px in 0..<gw {
                for o in 0..<d {
                    var acc = kernelBias[o]
                    for c in 0..<3 {
                        for ky in 0..<patch {
                            for kx in 0..<patch {
                                let pixel = pixels[((py * patch + ky) * width + px * patch + kx) * 3 + c]
                                acc += kernel[((o * 3 + c) * patch + ky) * patch + kx] * Double(pixel)
                            }
                        }
                    }
                    x[(py * gw + px) * d + o] = acc
                }
            }
        }
        // X += the position table resized to gw x gh
        let table = tensors["v.position_embd.weight"]!
        let wx = Self.filter(from: side, to: gw), wy = Self.filter(from: side, to: gh)
        for Y in 0..<gh {
            for X in 0..<gw {
                for c in 0..<d {
                    var acc = 0.0
                    for y in 0..<side where wy[Y][y] > 0 {
                        for xs in 0..<side where wx[X][xs] > 0 { acc += wy[Y][y] * wx[X][xs] * table[(y * side + xs) * d + c] }
                    }
                    x[(Y * gw + X) * d + c] += acc
                }
            }
        }
        // The blocks: h = x + Attention(LN₁(x)); x = h + MLP(LN₂(h))
        for l in 0..<layers {
            let b = "v.blk.\(l)."
            let attended = attention(layerNorm(x, b + "ln1", eps: eps), layer: l, count: n)
            for i in x.indices { x[i] += attended[i] }
            var mlp = linear(layerNorm(x, b + "ln2", eps: eps), b + "ffn_up", count: n)
            mlp = mlp.map(Self.gelu)
            mlp = linear(mlp, b + "ffn_down", count: n)
            for i in x.indices { x[i] += mlp[i] }
        }
        x = layerNorm(x, "v.post_ln", eps: eps)
        // Pixel unshuffle: token (Y, X) = patches (sY + i, sX + j), i then j
        let tw = gw / merge, th = gh / merge, tokens = tw * th, merged = d * merge * merge
        var t = [Double](repeating: 0, count: tokens * merged)
        for Y in 0..<th {
            for X in 0..<tw {
                for i in 0..<merge {
                    for j in 0..<merge {
                        let from = ((merge * Y + i) * gw + merge * X + j) * d, to = (Y * tw + X) * merged + (i * merge + j) * d
                        for c in 0..<d { t[to + c] = x[from + c] }
                    }
                }
            }
        }
        // E = mm₂ GELU(mm₁ LN(T))
        if tensors["mm.input_norm.weight"] != nil { t = layerNorm(t, "mm.input_norm", eps: 1e-5) }
        let projected = linear(linear(t, "mm.1", count: tokens).map(Self.gelu), "mm.2", count: tokens)
        return projected.map { Float($0) }
    }

    // MARK: - The pieces

    /// `(x - mean) / sqrt(var + eps) · w + b` per row of the tensor's width.
    func layerNorm(_ x: [Double], _ name: String, eps: Double) -> [Double] {
        let w = tensors[name + ".weight"]!, b = tensors[name + ".bias"]!, width = w.count
        var y = x
        for r in 0..<(x.count / width) {
            let row = x[(r * width)..<((r + 1) * width)]
            let mean = row.reduce(0, +) / Double(width)
            let variance = row.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / Double(width)
            let scale = 1 / (variance + eps).squareRoot()
            for c in 0..<width { y[r * width + c] = (x[r * width + c] - mean) * scale * w[c] + b[c] }
        }
        return y
    }

    /// `y = W x + b` for each of `count` rows (`W` from `name.weight`, `out x in` row-major).
    func linear(_ x: [Double], _ name: String, count: Int) -> [Double] {
        let w = tensors[name + ".weight"]!, b = tensors[name + ".bias"]!
        let outs = b.count, ins = w.count / outs
        var y = [Double](repeating: 0, count: count * outs)
        for r in 0..<count {
            for o in 0..<outs {
                var acc = b[o]
                for i in 0..<ins { acc += w[o * ins + i] * x[r * ins + i] }
                y[r * outs + o] = acc
            }
        }
        return y
    }

    /// Multi-head attention of `count` rows, every row seeing every row, then `attn_out`.
    func attention(_ x: [Double], layer l: Int, count n: Int) -> [Double] {
        let b = "v.blk.\(l).", hd = d / heads
        let q = linear(x, b + "attn_q", count: n), k = linear(x, b + "attn_k", count: n), v = linear(x, b + "attn_v", count: n)
        var out = [Double](repeating: 0, count: n * d)
        var scores = [Double](repeating: 0, count: n)
        for h in 0..<heads {
            for i in 0..<n {
                for j in 0..<n {
                    var dot = 0.0
                    for c in 0..<hd { dot += q[i * d + h * hd + c] * k[j * d + h * hd + c] }
                    scores[j] = dot / Double(hd).squareRoot()
                }
                let top = scores.max()!
                var total = 0.0
                for j in 0..<n {
                    scores[j] = exp(scores[j] - top)
                    total += scores[j]
                }
                for j in 0..<n {
                    let p = scores[j] / total
                    for c in 0..<hd { out[i * d + h * hd + c] += p * v[j * d + h * hd + c] }
                }
            }
        }
        return linear(out, b + "attn_out", count: n)
    }

    /// GELU, tanh form: `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))`.
    static func gelu(_ x: Double) -> Double {
        0.5 * x * (1 + tanh((2 / Double.pi).squareRoot() * (x + 0.044715 * x * x * x)))
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
