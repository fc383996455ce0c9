// The element-wise operations of a transformer layer: RMS normalization, rotary position
// embedding, softmax (with a vector `exp`), SiLU and GELU gating, and the vector add, dot and axpy
// that the residual stream and attention use. They are memory-light (a few thousand
// floats per token), so they are written once with Swift's portable SIMD16 and keep no
// architecture-specific path. Their scalar reference is the formula itself:
// ElementwiseTests checks each against it evaluated in Double (and `exp` to 3 ulp).

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Element-wise kernels on float rows.
public enum Elementwise {
    /// RMSNorm: `y[i] = x[i] / sqrt(mean(x²) + eps) * weight[i]`, as ggml's `rms_norm`
    /// followed by a multiplication with the norm weight. `y` may equal `x`.
    @inlinable
    public static func rmsNorm(
        _ x: UnsafePointer<Float>, weight: UnsafePointer<Float>, _ y: UnsafeMutablePointer<Float>,
        count n: Int, eps: Float
    ) {
        var acc = SIMD16<Float>()
        var i = 0
        let xr = UnsafeRawPointer(x)
        while i + 16 <= n {
            let v = xr.loadUnaligned(fromByteOffset: i * 4, as: SIMD16<Float>.self)
            acc += v * v
            i += 16
        }
        // ggml accumulates the sum of squares in double; so does the tail here, and the
        // SIMD partial sums are widened before adding.
        var sum: Double = 0
        for lane in 0..<16 { sum += Double(acc[lane]) }
        while i < n {
            sum += Double(x[i]) * Double(x[i])
            i += 1
        }
        let scale = Float(1.0 / (sum / Double(n) + Double(eps)).squareRoot())
        let wr = UnsafeRawPointer(weight)
        let yr = UnsafeMutableRawPointer(y)
        i = 0
        while i + 16 <= n {
            let v = xr.loadUnaligned(fromByteOffset: i * 4, as: SIMD16<Float>.self)
            let w = wr.loadUnaligned(fromByteOffset: i * 4, as: SIMD16<Float>.self)
            yr.storeBytes(of: v * scale * w, toByteOffset: i * 4, as: SIMD16<Float>.self)
            i += 16
        }
        while i < n {
            y[i] = x[i] * scale * weight[i]
            i += 1
        }
    }

    /// How a rotary embedding pairs the dimensions of a head.
    public enum RopeStyle: Sendable {
        /// Adjacent pairs `(x[2i], x[2i+1])`: ggml's "normal" mode, used by `llama` GGUFs
        /// (whose Q/K weights the converter permuted for it).
        case adjacentPairs
        /// Halves `(x[i], x[i + n/2])`: GPT-NeoX style, used by `lfm2`.
        case neox
    }

    /// Fills `cache` with `(cos θ_i, sin θ_i)` for the `pairs` rotation angles of position
    /// `position`: `θ_i = position · thetaScale^i` with `thetaScale = base^(-2/dims)`.
    /// The angle is formed as ggml forms it (start at the position, multiply by
    /// `thetaScale` once per pair, in float), so angles agree with llama.cpp to the bit.
    @inlinable
    public static func ropeCache(position: Int, thetaScale: Float, pairs: Int, into cache: UnsafeMutablePointer<Float>) {
        var theta = Float(position)
        for i in 0..<pairs {
            cache[2 * i] = cos(theta)
            cache[2 * i + 1] = sin(theta)
            theta *= thetaScale
        }
    }

    /// `base^(-2/dims)`, the ratio between successive rotary frequencies.
    public static func ropeThetaScale(base: Float, dimensions: Int) -> Float {
        powf(base, -2.0 / Float(dimensions))
    }

    /// Rotates the first `2 * pairs` dimensions of each of `heads` heads of `headDim`
    /// floats in `x` by the angles in `cache` (from `ropeCache`).
    @inlinable
    public static func rope(
        _ x: UnsafeMutablePointer<Float>, heads: Int, headDim: Int,
        cache: UnsafePointer<Float>, pairs: Int, style: RopeStyle
    ) {
        for h in 0..<heads {
            let base = x + h * headDim
            for p in 0..<pairs {
                let c = cache[2 * p], s = cache[2 * p + 1]
                let (i, j) = style == .adjacentPairs ? (2 * p, 2 * p + 1) : (p, p + pairs)
                let a = base[i], b = base[j]
                base[i] = a * c - b * s
                base[j] = a * s + b * c
            }
        }
    }

