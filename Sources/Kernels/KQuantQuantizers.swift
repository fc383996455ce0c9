// Quantizers for the K-quants (Q4_K, Q5_K, Q6_K), written from the format description and
// from the behaviour of ggml's reference quantizers (`quantize_row_q4_K_ref`,
// `quantize_row_q5_K_ref`, `quantize_row_q6_K_ref` in ggml-quants.c), so that the bytes come
// out identical to what llama-quantize writes without an importance matrix.
//
// A K-quant super-block has two levels of scales: every sub-block gets its own (scale, min)
// or scale, found by a small search that minimizes a weighted squared error, and those
// sub-block scales are then themselves quantized (6 bits for Q4_K/Q5_K, int8 for Q6_K)
// against one fp16 super-block scale. The values are finally re-quantized against the
// rounded scales, so that the levels fit the scales the file actually stores.
//
// Bit-identity with ggml needs the same float operations in the same order: every sum is
// accumulated left to right, products are not fused with additions (Swift does not
// contract `a * b + c` into an FMA; ggml-base is compiled without FMA), and rounding to an
// integer goes through `nearestInt`, ggml's magic-number rounding (round half to even).

/// Rounds `x` to the nearest integer, ties to even, the way ggml's `nearest_int` does:
/// adding 1.5 * 2^23 leaves the rounded integer in the low mantissa bits. Exact for
/// |x| < 2^22; outside that range (or for NaN) it returns the same garbage ggml returns,
/// which the callers clamp.
@inline(__always)
func nearestInt(_ x: Float) -> Int32 {
    let shifted = x + 12_582_912
    return Int32(bitPattern: shifted.bitPattern & 0x007F_FFFF) - 0x0040_0000
}

/// The sub-block search shared by Q4_K and Q5_K (ggml's `make_qkx2_quants`): finds a scale
/// and a non-negative min (returned as `-min`, the amount subtracted) for `n` values so
/// that `scale * L + min` approximates `x` with levels `L` in `0...maxLevel`, minimizing
/// sum(weights * error^2). It starts from the range [min(x, 0), max(x)] mapped onto the
/// levels, then tries `steps + 1` other level spacings (`maxLevel + rmin + rdelta * k`
/// levels across the range), each followed by a weighted least-squares fit of scale and
/// min to the levels it gives, and keeps the best.
func searchScaleAndMin(
    _ x: UnsafePointer<Float>, count n: Int, maxLevel: Int32, weights: UnsafePointer<Float>,
    levels: UnsafeMutablePointer<UInt8>, scratch: UnsafeMutablePointer<UInt8>,
    rmin: Float, rdelta: Float, steps: Int
) -> (scale: Float, negativeMin: Float) {
    var lo = x[0], hi = x[0]
    var sumW = weights[0]
    var sumX = sumW * x[0]
    for i in 1..<n {
        if x[i] < lo { lo = x[i] }
        if x[i] > hi { hi = x[i] }
        let w = weights[i]
        sumW += w
        sumX += w * x[i]
    }
    if lo > 0 { lo = 0 }
    if hi == lo {
        for i in 0..<n { levels[i] = 0 }
        return (0, -lo)
    }
    let top = Float(maxLevel)
    var inverse = top / (hi - lo)
    var scale = 1 / inverse
    var bestError: Float = 0
    for i in 0..<n {
        let l = max(0, min(maxLevel, nearestInt(inverse * (x[i] - lo))))
        levels[i] = UInt8(l)
        let diff = scale * Float(l) + lo - x[i]
        bestError += weights[i] * (diff * diff)
    }
    if steps < 1 { return (scale, -lo) }
    for step in 0...steps {
        inverse = (rmin + rdelta * Float(step) + top) / (hi - lo)
        var sumL: Float = 0, sumL2: Float = 0, sumXL: Float = 0
        for i in 0..<n {
            let l = max(0, min(maxLevel, nearestInt(inverse * (x[i] - lo))))
            scratch[i] = UInt8(l)
            let w = weights[i], fl = Float(l)
            sumL += w * fl
            sumL2 += w * fl * fl
            sumXL += w * fl * x[i]
        }
        // Weighted least squares for x ≈ scale * l + min over the fixed levels.
        let det = sumW * sumL2 - sumL * sumL
        guard det > 0 else { continue }
        var fitScale = (sumW * sumXL - sumX * sumL) / det
        var fitMin = (sumL2 * sumX - sumL * sumXL) / det
        if fitMin > 0 {
            // The format subtracts the min: a positive one is not allowed.
            fitMin = 0
            fitScale = sumXL / sumL2
        }
        var error: Float = 0
        for i in 0..<n {
            let diff = fitScale * Float(scratch[i]) + fitMin - x[i]
            error += weights[i] * (diff * diff)
        }
        if error < bestError {
            for i in 0..<n { levels[i] = scratch[i] }
            bestError = error
            scale = fitScale
            lo = fitMin
        }
    }
    return (scale, -lo)
}

