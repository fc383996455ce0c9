import Foundation
import GGUF
import TestSupport

@testable import Kernels

/// One case of Fixtures/manifest.json (made by scripts/make_kernel_fixtures.py with gguf-py).
struct FixtureCase: Decodable, CustomStringConvertible, Sendable {
    let name: String
    let kind: String
    let type: String
    let rows: Int
    let cols: Int
    let source: String

    var ggmlType: GGMLType { GGMLType(name: type)! }
    var description: String { "\(name) (\(type))" }

    var blocks: [UInt8] { [UInt8](Fixtures.data(name + ".blocks")) }
    var floats: [Float] {
        let d = Fixtures.data(name + ".f32")
        return d.withUnsafeBytes { raw in (0..<(d.count / 4)).map { raw.loadUnaligned(fromByteOffset: 4 * $0, as: Float.self) } }
    }
}

enum Fixtures {
    static func url(_ file: String) -> URL {
        let dot = file.lastIndex(of: ".")!
        let name = String(file[..<dot]), ext = String(file[file.index(after: dot)...])
        guard let url = Bundle.module.url(forResource: name, withExtension: ext, subdirectory: "Fixtures") else {
            fatalError("missing fixture \(file); run scripts/make_kernel_fixtures.py")
        }
        return url
    }

    static func data(_ file: String) -> Data { try! Data(contentsOf: url(file)) }

    static let manifest: [FixtureCase] = try! JSONDecoder().decode([FixtureCase].self, from: data("manifest.json"))
    static var dequantizeCases: [FixtureCase] { manifest.filter { $0.kind == "dequantize" } }
    static var quantizeCases: [FixtureCase] { manifest.filter { $0.kind == "quantize" } }
}

/// Rows of random weights of `type`: quantized from random floats for the 32-value formats,
/// random bytes with sane fp16 scales for the K-quants (every level and every packed scale
/// pattern, including Q6_K's negative scales, which their quantizers rarely produce).
func randomWeights(_ type: GGMLType, rows: Int, cols: Int, seed: UInt64) -> [UInt8] {
    var rng = SeededRandom(seed: seed)
    let rowBytes = type.rowBytes(count: cols)!
    var bytes = [UInt8](repeating: 0, count: rows * rowBytes)
    if type.canQuantize && type.blockSize <= 32 {
        for r in 0..<rows {
            var x = rng.normal(cols, scale: 0.02)
            if r % 3 == 1 { for j in stride(from: 0, to: cols, by: 5) { x[j] *= 10 } }  // outliers
            x.withUnsafeBufferPointer { src in
                bytes.withUnsafeMutableBytes { dst in
                    type.quantizeRow(src.baseAddress!, into: dst.baseAddress! + r * rowBytes, count: cols)
                }
            }
        }
        return bytes
    }
    for i in 0..<bytes.count { bytes[i] = UInt8.random(in: 0...255, using: &rng) }
    let nb = cols / 256
    func setHalf(_ offset: Int, _ v: Float) {
        let h = FloatBits.floatToHalf(v)
        bytes[offset] = UInt8(h & 0xFF)
        bytes[offset + 1] = UInt8(h >> 8)
    }
    for r in 0..<rows {
        for i in 0..<nb {
            let b = r * rowBytes + i * type.typeSize
            switch type {
            case .q4_K, .q5_K:
                setHalf(b, Float.random(in: 0.0001...0.001, using: &rng))
                setHalf(b + 2, Float.random(in: 0.0001...0.002, using: &rng))
            case .q6_K:
                setHalf(b + 208, Float.random(in: -0.0005...0.0005, using: &rng))
            default:
                fatalError("no random generator for \(type)")
            }
        }
    }
    return bytes
}

/// Dequantizes with the reference and returns Float rows.
func dequantizeReference(_ type: GGMLType, _ bytes: [UInt8], count: Int) -> [Float] {
    var out = [Float](repeating: 0, count: count)
    bytes.withUnsafeBytes { src in
        out.withUnsafeMutableBufferPointer { type.dequantizeRowReference(src.baseAddress!, into: $0.baseAddress!, count: count) }
    }
    return out
}

func sameBits(_ a: [Float], _ b: [Float]) -> Bool {
    a.count == b.count && zip(a, b).allSatisfy { $0.bitPattern == $1.bitPattern || ($0.isNaN && $1.isNaN) }
}

/// Index and values of the first difference, for failure messages.
func firstDifference(_ a: [Float], _ b: [Float]) -> String {
    for i in 0..<min(a.count, b.count) where a[i].bitPattern != b[i].bitPattern && !(a[i].isNaN && b[i].isNaN) {
        return "first difference at \(i): \(a[i]) vs \(b[i])"
    }
    return a.count == b.count ? "none" : "counts \(a.count) vs \(b.count)"
}

/// The layouts the decode kernels can read `m` in: its rows as stored, and the interleaved
/// copy where this build has one for its type (Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 on AVX2).
func decodeLayouts(_ m: WeightMatrix) -> [(name: String, matrix: WeightMatrix)] {
    let interleaved = m.interleavedForDecode()
    return interleaved.interleavedByteCount > 0 ? [("row-major", m), ("interleaved", interleaved)] : [("row-major", m)]
}