    /// `e^x` for 16 floats at once, within 3 ulp of the exact value over the range where the
    /// result is a normal float (below it, 0; above it, +inf). Cody-Waite reduction
    /// `x = k·ln2 + r`, a degree-6 polynomial for `e^r` on |r| ≤ ln2/2, and `2^k` put
    /// together from its exponent bits.
    /// Always inlined: as a call it passes its vectors through memory (a third of a softmax's
    /// time in the vision tower's attention).
    @inlinable @inline(__always)
    public static func exp(_ x: SIMD16<Float>) -> SIMD16<Float> {
        // Clamped with compare-and-blend (the generic pointwiseMin/Max compile to lane loops).
        var clamped = x
        clamped.replace(with: SIMD16(repeating: 88.72), where: x .> 88.72)
        clamped.replace(with: SIMD16(repeating: -87.33), where: x .< -87.33)
        let (p, ki) = reduced(clamped)
        // 2^k as 2^(k/2)·2^(k-k/2): each factor a normal float for every k in -126...128,
        // so results near FLT_MAX stay finite and those near FLT_MIN stay normal.
        let half = ki &>> 1
        let scaleA = unsafeBitCast((half &+ 127) &<< 23, to: SIMD16<Float>.self)
        let scaleB = unsafeBitCast((ki &- half &+ 127) &<< 23, to: SIMD16<Float>.self)
        var result = p * scaleA * scaleB
        result.replace(with: 0, where: x .< -87.33)
        result.replace(with: Float.infinity, where: x .> 88.72)
        return result
    }

    /// The common part of ``exp(_:)`` and ``expOfNonPositive(_:)`` for clamped inputs:
    /// `x = k·ln2 + r` and `p ≈ e^r`, so that `e^x = p · 2^k`.
    @usableFromInline @inline(__always)
    static func reduced(_ clamped: SIMD16<Float>) -> (p: SIMD16<Float>, k: SIMD16<Int32>) {
        // k = round(x / ln2) by the shifter trick: adding 1.5·2^23 rounds to an integer
        // (to nearest even) and leaves it in the low mantissa bits, so both the float and
        // the integer k come without a conversion instruction.
        let shifter = SIMD16<Float>(repeating: 12_582_912)
        let t = clamped * 1.442_695_04 + shifter
        let k = t - shifter
        let ki = unsafeBitCast(t, to: SIMD16<Int32>.self) &- 0x4B40_0000
        var r = clamped.addingProduct(k, SIMD16(repeating: -0.693_145_751_953_125))  // ln2, high part (exact in float)
        r = r.addingProduct(k, SIMD16(repeating: -1.428_606_765_330_187e-06))  // ln2, low part
        // e^r ≈ 1 + r + r²/2! + ... + r⁶/6!, Horner form with fused multiply-adds.
        var p = SIMD16<Float>(repeating: 1.0 / 720)
        p = SIMD16(repeating: 1.0 / 120).addingProduct(p, r)
        p = SIMD16(repeating: 1.0 / 24).addingProduct(p, r)
        p = SIMD16(repeating: 1.0 / 6).addingProduct(p, r)
        p = SIMD16(repeating: 0.5).addingProduct(p, r)
        p = SIMD16(repeating: 1).addingProduct(p, r)
        p = SIMD16(repeating: 1).addingProduct(p, r)
        return (p, ki)
    }

    /// ``exp(_:)`` of inputs at most 0 (a softmax's `x - max`), bit for bit, with less work:
    /// no overflow guard, and `2^k` as one factor, since `k` is in -126...0 there and
    /// `2^k` is a normal float (multiplying by a power of two rounds once either way).
    /// Inputs above 0 are outside its range.
    @inlinable @inline(__always)
    public static func expOfNonPositive(_ x: SIMD16<Float>) -> SIMD16<Float> {
        var clamped = x
        clamped.replace(with: SIMD16(repeating: -87.33), where: x .< -87.33)
        let (p, ki) = reduced(clamped)
        var result = p * unsafeBitCast((ki &+ 127) &<< 23, to: SIMD16<Float>.self)
        result.replace(with: 0, where: x .< -87.33)
        return result
    }

