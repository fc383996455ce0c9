// Hints to the CPU that Swift cannot spell: its importer drops the side-effect-free
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

#endif
