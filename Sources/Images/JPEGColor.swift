/// From decoded component planes to RGB, as stb_image does it: chroma upsampled with its
/// "fancy" filters (triangle filters centred between samples, across block boundaries) for
/// 2x horizontal and/or 2x vertical subsampling and by replication for every other ratio,
/// then a fixed-point YCbCr -> RGB conversion (JFIF, full range), or the Adobe variants.

/// One component's samples after the inverse DCT, and its subsampling.
struct JPEGPlane {
    /// Samples, rows `stride` apart (whole MCUs, so wider and taller than needed).
    let samples: UnsafeMutableBufferPointer<UInt8>
    let stride: Int
    /// Samples that carry image content: ceil(image width * h / h max) by ceil(height * v / v max).
    let width: Int
    let height: Int
    /// Upsampling factors: h max / h and v max / v.
    let horizontalFactor: Int
    let verticalFactor: Int
}

/// How the components become R, G, B.
enum JPEGColorModel {
    /// One component, copied to R, G and B.
    case gray
    /// Y, Cb, Cr (the JFIF default).
    case yCbCr
    /// Three components that already are R, G and B (component ids 'R', 'G', 'B', or an
    /// Adobe APP14 transform 0 without JFIF).
    case rgb
    /// Four components with Adobe transform 0: C, M, Y, K as stored (Adobe's inverted
    /// convention), each multiplied by K.
    case cmyk
    /// Four components with Adobe transform 2: Y, Cb, Cr, K.
    case yccK
    /// Four components with any other transform: the first three as Y, Cb, Cr.
    case yCbCrIgnoringFourth
}

enum JPEGColorConverter {
    /// Builds the `width` x `height` RGB image from `planes` (1, 3 or 4 of them).
    static func rgb(planes: [JPEGPlane], width: Int, height: Int, model: JPEGColorModel) -> [UInt8] {
        var rgb = [UInt8](repeating: 0, count: width * height * 3)
        // One line per plane, long enough for a factor-4 upsampling of a rounded-up width.
        let lineLength = width + 3
        var lines = [UInt8](repeating: 0, count: lineLength * planes.count)
        lines.withUnsafeMutableBufferPointer { lineBuffer in
            rgb.withUnsafeMutableBufferPointer { out in
                for y in 0..<height {
                    for (index, plane) in planes.enumerated() {
                        upsampleRow(plane, row: y, into: lineBuffer.baseAddress! + index * lineLength)
                    }
                    let line = { (index: Int) in UnsafePointer(lineBuffer.baseAddress! + index * lineLength) }
                    convertRow(
                        model, lines: planes.indices.map(line), count: width, into: out.baseAddress! + y * width * 3)
                }
            }
        }
        return rgb
    }

    /// Writes output row `row` of `plane`, upsampled to (at least) full width, to `out`.
    static func upsampleRow(_ plane: JPEGPlane, row: Int, into out: UnsafeMutablePointer<UInt8>) {
        let hs = plane.horizontalFactor
        let vs = plane.verticalFactor
        let inputWidth = plane.width
        let base = plane.samples.baseAddress!
        let filtered = vs <= 2 && hs <= 2 && (vs == 2 || hs == 2)
        // The nearer source row, and for the vertical filter the farther one: output rows 2m
        // and 2m+1 sit a quarter of a sample above and below source row m, so they mix in
        // rows m-1 and m+1 (clamped at the edges).
        let nearRow: Int
        var farRow: Int
        if vs == 2 && filtered {
            nearRow = row >> 1
            farRow = row & 1 == 0 ? max(nearRow - 1, 0) : min(nearRow + 1, plane.height - 1)
        } else {
            nearRow = row / vs
            farRow = nearRow
        }
        let near = base + nearRow * plane.stride
        let far = base + farRow * plane.stride
        switch (hs, vs) {
        case (1, 1):
            out.update(from: near, count: inputWidth)
        case (1, 2):
            for i in 0..<inputWidth { out[i] = UInt8((3 * Int(near[i]) + Int(far[i]) + 2) >> 2) }
        case (2, 1):
            upsampleHorizontally(near, count: inputWidth, into: out)
        case (2, 2):
            upsampleBothWays(near: near, far: far, count: inputWidth, into: out)
        default:
            // Any other ratio: nearest sample (vertical choice made above).
            for i in 0..<inputWidth {
                for j in 0..<hs { out[i * hs + j] = near[i] }
            }
        }
    }