/// The Q6_K sub-block search (ggml's `make_qx_quants` with `nmax` 32 and weights x²):
/// a signed scale for `n` values with levels `L - 32`, `L` in `0...63`. The value of
/// largest magnitude maps onto level -32 exactly; then 18 nearby spacings
/// (`32 ± 0.1 k` levels) are tried, each with the least-squares scale for its levels,
/// and the one with the smallest weighted error wins. Returns the scale (0 for an all-zero
/// group).
func searchSymmetricScale(_ x: UnsafePointer<Float>, count n: Int, levels: UnsafeMutablePointer<UInt8>) -> Float {
    let half: Int32 = 32
    var peak: Float = 0, peakMagnitude: Float = 0
    for i in 0..<n {
        let a = abs(x[i])
        if a > peakMagnitude {
            peakMagnitude = a
            peak = x[i]
        }
    }
    if peakMagnitude < 1e-15 {
        for i in 0..<n { levels[i] = 0 }
        return 0
    }
    @inline(__always) func level(_ inverse: Float, _ v: Float) -> Int32 {
        max(-half, min(half - 1, nearestInt(inverse * v)))
    }
    var inverse = -Float(half) / peak
    var sumLX: Float = 0, sumL2: Float = 0
    for i in 0..<n {
        let l = level(inverse, x[i])
        levels[i] = UInt8(l + half)
        let w = x[i] * x[i], fl = Float(l)
        sumLX += w * x[i] * fl
        sumL2 += w * fl * fl
    }
    var scale: Float = sumL2 != 0 ? sumLX / sumL2 : 0
    var best = scale * sumLX
    for step in -9...9 where step != 0 {
        inverse = -(Float(half) + 0.1 * Float(step)) / peak
        sumLX = 0
        sumL2 = 0
        for i in 0..<n {
            let l = level(inverse, x[i])
            let w = x[i] * x[i], fl = Float(l)
            sumLX += w * x[i] * fl
            sumL2 += w * fl * fl
        }
        // Error of the least-squares fit is sum(w x²) - sumLX² / sumL2: smaller when
        // sumLX² / sumL2 is larger.
        if sumL2 > 0 && sumLX * sumLX > best * sumL2 {
            for i in 0..<n { levels[i] = UInt8(level(inverse, x[i]) + half) }
            scale = sumLX / sumL2
            best = scale * sumLX
        }
    }
    return scale
}

/// Quantizes the 8 sub-block scales and mins of a Q4_K/Q5_K super-block (each against the
/// largest, on 6 bits), stores them and the fp16 `d`/`dmin` in the block at `b`, then
/// re-derives each value's level from the rounded scales (levels of sub-blocks whose
/// rounded scale is 0 keep the search's levels).
private func storeScalesAndRequantize(
    _ x: UnsafePointer<Float>, _ b: UnsafeMutableRawPointer, scales: [Float], mins: [Float],
    maxLevel: Int32, levels: UnsafeMutablePointer<UInt8>
) {
    var maxScale: Float = 0, maxMin: Float = 0
    for j in 0..<8 {
        if scales[j] > maxScale { maxScale = scales[j] }
        if mins[j] > maxMin { maxMin = mins[j] }
    }
    let inverseScale: Float = maxScale > 0 ? 63 / maxScale : 0
    let inverseMin: Float = maxMin > 0 ? 63 / maxMin : 0
    let packed = b + 4
    for k in 0..<12 { packed.storeBytes(of: 0, toByteOffset: k, as: UInt8.self) }
    for j in 0..<8 {
        let ls = min(63, UInt8(truncatingIfNeeded: nearestInt(inverseScale * scales[j])))
        let lm = min(63, UInt8(truncatingIfNeeded: nearestInt(inverseMin * mins[j])))
        // The `scaleMinK4` layout: sub-blocks 0-3 in bytes 0-7 (6 bits each), sub-blocks
        // 4-7 split into a low nibble in bytes 8-11 and two high bits on top of bytes 0-7.
        if j < 4 {
            packed.storeBytes(of: ls, toByteOffset: j, as: UInt8.self)
            packed.storeBytes(of: lm, toByteOffset: j + 4, as: UInt8.self)
        } else {
            packed.storeBytes(of: (ls & 0x0F) | (lm & 0x0F) << 4, toByteOffset: j + 4, as: UInt8.self)
            packed.storeBytes(of: byte(packed, j - 4) | (ls >> 4) << 6, toByteOffset: j - 4, as: UInt8.self)
            packed.storeBytes(of: byte(packed, j) | (lm >> 4) << 6, toByteOffset: j, as: UInt8.self)
        }
    }
    storeHalf(b, 0, maxScale / 63)
    storeHalf(b, 2, maxMin / 63)
    let d = loadHalf(UnsafeRawPointer(b), 0), dmin = loadHalf(UnsafeRawPointer(b), 2)
    for j in 0..<8 {
        let (sc, m) = scaleMinK4(j, UnsafeRawPointer(packed))
        let scale = d * Float(sc)
        if scale == 0 { continue }
        let offset = dmin * Float(m)
        for l in 0..<32 {
            levels[32 * j + l] = UInt8(max(0, min(maxLevel, nearestInt((x[32 * j + l] + offset) / scale))))
        }
    }
}

