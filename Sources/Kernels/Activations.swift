// Activations prepared for the integer dot products.
//
// ggml quantizes activations to Q8_0 (fp16 scale per 32 values) for the 32-value formats
// and to Q8_K (fp32 scale per 256 values, plus sums of each 16) for the K-quants. leap-ref
// uses one format for every weight type instead, so that q/k/v (which a Q4_K_M file may
// store as Q4_K, Q4_K and Q6_K) share one quantization of their input:
//
//   per block of 32 values:  qs[32]  Int8     round-to-nearest-even(x / d), |qs| <= 127
//                            d       Float    max|x| / 127 (kept in fp32, not fp16)
//                            s       Float    d * sum(qs)        (for formats with a min)
//   per group of 16 values:  bsums   Int16    sum(qs) of the 16  (for Q6_K's -32 offset)
//
// The fp32 scale per 32 values is more accurate than both Q8_0 (fp16 scale) and Q8_K (one
// scale per 256), so results differ from llama.cpp's by a little, in our favour.
// A float copy of the input is kept too, for the F32/F16/BF16 weight paths.

#if LEAP_X86_AVX2
import _Builtin_intrinsics.intel
#endif

/// A vector of activations, kept as floats and quantized to 8 bits in blocks of 32, ready
/// to be multiplied with weight rows of any supported type.
///
/// Allocate one per activation buffer of the model (it allocates nothing afterwards), call
/// ``quantize(_:count:)`` once per token, then pass it to any number of
/// ``WeightMatrix/matvec(_:into:pool:)`` calls. Not thread-safe while quantizing; reading
/// it from many threads at once (as matvec does) is fine.
public final class QuantizedActivations {
    /// Number of values in the blocks: activations are quantized in blocks of 32.
    public static let blockSize = 32

    /// The largest `count` this buffer can hold.
    public let capacity: Int
    /// Number of values currently held.
    public private(set) var count: Int = 0
    /// Number of quantized blocks of 32 held (0 when `count` is not a multiple of 32, in
    /// which case only float weight types can use these activations).
    public private(set) var blockCount: Int = 0
    /// Whether the float copy of the values is current (false after a batch
    /// ``quantizeRows(_:rows:cols:keepingFloats:pool:)`` of several rows that keeps only
    /// the blocks).
    public private(set) var holdsFloats = true

    let x: UnsafeMutablePointer<Float>
    let qs: UnsafeMutablePointer<Int8>
    let d: UnsafeMutablePointer<Float>
    let s: UnsafeMutablePointer<Float>
    let bsums: UnsafeMutablePointer<Int16>
    /// `d` and `s` with each value repeated 4 times, so that the kernels working on two
    /// blocks at once (lanes 0-3 for one, 4-7 for the next) load both scales in one go.
    let d4: UnsafeMutablePointer<Float>
    let s4: UnsafeMutablePointer<Float>

    /// Creates a buffer for up to `capacity` activations.
    public init(capacity: Int) {
        precondition(capacity >= 0)
        self.capacity = capacity
        let blocks = (capacity + 31) / 32
        // Padded to whole blocks, aligned for vector loads.
        x = UnsafeMutableRawPointer.allocate(byteCount: max(blocks * 32, 1) * 4, alignment: 64)
            .bindMemory(to: Float.self, capacity: max(blocks * 32, 1))
        qs = UnsafeMutableRawPointer.allocate(byteCount: max(blocks * 32, 1), alignment: 64)
            .bindMemory(to: Int8.self, capacity: max(blocks * 32, 1))
        d = UnsafeMutableRawPointer.allocate(byteCount: max(blocks, 1) * 4 + 32, alignment: 64)
            .bindMemory(to: Float.self, capacity: max(blocks, 1) + 8)
        s = UnsafeMutableRawPointer.allocate(byteCount: max(blocks, 1) * 4 + 32, alignment: 64)
            .bindMemory(to: Float.self, capacity: max(blocks, 1) + 8)
        bsums = UnsafeMutableRawPointer.allocate(byteCount: max(blocks, 1) * 4 + 32, alignment: 64)
            .bindMemory(to: Int16.self, capacity: max(blocks, 1) * 2 + 16)
        d4 = UnsafeMutableRawPointer.allocate(byteCount: max(blocks, 1) * 16 + 32, alignment: 64)
            .bindMemory(to: Float.self, capacity: max(blocks, 1) * 4 + 8)
        s4 = UnsafeMutableRawPointer.allocate(byteCount: max(blocks, 1) * 16 + 32, alignment: 64)
            .bindMemory(to: Float.self, capacity: max(blocks, 1) * 4 + 8)
    }

