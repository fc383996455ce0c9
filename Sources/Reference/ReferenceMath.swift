import GGUF

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The operations the references write their layers with, in Double over rows
/// (`[[Double]]`, one array per token), as plain loops.
enum ReferenceMath {
    /// `y = x Wᵀ + b` per row, `W` of `outputs x inputs` row-major (`b` nil: no bias).
    static func linear(_ x: [[Double]], _ w: [Double], _ b: [Double]?, outputs: Int) -> [[Double]] {
        let inputs = w.count / outputs
        return x.map { (row: [Double]) -> [Double] in
            precondition(row.count == inputs)
            var y = [Double](repeating: 0, count: outputs)
            for o in 0..<outputs {
                var acc: Double = b?[o] ?? 0
                for i in 0..<inputs { acc += w[o * inputs + i] * row[i] }
                y[o] = acc
            }
            return y
        }
    }

    /// `(x - mean) / sqrt(var + eps) · w + b` per row.
    static func layerNorm(_ x: [[Double]], _ w: [Double], _ b: [Double], eps: Double) -> [[Double]] {
        x.map { row in
            let n = Double(row.count)
            let mean = row.reduce(0, +) / n
            let variance = row.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / n
            return row.indices.map { (row[$0] - mean) / (variance + eps).squareRoot() * w[$0] + b[$0] }
        }
    }

    /// `softmax(scores)`: `e^(s - max) / Σ e^(s - max)`.
    static func softmax(_ scores: [Double]) -> [Double] {
        let top = scores.max()!
        let e = scores.map { exp($0 - top) }
        let total = e.reduce(0, +)
        return e.map { $0 / total }
    }

    /// `x + scale · y`, row by row.
    static func add(_ x: [[Double]], _ y: [[Double]], scale: Double = 1) -> [[Double]] {
        zip(x, y).map { zip($0, $1).map { $0 + scale * $1 } }
    }

    /// GELU, tanh form: `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))`.
    static func geluTanh(_ x: Double) -> Double { 0.5 * x * (1 + tanh((2 / Double.pi).squareRoot() * (x + 0.044715 * x * x * x))) }

    /// GELU, exact form: `0.5 x (1 + erf(x / √2))`.
    static func geluErf(_ x: Double) -> Double { 0.5 * x * (1 + erf(x / 2.0.squareRoot())) }

    /// SiLU: `x / (1 + e^(-x))`.
    static func silu(_ x: Double) -> Double { x / (1 + exp(-x)) }

    /// Every value of tensor `t` of `file` in Double: each row dequantized by the scalar
    /// reference of its block format (`dequantizeRowReference`), never the fast kernels.
    /// The caller has checked that the type has kernels (a row length in bytes).
    static func dequantized(_ t: GGUFTensorInfo, of file: GGUFFile) -> [Double] {
        let rowBytes = t.type.rowBytes(count: t.rowLength)!
        var values = [Float](repeating: 0, count: t.elementCount)
        let bytes = file.data(for: t).baseAddress!
        values.withUnsafeMutableBufferPointer { v in
            for r in 0..<t.rowCount {
                t.type.dequantizeRowReference(bytes + r * rowBytes, into: v.baseAddress! + r * t.rowLength, count: t.rowLength)
            }
        }
        return values.map(Double.init)
    }
}
