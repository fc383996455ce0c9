/// The tensor element types of ggml, with their on-disk ids and block geometry.
///
/// A quantized type stores `blockSize` consecutive values of a row in one block of
/// `typeSize` bytes; a row's length must therefore be a multiple of `blockSize`.
/// The ids are ggml's (`enum ggml_type`); ids that ggml has retired are absent, so a file
/// that uses one is rejected as an unknown type.
public enum GGMLType: UInt32, CaseIterable, Sendable, CustomStringConvertible {
    case f32 = 0
    case f16 = 1
    case q4_0 = 2
    case q4_1 = 3
    case q5_0 = 6
    case q5_1 = 7
    case q8_0 = 8
    case q8_1 = 9
    case q2_K = 10
    case q3_K = 11
    case q4_K = 12
    case q5_K = 13
    case q6_K = 14
    case q8_K = 15
    case iq2_xxs = 16
    case iq2_xs = 17
    case iq3_xxs = 18
    case iq1_s = 19
    case iq4_nl = 20
    case iq3_s = 21
    case iq2_s = 22
    case iq4_xs = 23
    case i8 = 24
    case i16 = 25
    case i32 = 26
    case i64 = 27
    case f64 = 28
    case iq1_m = 29
    case bf16 = 30
    case tq1_0 = 34
    case tq2_0 = 35
    case mxfp4 = 39

    /// Number of values stored in one block.
    public var blockSize: Int {
        switch self {
        case .f32, .f16, .bf16, .f64, .i8, .i16, .i32, .i64: return 1
        case .q4_0, .q4_1, .q5_0, .q5_1, .q8_0, .q8_1, .iq4_nl, .mxfp4: return 32
        case .q2_K, .q3_K, .q4_K, .q5_K, .q6_K, .q8_K,
            .iq2_xxs, .iq2_xs, .iq3_xxs, .iq1_s, .iq3_s, .iq2_s, .iq4_xs, .iq1_m,
            .tq1_0, .tq2_0:
            return 256
        }
    }

    /// Number of bytes in one block.
    public var typeSize: Int {
        switch self {
        case .f32: return 4
        case .f16, .bf16: return 2
        case .f64: return 8
        case .i8: return 1
        case .i16: return 2
        case .i32: return 4
        case .i64: return 8
        case .q4_0: return 18
        case .q4_1: return 20
        case .q5_0: return 22
        case .q5_1: return 24
        case .q8_0: return 34
        case .q8_1: return 36
        case .q2_K: return 84
        case .q3_K: return 110
        case .q4_K: return 144
        case .q5_K: return 176
        case .q6_K: return 210
        case .q8_K: return 292
        case .iq2_xxs: return 66
        case .iq2_xs: return 74
        case .iq3_xxs: return 98
        case .iq1_s: return 50
        case .iq4_nl: return 18
        case .iq3_s: return 110
        case .iq2_s: return 82
        case .iq4_xs: return 136
        case .iq1_m: return 56
        case .tq1_0: return 54
        case .tq2_0: return 66
        case .mxfp4: return 17
        }
    }

    /// ggml's lower-case name for the type (`q4_0`, `q4_K`, `bf16`, ...).
    public var name: String {
        switch self {
        case .f32: return "f32"
        case .f16: return "f16"
        case .bf16: return "bf16"
        case .f64: return "f64"
        case .i8: return "i8"
        case .i16: return "i16"
        case .i32: return "i32"
        case .i64: return "i64"
        case .q4_0: return "q4_0"
        case .q4_1: return "q4_1"
        case .q5_0: return "q5_0"
        case .q5_1: return "q5_1"
        case .q8_0: return "q8_0"
        case .q8_1: return "q8_1"
        case .q2_K: return "q2_K"
        case .q3_K: return "q3_K"
        case .q4_K: return "q4_K"
        case .q5_K: return "q5_K"
        case .q6_K: return "q6_K"
        case .q8_K: return "q8_K"
        case .iq2_xxs: return "iq2_xxs"
        case .iq2_xs: return "iq2_xs"
        case .iq3_xxs: return "iq3_xxs"
        case .iq1_s: return "iq1_s"
        case .iq4_nl: return "iq4_nl"
        case .iq3_s: return "iq3_s"
        case .iq2_s: return "iq2_s"
        case .iq4_xs: return "iq4_xs"
        case .iq1_m: return "iq1_m"
        case .tq1_0: return "tq1_0"
        case .tq2_0: return "tq2_0"
        case .mxfp4: return "mxfp4"
        }
    }

    public var description: String { name }

    /// Looks a type up by ggml's name, case-insensitively (`"Q4_K"`, `"q8_0"`).
    public init?(name: String) {
        let lower = name.lowercased()
        guard let match = GGMLType.allCases.first(where: { $0.name.lowercased() == lower }) else { return nil }
        self = match
    }

    /// Bytes needed for a row of `count` values, or nil when `count` is not a whole number
    /// of blocks or the size overflows.
    public func rowBytes(count: Int) -> Int? {
        guard count >= 0, count % blockSize == 0 else { return nil }
        let (bytes, overflow) = (count / blockSize).multipliedReportingOverflow(by: typeSize)
        return overflow ? nil : bytes
    }
}
