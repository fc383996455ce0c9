import CBLAS

extension BLAS {
    /// Sets how many threads OpenBLAS uses for its products (it defaults to every core).
    public static func setThreads(_ n: Int) {
        openblas_set_num_threads(Int32(max(1, n)))
    }
}