    /// `x[i] = exp(x[i] - max x)` over `n` floats in place (a softmax without its division);
    /// returns the largest input and the sum of the exponentials.
    @inlinable @inline(__always) @discardableResult
    public static func exponentiate(_ x: UnsafeMutablePointer<Float>, count n: Int) -> (max: Float, sum: Float) {
        guard n > 0 else { return (-.infinity, 0) }
        var maxValue = x[0]
        var i = 0
        if n >= 16 {
            // 16 running maxima, then the rest one by one (max is exact in any order).
            let xr = UnsafeRawPointer(x)
            var m16 = xr.loadUnaligned(as: SIMD16<Float>.self)
            i = 16
            while i + 16 <= n {
                let v = xr.loadUnaligned(fromByteOffset: i * 4, as: SIMD16<Float>.self)
                m16.replace(with: v, where: v .> m16)  // a compare and a blend
                i += 16
            }
            maxValue = m16[0]
            for lane in 1..<16 where m16[lane] > maxValue { maxValue = m16[lane] }
        }
        while i < n {
            if x[i] > maxValue { maxValue = x[i] }
            i += 1
        }
        i = 0
        var acc = SIMD16<Float>()
        let xr = UnsafeMutableRawPointer(x)
        let m = SIMD16<Float>(repeating: maxValue)
        while i + 16 <= n {
            let e = expOfNonPositive(xr.loadUnaligned(fromByteOffset: i * 4, as: SIMD16<Float>.self) - m)
            xr.storeBytes(of: e, toByteOffset: i * 4, as: SIMD16<Float>.self)
            acc += e
            i += 16
        }
        var sum = acc.sum()
        while i < n {
            let e = expf(x[i] - maxValue)
            x[i] = e
            sum += e
            i += 1
        }
        return (maxValue, sum)
    }

    /// In-place softmax over `n` floats; leaves the probabilities in `x` and returns the
    /// largest input and the sum of `exp(x - max)` (what merging softmaxes over parts needs).
    @inlinable @discardableResult
    public static func softmax(_ x: UnsafeMutablePointer<Float>, count n: Int) -> (max: Float, sum: Float) {
        guard n > 0 else { return (-.infinity, 0) }
        let (maxValue, sum) = exponentiate(x, count: n)
        let inv = 1 / sum
        for j in 0..<n { x[j] *= inv }
        return (maxValue, sum)
    }

    /// SwiGLU gating: `gate[i] = silu(gate[i]) * up[i]`, with `silu(g) = g / (1 + e^-g)`.
    @inlinable
    public static func siluMultiply(_ gate: UnsafeMutablePointer<Float>, _ up: UnsafePointer<Float>, count n: Int) {
        var i = 0
        let gr = UnsafeMutableRawPointer(gate), ur = UnsafeRawPointer(up)
        while i + 16 <= n {
            let g = gr.loadUnaligned(fromByteOffset: i * 4, as: SIMD16<Float>.self)
            let u = ur.loadUnaligned(fromByteOffset: i * 4, as: SIMD16<Float>.self)
            gr.storeBytes(of: g / (1 + exp(-g)) * u, toByteOffset: i * 4, as: SIMD16<Float>.self)
            i += 16
        }
        while i < n {
            let g = gate[i]
            gate[i] = g / (1 + expf(-g)) * up[i]
            i += 1
        }
    }

