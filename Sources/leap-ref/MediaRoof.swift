import Dispatch
import Kernels
import Models

/// The F32 roof of a vision encode, measured beside it by `leap-ref bench --image`: each of
/// the encode's matrix products (`SigLIP2VisionEncoder.productShapes`) as one OpenBLAS
/// sgemm of F32 operands on the bench's threads (OpenBLAS's own, no weight conversion, no
/// blocks), the fastest of a few runs. `milliseconds` is what the products alone would take
/// at that speed, `peakGFLOPS` the best rate of any of the shapes; an encode at
/// `flops / peak` would be at the machine's F32 peak as OpenBLAS reaches it.
struct ProductRoof: Equatable {
    /// Floating-point operations of the encode's products (every slice), in GFLOP.
    var gflop = 0.0
    /// The products' time at each shape's measured rate, in ms.
    var milliseconds = 0.0
    /// The fastest shape's rate, GFLOP/s.
    var peakGFLOPS = 0.0

    /// Milliseconds of the products at ``peakGFLOPS``.
    var peakMilliseconds: Double { peakGFLOPS > 0 ? gflop / peakGFLOPS * 1e3 : 0 }

    static func measure(_ shapes: [SigLIP2VisionEncoder.ProductShape], runs: Int = 3) -> ProductRoof {
        var roof = ProductRoof()
        func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }
        for s in shapes where s.calls > 0 {
            let a = UnsafeMutablePointer<Float>.allocate(capacity: s.m * s.k)
            let b = UnsafeMutablePointer<Float>.allocate(capacity: s.n * s.k)
            let c = UnsafeMutablePointer<Float>.allocate(capacity: s.m * s.n)
            defer { (a.deallocate(), b.deallocate(), c.deallocate()) }
            for i in 0..<(s.m * s.k) { a[i] = Float(i % 17) * 0.01 - 0.08 }
            for i in 0..<(s.n * s.k) { b[i] = Float(i % 13) * 0.01 - 0.06 }
            // Enough calls per run that a run takes a few ms (the attention shapes are small).
            let perRun = max(1, min(s.calls, Int(4e8 / (2 * Double(s.m) * Double(s.n) * Double(s.k)))))
            var best = Double.infinity
            for run in 0...runs {
                let t0 = now()
                for _ in 0..<perRun {
                    BLAS.sgemm(transB: true, m: s.m, n: s.n, k: s.k, a: a, lda: s.k, b: b, ldb: s.k, c: c, ldc: s.n)
                }
                let seconds = Double(now() - t0) / 1e9 / Double(perRun)
                if run > 0 { best = min(best, seconds) }
            }
            let flop = 2 * Double(s.m) * Double(s.n) * Double(s.k)
            roof.gflop += s.flops / 1e9
            roof.milliseconds += best * Double(s.calls) * 1e3
            roof.peakGFLOPS = max(roof.peakGFLOPS, flop / best / 1e9)
        }
        return roof
    }
}