    deinit {
        x.deallocate()
        qs.deallocate()
        d.deallocate()
        s.deallocate()
        bsums.deallocate()
        d4.deallocate()
        s4.deallocate()
    }

    /// Copies and quantizes `count` floats (at most `capacity`). Uses the SIMD path when
    /// the build has one; the result is bit-identical to ``quantizeReference(_:count:)``.
    public func quantize(_ src: UnsafePointer<Float>, count: Int) {
        prepare(src, count: count)
        #if LEAP_X86_AVX2
        for i in 0..<blockCount { Self.quantizeBlockAVX2(src + 32 * i, i, self) }
        #else
        for i in 0..<blockCount { Self.quantizeBlockReference(src + 32 * i, i, self) }
        #endif
        expandScales()
    }

    /// Convenience: quantizes the contents of an array.
    public func quantize(_ src: [Float]) {
        src.withUnsafeBufferPointer { quantize($0.baseAddress!, count: $0.count) }
    }

    /// The scalar reference quantizer (never optimized; the fast path must match it bit
    /// for bit).
    public func quantizeReference(_ src: UnsafePointer<Float>, count: Int) {
        prepare(src, count: count)
        for i in 0..<blockCount { Self.quantizeBlockReference(src + 32 * i, i, self) }
        expandScales()
    }

    private func expandScales() {
        for i in 0..<blockCount {
            for k in 0..<4 {
                d4[4 * i + k] = d[i]
                s4[4 * i + k] = s[i]
            }
        }
    }

    private func prepare(_ src: UnsafePointer<Float>, count: Int) {
        precondition(count >= 0 && count <= capacity, "QuantizedActivations: \(count) values exceed capacity \(capacity)")
        self.count = count
        x.update(from: src, count: count)
        blockCount = count % 32 == 0 ? count / 32 : 0
        holdsFloats = true
    }

    /// Quantizes `rows` rows of `cols` floats (row-major at `src`, `rows * cols` at most
    /// `capacity`): row `t`'s blocks are blocks `t * cols / 32 ..< (t + 1) * cols / 32`,
    /// each quantized exactly as ``quantize(_:count:)`` quantizes it, so that a row's
    /// products do not depend on the other rows. Split over `pool` by rows. The floats are
    /// copied too when `keepingFloats` (or `rows == 1`), for the F32/F16/BF16 weights of
    /// ``WeightMatrix/matvec(_:rows:into:pool:)``; `cols` must be a multiple of 32 unless
    /// they are kept (then, as for ``quantize(_:count:)``, only the floats are held).
    public func quantizeRows(_ src: UnsafePointer<Float>, rows: Int, cols: Int, keepingFloats: Bool = false, pool: ThreadPool? = nil) {
        precondition(rows >= 0 && cols >= 0, "quantizeRows: negative size")
        if rows == 1 {
            quantize(src, count: cols)
            return
        }
        precondition(cols % 32 == 0 || keepingFloats, "quantizeRows: \(cols) columns are not whole blocks of 32")
        let total = rows * cols
        precondition(total <= capacity, "QuantizedActivations: \(total) values exceed capacity \(capacity)")
        count = total
        blockCount = cols % 32 == 0 ? total / 32 : 0
        holdsFloats = keepingFloats
        if keepingFloats { x.update(from: src, count: total) }
        guard blockCount > 0 else { return }
        let nb = cols / 32
        let body: (Range<Int>) -> Void = { range in
            for t in range {
                for i in (t * nb)..<((t + 1) * nb) {
                    #if LEAP_X86_AVX2
                    Self.quantizeBlockAVX2(src + 32 * i, i, self)
                    #else
                    Self.quantizeBlockReference(src + 32 * i, i, self)
                    #endif
                    for k in 0..<4 {
                        self.d4[4 * i + k] = self.d[i]
                        self.s4[4 * i + k] = self.s[i]
                    }
                }
            }
        }
        if let pool, pool.threads > 1, rows >= 8 {
            pool.parallelFor(count: rows, minChunk: 4, body)
        } else {
            body(0..<rows)
        }
    }

