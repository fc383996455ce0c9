// Hints to the CPU that Swift cannot spell (and the affinity mask's CPU count, whose
// CPU_COUNT is a macro): its importer drops the side-effect-free
// `_m_prefetch` call, and `_mm_prefetch` is a C macro. Header only (nothing to compile or
// link); every compiler that builds leap-ref has `__builtin_prefetch`, which becomes
// `prefetcht0` on x86-64 and `prfm pldl1keep` on arm64.
#ifndef LEAP_CPU_HINTS_H
#define LEAP_CPU_HINTS_H

/// Asks for the cache line holding `address` to be brought into all cache levels for
/// reading; never faults, even for an address outside any mapping.
static inline __attribute__((always_inline)) void leap_prefetch(const void *address) {
    __builtin_prefetch(address, 0, 3);
}

#if defined(__linux__)
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>

/// The CPUs in the calling thread's affinity mask (`sched_getaffinity`, whose `CPU_COUNT`
/// is a macro Swift cannot call), or 0 when it cannot be read.
static inline int leap_affinity_cpu_count(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
    return CPU_COUNT(&set);
}
#endif

#endif
