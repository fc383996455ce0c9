#!/usr/bin/env bash
# Instruction counts of the matvec kernels under callgrind: deterministic, so they compare
# kernels on a machine too busy for timings. Builds KernelBench (release) without the
# AVX-512 kernels (valgrind cannot run AVX-512 code; LEAP_REF_NO_VNNI=1, scratch path
# .build-avx2) and runs `KernelBench --count CALLS` once per case under callgrind,
# collecting inside `countedMatvecs` only. Prints one markdown row per case: instructions
# (Ir) per call and callgrind's cycle estimate (Ir + 10 L1 misses + 100 LL misses + 10
# mispredicted branches) per call.
#
#   scripts/kernel-instructions.sh [--no-build] [--bin KERNELBENCH] [--calls N] [CASE...]
#
# --bin runs another KernelBench build (e.g. of an older commit, for a before/after
# comparison; it must have been built the same way) and implies --no-build.
# A case is TYPE:ROWSxCOLS:BATCH[:i] (":i" through decode's interleaved copy); the default
# cases are the decode shapes of the row-major kernels, one and several activation rows.
#
#   scripts/kernel-instructions.sh --portable-mix SCRATCH
#
# instead prints the instruction mix of the portable dot products (PortableDots.swift) as
# compiled, from the object files of a portable release build
# (`LEAP_REF_PORTABLE=1 swift build -c release --scratch-path SCRATCH`): per function, its
# instructions, the SIMD multiplies by kind (pmaddwd: 16-bit products added in pairs,
# SSE2; pmaddubsw: SSSE3; pmullw: 16-bit products, SSE2; pmuludq; pmulld: SSE4.1), scalar
# imul, and instructions on ymm/zmm registers (none in a baseline x86-64 build). Static
# counts of the whole function (loop and set-up), from objdump; nothing is run.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --portable-mix ]; then
    objects="$2/release/Kernels.build"
    echo "| function | instructions | pmaddwd | pmaddubsw | pmullw | pmuludq | pmulld | imul | ymm/zmm |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    # The specializations are weak symbols, emitted in several objects: count each once.
    for o in "$objects"/*.o; do
        objdump -d --no-show-raw-insn "$o" | awk -v obj="$o" '
            /^[0-9a-f]+ <.*>:$/ { name = $2; keep = name ~ /dotPortable/; next }
            keep && /^ +[0-9a-f]+:\t/ { split($0, f, "\t"); split(f[2], m, " "); print name, obj, m[1], (f[2] ~ /%[yz]mm/) }'
    done | awk '
        !($1 in first) { first[$1] = $2 }
        $2 == first[$1] { n[$1]++; c[$1, $3]++; v[$1] += $4 }
        END {
            for (k in n)
                print k, n[k], c[k, "pmaddwd"] + 0, c[k, "pmaddubsw"] + 0, c[k, "pmullw"] + 0, c[k, "pmuludq"] + 0,
                    c[k, "pmulld"] + 0, c[k, "imul"] + 0, v[k] + 0
        }' | while read -r name counts; do
        # The format: the generic specialization's type argument, or the extended type.
        full=$(echo "$name" | tr -d '<>:' | swift demangle --compact)
        format=$(echo "$full" | sed -nE 's/.*generic specialization <Kernels\.([A-Za-z0-9_]+)>.*/\1/p')
        [ -n "$format" ] || format=$(echo "$full" | sed -nE 's/.*Kernels\.([A-Za-z0-9_]+)\.dotPortable.*/\1/p')
        echo "| $format.dotPortable | ${counts// / | } |"
    done | sort
    exit 0
fi
build=1
calls=20
bin=.build-avx2/release/KernelBench
while [ $# -gt 0 ]; do
    case "$1" in
    --no-build) build=0; shift ;;
    --bin) bin="$2"; build=0; shift 2 ;;
    --calls) calls="$2"; shift 2 ;;
    *) break ;;
    esac
done
cases=("$@")
if [ ${#cases[@]} -eq 0 ]; then
    for t in q4_K q5_K q6_K; do
        for b in 1 2 4; do cases+=("$t:576x1536:$b"); done
        cases+=("$t:1024x4608:1")
    done
    for t in q8_0 q4_0 q4_1 q5_0 q5_1; do
        for b in 1 2 4; do cases+=("$t:1536x576:$b"); done
    done
    for t in q4_0 q8_0; do cases+=("$t:1536x576:1:i"); done
fi
if [ "$build" = 1 ]; then
    LEAP_REF_NO_VNNI=1 swift build -c release --product KernelBench --scratch-path .build-avx2 >&2
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "| case | Ir per call | cycle estimate per call |"
echo "|---|---:|---:|"
for c in "${cases[@]}"; do
    IFS=: read -r type shape batch layout <<<"$c"
    extra=()
    if [ "${layout:-}" = i ]; then extra=(--interleaved); fi
    valgrind --tool=callgrind --cache-sim=yes --branch-sim=yes --collect-atstart=no \
        --toggle-collect='*countedMatvecs*' --callgrind-out-file="$out/cg" \
        "$bin" --count "$calls" --types "$type" --shape "$shape" --batch "$batch" "${extra[@]}" >/dev/null 2>"$out/log"
    # The totals line, by the event names of the header ("Events shown: Ir Dr Dw I1mr ..."),
    # each count followed by its percentage in parentheses.
    callgrind_annotate "$out/cg" 2>/dev/null | awk -v c="$c" -v n="$calls" '
        /^Events shown:/ { for (k = 3; k <= NF; k++) name[k - 2] = $k }
        /PROGRAM TOTALS/ {
            gsub(/\([^)]*\)/, ""); gsub(",", "")
            for (k = 1; k in name; k++) v[name[k]] = $k
            l1 = v["I1mr"] + v["D1mr"] + v["D1mw"]; ll = v["ILmr"] + v["DLmr"] + v["DLmw"]; bm = v["Bcm"] + v["Bim"]
            printf "| %s | %.0f | %.0f |\n", c, v["Ir"] / n, (v["Ir"] + 10 * l1 + 100 * ll + 10 * bm) / n
        }'
done
