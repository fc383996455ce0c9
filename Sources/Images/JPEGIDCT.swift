/// The inverse DCT of stb_image (derived from IJG's `jidctint.c`, "ISLOW"): a separable
/// integer transform with 12-bit fixed-point constants, columns first (keeping 2 extra bits),
/// then rows, plus the +128 level shift and clamping to 0...255.
///
/// On x86-64 and ARM64 stb_image runs its SIMD version of this transform, and that is what
/// llama.cpp's images go through. It equals the scalar one on every real image, but holds
/// the intermediate values in 16-bit lanes: the sums s0 + s4, s0 - s4, s1 + s7 and s3 + s5
/// wrap around 16 bits, and each pass's results saturate to 16 bits. This implementation
/// follows those lane semantics, so that even extreme coefficients give stb_image's bytes.
enum JPEGIDCT {
    // stb_image's constants: trunc(c * 4096 + 0.5) of the IJG rotation constants (computed
    // in float, truncated toward zero, hence -7567 for -1.847759065 * 4096 = -7568.4).
    private static let c0541: Int32 = 2217  // 0.5411961
    private static let cm1847: Int32 = -7567  // -1.847759065
    private static let c0765: Int32 = 3135  // 0.765366865
    private static let c1175: Int32 = 4816  // 1.175875602
    private static let c0298: Int32 = 1223  // 0.298631336
    private static let c2053: Int32 = 8410  // 2.053119869
    private static let c3072: Int32 = 12586  // 3.072711026
    private static let c1501: Int32 = 6149  // 1.501321110
    private static let cm0899: Int32 = -3685  // -0.899976223
    private static let cm2562: Int32 = -10497  // -2.562915447
    private static let cm1961: Int32 = -8034  // -1.961570560
    private static let cm0390: Int32 = -1597  // -0.390180644

    /// Column pass: rounding bias 0.5 * 2^10, then drop 10 of the 12 fraction bits.
    private static let columnBias: Int32 = 512
    /// Row pass: 0.5 * 2^17 for rounding, plus 128 << 17 for the level shift; drop 17 bits
    /// (12 fraction bits, the 2 kept by the column pass, and 3 for the two sqrt(8) scalings).
    private static let rowBias: Int32 = 65536 + (128 << 17)

    @inline(__always)
    private static func saturate16(_ x: Int32) -> Int16 { Int16(clamping: x) }

    @inline(__always)
    private static func wrap16(_ x: Int32) -> Int16 { Int16(truncatingIfNeeded: x) }

    /// The one-dimensional transform of `s` (8 values at `stride` apart in `input`), written
    /// to `out` (8 values at `outStride` apart), with rounding `bias` and right `shift`.
    @inline(__always)
    private static func transform1D(
        _ input: UnsafePointer<Int16>, stride: Int, _ out: UnsafeMutablePointer<Int16>, outStride: Int, bias: Int32, shift: Int32
    ) {
        let s0 = Int32(input[0]), s1 = Int32(input[stride]), s2 = Int32(input[2 * stride]), s3 = Int32(input[3 * stride])
        let s4 = Int32(input[4 * stride]), s5 = Int32(input[5 * stride]), s6 = Int32(input[6 * stride]), s7 = Int32(input[7 * stride])
        // Even part: the rotation of s2, s6 and the butterfly of s0, s4.
        let t2 = s2 &* c0541 &+ s6 &* (c0541 &+ cm1847)
        let t3 = s2 &* (c0541 &+ c0765) &+ s6 &* c0541
        let t0 = Int32(wrap16(s0 &+ s4)) << 12
        let t1 = Int32(wrap16(s0 &- s4)) << 12
        let x0 = t0 &+ t3, x3 = t0 &- t3, x1 = t1 &+ t2, x2 = t1 &- t2
        // Odd part.
        let y0 = s7 &* (cm1961 &+ c0298) &+ s3 &* cm1961
        let y2 = s7 &* cm1961 &+ s3 &* (cm1961 &+ c3072)
        let y1 = s5 &* (cm0390 &+ c2053) &+ s1 &* cm0390
        let y3 = s5 &* cm0390 &+ s1 &* (cm0390 &+ c1501)
        let sum17 = Int32(wrap16(s1 &+ s7)), sum35 = Int32(wrap16(s3 &+ s5))
        let y4 = sum17 &* (c1175 &+ cm0899) &+ sum35 &* c1175
        let y5 = sum17 &* c1175 &+ sum35 &* (c1175 &+ cm2562)
        let x4 = y0 &+ y4, x5 = y1 &+ y5, x6 = y2 &+ y5, x7 = y3 &+ y4
        // Final butterflies.
        out[0] = saturate16((x0 &+ bias &+ x7) >> shift)
        out[7 * outStride] = saturate16((x0 &+ bias &- x7) >> shift)
        out[outStride] = saturate16((x1 &+ bias &+ x6) >> shift)
        out[6 * outStride] = saturate16((x1 &+ bias &- x6) >> shift)
        out[2 * outStride] = saturate16((x2 &+ bias &+ x5) >> shift)
        out[5 * outStride] = saturate16((x2 &+ bias &- x5) >> shift)
        out[3 * outStride] = saturate16((x3 &+ bias &+ x4) >> shift)
        out[4 * outStride] = saturate16((x3 &+ bias &- x4) >> shift)
    }

    /// Transforms one block of 64 dequantized coefficients (natural order) into 8x8 samples
    /// at `output`, rows `stride` bytes apart. `workspace` (72 values) holds the column pass's
    /// results and one row of the row pass.
    static func transform(
        _ coefficients: UnsafePointer<Int16>, into output: UnsafeMutablePointer<UInt8>, stride: Int,
        workspace: UnsafeMutablePointer<Int16>
    ) {
        var onlyDC = true
        for i in 1..<64 where coefficients[i] != 0 {
            onlyDC = false
            break
        }
        if onlyDC {
            // Both passes reduce to a constant: the same arithmetic with every AC term zero.
            let column = saturate16(((Int32(coefficients[0]) << 12) &+ columnBias) >> 10)
            let sample = UInt8(clamping: saturate16(((Int32(column) << 12) &+ rowBias) >> 17))
            for row in 0..<8 { (output + row * stride).update(repeating: sample, count: 8) }
            return
        }
        for column in 0..<8 {
            transform1D(coefficients + column, stride: 8, workspace + column, outStride: 8, bias: columnBias, shift: 10)
        }
        let rowResult = workspace + 64
        for row in 0..<8 {
            transform1D(workspace + 8 * row, stride: 1, rowResult, outStride: 1, bias: rowBias, shift: 17)
            let destination = output + row * stride
            for x in 0..<8 { destination[x] = UInt8(clamping: rowResult[x]) }
        }
    }
}