    /// GEGLU gating (Shazeer, 2020) with GELU in its tanh form (Hendrycks & Gimpel, 2016):
    /// `gate[i] = gelu(gate[i]) * up[i]`, with
    /// `gelu(g) = 0.5 g (1 + tanh(√(2/π) (g + 0.044715 g³)))`, computed as the equal
    /// `g / (1 + e^(-2u))` for `u = √(2/π) (g + 0.044715 g³)` (so one vector `exp`, and
    /// `g` itself for large `g`, 0 for very negative `g`).
    @inlinable
    public static func geluTanhMultiply(_ gate: UnsafeMutablePointer<Float>, _ up: UnsafePointer<Float>, count n: Int) {
        let c: Float = -2 * 0.797_884_560_802_865_4  // -2 √(2/π)
        let a: Float = 0.044_715
        var i = 0
        let gr = UnsafeMutableRawPointer(gate), ur = UnsafeRawPointer(up)
        while i + 16 <= n {
            let g = gr.loadUnaligned(fromByteOffset: i * 4, as: SIMD16<Float>.self)
            let u = ur.loadUnaligned(fromByteOffset: i * 4, as: SIMD16<Float>.self)
            let e = exp(c * g * (1 + a * g * g))
            gr.storeBytes(of: g / (1 + e) * u, toByteOffset: i * 4, as: SIMD16<Float>.self)
            i += 16
        }
        while i < n {
            let g = gate[i]
            gate[i] = g / (1 + expf(c * g * (1 + a * g * g))) * up[i]
            i += 1
        }
    }

    /// `y[i] += x[i]`.
    @inlinable
    public static func add(_ x: UnsafePointer<Float>, into y: UnsafeMutablePointer<Float>, count n: Int) {
        var i = 0
        let xr = UnsafeRawPointer(x), yr = UnsafeMutableRawPointer(y)
        while i + 16 <= n {
            let a = xr.loadUnaligned(fromByteOffset: i * 4, as: SIMD16<Float>.self)
            let b = yr.loadUnaligned(fromByteOffset: i * 4, as: SIMD16<Float>.self)
            yr.storeBytes(of: a + b, toByteOffset: i * 4, as: SIMD16<Float>.self)
            i += 16
        }
        while i < n {
            y[i] += x[i]
            i += 1
        }
    }

    /// Dot product of two float vectors.
    @inlinable
    public static func dot(_ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>, count n: Int) -> Float {
        dot(a, UnsafeRawPointer(b), FloatRows.self, count: n)
    }

    /// Dot product of `a` with the row at `row`, stored as `Stored` stores it (F32 or F16,
    /// widened as it is loaded: the bits of the same row in F32). 16 lanes of products, the
    /// lanes added in order, then the columns past the last multiple of 16 in order.
    @inlinable @inline(__always)
    public static func dot<Stored: AttentionRows>(_ a: UnsafePointer<Float>, _ row: UnsafeRawPointer, _: Stored.Type, count n: Int)
        -> Float
    {
        var acc = SIMD16<Float>()
        var i = 0
        let ar = UnsafeRawPointer(a)
        while i &+ 16 <= n {
            acc += ar.loadUnaligned(fromByteOffset: i &* 4, as: SIMD16<Float>.self) * Stored.load16(row, i)
            i &+= 16
        }
        var sum = acc.sum()
        while i < n {
            sum += a[i] * Stored.load(row, i)
            i &+= 1
        }
        return sum
    }

    /// `y[i] += alpha * x[i]`.
    @inlinable
    public static func axpy(_ alpha: Float, _ x: UnsafePointer<Float>, _ y: UnsafeMutablePointer<Float>, count n: Int) {
        axpy(alpha, UnsafeRawPointer(x), FloatRows.self, y, count: n)
    }

    /// `y[i] += alpha * row[i]` for the row at `row`, stored as `Stored` stores it.
    @inlinable @inline(__always)
    public static func axpy<Stored: AttentionRows>(
        _ alpha: Float, _ row: UnsafeRawPointer, _: Stored.Type, _ y: UnsafeMutablePointer<Float>, count n: Int
    ) {
        var i = 0
        let yr = UnsafeMutableRawPointer(y)
        let a = SIMD16<Float>(repeating: alpha)
        while i &+ 16 <= n {
            var b = yr.loadUnaligned(fromByteOffset: i &* 4, as: SIMD16<Float>.self)
            b += a * Stored.load16(row, i)
            yr.storeBytes(of: b, toByteOffset: i &* 4, as: SIMD16<Float>.self)
            i &+= 16
        }
        while i < n {
            y[i] += alpha * Stored.load(row, i)
            i &+= 1
        }
    }
}
