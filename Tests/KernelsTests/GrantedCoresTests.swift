import Foundation
import Testing

@testable import Kernels

/// The default thread count: the cores granted to the process, read from its affinity
/// mask and its cgroup's CPU quota.
@Suite struct GrantedCoresTests {
    @Test func aQuotaIsRoundedUpToWholeCores() {
        #expect(GrantedCores.cores(cpuMax: "200000 100000\n") == 2)
        #expect(GrantedCores.cores(cpuMax: "150000 100000") == 2)
        #expect(GrantedCores.cores(cpuMax: "50000 100000") == 1)
        #expect(GrantedCores.cores(cpuMax: "max 100000") == nil)
        #expect(GrantedCores.cores(cpuMax: "") == nil)
        #expect(GrantedCores.cores(cpuMax: "1 2 3") == nil)
        #expect(GrantedCores.cores(quota: -1, period: 100_000) == nil)
        #expect(GrantedCores.cores(quota: 100_000, period: 0) == nil)
        #expect(GrantedCores.cores(quota: 400_000, period: 100_000) == 4)
    }

    @Test func theCountIsWithinTheMachine() {
        #expect(GrantedCores.count >= 1)
        #expect(GrantedCores.count <= ProcessInfo.processInfo.activeProcessorCount)
        #expect(ThreadPool.defaultThreads == GrantedCores.count)
        #if os(Linux)
        // The mask of this process: every CPU it may run on.
        let mask = GrantedCores.affinityCount()
        #expect(mask != nil)
        #expect(GrantedCores.count <= (mask ?? 0))
        #endif
    }
}
