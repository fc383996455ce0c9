/// Pillow's bilinear resize (`Image.resize(size, Image.BILINEAR)`, libImaging/Resample.c),
/// as llama.cpp reimplements it for LFM2-VL: same bytes as Pillow.
///
/// Separable: rows are resampled horizontally, then columns vertically (each pass only when
/// that side changes). Each output sample is a weighted sum of the input samples under a
/// triangle filter centred on the output pixel's centre in input coordinates; when shrinking,
/// the triangle widens by the scale factor so every input pixel contributes (antialiasing).
/// Weights are normalized in double precision, then rounded to 22-bit fixed point, and sums are
/// accumulated in 32-bit integers with a rounding half, shifted back and clamped to 0...255.
enum PillowBilinear {
    /// The largest side llama.cpp resizes to; larger targets are an error there.
    static let maxSide = 65536

    private static let precisionBits = 32 - 8 - 2

    /// For each output position: the first input position used, and the fixed-point weights
    /// of the inputs from there on.
    struct Coefficients {
        var firstInput: [Int]
        var weights: [[Int32]]
    }

    static func coefficients(inputSize: Int, outputSize: Int) -> Coefficients {
        let scale = Double(inputSize) / Double(outputSize)
        let filterScale = max(scale, 1.0)
        let support = 1.0 * filterScale  // the triangle's half-width, widened when shrinking
        var firstInput = [Int](repeating: 0, count: outputSize)
        var weights = [[Int32]](repeating: [], count: outputSize)
        let fixedOne = Double(1 << precisionBits)
        // Distances are scaled by multiplying with the reciprocal, as Pillow does (dividing
        // can differ in the last bit).
        let inverseFilterScale = 1.0 / filterScale
        for output in 0..<outputSize {
            let center = (Double(output) + 0.5) * scale
            // C's int conversion: truncation toward zero.
            let first = max(0, Int(center - support + 0.5))
            let end = min(inputSize, Int(center + support + 0.5))
            var raw: [Double] = []
            var total = 0.0
            for input in first..<max(first, end) {
                let distance = abs((Double(input) - center + 0.5) * inverseFilterScale)
                let weight = distance < 1.0 ? 1.0 - distance : 0.0
                raw.append(weight)
                total += weight
            }
            firstInput[output] = first
            weights[output] = raw.map { w in
                let normalized = total != 0 ? w / total : w
                // Pillow rounds half away from zero by adding +-0.5 and truncating.
                return Int32(normalized * fixedOne + (normalized < 0 ? -0.5 : 0.5))
            }
        }
        return Coefficients(firstInput: firstInput, weights: weights)
    }

    /// `image` resized to `width` x `height` (each 1...65536).
    static func resize(_ image: RGBImage, width: Int, height: Int) -> RGBImage {
        precondition(width > 0 && height > 0 && width <= maxSide && height <= maxSide, "resize target \(width)x\(height)")
        var rgb = image.rgb
        var currentWidth = image.width
        if width != image.width {
            rgb = resampleRows(rgb, width: image.width, height: image.height, to: width)
            currentWidth = width
        }
        if height != image.height {
            rgb = resampleColumns(rgb, width: currentWidth, height: image.height, to: height)
        }
        return RGBImage(width: width, height: height, rgb: rgb)
    }

    @inline(__always)
    private static func clampedByte(_ accumulator: Int32) -> UInt8 { UInt8(clamping: accumulator >> Int32(precisionBits)) }

    private static func resampleRows(_ input: [UInt8], width: Int, height: Int, to outputWidth: Int) -> [UInt8] {
        let c = coefficients(inputSize: width, outputSize: outputWidth)
        var output = [UInt8](repeating: 0, count: outputWidth * height * 3)
        let half: Int32 = 1 << Int32(precisionBits - 1)
        input.withUnsafeBufferPointer { source in
            output.withUnsafeMutableBufferPointer { out in
                for y in 0..<height {
                    let row = y * width * 3
                    for x in 0..<outputWidth {
                        var r = half, g = half, b = half
                        var p = row + c.firstInput[x] * 3
                        for weight in c.weights[x] {
                            r &+= Int32(source[p]) &* weight
                            g &+= Int32(source[p + 1]) &* weight
                            b &+= Int32(source[p + 2]) &* weight
                            p += 3
                        }
                        let o = (y * outputWidth + x) * 3
                        out[o] = clampedByte(r)
                        out[o + 1] = clampedByte(g)
                        out[o + 2] = clampedByte(b)
                    }
                }
            }
        }
        return output
    }

    private static func resampleColumns(_ input: [UInt8], width: Int, height: Int, to outputHeight: Int) -> [UInt8] {
        let c = coefficients(inputSize: height, outputSize: outputHeight)
        let rowLength = width * 3
        var output = [UInt8](repeating: 0, count: rowLength * outputHeight)
        var accumulator = [Int32](repeating: 0, count: rowLength)
        let half: Int32 = 1 << Int32(precisionBits - 1)
        input.withUnsafeBufferPointer { source in
            output.withUnsafeMutableBufferPointer { out in
                accumulator.withUnsafeMutableBufferPointer { sums in
                    for y in 0..<outputHeight {
                        sums.update(repeating: half)
                        var sourceRow = c.firstInput[y] * rowLength
                        for weight in c.weights[y] {
                            for i in 0..<rowLength { sums[i] &+= Int32(source[sourceRow + i]) &* weight }
                            sourceRow += rowLength
                        }
                        let o = y * rowLength
                        for i in 0..<rowLength { out[o + i] = clampedByte(sums[i]) }
                    }
                }
            }
        }
        return output
    }
}
