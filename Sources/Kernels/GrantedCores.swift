// How many cores this process is granted: the default thread count.
//
// `ProcessInfo.activeProcessorCount` counts the machine's online processors. A process
// started under `taskset -c 0`, in a container with a cpuset, or under a CFS quota
// (`docker run --cpus 1`) runs on fewer, and a pool of one thread per online processor
// then has threads that wait for a core while the others wait for them at every loop's
// end. Here: the CPUs of the affinity mask, at most the cgroup's quota rounded up.

import CPUHints
import Foundation

/// The cores the process may use, as read from the operating system.
public enum GrantedCores {
    /// The number of cores the process may run on at once: the CPUs of its affinity mask,
    /// at most its cgroup's CPU quota (cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us` over
    /// `cpu.cfs_period_us`) rounded up, at least 1. Where neither is available (macOS),
    /// the active processors.
    public static let count: Int = {
        var cores = ProcessInfo.processInfo.activeProcessorCount
        #if os(Linux)
        if let mask = affinityCount() { cores = min(cores, mask) }
        if let quota = quotaCores() { cores = min(cores, quota) }
        #endif
        return max(1, cores)
    }()

    #if os(Linux)
    /// The CPUs of the calling thread's affinity mask (the process's, at startup).
    static func affinityCount() -> Int? {
        let count = Int(leap_affinity_cpu_count())
        return count > 0 ? count : nil
    }

    /// The cgroup's CPU quota in whole cores (rounded up), or nil without a quota.
    static func quotaCores() -> Int? {
        guard let lines = try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8) else { return nil }
        for line in lines.split(separator: "\n") {
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3 else { continue }
            let path = String(fields[2])
            if fields[0] == "0" && fields[1].isEmpty {
                // cgroup v2: "max 100000" (no quota) or "200000 100000".
                for dir in ["/sys/fs/cgroup" + path, "/sys/fs/cgroup"] {
                    guard let text = try? String(contentsOfFile: dir + "/cpu.max", encoding: .utf8) else { continue }
                    return cores(cpuMax: text)
                }
            } else if fields[1].split(separator: ",").contains("cpu") {
                // cgroup v1: a quota of -1 is none.
                for dir in ["/sys/fs/cgroup/cpu" + path, "/sys/fs/cgroup/cpu"] {
                    func read(_ name: String) -> Int? {
                        (try? String(contentsOfFile: dir + "/" + name, encoding: .utf8))
                            .flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
                    }
                    guard let quota = read("cpu.cfs_quota_us") else { continue }
                    return cores(quota: quota, period: read("cpu.cfs_period_us"))
                }
            }
        }
        return nil
    }

    #endif

    /// The whole cores of a cgroup v2 `cpu.max` ("200000 100000"; "max 100000" is no quota).
    static func cores(cpuMax text: String) -> Int? {
        let parts = text.split(whereSeparator: \.isWhitespace)
        guard parts.count == 2 else { return nil }
        return cores(quota: Int(parts[0]), period: Int(parts[1]))
    }

    /// `quota / period` rounded up, or nil for no quota (`max`, -1) or nonsense.
    static func cores(quota: Int?, period: Int?) -> Int? {
        guard let quota, let period, quota > 0, period > 0 else { return nil }
        return (quota + period - 1) / period
    }
}
