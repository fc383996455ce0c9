import GGUF
import Testing

@testable import Kernels

/// Which kernel each type dispatches to: every integer format takes the vector path with
/// the 8-row reduction in an AVX2 build (a format that silently fell back to one row at a
/// time would still be correct, only slow, so correctness tests cannot see it).
@Suite struct DispatchTests {
    @Test func integerFormatsUseTheVectorKernels() {
        let integer: [any IntegerDotFormat.Type] = [Q8_0.self, Q4_0.self, Q4_1.self, Q5_0.self, Q5_1.self, Q4_K.self, Q5_K.self, Q6_K.self]
        #expect(integer.map { $0.type } == [.q8_0, .q4_0, .q4_1, .q5_0, .q5_1, .q4_K, .q5_K, .q6_K])
        #if LEAP_X86_AVX2
        for f in integer { #expect(f.hasDotVector, "\(f.type)") }
        #expect(!F32Format.hasDotVector)
        #endif
    }
}
