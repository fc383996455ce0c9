// The block formats as one protocol, and the dispatch from GGMLType to a format.
//
// Every format has scalar reference kernels (`...Reference`, written to be checked line by
// line against ggml's C, never optimized) and fast kernels (SIMD where the build allows,
// otherwise portable Swift). The tests check fast == reference for each.

import GGUF

#if LEAP_X86_AVX2
import _Builtin_intrinsics.intel
#endif

/// One of ggml's tensor storage formats: `blockSize` values stored in `typeSize` bytes.
///
/// All pointers are raw: blocks are packed without padding, so multi-byte fields are read
/// unaligned. Values are little-endian, as in GGUF files. `nb` is a number of blocks.
protocol BlockFormat {
    /// The ggml type this format implements.
    static var type: GGMLType { get }

    /// Scalar reference dequantization of `nb` blocks at `x` into `nb * blockSize` floats.
    static func dequantizeReference(_ x: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>, nb: Int)
    /// Fast dequantization; equals the reference exactly.
    static func dequantize(_ x: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>, nb: Int)

    /// Scalar reference dot product of `nb` blocks with the activations (float activations
    /// for float formats, the 8-bit blocks otherwise).
    static func dotReference(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> Float
    /// Fast dot product; equals the reference up to float summation order.
    static func dot(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> Float

    #if LEAP_X86_AVX2
    /// Whether `dotVector` is implemented (the quantized formats), so that `dotRows` can
    /// reduce 8 rows at once.
    static var hasDotVector: Bool { get }
    /// `dot` before its final horizontal sum: `hsum(dotVector(...)) == dot(...)`.
    static func dotVector(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> __m256
    #endif
}

/// A format with a deterministic reference quantizer, bit-identical to ggml's
/// `quantize_row_*_ref`.
protocol QuantizableBlockFormat: BlockFormat {
    /// Quantizes `nb * blockSize` floats into `nb` blocks.
    static func quantizeReference(_ x: UnsafePointer<Float>, _ y: UnsafeMutableRawPointer, nb: Int)
}

/// A quantized format whose dot product multiplies its integer values with the 8-bit
/// activations: with the AVX2 stepped loop where the build has it, with the scalar
/// `dotPortable` (PortableDots.swift) otherwise. `dot` and `hasDotVector` follow from
/// that, here, once for every such format.
///
/// On AVX2 builds a format describes its dot product as a loop of steps that first unpack
/// weights and then multiply them with the activations: `unpack` the weights of
/// `stepBlocks` blocks, `accumulate` them into one activation row's sums, `finish` (the
/// blocks left over, the final combination). SteppedDots.swift runs that loop, for one
/// activation row (`dotVector`) and for several sharing each unpacked step
/// (`dotVectors`): one body, so several rows at once equal each row alone by construction.
protocol IntegerDotFormat: BlockFormat {
    /// The portable dot product: scalar loops with integer accumulation per block.
    static func dotPortable(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> Float

    #if LEAP_X86_AVX2
    /// The unpacked weights of one step.
    associatedtype Weights
    /// One activation row's running sums.
    associatedtype Accumulator
    /// Blocks per step.
    static var stepBlocks: Int { get }
    /// The sums before the first step.
    static var zero: Accumulator { get }
    /// Unpacks blocks `i..<i + stepBlocks` of the row at `x`.
    static func unpack(_ x: UnsafeRawPointer, _ i: Int) -> Weights
    /// Multiplies unpacked weights with blocks `i..<i + stepBlocks` of `a`.
    static func accumulate(_ w: Weights, _ a: ActivationView, _ i: Int, _ acc: inout Accumulator)
    /// The dot product's vector (its lanes add up to the dot product) from the sums over
    /// the whole steps and the blocks `i..<nb` left over.
    static func finish(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int, from i: Int, _ acc: Accumulator) -> __m256
    #endif
}

extension IntegerDotFormat {
    static func dot(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> Float {
        #if LEAP_X86_AVX2
        return hsum(dotVector(x, a, nb: nb))
        #else
        return dotPortable(x, a, nb: nb)
        #endif
    }

    #if LEAP_X86_AVX2
    static var hasDotVector: Bool { true }
    #endif
}

extension BlockFormat {
    static var blockSize: Int { type.blockSize }
    static var typeSize: Int { type.typeSize }

    #if LEAP_X86_AVX2
    static var hasDotVector: Bool { false }
    static func dotVector(_ x: UnsafeRawPointer, _ a: ActivationView, nb: Int) -> __m256 {
        lane0(dot(x, a, nb: nb))
    }
    #endif

    /// Dot products of consecutive rows `rows` (each `rowBytes` apart, `nb` blocks long)
    /// with the activations, into `y[row]`.
    @inline(__always)
    static func dotRows(
        _ base: UnsafeRawPointer, rowBytes: Int, rows: Range<Int>, nb: Int,
        _ a: ActivationView, _ y: UnsafeMutablePointer<Float>
    ) {
        #if LEAP_X86_AVX2
        if hasDotVector {
            // Eight rows at a time, reduced together (SteppedDots.swift).
            let one = InlineArray<1, UnsafeMutablePointer<Float>>(repeating: y)
            dotRowGroups(base, rowBytes: rowBytes, rows: rows, one) { p in
                InlineArray<1, __m256>(repeating: dotVector(p, a, nb: nb))
            }
            return
        }
        #endif
        for r in rows { y[r] = dot(base + r * rowBytes, a, nb: nb) }
    }
}

/// The format implementing `type`, or nil when the kernels do not support it.
func blockFormat(for type: GGMLType) -> (any BlockFormat.Type)? {
    switch type {
    case .f32: return F32Format.self
    case .f16: return F16Format.self
    case .bf16: return BF16Format.self
    case .q8_0: return Q8_0.self
    case .q4_0: return Q4_0.self
    case .q4_1: return Q4_1.self
    case .q5_0: return Q5_0.self
    case .q5_1: return Q5_1.self
    case .q4_K: return Q4_K.self
    case .q5_K: return Q5_K.self
    case .q6_K: return Q6_K.self
    default: return nil
    }
}

/// The quantizer for `type`, or nil when there is none.
func quantizableFormat(for type: GGMLType) -> (any QuantizableBlockFormat.Type)? {
    switch type {
    case .f32: return F32Format.self
    case .f16: return F16Format.self
    case .bf16: return BF16Format.self
    case .q8_0: return Q8_0.self
    case .q4_0: return Q4_0.self
    case .q4_1: return Q4_1.self
    case .q5_0: return Q5_0.self
    case .q5_1: return Q5_1.self
    case .q4_K: return Q4_K.self
    case .q5_K: return Q5_K.self
    case .q6_K: return Q6_K.self
    default: return nil
    }
}

// MARK: - Small helpers shared by the formats

/// Reads an fp16 field at `offset` and widens it.
@inline(__always)
func loadHalf(_ p: UnsafeRawPointer, _ offset: Int) -> Float {
    FloatBits.halfToFloat(p.loadUnaligned(fromByteOffset: offset, as: UInt16.self))
}

/// Reads an fp16 field with the software conversion (for the reference kernels).
@inline(__always)
func loadHalfReference(_ p: UnsafeRawPointer, _ offset: Int) -> Float {
    FloatBits.halfToFloatReference(p.loadUnaligned(fromByteOffset: offset, as: UInt16.self))
}

@inline(__always)
func storeHalf(_ p: UnsafeMutableRawPointer, _ offset: Int, _ value: Float) {
    p.storeBytes(of: FloatBits.floatToHalf(value), toByteOffset: offset, as: UInt16.self)
}

@inline(__always)
func byte(_ p: UnsafeRawPointer, _ offset: Int) -> UInt8 {
    p.load(fromByteOffset: offset, as: UInt8.self)
}
