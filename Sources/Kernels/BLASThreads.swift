import CBLAS

extension BLAS {
    /// Sets how many threads OpenBLAS uses for its products (it defaults to every core).
    public static func setThreads(_ n: Int) {
        openblas_set_num_threads(Int32(max(1, n)))
    }

    /// Runs `body` with OpenBLAS limited to one thread when `condition` holds (and OpenBLAS
    /// has more), then restores its thread count: for work that runs BLAS products on
    /// several of our own threads at once (one attention head per thread), where OpenBLAS
    /// starting threads of its own inside each product would oversubscribe the cores.
    public static func withOneThread<R>(when condition: Bool, _ body: () throws -> R) rethrows -> R {
        let threads = openblas_get_num_threads()
        let limit = condition && threads > 1
        if limit { openblas_set_num_threads(1) }
        defer { if limit { openblas_set_num_threads(threads) } }
        return try body()
    }
}
