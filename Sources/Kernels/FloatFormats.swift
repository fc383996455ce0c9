// F32, F16 and BF16: one value per "block"; dot products use the float activations.

import GGUF

#if LEAP_X86_AVX2
import _Builtin_intrinsics.intel
#endif

enum F32Format: QuantizableBlockFormat {
    static var type: GGMLType { .f32 }

    static func dequantizeReference(_ x: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>, nb: Int) {
        for i in 0..<nb { y[i] = x.loadUnaligned(fromByteOffset: 4 * i, as: Float.self) }
    }

    static func dequantize(_ x: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>, nb: Int) {
        UnsafeMutableRawPointer(y).copyMemory(from: x, byteCount: 4 * nb)
    }

    static func quantizeReference(_ x: UnsafePointer<Float>, _ y: UnsafeMutableRawPointer, nb: Int) {
        y.copyMemory(from: x, byteCount: 4 * nb)
    }

    static func dotReference(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> Float {
        var sum: Float = 0
        for i in 0..<nb { sum += x.loadUnaligned(fromByteOffset: 4 * i, as: Float.self) * a.x[i] }
        return sum
    }

    static func dot(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> Float {
        floatDot(nb, a.x) {
            x.loadUnaligned(fromByteOffset: 4 * $0, as: SIMD8<Float>.self)
        } scalar: {
            x.loadUnaligned(fromByteOffset: 4 * $0, as: Float.self)
        }
    }
}

enum F16Format: QuantizableBlockFormat {
    static var type: GGMLType { .f16 }

    static func dequantizeReference(_ x: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>, nb: Int) {
        for i in 0..<nb { y[i] = loadHalfReference(x, 2 * i) }
    }

    static func dequantize(_ x: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>, nb: Int) {
        var i = 0
        #if LEAP_X86_AVX2
        while i + 8 <= nb {
            let h = x.loadUnaligned(fromByteOffset: 2 * i, as: __m128i.self)
            UnsafeMutableRawPointer(y + i).storeBytes(of: _mm256_cvtph_ps(h), as: __m256.self)
            i += 8
        }
        #endif
        while i < nb {
            y[i] = loadHalf(x, 2 * i)
            i += 1
        }
    }

    static func quantizeReference(_ x: UnsafePointer<Float>, _ y: UnsafeMutableRawPointer, nb: Int) {
        for i in 0..<nb { storeHalf(y, 2 * i, x[i]) }
    }

    static func dotReference(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> Float {
        var sum: Float = 0
        for i in 0..<nb { sum += loadHalfReference(x, 2 * i) * a.x[i] }
        return sum
    }

    static func dot(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> Float {
        #if LEAP_X86_AVX2
        return floatDot(nb, a.x) { i in
            _mm256_cvtph_ps(x.loadUnaligned(fromByteOffset: 2 * i, as: __m128i.self))
        } scalar: {
            loadHalf(x, 2 * $0)
        }
        #else
        // One conversion per value (table or hardware): keep it scalar, 4 accumulators.
        var s0: Float = 0, s1: Float = 0, s2: Float = 0, s3: Float = 0
        var i = 0
        while i + 4 <= nb {
            s0 += loadHalf(x, 2 * i) * a.x[i]
            s1 += loadHalf(x, 2 * i + 2) * a.x[i + 1]
            s2 += loadHalf(x, 2 * i + 4) * a.x[i + 2]
            s3 += loadHalf(x, 2 * i + 6) * a.x[i + 3]
            i += 4
        }
        var sum = (s0 + s1) + (s2 + s3)
        while i < nb {
            sum += loadHalf(x, 2 * i) * a.x[i]
            i += 1
        }
        return sum
        #endif
    }
}

enum BF16Format: QuantizableBlockFormat {
    static var type: GGMLType { .bf16 }

    static func dequantizeReference(_ x: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>, nb: Int) {
        for i in 0..<nb { y[i] = FloatBits.bf16ToFloat(x.loadUnaligned(fromByteOffset: 2 * i, as: UInt16.self)) }
    }

    static func dequantize(_ x: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>, nb: Int) {
        var i = 0
        while i + 8 <= nb {
            UnsafeMutableRawPointer(y + i).storeBytes(of: loadBF16x8(x, i), as: SIMD8<Float>.self)
            i += 8
        }
        while i < nb {
            y[i] = FloatBits.bf16ToFloat(x.loadUnaligned(fromByteOffset: 2 * i, as: UInt16.self))
            i += 1
        }
    }

    @inline(__always)
    static func loadBF16x8(_ x: UnsafeRawPointer, _ i: Int) -> SIMD8<Float> {
        let h = x.loadUnaligned(fromByteOffset: 2 * i, as: SIMD8<UInt16>.self)
        let w = SIMD8<UInt32>(truncatingIfNeeded: h) &<< 16
        return unsafeBitCast(w, to: SIMD8<Float>.self)
    }

    static func quantizeReference(_ x: UnsafePointer<Float>, _ y: UnsafeMutableRawPointer, nb: Int) {
        for i in 0..<nb { y.storeBytes(of: FloatBits.floatToBF16(x[i]), toByteOffset: 2 * i, as: UInt16.self) }
    }

    static func dotReference(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> Float {
        var sum: Float = 0
        for i in 0..<nb {
            sum += FloatBits.bf16ToFloat(x.loadUnaligned(fromByteOffset: 2 * i, as: UInt16.self)) * a.x[i]
        }
        return sum
    }

    static func dot(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> Float {
        floatDot(nb, a.x) {
            loadBF16x8(x, $0)
        } scalar: {
            FloatBits.bf16ToFloat(x.loadUnaligned(fromByteOffset: 2 * $0, as: UInt16.self))
        }
    }
}

/// A float dot product over `n` values: `load8(i)` gives weights i..<i+8, `scalar(i)` one
/// weight; four independent accumulators hide the FMA latency.
@inline(__always)
func floatDot(_ n: Int, _ x: UnsafePointer<Float>, load8: (Int) -> SIMD8<Float>, scalar: (Int) -> Float) -> Float {
    let xr = UnsafeRawPointer(x)
    var acc0 = SIMD8<Float>(), acc1 = SIMD8<Float>(), acc2 = SIMD8<Float>(), acc3 = SIMD8<Float>()
    var i = 0
    while i + 32 <= n {
        acc0 = fma8(acc0, load8(i), xr.loadUnaligned(fromByteOffset: 4 * i, as: SIMD8<Float>.self))
        acc1 = fma8(acc1, load8(i + 8), xr.loadUnaligned(fromByteOffset: 4 * (i + 8), as: SIMD8<Float>.self))
        acc2 = fma8(acc2, load8(i + 16), xr.loadUnaligned(fromByteOffset: 4 * (i + 16), as: SIMD8<Float>.self))
        acc3 = fma8(acc3, load8(i + 24), xr.loadUnaligned(fromByteOffset: 4 * (i + 24), as: SIMD8<Float>.self))
        i += 32
    }
    while i + 8 <= n {
        acc0 = fma8(acc0, load8(i), xr.loadUnaligned(fromByteOffset: 4 * i, as: SIMD8<Float>.self))
        i += 8
    }
    var sum = ((acc0 + acc1) + (acc2 + acc3)).sum()
    while i < n {
        sum += scalar(i) * x[i]
        i += 1
    }
    return sum
}

/// `acc + a * b`, fused where the build has FMA (an unfused multiply-add otherwise: on x86
/// without FMA, a fused `addProduct` would become a library call per lane).
@inline(__always)
func fma8(_ acc: SIMD8<Float>, _ a: SIMD8<Float>, _ b: SIMD8<Float>) -> SIMD8<Float> {
    #if LEAP_X86_AVX2
    return _mm256_fmadd_ps(a, b, acc)
    #elseif arch(arm64)
    return acc.addingProduct(a, b)
    #else
    return acc + a * b
    #endif
}

#if LEAP_X86_AVX2
extension F16Format {
    /// One weight row of `nb` halves at `x` with the n activation rows `a` (their floats):
    /// each 8 halves converted once for all of them. Row k's result is `dot(x, a[k], nb:)`
    /// bit for bit: the same four accumulators, the same fused operations in the same
    /// order, the same final sum and scalar tail as `floatDot`.
    @inline(__always)
    static func dots<let n: Int>(_ x: UnsafeRawPointer, _ a: InlineArray<n, UnsafePointer<Float>>, nb: Int) -> InlineArray<n, Float> {
        @inline(__always) func halves(_ i: Int) -> SIMD8<Float> {
            _mm256_cvtph_ps(x.loadUnaligned(fromByteOffset: 2 * i, as: __m128i.self))
        }
        @inline(__always) func floats(_ k: Int, _ i: Int) -> SIMD8<Float> {
            UnsafeRawPointer(a[k]).loadUnaligned(fromByteOffset: 4 * i, as: SIMD8<Float>.self)
        }
        var acc0 = InlineArray<n, SIMD8<Float>>(repeating: SIMD8()), acc1 = acc0, acc2 = acc0, acc3 = acc0
        var i = 0
        while i + 32 <= nb {
            let w0 = halves(i), w1 = halves(i + 8), w2 = halves(i + 16), w3 = halves(i + 24)
            unrolled(n) { k in
                acc0[k] = fma8(acc0[k], w0, floats(k, i))
                acc1[k] = fma8(acc1[k], w1, floats(k, i + 8))
                acc2[k] = fma8(acc2[k], w2, floats(k, i + 16))
                acc3[k] = fma8(acc3[k], w3, floats(k, i + 24))
            }
            i += 32
        }
        while i + 8 <= nb {
            let w = halves(i)
            unrolled(n) { k in acc0[k] = fma8(acc0[k], w, floats(k, i)) }
            i += 8
        }
        var out = InlineArray<n, Float>(repeating: 0)
        unrolled(n) { k in
            var sum = ((acc0[k] + acc1[k]) + (acc2[k] + acc3[k])).sum()
            var j = i
            while j < nb {
                sum += loadHalf(x, 2 * j) * a[k][j]
                j += 1
            }
            out[k] = sum
        }
        return out
    }

    /// Weight rows `rows` times activation rows `activationRows` of `a` (rows of `cols`;
    /// row `t`'s results at `y + t * outputs`): activation rows in fours, then a pair,
    /// then one, every weight row's halves converted once per group. Each result is the
    /// one-row kernel's, bit for bit.
    static func dotRowsMulti(
        _ base: UnsafeRawPointer, rowBytes: Int, rows: Range<Int>, nb: Int,
        _ a: ActivationView, cols: Int, activationRows: Range<Int>, _ y: UnsafeMutablePointer<Float>, outputs: Int
    ) {
        @inline(__always) func group<let n: Int>(from first: Int, _ rowsOfGroup: InlineArray<n, UnsafePointer<Float>>) {
            var floats = rowsOfGroup
            unrolled(n) { k in floats[k] = a.row(first + k, cols: cols).x }
            for r in rows {
                let results = dots(base + r * rowBytes, floats, nb: nb)
                unrolled(n) { k in y[(first + k) * outputs + r] = results[k] }
            }
        }
        var t = activationRows.lowerBound
        while t + 4 <= activationRows.upperBound {
            group(from: t, InlineArray<4, UnsafePointer<Float>>(repeating: a.x))
            t += 4
        }
        if t + 2 <= activationRows.upperBound {
            group(from: t, InlineArray<2, UnsafePointer<Float>>(repeating: a.x))
            t += 2
        }
        if t < activationRows.upperBound {
            dotRows(base, rowBytes: rowBytes, rows: rows, nb: nb, a.row(t, cols: cols), y + t * outputs)
        }
    }
}
#endif