    /// 2x horizontally: each output sample is 3/4 of the nearer input and 1/4 of the other
    /// neighbour; the two ends copy their input. As in stb_image, the second-to-last output
    /// weighs input w-2 by 3/4 and input w-1 by 1/4 (libjpeg weighs them the other way).
    private static func upsampleHorizontally(_ input: UnsafePointer<UInt8>, count w: Int, into out: UnsafeMutablePointer<UInt8>) {
        if w == 1 {
            out[0] = input[0]
            out[1] = input[0]
            return
        }
        out[0] = input[0]
        out[1] = UInt8((3 * Int(input[0]) + Int(input[1]) + 2) >> 2)
        for i in 1..<(w - 1) {
            let weighted = 3 * Int(input[i]) + 2
            out[2 * i] = UInt8((weighted + Int(input[i - 1])) >> 2)
            out[2 * i + 1] = UInt8((weighted + Int(input[i + 1])) >> 2)
        }
        out[2 * w - 2] = UInt8((3 * Int(input[w - 2]) + Int(input[w - 1]) + 2) >> 2)
        out[2 * w - 1] = input[w - 1]
    }

    /// 2x both ways: the vertical 3:1 mix first (kept at 4x scale), then the horizontal 3:1
    /// mix, rounded once (+8, / 16); the ends of the row use the vertical mix alone.
    private static func upsampleBothWays(
        near: UnsafePointer<UInt8>, far: UnsafePointer<UInt8>, count w: Int, into out: UnsafeMutablePointer<UInt8>
    ) {
        let first = 3 * Int(near[0]) + Int(far[0])
        if w == 1 {
            out[0] = UInt8((first + 2) >> 2)
            out[1] = out[0]
            return
        }
        out[0] = UInt8((first + 2) >> 2)
        var previous = first
        for i in 1..<w {
            let current = 3 * Int(near[i]) + Int(far[i])
            out[2 * i - 1] = UInt8((3 * previous + current + 8) >> 4)
            out[2 * i] = UInt8((3 * current + previous + 8) >> 4)
            previous = current
        }
        out[2 * w - 1] = UInt8((previous + 2) >> 2)
    }

    // stb_image's YCbCr -> RGB constants: round(c * 4096) << 8, i.e. 20 fraction bits.
    private static let crToR = 1_470_208  // 1.40200
    private static let crToG = -748_800  // -0.71414
    private static let cbToG = -360_960  // -0.34414
    private static let cbToB = 1_858_048  // 1.77200

    @inline(__always)
    private static func clampToByte(_ x: Int) -> UInt8 { UInt8(clamping: x) }

    /// R, G, B of one pixel from Y, Cb, Cr with stb_image's fixed point: Y with a rounding
    /// half in 20 fraction bits; the Cb term of green drops its low 16 bits.
    @inline(__always)
    static func yCbCrToRGB(_ y: UInt8, _ cb: UInt8, _ cr: UInt8) -> (UInt8, UInt8, UInt8) {
        let yFixed = Int(y) << 20 + (1 << 19)
        let crCentered = Int(cr) - 128
        let cbCentered = Int(cb) - 128
        let r = (yFixed + crCentered * crToR) >> 20
        let g = (yFixed + crCentered * crToG + ((cbCentered * cbToG) & ~0xFFFF)) >> 20
        let b = (yFixed + cbCentered * cbToB) >> 20
        return (clampToByte(r), clampToByte(g), clampToByte(b))
    }

    /// stb_image's rounded x * y / 255.
    @inline(__always)
    static func multiply(_ x: UInt8, _ y: UInt8) -> UInt8 {
        let t = Int(x) * Int(y) + 128
        return UInt8((t + (t >> 8)) >> 8)
    }

    private static func convertRow(
        _ model: JPEGColorModel, lines: [UnsafePointer<UInt8>], count: Int, into out: UnsafeMutablePointer<UInt8>
    ) {
        switch model {
        case .gray:
            let g = lines[0]
            for i in 0..<count {
                out[3 * i] = g[i]
                out[3 * i + 1] = g[i]
                out[3 * i + 2] = g[i]
            }
        case .rgb:
            let (r, g, b) = (lines[0], lines[1], lines[2])
            for i in 0..<count {
                out[3 * i] = r[i]
                out[3 * i + 1] = g[i]
                out[3 * i + 2] = b[i]
            }
        case .yCbCr, .yCbCrIgnoringFourth:
            let (y, cb, cr) = (lines[0], lines[1], lines[2])
            for i in 0..<count {
                let (r, g, b) = yCbCrToRGB(y[i], cb[i], cr[i])
                out[3 * i] = r
                out[3 * i + 1] = g
                out[3 * i + 2] = b
            }
        case .cmyk:
            let (c, m, y, k) = (lines[0], lines[1], lines[2], lines[3])
            for i in 0..<count {
                out[3 * i] = multiply(c[i], k[i])
                out[3 * i + 1] = multiply(m[i], k[i])
                out[3 * i + 2] = multiply(y[i], k[i])
            }
        case .yccK:
            let (y, cb, cr, k) = (lines[0], lines[1], lines[2], lines[3])
            for i in 0..<count {
                let (r, g, b) = yCbCrToRGB(y[i], cb[i], cr[i])
                out[3 * i] = multiply(255 - r, k[i])
                out[3 * i + 1] = multiply(255 - g, k[i])
                out[3 * i + 2] = multiply(255 - b, k[i])
            }
        }
    }
}
