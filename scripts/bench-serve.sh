#!/usr/bin/env bash
# Side-by-side serving benchmark: leap-ref serve and (when LLAMA_SERVER names its binary)
# llama-server, same model file, same slots and threads, measured by the same client
# (Benchmarks/ServeBench, a package of its own): C concurrent clients, N streamed
# completions of exactly --max-tokens tokens each, distinct prompts, every response checked.
#
#   [LLAMA_SERVER=.../llama-server] scripts/bench-serve.sh [MODEL.gguf] [--chat-load] [-c C] [-n N]
#       [--max-tokens M] [--prompt-words W] [--parallel P] [-t T] [--ctx-size S] [-r R]
#       [--keep-alive] [--no-build]
#
# --chat-load sets the load of a small chat service (issue #28's serving shape): 48 chat
# requests of 32 tokens from 8 concurrent clients, short prompts (8 words), 2 slots; the
# options after it still apply. The default load is 32 requests of 64 tokens from 4
# clients, 64-word prompts, 4 slots.
#
# R rounds (default 3); each round starts each server afresh and runs the client once
# against it, the order of the two servers alternating from round to round (as
# scripts/bench_side_by_side.py does for leap-ref bench and llama-bench), so neither always
# gets the warmer or quieter minute. Prints every round, then the median of the rounds per
# server, as Markdown, with the commands and the load average. --ctx-size is per slot
# (llama-server gets -c S*P, which it splits among its P slots). --keep-alive is passed to
# ServeBench (default: a fresh connection per request). --no-build skips the release
# builds (swift build -c release) of leap-ref and of ServeBench (in its package:
# --package-path Benchmarks/ServeBench). Stops at the first failed request, server start
# or check. Run on a quiet machine; see docs/performance.md ("Serving").
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${HOME}/.cache/leap-ref/models/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then MODEL="$1"; shift; fi
C=4 N=32 M=64 W=64 P=4 T=2 S=1024 R=3 BUILD=1 CLIENT_FLAGS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --chat-load) C=8 N=48 M=32 P=2 W=8; shift ;;
        -c) C="$2"; shift 2 ;;
        -n) N="$2"; shift 2 ;;
        --max-tokens) M="$2"; shift 2 ;;
        --parallel) P="$2"; shift 2 ;;
        -t) T="$2"; shift 2 ;;
        --ctx-size) S="$2"; shift 2 ;;
        -r) R="$2"; shift 2 ;;
        --keep-alive) CLIENT_FLAGS+=(--keep-alive); shift ;;
        --prompt-words) W="$2"; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        *) echo "bench-serve: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -f "$MODEL" ] || { echo "bench-serve: no model file $MODEL" >&2; exit 2; }
[ "$R" -ge 1 ] || { echo "bench-serve: -r must be at least 1" >&2; exit 2; }
if [ -n "${LLAMA_SERVER:-}" ] && [ ! -x "$LLAMA_SERVER" ]; then
    echo "bench-serve: LLAMA_SERVER=$LLAMA_SERVER is not executable" >&2; exit 2
fi
if [ "$BUILD" = 1 ]; then
    swift build -c release --product leap-ref >/dev/null
    swift build -c release --package-path Benchmarks/ServeBench --product ServeBench >/dev/null
fi
BIN="$(swift build -c release --show-bin-path)"
CLIENT_BIN="$(swift build -c release --package-path Benchmarks/ServeBench --show-bin-path)"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
work=$(mktemp -d /tmp/leap-ref-bench-serve.XXXXXX)
pid=""
trap '[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null; rm -rf "$work"' EXIT

wait_ready() {  # $1: port, $2: log
    for _ in $(seq 1 1200); do
        if curl -sf "http://127.0.0.1:$1/health" >/dev/null 2>&1; then return 0; fi
        kill -0 "$pid" 2>/dev/null || { echo "bench-serve: the server exited:" >&2; cat "$2" >&2; return 1; }
        sleep 0.25
    done
    echo "bench-serve: the server was not ready after 300 s:" >&2; cat "$2" >&2
    return 1
}