    /// Copies rows of `source` (quantized in rows of `cols` values) into this buffer: row
    /// `t` here becomes row `rows[t]` of `source`, bit for bit (its blocks, and its floats
    /// when `source` holds them), exactly as if it had been quantized here. A row may be
    /// taken several times. A mixture-of-experts layer gathers each expert's tokens this
    /// way, so that a token is quantized once for all the experts that read it.
    public func gatherRows(of source: QuantizedActivations, _ rows: UnsafeBufferPointer<Int>, cols: Int) {
        precondition(cols > 0 && source.count % cols == 0, "gatherRows: \(source.count) values are not rows of \(cols)")
        let total = rows.count * cols
        precondition(total <= capacity, "QuantizedActivations: \(total) values exceed capacity \(capacity)")
        precondition(source.blockCount == 0 || cols % 32 == 0, "gatherRows: \(cols) columns are not whole blocks of 32")
        let sourceRows = source.count / cols
        precondition(rows.allSatisfy { $0 >= 0 && $0 < sourceRows }, "gatherRows: a row outside 0..<\(sourceRows)")
        count = total
        blockCount = source.blockCount > 0 ? total / 32 : 0
        holdsFloats = source.holdsFloats
        let nb = cols / 32
        for (t, r) in rows.enumerated() {
            if holdsFloats { (x + t * cols).update(from: source.x + r * cols, count: cols) }
            guard blockCount > 0 else { continue }
            (qs + t * cols).update(from: source.qs + r * cols, count: cols)
            (d + t * nb).update(from: source.d + r * nb, count: nb)
            (s + t * nb).update(from: source.s + r * nb, count: nb)
            (bsums + 2 * t * nb).update(from: source.bsums + 2 * r * nb, count: 2 * nb)
            (d4 + 4 * t * nb).update(from: source.d4 + 4 * r * nb, count: 4 * nb)
            (s4 + 4 * t * nb).update(from: source.s4 + 4 * r * nb, count: 4 * nb)
        }
    }

    static func quantizeBlockReference(_ x: UnsafePointer<Float>, _ i: Int, _ a: QuantizedActivations) {
        var amax: Float = 0
        for j in 0..<32 { amax = max(amax, abs(x[j])) }
        let d = amax / 127
        let id: Float = d != 0 ? 1 / d : 0
        var sum0: Int32 = 0, sum1: Int32 = 0
        for j in 0..<32 {
            let q = Int8((x[j] * id).rounded(.toNearestOrEven))
            a.qs[32 * i + j] = q
            if j < 16 { sum0 += Int32(q) } else { sum1 += Int32(q) }
        }
        a.d[i] = d
        a.s[i] = d * Float(sum0 + sum1)
        a.bsums[2 * i] = Int16(sum0)
        a.bsums[2 * i + 1] = Int16(sum1)
    }

    /// The view the dot kernels read.
    @inline(__always)
    var view: ActivationView { ActivationView(x: x, qs: qs, d: d, s: s, bsums: bsums, d4: d4, s4: s4) }