/// One Q4_K/Q5_K super-block's sub-block search: weights `sqrt(mean(x²)) + |x|` per value,
/// as ggml's reference quantizers use without an importance matrix.
private func searchSubBlocks(
    _ x: UnsafePointer<Float>, maxLevel: Int32, rmin: Float, rdelta: Float, steps: Int,
    levels: UnsafeMutablePointer<UInt8>
) -> (scales: [Float], mins: [Float]) {
    var scales = [Float](repeating: 0, count: 8), mins = [Float](repeating: 0, count: 8)
    withUnsafeTemporaryAllocation(of: Float.self, capacity: 32) { weights in
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { scratch in
            for j in 0..<8 {
                let v = x + 32 * j
                var sumX2: Float = 0
                for l in 0..<32 { sumX2 += v[l] * v[l] }
                let rms = (sumX2 / 32).squareRoot()
                for l in 0..<32 { weights[l] = rms + abs(v[l]) }
                (scales[j], mins[j]) = searchScaleAndMin(
                    v, count: 32, maxLevel: maxLevel, weights: weights.baseAddress!, levels: levels + 32 * j,
                    scratch: scratch.baseAddress!, rmin: rmin, rdelta: rdelta, steps: steps)
            }
        }
    }
    return (scales, mins)
}

/// Quantizes `nb` Q4_K or Q5_K super-blocks of `typeSize` bytes: the sub-block search,
/// the 6-bit scales and mins, then `pack` stores the 256 levels in the block's own layout.
private func quantizeWithMins(
    _ x: UnsafePointer<Float>, _ y: UnsafeMutableRawPointer, nb: Int, typeSize: Int, maxLevel: Int32, rmin: Float,
    steps: Int, pack: (UnsafePointer<UInt8>, UnsafeMutableRawPointer) -> Void
) {
    withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 256) { buffer in
        let levels = buffer.baseAddress!
        for i in 0..<nb {
            let src = x + 256 * i, b = y + typeSize * i
            let (scales, mins) = searchSubBlocks(src, maxLevel: maxLevel, rmin: rmin, rdelta: 0.1, steps: steps, levels: levels)
            storeScalesAndRequantize(src, b, scales: scales, mins: mins, maxLevel: maxLevel, levels: levels)
            pack(levels, b)
        }
    }
}

extension Q4_K: QuantizableBlockFormat {
    /// ggml's `quantize_row_q4_K_ref`, bit for bit: per sub-block of 32 a (scale, min)
    /// search over 4-bit levels (21 trial spacings), scales and mins quantized to 6 bits
    /// against fp16 `d` and `dmin`, then the levels recomputed from the stored scales.
    static func quantizeReference(_ x: UnsafePointer<Float>, _ y: UnsafeMutableRawPointer, nb: Int) {
        quantizeWithMins(x, y, nb: nb, typeSize: 144, maxLevel: 15, rmin: -1, steps: 20) { levels, b in
            // qs[32k + l]: sub-block 2k in the low nibble, 2k + 1 in the high one.
            for k in 0..<4 {
                for l in 0..<32 {
                    b.storeBytes(of: levels[64 * k + l] | levels[64 * k + 32 + l] << 4, toByteOffset: 16 + 32 * k + l, as: UInt8.self)
                }
            }
        }
    }
}