# The server commands, with PORT replaced per run.
LEAP_CMD=("$BIN/leap-ref" serve --model "$MODEL" --port PORT --parallel "$P" --threads "$T" --ctx-size "$S")
LLAMA_CMD=("${LLAMA_SERVER:-llama-server}" -m "$MODEL" --port PORT -np "$P" -t "$T" -c $((S * P)))
CLIENT_CMD=("$CLIENT_BIN/ServeBench" --url "http://127.0.0.1:PORT" -c "$C" -n "$N" --max-tokens "$M" --prompt-words "$W" "${CLIENT_FLAGS[@]}")

bench() {  # $1: server name, $2: round; appends one JSON line to $work/results
    local name="$1" round="$2" port cmd=()
    port=$(free_port)
    if [ "$name" = leap-ref ]; then cmd=("${LEAP_CMD[@]}"); else cmd=("${LLAMA_CMD[@]}"); fi
    cmd=("${cmd[@]/PORT/$port}")
    "${cmd[@]}" >"$work/$name.log" 2>&1 &
    pid=$!
    wait_ready "$port" "$work/$name.log"
    local client=("${CLIENT_CMD[@]/PORT/$port}")
    local load
    load=$(cut -d' ' -f1 /proc/loadavg)
    local out
    if ! out=$("${client[@]}" --json 2>"$work/client.err"); then
        echo "bench-serve: ServeBench failed against $name in round $round:" >&2
        cat "$work/client.err" >&2
        return 1
    fi
    kill -TERM "$pid"; wait "$pid" || true; pid=""
    python3 - "$name" "$round" "$load" "$out" >>"$work/results" <<'EOF'
import json, sys
r = json.loads(sys.argv[4])
r.update(server=sys.argv[1], round=int(sys.argv[2]), load=float(sys.argv[3]))
print(json.dumps(r))
EOF
    python3 - "$(tail -n 1 "$work/results")" <<'EOF'
import json, sys
r = json.loads(sys.argv[1])
print(f"round {r['round']} {r['server']:>13}: {r['aggregate_tps']:7.2f} t/s, TTFT p50/p99 {r['ttft_p50_ms']:.0f}/{r['ttft_p99_ms']:.0f} ms, "
      f"latency p50/p95/p99 {r['latency_p50_ms']:.0f}/{r['latency_p95_ms']:.0f}/{r['latency_p99_ms']:.0f} ms, {r['requests']} requests, {r['tokens']} tokens, "
      f"retries {r['retries'] + r['warmup_retries']}, load before {r['load']}", flush=True)
EOF
}

servers=(leap-ref)
[ -n "${LLAMA_SERVER:-}" ] && servers+=(llama-server)
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- Sources Benchmarks Package.swift || echo ' (with uncommitted changes)')"
for round in $(seq 1 "$R"); do
    order=("${servers[@]}")
    if [ $((round % 2)) = 0 ] && [ ${#servers[@]} = 2 ]; then order=("${servers[1]}" "${servers[0]}"); fi
    for name in "${order[@]}"; do bench "$name" "$round"; done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "  ${LEAP_CMD[*]}"
[ -n "${LLAMA_SERVER:-}" ] && echo "  ${LLAMA_CMD[*]}"
echo "  ${CLIENT_CMD[*]}"
python3 - "$work/results" <<'EOF'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
print("\n| server | round | aggregate t/s | TTFT p50 / p99 ms | latency p50 / p95 / p99 ms | requests | tokens | retries | load before |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in sorted(rows, key=lambda r: (r["server"] != "leap-ref", r["round"])):
    print(f"| {r['server']} | {r['round']} | {r['aggregate_tps']:.1f} | {r['ttft_p50_ms']:.0f} / {r['ttft_p99_ms']:.0f} | "
          f"{r['latency_p50_ms']:.0f} / {r['latency_p95_ms']:.0f} / {r['latency_p99_ms']:.0f} | {r['requests']} | {r['tokens']} | "
          f"{r['retries'] + r['warmup_retries']} | {r['load']:.2f} |")
for server in sorted({r["server"] for r in rows}, key=lambda s: s != "leap-ref"):
    rs = [r for r in rows if r["server"] == server]
    med = lambda k: statistics.median(r[k] for r in rs)
    print(f"| {server} | median of {len(rs)} | {med('aggregate_tps'):.1f} | {med('ttft_p50_ms'):.0f} / {med('ttft_p99_ms'):.0f} | "
          f"{med('latency_p50_ms'):.0f} / {med('latency_p95_ms'):.0f} / {med('latency_p99_ms'):.0f} | | | | |")
EOF