    #if LEAP_X86_AVX2
    @inline(__always)
    static func quantizeBlockAVX2(_ x: UnsafePointer<Float>, _ i: Int, _ a: QuantizedActivations) {
        let (v0, v1, v2, v3, amax) = loadBlockOf32(x)
        let d = amax / 127
        let id: Float = d != 0 ? 1 / d : 0
        let vid = _mm256_set1_ps(id)
        // cvtps rounds to nearest even (the default MXCSR mode), as the reference does.
        let i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, vid))
        let i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, vid))
        let i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, vid))
        let i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, vid))
        // Pack 32-bit -> 16-bit -> 8-bit (no saturation: |q| <= 127), then undo the
        // per-128-bit-lane interleaving of the packs.
        let p01 = _mm256_packs_epi32(i0, i1)
        let p23 = _mm256_packs_epi32(i2, i3)
        let bytes = _mm256_packs_epi16(p01, p23)
        let ordered = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
        UnsafeMutableRawPointer(a.qs + 32 * i).storeBytes(of: ordered, as: __m256i.self)
        // Sums of each 16: madd with ones on the 16-bit packs (lanes hold i0..i3 mixed, but
        // p01 = {i0 lo, i1 lo, i0 hi, i1 hi} by 128-bit lane, i.e. values 0-3,8-11,4-7,12-15).
        let ones = _mm256_set1_epi16(1)
        let s01 = _mm256_madd_epi16(p01, ones)  // 8 pair sums of values 0..15
        let s23 = _mm256_madd_epi16(p23, ones)  // 8 pair sums of values 16..31
        let sum0 = Int32(truncatingIfNeeded: unsafeBitCast(s01, to: SIMD8<Int32>.self).wrappedSum())
        let sum1 = Int32(truncatingIfNeeded: unsafeBitCast(s23, to: SIMD8<Int32>.self).wrappedSum())
        a.d[i] = d
        a.s[i] = d * Float(sum0 + sum1)
        a.bsums[2 * i] = Int16(truncatingIfNeeded: sum0)
        a.bsums[2 * i + 1] = Int16(truncatingIfNeeded: sum1)
    }
    #endif
}

/// Raw pointers into a ``QuantizedActivations`` for the kernels (no ownership).
@usableFromInline
struct ActivationView {
    let x: UnsafePointer<Float>
    let qs: UnsafePointer<Int8>
    let d: UnsafePointer<Float>
    let s: UnsafePointer<Float>
    let bsums: UnsafePointer<Int16>
    let d4: UnsafePointer<Float>
    let s4: UnsafePointer<Float>

    init(
        x: UnsafeMutablePointer<Float>, qs: UnsafeMutablePointer<Int8>, d: UnsafeMutablePointer<Float>, s: UnsafeMutablePointer<Float>,
        bsums: UnsafeMutablePointer<Int16>, d4: UnsafeMutablePointer<Float>, s4: UnsafeMutablePointer<Float>
    ) {
        self.x = UnsafePointer(x)
        self.qs = UnsafePointer(qs)
        self.d = UnsafePointer(d)
        self.s = UnsafePointer(s)
        self.bsums = UnsafePointer(bsums)
        self.d4 = UnsafePointer(d4)
        self.s4 = UnsafePointer(s4)
    }

    /// The view of row `t` of activations quantized in rows of `cols` values
    /// (``QuantizedActivations/quantizeRows(_:rows:cols:keepingFloats:pool:)``).
    @inline(__always)
    func row(_ t: Int, cols: Int) -> ActivationView {
        let blocks = t * cols / 32
        return ActivationView(
            x: UnsafeMutablePointer(mutating: x + t * cols), qs: UnsafeMutablePointer(mutating: qs + 32 * blocks),
            d: UnsafeMutablePointer(mutating: d + blocks), s: UnsafeMutablePointer(mutating: s + blocks),
            bsums: UnsafeMutablePointer(mutating: bsums + 2 * blocks),
            d4: UnsafeMutablePointer(mutating: d4 + 4 * blocks), s4: UnsafeMutablePointer(mutating: s4 + 4 * blocks))
    }
}