extension Q5_K: QuantizableBlockFormat {
    /// ggml's `quantize_row_q5_K_ref`, bit for bit: as Q4_K with 5-bit levels (16 trial
    /// spacings); the fifth bits go to `qh`.
    static func quantizeReference(_ x: UnsafePointer<Float>, _ y: UnsafeMutableRawPointer, nb: Int) {
        quantizeWithMins(x, y, nb: nb, typeSize: 176, maxLevel: 31, rmin: -0.5, steps: 15) { levels, b in
            // qs as Q4_K's; bit j of qh[l] is the fifth bit of value l of sub-block j.
            for l in 0..<32 {
                var high: UInt8 = 0
                for j in 0..<8 where levels[32 * j + l] > 15 { high |= 1 << UInt8(j) }
                b.storeBytes(of: high, toByteOffset: 16 + l, as: UInt8.self)
            }
            for k in 0..<4 {
                for l in 0..<32 {
                    let q = (levels[64 * k + l] & 0x0F) | (levels[64 * k + 32 + l] & 0x0F) << 4
                    b.storeBytes(of: q, toByteOffset: 48 + 32 * k + l, as: UInt8.self)
                }
            }
        }
    }
}

extension Q6_K: QuantizableBlockFormat {
    /// ggml's `quantize_row_q6_K_ref`, bit for bit: a signed scale per sub-block of 16
    /// (`searchSymmetricScale`), the 16 scales quantized to int8 against fp16 `d` (the
    /// largest in magnitude becomes -128), then the levels recomputed from the stored scales.
    static func quantizeReference(_ x: UnsafePointer<Float>, _ y: UnsafeMutableRawPointer, nb: Int) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 256) { buffer in
            let levels = buffer.baseAddress!
            var scales = [Float](repeating: 0, count: 16)
            for i in 0..<nb {
                let src = x + 256 * i, b = y + 210 * i
                var maxScale: Float = 0, maxMagnitude: Float = 0
                for g in 0..<16 {
                    scales[g] = searchSymmetricScale(src + 16 * g, count: 16, levels: levels + 16 * g)
                    if abs(scales[g]) > maxMagnitude {
                        maxMagnitude = abs(scales[g])
                        maxScale = scales[g]
                    }
                }
                if maxMagnitude < 1e-15 {
                    b.initializeMemory(as: UInt8.self, repeating: 0, count: 210)
                    continue
                }
                let inverse = -128 / maxScale
                storeHalf(b, 208, 1 / inverse)
                for g in 0..<16 {
                    let sc = Int8(truncatingIfNeeded: min(127, nearestInt(inverse * scales[g])))
                    b.storeBytes(of: sc, toByteOffset: 192 + g, as: Int8.self)
                }
                let d = loadHalf(UnsafeRawPointer(b), 208)
                for g in 0..<16 {
                    let scale = d * Float(Int8(bitPattern: byte(UnsafeRawPointer(b), 192 + g)))
                    if scale == 0 { continue }
                    for l in 0..<16 {
                        levels[16 * g + l] = UInt8(max(-32, min(31, nearestInt(src[16 * g + l] / scale))) + 32)
                    }
                }
                // Per half n of 128 values: ql[64n + l] holds values l (low nibble) and
                // l + 64 (high); ql[64n + 32 + l] values l + 32 and l + 96; qh[32n + l]
                // the top two bits of values l, l + 32, l + 64, l + 96.
                for n in 0..<2 {
                    let v = levels + 128 * n
                    for l in 0..<32 {
                        b.storeBytes(of: (v[l] & 0x0F) | (v[l + 64] & 0x0F) << 4, toByteOffset: 64 * n + l, as: UInt8.self)
                        b.storeBytes(of: (v[l + 32] & 0x0F) | (v[l + 96] & 0x0F) << 4, toByteOffset: 64 * n + 32 + l, as: UInt8.self)
                        let h = v[l] >> 4 | (v[l + 32] >> 4) << 2 | (v[l + 64] >> 4) << 4 | (v[l + 96] >> 4) << 6
                        b.storeBytes(of: h, toByteOffset: 128 + 32 * n + l, as: UInt8.self)
                    }
                }
            }
        }
    }
}
